package camera

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// Kinds of refusal. Every error of this package wraps one of them, so a
// node can count drops by reason (errors.Is).
var (
	// ErrUnsupported: an encoding or format this package does not decode.
	ErrUnsupported = errors.New("unsupported image encoding")
	// ErrGeometry: width, height, step and data length disagree.
	ErrGeometry = errors.New("inconsistent image geometry")
	// ErrTooLarge: a side, the pixel count or the compressed size is over
	// its limit (a decompression bomb is refused here, before decoding).
	ErrTooLarge = errors.New("image too large")
	// ErrCorrupt: compressed data that does not decode (truncated, damaged,
	// or not what its format says).
	ErrCorrupt = errors.New("corrupt compressed image")
)

// Limits bounds what a decoder accepts. The zero value of a field means its
// default (DefaultLimits).
type Limits struct {
	// MaxSide bounds the width and the height (at most
	// worldmodel.MaxImageSide, which the preprocessing accepts).
	MaxSide int
	// MaxPixels bounds width × height: a compressed image's header is
	// checked against it before any pixel is allocated.
	MaxPixels int
	// MaxCompressedBytes bounds a CompressedImage's data.
	MaxCompressedBytes int
}

// Defaults of Limits.
const (
	DefaultMaxPixels          = 1 << 24  // 16.8 M pixels: 4096 × 4096, twice a 4K UHD frame
	DefaultMaxCompressedBytes = 64 << 20 // 64 MiB
)

// DefaultLimits returns the limits a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{MaxSide: worldmodel.MaxImageSide, MaxPixels: DefaultMaxPixels, MaxCompressedBytes: DefaultMaxCompressedBytes}
}

// withDefaults fills the zero fields and clamps MaxSide to what the world
// model accepts.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxSide <= 0 || l.MaxSide > worldmodel.MaxImageSide {
		l.MaxSide = d.MaxSide
	}
	if l.MaxPixels <= 0 {
		l.MaxPixels = d.MaxPixels
	}
	if l.MaxCompressedBytes <= 0 {
		l.MaxCompressedBytes = d.MaxCompressedBytes
	}
	return l
}

// checkSize refuses a width × height outside the limits.
func (l Limits) checkSize(what string, w, h int) error {
	if w < 1 || h < 1 {
		return fmt.Errorf("camera: %s of %d × %d (width × height): %w: want each side at least 1", what, w, h, ErrGeometry)
	}
	if w > l.MaxSide || h > l.MaxSide {
		return fmt.Errorf("camera: %s of %d × %d (width × height): %w: want each side at most %d", what, w, h, ErrTooLarge, l.MaxSide)
	}
	if w*h > l.MaxPixels { // both ≤ 8192: no overflow
		return fmt.Errorf("camera: %s of %d × %d (width × height) is %d pixels: %w: want at most %d", what, w, h, w*h, ErrTooLarge, l.MaxPixels)
	}
	return nil
}

// Encodings lists the sensor_msgs/Image encodings DecodeImage accepts.
const Encodings = "rgb8, bgr8, rgba8, bgra8, mono8"

// layout of an 8-bit encoding: bytes per pixel and where R, G, B are.
type layout struct {
	channels int
	r, g, b  int
}

func encodingLayout(enc string) (layout, bool) {
	switch enc {
	case "rgb8":
		return layout{3, 0, 1, 2}, true
	case "bgr8":
		return layout{3, 2, 1, 0}, true
	case "rgba8":
		return layout{4, 0, 1, 2}, true
	case "bgra8":
		return layout{4, 2, 1, 0}, true
	case "mono8":
		return layout{1, 0, 0, 0}, true
	}
	return layout{}, false
}

// resize returns dst's pixel buffer resized to n bytes, in its own array
// when that is large enough.
func resize(dst *worldmodel.Image, w, h int) {
	n := w * h * 3
	if cap(dst.Pix) >= n {
		dst.Pix = dst.Pix[:n]
	} else {
		dst.Pix = make([]byte, n)
	}
	dst.Width, dst.Height = w, h
}

