package camera_test

import (
	"errors"
	"testing"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// FuzzDecodeCompressed: any bytes under any of the formats decode to an
// image of the declared size or are refused with one of the package's
// kinds; nothing panics, and a small pixel budget holds.
func FuzzDecodeCompressed(f *testing.F) {
	img := toNRGBA(pattern(9, 7, 1))
	f.Add(uint8(0), encodePNG(f, img))
	f.Add(uint8(1), encodeJPEG(f, img, 70))
	f.Add(uint8(0), bombPNG(100000, 3))
	f.Add(uint8(1), bombJPEG(f, 4000, 4000))
	formats := []string{"png", "jpeg", "rgb8; png compressed bgr8", "rgb8; jpeg compressed bgr8"}
	lim := camera.Limits{MaxPixels: 64 * 64, MaxCompressedBytes: 1 << 16}
	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		var dst worldmodel.Image
		err := lim.DecodeCompressed(&dst, &msgs.CompressedImage{Format: formats[int(format)%len(formats)], Data: data})
		if err != nil {
			if !errors.Is(err, camera.ErrCorrupt) && !errors.Is(err, camera.ErrTooLarge) && !errors.Is(err, camera.ErrGeometry) && !errors.Is(err, camera.ErrUnsupported) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		if dst.Width*dst.Height > 64*64 || len(dst.Pix) != dst.Width*dst.Height*3 {
			t.Fatalf("decoded %d × %d with %d bytes", dst.Width, dst.Height, len(dst.Pix))
		}
	})
}

// FuzzDecodeImage: any Image message decodes to a consistent image or is
// refused with one of the package's kinds.
func FuzzDecodeImage(f *testing.F) {
	f.Add(uint32(2), uint32(3), "rgb8", uint32(9), make([]byte, 18))
	f.Add(uint32(2), uint32(3), "bgra8", uint32(12), make([]byte, 24))
	f.Add(uint32(1<<31), uint32(1<<31), "mono8", uint32(1<<31), []byte{1})
	var lim camera.Limits
	f.Fuzz(func(t *testing.T, h, w uint32, enc string, step uint32, data []byte) {
		var dst worldmodel.Image
		err := lim.DecodeImage(&dst, &msgs.Image{Height: h, Width: w, Encoding: enc, Step: step, Data: data})
		if err != nil {
			if !errors.Is(err, camera.ErrTooLarge) && !errors.Is(err, camera.ErrGeometry) && !errors.Is(err, camera.ErrUnsupported) {
				t.Fatalf("error of no known kind: %v", err)
			}
			return
		}
		if dst.Width != int(w) || dst.Height != int(h) || len(dst.Pix) != int(w*h*3) {
			t.Fatalf("decoded %d × %d with %d bytes from %d × %d", dst.Width, dst.Height, len(dst.Pix), w, h)
		}
	})
}
