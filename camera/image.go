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
		switch {
		case lay == layout{3, 0, 1, 2}:
			copy(o, src)
		case lay.channels == 1:
			for x, v := range src {
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		default:
			c := lay.channels
			for x := range w {
				p := src[x*c : x*c+c]
				o[3*x], o[3*x+1], o[3*x+2] = p[lay.r], p[lay.g], p[lay.b]
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
// byte, alpha is dropped (not composited), CMYK and YCbCr use Go's
// image/color conversions. The conversion reuses dst.Pix; the JPEG and
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
		for y := range h {
			o := out[y*w*3:]
			for x := range w {
				yi := src.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := src.COffset(b.Min.X+x, b.Min.Y+y)
				o[3*x], o[3*x+1], o[3*x+2] = color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
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
