package camera_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"runtime"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// pattern is a structured test image: gradients and a square.
func pattern(w, h, salt int) worldmodel.Image {
	img := worldmodel.Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
	for y := range h {
		for x := range w {
			p := img.Pix[(y*w+x)*3:]
			p[0] = byte(x * 255 / max(w-1, 1))
			p[1] = byte(y * 255 / max(h-1, 1))
			p[2] = byte((x+y)*200/(w+h) + salt)
			if x >= w/4+salt%4 && x < w/2+salt%4 && y >= h/4 && y < h/2 {
				p[0], p[1], p[2] = 250, 20, byte(40+salt)
			}
		}
	}
	return img
}

// rawMessage lays img out in encoding by hand (independently of
// EncodeImage): channel order and the padding of each row.
func rawMessage(img worldmodel.Image, encoding string, pad int) *msgs.Image {
	order := map[string][]int{"rgb8": {0, 1, 2}, "bgr8": {2, 1, 0}, "rgba8": {0, 1, 2, -1}, "bgra8": {2, 1, 0, -1}, "mono8": {1}}[encoding]
	c := len(order)
	step := img.Width*c + pad
	data := make([]byte, step*img.Height)
	for i := range data {
		data[i] = 0xee // padding is skipped, whatever it holds
	}
	for y := range img.Height {
		for x := range img.Width {
			for k, ch := range order {
				v := byte(77) // alpha
				if ch >= 0 {
					v = img.Pix[(y*img.Width+x)*3+ch]
				}
				data[y*step+x*c+k] = v
			}
		}
	}
	return &msgs.Image{Height: uint32(img.Height), Width: uint32(img.Width), Encoding: encoding, Step: uint32(step), Data: data}
}

func TestDecodeImageEncodings(t *testing.T) {
	src := pattern(13, 7, 1)
	var lim camera.Limits
	for _, enc := range []string{"rgb8", "bgr8", "rgba8", "bgra8", "mono8"} {
		for _, pad := range []int{0, 1, 5} {
			m := rawMessage(src, enc, pad)
			m.IsBigEndian = 1 // irrelevant for 8-bit channels
			var got worldmodel.Image
			if err := lim.DecodeImage(&got, m); err != nil {
				t.Fatalf("%s pad %d: %v", enc, pad, err)
			}
			if got.Width != 13 || got.Height != 7 || len(got.Pix) != 13*7*3 {
				t.Fatalf("%s: %d × %d, %d bytes", enc, got.Width, got.Height, len(got.Pix))
			}
			for i := 0; i < len(got.Pix); i += 3 {
				want := src.Pix[i : i+3]
				if enc == "mono8" {
					g := src.Pix[i+1]
					want = []byte{g, g, g}
				}
				if !bytes.Equal(got.Pix[i:i+3], want) {
					t.Fatalf("%s pad %d: pixel %d is %v, want %v", enc, pad, i/3, got.Pix[i:i+3], want)
				}
			}
		}
	}
}

