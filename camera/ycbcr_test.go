package camera_test

import (
	"image"
	"image/color"
	"math/rand/v2"
	"testing"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/worldmodel"
)

// TestYCbCrRows: the row-by-row conversion of every subsample ratio, at odd
// sizes and from a sub-image (the generic path), equals libjpeg's
// conversion of each pixel's samples (image.YCbCr.YCbCrAt), except where libjpeg's fancy upsampling
// applies (4:2:0 and 4:2:2 more than 2 chroma samples wide at the origin).
func TestYCbCrRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ratio := range []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	} {
		for _, size := range [][2]int{{1, 1}, {7, 5}, {16, 9}, {33, 17}} {
			full := image.NewYCbCr(image.Rect(0, 0, size[0]+3, size[1]+2), ratio)
			for _, b := range [][]byte{full.Y, full.Cb, full.Cr} {
				for i := range b {
					b[i] = byte(rng.IntN(256))
				}
			}
			for _, img := range []*image.YCbCr{
				full.SubImage(image.Rect(0, 0, size[0], size[1])).(*image.YCbCr),
				full.SubImage(image.Rect(3, 1, size[0]+3, size[1]+1)).(*image.YCbCr), // Min ≠ 0: the generic path
			} {
				fancy := (ratio == image.YCbCrSubsampleRatio420 || ratio == image.YCbCrSubsampleRatio422) &&
					img.Rect.Min == (image.Point{}) && (size[0]+1)/2 > 2
				if fancy {
					continue // libjpeg's upsampling: checked against Pillow (TestPillowKinds)
				}
				var got worldmodel.Image
				if err := camera.ToRGB(&got, img); err != nil {
					t.Fatal(err)
				}
				b := img.Bounds()
				for y := b.Min.Y; y < b.Max.Y; y++ {
					for x := b.Min.X; x < b.Max.X; x++ {
						c := libjpegRGB(img.YCbCrAt(x, y))
						p := got.Pix[((y-b.Min.Y)*got.Width+x-b.Min.X)*3:]
						if p[0] != c.R || p[1] != c.G || p[2] != c.B {
							t.Fatalf("%v %v at (%d, %d): %v, want %v", ratio, b, x, y, p[:3], c)
						}
					}
				}
			}
		}
	}
}

// libjpegRGB is jdcolor.c's ycc_rgb_convert for one pixel, written from
// its table definitions: Cr_r_tab[i] = (FIX(1.40200)·x + ONE_HALF) >> 16,
// Cb_b_tab[i] = (FIX(1.77200)·x + ONE_HALF) >> 16, Cr_g_tab[i] =
// −FIX(0.71414)·x, Cb_g_tab[i] = −FIX(0.34414)·x + ONE_HALF, x = i − 128,
// FIX(v) = (int)(v·65536 + 0.5), and the range limit.
func libjpegRGB(c color.YCbCr) color.RGBA {
	fix := func(v float64) int64 { return int64(v*65536 + 0.5) }
	x, z := int64(c.Cr)-128, int64(c.Cb)-128
	crR := (fix(1.40200)*x + 32768) >> 16
	cbB := (fix(1.77200)*z + 32768) >> 16
	crG := -fix(0.71414) * x
	cbG := -fix(0.34414)*z + 32768
	lim := func(v int64) uint8 { return uint8(min(max(v, 0), 255)) }
	y := int64(c.Y)
	return color.RGBA{R: lim(y + crR), G: lim(y + (cbG+crG)>>16), B: lim(y + cbB), A: 255}
}