// DecodeImage converts a sensor_msgs/Image to RGB8 in dst, reusing dst.Pix
// when it is large enough (a stream of frames of one size allocates
// nothing). Accepted encodings are Encodings (8 bits a channel, so
// is_bigendian does not matter); alpha is dropped, mono8 is replicated to
// R, G and B. step must be at least width × channels (the bytes after
// them in each row are padding, skipped) and the data exactly
// step × height bytes. On error dst is unchanged.
func (l Limits) DecodeImage(dst *worldmodel.Image, m *msgs.Image) error {
	l = l.withDefaults()
	lay, ok := encodingLayout(m.Encoding)
	if !ok {
		return fmt.Errorf("camera: Image encoding %q: %w: want one of %s", m.Encoding, ErrUnsupported, Encodings)
	}
	w, h := int(m.Width), int(m.Height)
	if err := l.checkSize("Image", w, h); err != nil {
		return err
	}
	row := w * lay.channels
	step := int(m.Step)
	if step < row {
		return fmt.Errorf("camera: Image of %d × %d %s: step %d: %w: want at least width × %d = %d", w, h, m.Encoding, step, ErrGeometry, lay.channels, row)
	}
	if uint64(len(m.Data)) != uint64(m.Step)*uint64(m.Height) {
		return fmt.Errorf("camera: Image of %d × %d %s with step %d: %d bytes of data: %w: want step × height = %d",
			w, h, m.Encoding, step, len(m.Data), ErrGeometry, uint64(m.Step)*uint64(m.Height))
	}
	resize(dst, w, h)
	out := dst.Pix
	for y := range h {
		src := m.Data[y*step : y*step+row]
		o := out[y*w*3 : (y+1)*w*3]
		switch m.Encoding {
		case "rgb8":
			copy(o, src)
		case "bgr8":
			for len(src) >= 3 && len(o) >= 3 {
				o[0], o[1], o[2] = src[2], src[1], src[0]
				src, o = src[3:], o[3:]
			}
		case "rgba8":
			for len(src) >= 4 && len(o) >= 3 {
				o[0], o[1], o[2] = src[0], src[1], src[2]
				src, o = src[4:], o[3:]
			}
		case "bgra8":
			for len(src) >= 4 && len(o) >= 3 {
				o[0], o[1], o[2] = src[2], src[1], src[0]
				src, o = src[4:], o[3:]
			}
		case "mono8":
			for x, v := range src {
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	}
	return nil
}

// Codec is the compression of a CompressedImage.
type Codec int

// Codecs.
const (
	JPEG Codec = iota + 1
	PNG
)

// String names the codec as image_transport's format field does.
func (c Codec) String() string {
	switch c {
	case JPEG:
		return "jpeg"
	case PNG:
		return "png"
	}
	return fmt.Sprintf("codec(%d)", int(c))
}

// Formats describes the CompressedImage formats ParseFormat accepts.
const Formats = `"jpeg", "png" or image_transport's "<encoding>; jpeg compressed <encoding>" and "<encoding>; png compressed <encoding>"`

// ParseFormat reads a CompressedImage format as image_transport's
// compressed plugin writes it: "jpeg" or "png" (older publishers), or
// "<original encoding>; jpeg compressed <encoding>" (and png). The data is
// then a standard JPEG or PNG file either way (the plugin encodes BGR
// images through OpenCV, which writes correct colours), so only the codec
// matters. "compressedDepth", tiff and anything else are refused.
func ParseFormat(format string) (Codec, error) {
	f := strings.ToLower(strings.TrimSpace(format))
	if _, after, ok := strings.Cut(f, ";"); ok {
		f = strings.TrimSpace(after)
		switch {
		case strings.HasPrefix(f, "jpeg compressed"):
			return JPEG, nil
		case strings.HasPrefix(f, "png compressed"):
			return PNG, nil
		}
	} else {
		switch f {
		case "jpeg", "jpg":
			return JPEG, nil
		case "png":
			return PNG, nil
		}
	}
	return 0, fmt.Errorf("camera: CompressedImage format %q: %w: want %s", format, ErrUnsupported, Formats)
}

// sniff names the codec the data's signature says, or 0.
func sniff(data []byte) Codec {
	switch {
	case len(data) >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff:
		return JPEG
	case len(data) >= 8 && string(data[:8]) == "\x89PNG\r\n\x1a\n":
		return PNG
	}
	return 0
}

// DecodeCompressed decodes a sensor_msgs/CompressedImage (JPEG or PNG, see
// ParseFormat) to RGB8 in dst. The header is read first
// (image.DecodeConfig) and its size checked against the limits, so a
// decompression bomb (a small file declaring a huge image) is refused
// before any pixel buffer exists; only then is the image decoded, from a
// reader over the message's bytes. Grayscale, paletted, CMYK, 16-bit and
// alpha images are converted to RGB8: 16-bit channels keep their high
// byte, alpha is dropped (not composited), CMYK uses Go's image/color
// conversion; a JPEG's YCbCr gets libjpeg's chroma upsampling and colour
// conversion (fancyUpsample, jpegYCbCrToRGB), so that it decodes as
// Pillow and OpenCV decode it but for the IDCT's rounding (at most 3
// apart). A header whose size its data cannot hold is refused too
// (minCompressedBytes). The conversion reuses dst.Pix; the JPEG and
// PNG decoders allocate their own image per call. On error dst is
// unchanged.
func (l Limits) DecodeCompressed(dst *worldmodel.Image, m *msgs.CompressedImage) error {
	l = l.withDefaults()
	codec, err := ParseFormat(m.Format)
	if err != nil {
		return err
	}
	if len(m.Data) > l.MaxCompressedBytes {
		return fmt.Errorf("camera: CompressedImage of %d bytes: %w: want at most %d", len(m.Data), ErrTooLarge, l.MaxCompressedBytes)
	}
	if got := sniff(m.Data); got != codec {
		what := "no JPEG or PNG signature"
		if got != 0 {
			what = "a " + got.String() + " signature"
		}
		return fmt.Errorf("camera: CompressedImage format %q but the %d bytes of data start with %s: %w", m.Format, len(m.Data), what, ErrCorrupt)
	}
	var cfg image.Config
	switch codec {
	case JPEG:
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(m.Data))
	case PNG:
		cfg, err = png.DecodeConfig(bytes.NewReader(m.Data))
	}
	if err != nil {
		return fmt.Errorf("camera: CompressedImage %s header: %w: %w", codec, ErrCorrupt, err)
	}
	if err := l.checkSize("CompressedImage "+codec.String(), cfg.Width, cfg.Height); err != nil {
		return err
	}
	if min := minCompressedBytes(codec, m.Data, cfg.Width, cfg.Height); int64(len(m.Data)) < min {
		return fmt.Errorf("camera: CompressedImage %s of %d × %d in %d bytes: %w: that many pixels need at least %d bytes of %s (a header that lies about the size)",
			codec, cfg.Width, cfg.Height, len(m.Data), ErrCorrupt, min, codec)
	}
	var img image.Image
	switch codec {
	case JPEG:
		img, err = jpeg.Decode(bytes.NewReader(m.Data))
	case PNG:
		img, err = png.Decode(bytes.NewReader(m.Data))
	}
	if err != nil {
		return fmt.Errorf("camera: CompressedImage %s of %d × %d: %w: %w", codec, cfg.Width, cfg.Height, ErrCorrupt, err)
	}
	b := img.Bounds()
	if b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return fmt.Errorf("camera: CompressedImage %s decoded to %d × %d, its header says %d × %d: %w", codec, b.Dx(), b.Dy(), cfg.Width, cfg.Height, ErrCorrupt)
	}
	return toRGB(dst, img)
}