func TestDecodeImageRefusals(t *testing.T) {
	src := pattern(8, 4, 0)
	good := rawMessage(src, "rgb8", 0)
	with := func(f func(m *msgs.Image)) *msgs.Image {
		m := *good
		f(&m)
		return &m
	}
	small := camera.Limits{MaxPixels: 31}
	for _, c := range []struct {
		name string
		lim  camera.Limits
		m    *msgs.Image
		kind error
		msg  string
	}{
		{"wrong encoding rgb16", camera.Limits{}, with(func(m *msgs.Image) { m.Encoding = "rgb16" }), camera.ErrUnsupported, `encoding "rgb16"`},
		{"wrong encoding yuv422", camera.Limits{}, with(func(m *msgs.Image) { m.Encoding = "yuv422" }), camera.ErrUnsupported, "want one of rgb8, bgr8, rgba8, bgra8, mono8"},
		{"bayer", camera.Limits{}, with(func(m *msgs.Image) { m.Encoding = "bayer_rggb8" }), camera.ErrUnsupported, "bayer_rggb8"},
		{"empty encoding", camera.Limits{}, with(func(m *msgs.Image) { m.Encoding = "" }), camera.ErrUnsupported, `encoding ""`},
		{"zero width", camera.Limits{}, with(func(m *msgs.Image) { m.Width = 0 }), camera.ErrGeometry, "0 × 4"},
		{"width over MaxImageSide", camera.Limits{}, with(func(m *msgs.Image) { m.Width = worldmodel.MaxImageSide + 1 }), camera.ErrTooLarge, "at most 8192"},
		{"height 2^32-1", camera.Limits{}, with(func(m *msgs.Image) { m.Height = 1<<32 - 1 }), camera.ErrTooLarge, "at most 8192"},
		{"pixel budget", small, good, camera.ErrTooLarge, "32 pixels"},
		{"step below width×3", camera.Limits{}, with(func(m *msgs.Image) { m.Step = 23 }), camera.ErrGeometry, "step 23"},
		{"data short", camera.Limits{}, with(func(m *msgs.Image) { m.Data = m.Data[:len(m.Data)-1] }), camera.ErrGeometry, "95 bytes of data"},
		{"data long", camera.Limits{}, with(func(m *msgs.Image) { m.Data = append(m.Data, 0) }), camera.ErrGeometry, "want step × height = 96"},
		{"step lies (larger, data unchanged)", camera.Limits{}, with(func(m *msgs.Image) { m.Step = 1 << 31 }), camera.ErrGeometry, "want step × height = 8589934592"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := worldmodel.Image{Width: 1, Height: 1, Pix: []byte{9, 9, 9}}
			err := c.lim.DecodeImage(&dst, c.m)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v containing %q", err, c.kind, c.msg)
			}
			if dst.Width != 1 || !bytes.Equal(dst.Pix, []byte{9, 9, 9}) {
				t.Fatal("dst changed on error")
			}
		})
	}
}

// TestDecodeImageNoAllocation: frames of one size decode into the caller's
// buffer without allocating, from the CDR bytes on.
func TestDecodeImageNoAllocation(t *testing.T) {
	for _, enc := range []string{"rgb8", "bgr8", "bgra8"} {
		m := rawMessage(pattern(64, 48, 2), enc, 4)
		m.Header.FrameID = "agentview"
		b, err := m.MarshalCDR()
		if err != nil {
			t.Fatal(err)
		}
		var msg msgs.Image
		var img worldmodel.Image
		var lim camera.Limits
		run := func() {
			if err := msg.UnmarshalCDRReuse(b); err != nil {
				t.Fatal(err)
			}
			if err := lim.DecodeImage(&img, &msg); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if n := testing.AllocsPerRun(50, run); n != 0 {
			t.Fatalf("%s: %v allocations per frame, want 0", enc, n)
		}
		var fd camera.FrameDecoder
		var img2 worldmodel.Image
		h, err := fd.Decode(&img2, msgs.TypeImage, b)
		if err != nil || h.FrameID != "agentview" || !bytes.Equal(img2.Pix, img.Pix) {
			t.Fatalf("FrameDecoder: %v, header %+v", err, h)
		}
		if n := testing.AllocsPerRun(50, func() { _, _ = fd.Decode(&img2, msgs.TypeImage, b) }); n != 0 {
			t.Fatalf("%s: FrameDecoder: %v allocations per frame, want 0", enc, n)
		}
		if _, err := fd.Decode(&img2, msgs.TypeString, b); !errors.Is(err, camera.ErrUnsupported) {
			t.Fatalf("FrameDecoder of a String: %v", err)
		}
	}
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image, q int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func toNRGBA(img worldmodel.Image) *image.NRGBA {
	out := image.NewNRGBA(image.Rect(0, 0, img.Width, img.Height))
	for i := range img.Width * img.Height {
		copy(out.Pix[4*i:], img.Pix[3*i:3*i+3])
		out.Pix[4*i+3] = 255
	}
	return out
}

// TestDecodeCompressedKinds decodes PNGs of every colour type Go's encoder
// writes, and JPEGs, comparing with the pixels encoded.
func TestDecodeCompressedKinds(t *testing.T) {
	src := pattern(24, 16, 3)
	rgb := toNRGBA(src)
	gray := image.NewGray(rgb.Bounds())
	gray16 := image.NewGray16(rgb.Bounds())
	rgba64 := image.NewNRGBA64(rgb.Bounds())
	pal := image.NewPaletted(rgb.Bounds(), color.Palette{color.NRGBA{1, 2, 3, 255}, color.NRGBA{200, 100, 50, 128}, color.RGBA{0, 0, 0, 0}})
	translucent := image.NewNRGBA(rgb.Bounds())
	for y := range 16 {
		for x := range 24 {
			gray.SetGray(x, y, color.Gray{Y: byte(x*10 + y)})
			gray16.SetGray16(x, y, color.Gray16{Y: uint16(x*2700 + y*13)})
			rgba64.SetNRGBA64(x, y, color.NRGBA64{R: uint16(x * 2700), G: uint16(y * 4000), B: 0xabcd, A: 0x8000})
			pal.SetColorIndex(x, y, uint8((x+y)%3))
			translucent.SetNRGBA(x, y, color.NRGBA{R: byte(x), G: byte(y), B: 7, A: byte(x * 10)})
		}
	}
	want := func(f func(x, y int) [3]byte) []byte {
		out := make([]byte, 0, 24*16*3)
		for y := range 16 {
			for x := range 24 {
				p := f(x, y)
				out = append(out, p[:]...)
			}
		}
		return out
	}
	cases := []struct {
		name    string
		format  string
		data    []byte
		want    []byte
		maxErr  int     // JPEG is lossy: the largest difference allowed
		maxMean float64 // and the mean absolute difference
	}{
		{"png rgb", "png", encodePNG(t, rgb), src.Pix, 0, 0},
		{"png gray", "mono8; png compressed ", encodePNG(t, gray), want(func(x, y int) [3]byte { v := byte(x*10 + y); return [3]byte{v, v, v} }), 0, 0},
		{"png gray16 (high byte)", "png", encodePNG(t, gray16), want(func(x, y int) [3]byte { v := byte(uint16(x*2700+y*13) >> 8); return [3]byte{v, v, v} }), 0, 0},
		{"png rgba64 (high bytes, alpha dropped)", "png", encodePNG(t, rgba64), want(func(x, y int) [3]byte {
			return [3]byte{byte(uint16(x*2700) >> 8), byte(uint16(y*4000) >> 8), 0xab}
		}), 0, 0},
		{"png paletted", "png", encodePNG(t, pal), want(func(x, y int) [3]byte {
			return [][3]byte{{1, 2, 3}, {200, 100, 50}, {0, 0, 0}}[(x+y)%3]
		}), 0, 0},
		{"png alpha dropped", "rgba8; png compressed bgra8", encodePNG(t, translucent), want(func(x, y int) [3]byte { return [3]byte{byte(x), byte(y), 7} }), 0, 0},
		{"jpeg rgb q95", "rgb8; jpeg compressed bgr8", encodeJPEG(t, rgb, 95), src.Pix, 255, 6}, // 4:2:0 chroma on a 24 × 16 image with a sharp red square
		{"jpeg gray", "jpeg", encodeJPEG(t, gray, 100), want(func(x, y int) [3]byte { v := byte(x*10 + y); return [3]byte{v, v, v} }), 3, 1},
	}
	var lim camera.Limits
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got worldmodel.Image
			if err := lim.DecodeCompressed(&got, &msgs.CompressedImage{Format: c.format, Data: c.data}); err != nil {
				t.Fatal(err)
			}
			if got.Width != 24 || got.Height != 16 || len(got.Pix) != len(c.want) {
				t.Fatalf("%d × %d, %d bytes", got.Width, got.Height, len(got.Pix))
			}
			worst, sum := 0, 0
			for i := range got.Pix {
				d := int(got.Pix[i]) - int(c.want[i])
				worst, sum = max(worst, d, -d), sum+max(d, -d)
			}
			if mean := float64(sum) / float64(len(got.Pix)); worst > c.maxErr || mean > c.maxMean {
				t.Fatalf("largest difference %d, mean %.2f: want at most %d and %.2f", worst, mean, c.maxErr, c.maxMean)
			}
		})
	}
}