// toRGB converts a decoded image to RGB8 in dst.
func toRGB(dst *worldmodel.Image, img image.Image) error {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	var tmp worldmodel.Image
	tmp.Pix = dst.Pix
	resize(&tmp, w, h)
	out := tmp.Pix
	switch src := img.(type) {
	case *image.YCbCr:
		if fancyUpsample(out, src) {
			break
		}
		if hs, vs, ok := chromaShifts(src.SubsampleRatio); ok && b.Min == (image.Point{}) {
			// Row by row: the chroma sample of pixel x is x >> hs of
			// its chroma row, row y >> vs.
			for y := range h {
				yrow := src.Y[y*src.YStride : y*src.YStride+w]
				c0 := (y >> vs) * src.CStride
				cw := (w + 1<<hs - 1) >> hs
				cb, cr := src.Cb[c0:c0+cw], src.Cr[c0:c0+cw]
				o := out[y*w*3 : (y+1)*w*3]
				for x, yy := range yrow {
					c := x >> hs
					o[3*x], o[3*x+1], o[3*x+2] = jpegYCbCrToRGB(yy, cb[c], cr[c])
				}
			}
			break
		}
		for y := range h {
			o := out[y*w*3:]
			for x := range w {
				yi := src.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := src.COffset(b.Min.X+x, b.Min.Y+y)
				o[3*x], o[3*x+1], o[3*x+2] = jpegYCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
			}
		}
	case *image.Gray:
		for y := range h {
			row := src.Pix[y*src.Stride : y*src.Stride+w]
			o := out[y*w*3:]
			for x, v := range row {
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	case *image.RGBA:
		rgbaRows(out, src.Pix, src.Stride, w, h)
	case *image.NRGBA:
		rgbaRows(out, src.Pix, src.Stride, w, h)
	case *image.Paletted:
		var pal [256][3]byte
		for i, c := range src.Palette[:min(len(src.Palette), 256)] {
			if n, ok := c.(color.NRGBA); ok { // PNG with tRNS: the colour, alpha dropped
				pal[i] = [3]byte{n.R, n.G, n.B}
				continue
			}
			r, g, bl, _ := c.RGBA()
			pal[i] = [3]byte{byte(r >> 8), byte(g >> 8), byte(bl >> 8)}
		}
		for y := range h {
			row := src.Pix[y*src.Stride : y*src.Stride+w]
			o := out[y*w*3:]
			for x, v := range row {
				p := pal[v]
				o[3*x], o[3*x+1], o[3*x+2] = p[0], p[1], p[2]
			}
		}
	case *image.CMYK:
		for y := range h {
			row := src.Pix[y*src.Stride : y*src.Stride+4*w]
			o := out[y*w*3:]
			for x := range w {
				o[3*x], o[3*x+1], o[3*x+2] = color.CMYKToRGB(row[4*x], row[4*x+1], row[4*x+2], row[4*x+3])
			}
		}
	case *image.Gray16:
		for y := range h {
			row := src.Pix[y*src.Stride : y*src.Stride+2*w]
			o := out[y*w*3:]
			for x := range w {
				v := row[2*x] // big-endian: the high byte
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	case *image.RGBA64:
		rgba64Rows(out, src.Pix, src.Stride, w, h)
	case *image.NRGBA64:
		rgba64Rows(out, src.Pix, src.Stride, w, h)
	default:
		return fmt.Errorf("camera: decoded image of type %T: %w: want gray, paletted, RGB(A), CMYK or YCbCr, 8 or 16 bits", img, ErrUnsupported)
	}
	*dst = tmp
	return nil
}

// rgbaRows copies R, G, B of 4-byte pixels (alpha dropped).
func rgbaRows(out, pix []byte, stride, w, h int) {
	for y := range h {
		row := pix[y*stride : y*stride+4*w]
		o := out[y*w*3:]
		for x := range w {
			o[3*x], o[3*x+1], o[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
		}
	}
}

// rgba64Rows copies the high bytes of R, G, B of 8-byte pixels.
func rgba64Rows(out, pix []byte, stride, w, h int) {
	for y := range h {
		row := pix[y*stride : y*stride+8*w]
		o := out[y*w*3:]
		for x := range w {
			o[3*x], o[3*x+1], o[3*x+2] = row[8*x], row[8*x+2], row[8*x+4]
		}
	}
}

// chromaShifts returns how far a YCbCr image's chroma is subsampled, as
// shifts of x and y.
func chromaShifts(r image.YCbCrSubsampleRatio) (hs, vs uint, ok bool) {
	switch r {
	case image.YCbCrSubsampleRatio444:
		return 0, 0, true
	case image.YCbCrSubsampleRatio422:
		return 1, 0, true
	case image.YCbCrSubsampleRatio420:
		return 1, 1, true
	case image.YCbCrSubsampleRatio440:
		return 0, 1, true
	case image.YCbCrSubsampleRatio411:
		return 2, 0, true
	case image.YCbCrSubsampleRatio410:
		return 2, 1, true
	}
	return 0, 0, false
}

// maxDeflateRatio is the most deflate can expand: 258 bytes from a 2-bit
// code at best, about 1032:1.
const maxDeflateRatio = 1032

// minCompressedBytes is a lower bound on the size of a well-formed file of
// a w × h image, so that a header declaring far more pixels than its data
// can hold is refused before the decoder allocates them (up to the pixel
// budget). PNG: the filtered rows (one filter byte and ceil(w × bits per
// pixel / 8) bytes each, from IHDR's bit depth and colour type) over
// deflate's best ratio. JPEG: one bit per 8 × 8 luma block, the least a
// Huffman-coded DC coefficient takes in a baseline or a first progressive
// scan.
func minCompressedBytes(codec Codec, data []byte, w, h int) int64 {
	switch codec {
	case PNG:
		if len(data) < 29 { // DecodeConfig succeeded: IHDR is there
			return 0
		}
		depth, colorType := int64(data[24]), data[25]
		var channels int64
		switch colorType {
		case 0, 3: // gray, paletted
			channels = 1
		case 4: // gray and alpha
			channels = 2
		case 2: // RGB
			channels = 3
		case 6: // RGBA
			channels = 4
		}
		row := 1 + (int64(w)*depth*channels+7)/8
		return row * int64(h) / maxDeflateRatio
	case JPEG:
		blocks := int64((w+7)/8) * int64((h+7)/8)
		return blocks / 8
	}
	return 0
}

// fancyUpsample converts a 4:2:0 or 4:2:2 YCbCr image (at the origin, its
// chroma more than 2 samples wide) to RGB with libjpeg's "fancy"
// upsampling of the chroma (jdsample.c of libjpeg 6b and libjpeg-turbo,
// which Pillow and OpenCV use: each output chroma sample a 3:1 blend of the
// nearer and the farther input sample, horizontally and, for 4:2:0,
// vertically, the image edges replicated), where Go's image/jpeg leaves the
// chroma to be replicated. It reports false, writing nothing, for other
// images. Colours then go through libjpeg's conversion (jpegYCbCrToRGB).
func fancyUpsample(out []byte, src *image.YCbCr) bool {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	cw := (w + 1) / 2
	var vertical bool
	switch src.SubsampleRatio {
	case image.YCbCrSubsampleRatio420:
		vertical = true
	case image.YCbCrSubsampleRatio422:
	default:
		return false
	}
	if b.Min != (image.Point{}) || cw <= 2 {
		return false
	}
	ch := h
	if vertical {
		ch = (h + 1) / 2
	}
	// sums holds, for one output row, each chroma column's vertical sum
	// (4:2:0: 3 × the nearer row + the farther row; 4:2:2: 4 × the row);
	// up holds the upsampled Cb and Cr rows.
	sums := make([]int32, 2*cw)
	up := make([]byte, 2*2*cw)
	row := func(plane []byte, i int) []byte { return plane[i*src.CStride : i*src.CStride+cw] }
	for y := range h {
		for k, plane := range [2][]byte{src.Cb, src.Cr} {
			s := sums[k*cw : (k+1)*cw]
			if vertical {
				i := y >> 1
				j := i - 1 // the row above for even output rows, below for odd
				if y&1 == 1 {
					j = i + 1
				}
				j = max(0, min(j, ch-1))
				near, far := row(plane, i), row(plane, j)
				for c := range s {
					s[c] = 3*int32(near[c]) + int32(far[c])
				}
			} else {
				for c, v := range row(plane, y) {
					s[c] = 4 * int32(v)
				}
			}
			u := up[k*2*cw : (k+1)*2*cw]
			// jdsample.c's h2v2_fancy_upsample: even outputs
			// (3 s[c] + s[c-1] + 8) >> 4, odd ones (3 s[c] + s[c+1] + 7) >> 4,
			// the edges (4 s + 8) >> 4 and (4 s + 7) >> 4. For 4:2:2
			// (h2v1_fancy_upsample: (3a + b + 1) >> 2 and (3a + b + 2) >> 2
			// on the samples, the edges the samples themselves) the sums
			// are 4 × the samples, so biases 4 and 8 give the same values.
			bias0, bias1 := int32(8), int32(7)
			if !vertical {
				bias0, bias1 = 4, 8
			}
			u[0] = byte((s[0]*4 + bias0) >> 4)
			u[1] = byte((s[0]*3 + s[1] + bias1) >> 4)
			for c := 1; c < cw-1; c++ {
				u[2*c] = byte((s[c]*3 + s[c-1] + bias0) >> 4)
				u[2*c+1] = byte((s[c]*3 + s[c+1] + bias1) >> 4)
			}
			l := cw - 1
			u[2*l] = byte((s[l]*3 + s[l-1] + bias0) >> 4)
			u[2*l+1] = byte((s[l]*4 + bias1) >> 4)
		}
		cb, cr := up[:2*cw], up[2*cw:]
		yrow := src.Y[y*src.YStride : y*src.YStride+w]
		o := out[y*w*3 : (y+1)*w*3]
		for x, yy := range yrow {
			o[3*x], o[3*x+1], o[3*x+2] = jpegYCbCrToRGB(yy, cb[x], cr[x])
		}
	}
	return true
}

// FrameDecoder decodes camera messages from their CDR bytes, keeping the
// decoded message between calls so that a stream of raw frames of one
// layout allocates nothing. It is what a camera subscription needs: the
// CDR bytes of a sensor_msgs/Image or sensor_msgs/CompressedImage in, an
// RGB8 image and the message's header out. Not safe for concurrent use.
type FrameDecoder struct {
	Limits Limits
	raw    msgs.Image
	comp   msgs.CompressedImage
}

// Decode decodes cdr, a message of rosType (msgs.TypeImage or
// msgs.TypeCompressedImage), into dst (see DecodeImage and
// DecodeCompressed) and returns its header. On error dst is unchanged.
func (f *FrameDecoder) Decode(dst *worldmodel.Image, rosType string, cdr []byte) (msgs.Header, error) {
	switch rosType {
	case msgs.TypeImage:
		if err := f.raw.UnmarshalCDRReuse(cdr); err != nil {
			return msgs.Header{}, err
		}
		return f.raw.Header, f.Limits.DecodeImage(dst, &f.raw)
	case msgs.TypeCompressedImage:
		if err := f.comp.UnmarshalCDRReuse(cdr); err != nil {
			return msgs.Header{}, err
		}
		return f.comp.Header, f.Limits.DecodeCompressed(dst, &f.comp)
	}
	return msgs.Header{}, fmt.Errorf("camera: message type %s: %w: want %s or %s", rosType, ErrUnsupported, msgs.TypeImage, msgs.TypeCompressedImage)
}

// jpegYCbCrToRGB converts like libjpeg's ycc_rgb_convert (jdcolor.c):
// 16-bit fixed-point tables, R = Y + ⌊(FIX(1.402)·Cr' + ½) / 2^16⌋,
// G = Y + ⌊(−FIX(0.34414)·Cb' − FIX(0.71414)·Cr' + ½) / 2^16⌋,
// B = Y + ⌊(FIX(1.772)·Cb' + ½) / 2^16⌋ (Cb' = Cb − 128, Cr' = Cr − 128,
// ½ = 2^15), each clamped to 0..255. It differs from image/color's
// YCbCrToRGB by at most 1 on some inputs.
func jpegYCbCrToRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	const (
		fixCrR = 91881  // FIX(1.40200)
		fixCbB = 116130 // FIX(1.77200)
		fixCrG = 46802  // FIX(0.71414)
		fixCbG = 22554  // FIX(0.34414)
		half   = 1 << 15
	)
	b1, r1 := int32(cb)-128, int32(cr)-128
	yy := int32(y)
	return clamp8(yy + (fixCrR*r1+half)>>16), clamp8(yy + (-fixCbG*b1-fixCrG*r1+half)>>16), clamp8(yy + (fixCbB*b1+half)>>16)
}

func clamp8(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}