// pngChunk frames a PNG chunk with its CRC.
func pngChunk(typ string, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(typ), data...)))
}

// bombPNG is a valid-looking PNG whose IHDR declares w × h RGBA pixels
// and whose IDAT is a few bytes.
func bombPNG(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // 8-bit RGBA
	b := []byte("\x89PNG\r\n\x1a\n")
	b = append(b, pngChunk("IHDR", ihdr)...)
	b = append(b, pngChunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})...)
	return append(b, pngChunk("IEND", nil)...)
}

// bombJPEG patches the frame header (SOF0) of a small JPEG to declare h × w.
func bombJPEG(t testing.TB, w, h uint16) []byte {
	b := encodeJPEG(t, toNRGBA(pattern(8, 8, 0)), 75)
	for i := 2; i+8 < len(b); i++ {
		if b[i] == 0xff && b[i+1] == 0xc0 {
			binary.BigEndian.PutUint16(b[i+5:], h)
			binary.BigEndian.PutUint16(b[i+7:], w)
			return b
		}
	}
	t.Fatal("no SOF0 marker")
	return nil
}

func TestDecodeCompressedRefusals(t *testing.T) {
	pngData := encodePNG(t, toNRGBA(pattern(16, 16, 0)))
	jpegData := encodeJPEG(t, toNRGBA(pattern(16, 16, 0)), 90)
	for _, c := range []struct {
		name   string
		lim    camera.Limits
		format string
		data   []byte
		kind   error
		msg    string
	}{
		{"tiff", camera.Limits{}, "tiff", pngData, camera.ErrUnsupported, `format "tiff"`},
		{"compressedDepth", camera.Limits{}, "16UC1; compressedDepth png", pngData, camera.ErrUnsupported, "compressedDepth"},
		{"empty format", camera.Limits{}, "", pngData, camera.ErrUnsupported, `format ""`},
		{"png named jpeg", camera.Limits{}, "jpeg", pngData, camera.ErrCorrupt, "start with a png signature"},
		{"garbage", camera.Limits{}, "png", []byte("not an image at all"), camera.ErrCorrupt, "no JPEG or PNG signature"},
		{"empty data", camera.Limits{}, "png", nil, camera.ErrCorrupt, "0 bytes of data"},
		{"over the compressed limit", camera.Limits{MaxCompressedBytes: 100}, "png", pngData, camera.ErrTooLarge, "want at most 100"},
		{"bomb PNG 100000 × 100000", camera.Limits{}, "png", bombPNG(100000, 100000), camera.ErrTooLarge, "100000 × 100000"},
		{"bomb PNG 8192 × 8192 (over the pixel budget)", camera.Limits{}, "png", bombPNG(8192, 8192), camera.ErrTooLarge, "67108864 pixels"},
		{"bomb PNG 2^31-1 × 1", camera.Limits{}, "png", bombPNG(1<<31-1, 1), camera.ErrTooLarge, "2147483647 × 1"},
		{"bomb JPEG 65535 × 65535", camera.Limits{}, "jpeg", bombJPEG(t, 65535, 65535), camera.ErrTooLarge, "65535 × 65535"},
		{"PNG whose IHDR lies (a few bytes of IDAT for 300 × 300)", camera.Limits{}, "png", bombPNG(300, 300), camera.ErrCorrupt, "300 × 300 in 65 bytes: corrupt compressed image: that many pixels need at least 349 bytes"},
		{"bomb PNG 4096 × 4096 (within the budget, refused by deflate's ratio)", camera.Limits{}, "png", bombPNG(4096, 4096), camera.ErrCorrupt, "need at least 65031 bytes of png"},
		{"bomb JPEG 4096 × 4096 (within the budget, refused by its size)", camera.Limits{}, "jpeg", bombJPEG(t, 4096, 4096), camera.ErrCorrupt, "need at least 32768 bytes of jpeg"},
		{"PNG whose IHDR is a little larger than its data", camera.Limits{}, "png", grownPNG(t), camera.ErrCorrupt, "16 × 40: corrupt compressed image: png: invalid format: not enough pixel data"},
		{"jpeg truncated in the scan", camera.Limits{}, "jpeg", jpegData[:len(jpegData)-12], camera.ErrCorrupt, "16 × 16"},
		{"png truncated in IDAT", camera.Limits{}, "png", pngData[:len(pngData)-20], camera.ErrCorrupt, "16 × 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := worldmodel.Image{Width: 1, Height: 1, Pix: []byte{9, 9, 9}}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := c.lim.DecodeCompressed(&dst, &msgs.CompressedImage{Format: c.format, Data: c.data})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want %v containing %q", err, c.kind, c.msg)
			}
			if dst.Width != 1 || !bytes.Equal(dst.Pix, []byte{9, 9, 9}) {
				t.Fatal("dst changed on error")
			}
			// Nothing is sized by a header that was refused.
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Fatalf("allocated %d bytes on the way to the refusal, want under 1 MiB", n)
			}
		})
	}
}

// TestTruncatedCompressed: every prefix of a PNG and a JPEG is refused
// (ErrCorrupt), none panics.
func TestTruncatedCompressed(t *testing.T) {
	img := toNRGBA(pattern(16, 12, 5))
	var lim camera.Limits
	for _, c := range []struct {
		format string
		data   []byte
	}{{"png", encodePNG(t, img)}, {"jpeg", encodeJPEG(t, img, 80)}} {
		var dst worldmodel.Image
		if err := lim.DecodeCompressed(&dst, &msgs.CompressedImage{Format: c.format, Data: c.data}); err != nil {
			t.Fatalf("%s whole: %v", c.format, err)
		}
		// A JPEG's last two bytes are the EOI marker, which Go's decoder does
		// not need once the scan is complete.
		end := len(c.data)
		if c.format == "jpeg" {
			end -= 2
		}
		for n := range end {
			err := lim.DecodeCompressed(&dst, &msgs.CompressedImage{Format: c.format, Data: c.data[:n]})
			if !errors.Is(err, camera.ErrCorrupt) {
				t.Fatalf("%s cut to %d of %d bytes: %v, want ErrCorrupt", c.format, n, len(c.data), err)
			}
		}
	}
}

func TestParseFormat(t *testing.T) {
	for format, want := range map[string]camera.Codec{
		"jpeg": camera.JPEG, "JPEG": camera.JPEG, "jpg": camera.JPEG, "png": camera.PNG,
		"rgb8; jpeg compressed bgr8": camera.JPEG, "bgr8; png compressed bgr8": camera.PNG,
		"mono8; png compressed ": camera.PNG, "rgba8; jpeg compressed bgr8": camera.JPEG,
	} {
		got, err := camera.ParseFormat(format)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", format, got, err, want)
		}
	}
	for _, format := range []string{"tiff", "16UC1; compressedDepth png", "32FC1; compressedDepth rvl", "bmp", "rgb8; tiff compressed bgr8"} {
		if _, err := camera.ParseFormat(format); !errors.Is(err, camera.ErrUnsupported) {
			t.Errorf("ParseFormat(%q): %v, want ErrUnsupported", format, err)
		}
	}
}

// grownPNG is a 16 × 16 PNG whose IHDR says 16 × 40: plausible for its
// size, but its rows run out.
func grownPNG(t testing.TB) []byte {
	b := encodePNG(t, toNRGBA(pattern(16, 16, 0)))
	// IHDR data starts at 16; the height at 20; the CRC after the 13 bytes.
	binary.BigEndian.PutUint32(b[20:], 40)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}
