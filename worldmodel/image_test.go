package worldmodel

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/golden"
)

// goldenDir is where golden/make_worldmodel_golden.py writes its files.
var goldenDir = filepath.Join("..", "golden", "worldmodel")

// imageCases are the image goldens' names (image_<name>.npz).
var imageCases = []string{"libero", "cam480", "odd", "small_vertical", "two_vertical", "crop_only", "width_kept"}

// imageCase is one image golden: the inputs, the configuration and the
// reference's frame (and tensor, for the small tiles).
type imageCase struct {
	cfg    FrameConfig
	images []Image
	rgb    []byte
	tensor []float32 // nil when not stored
}

func readNPZ(t *testing.T, path string, keys ...string) map[string]golden.Array {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readNPZBytes(t, filepath.Base(path), b, keys)
}

func readNPZBytes(t *testing.T, name string, b []byte, keys []string) map[string]golden.Array {
	t.Helper()
	a, err := golden.ParseArrays(context.Background(), name, b, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// npzKeys lists the arrays of an .npz image, sorted.
func npzKeys(t *testing.T, b []byte) []string {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range z.File {
		keys = append(keys, strings.TrimSuffix(f.Name, ".npy"))
	}
	slices.Sort(keys)
	return keys
}

func toBytes(t *testing.T, a golden.Array) []byte {
	t.Helper()
	out := make([]byte, len(a.Data))
	for i, v := range a.Data {
		if v < 0 || v > 255 || v != float32(math.Trunc(float64(v))) {
			t.Fatalf("value %v at %d is not a byte", v, i)
		}
		out[i] = byte(v)
	}
	return out
}

func loadImageCase(t *testing.T, dir, name string) imageCase {
	t.Helper()
	path := filepath.Join(dir, "image_"+name+".npz")
	conf := readNPZ(t, path, "config")["config"].Data
	if len(conf) != 5 {
		t.Fatalf("%s: config has %d values, want 5", path, len(conf))
	}
	c := imageCase{cfg: FrameConfig{TileWidth: int(conf[0]), TileHeight: int(conf[1]), Concat: Concat(conf[2])}}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := npzKeys(t, b)
	a := readNPZBytes(t, path, b, keys)
	for i := 0; ; i++ {
		cam, ok := a[fmt.Sprintf("cam%d", i)]
		if !ok {
			break
		}
		if len(cam.Shape) != 3 || cam.Shape[2] != 3 {
			t.Fatalf("%s: cam%d has shape %v", path, i, cam.Shape)
		}
		c.cfg.Cameras = append(c.cfg.Cameras, Camera{Name: fmt.Sprintf("cam%d", i), Flip180: conf[3+i] != 0})
		c.images = append(c.images, Image{Width: cam.Shape[1], Height: cam.Shape[0], Pix: toBytes(t, cam)})
	}
	c.rgb = toBytes(t, a["rgb"])
	if x, ok := a["image"]; ok {
		c.tensor = x.Data
	}
	return c
}

// TestFrameMatchesPillow compares the frame byte for byte with the
// independent reference (golden/make_worldmodel_golden.py: the real
// Pillow's resize, NumPy's flips, crop and concatenation), for LIBERO's
// sizes, a 480 × 640 camera with an upscaled 50 × 60 wrist, odd sizes and
// small vertical tiles.
func TestFrameMatchesPillow(t *testing.T) {
	for _, name := range imageCases {
		t.Run(name, func(t *testing.T) {
			c := loadImageCase(t, goldenDir, name)
			p, err := NewPreprocessor(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			fw, fh := c.cfg.Size()
			got := make([]byte, fw*fh*3)
			for range 2 { // the second run reuses the plans and the scratch
				if err := p.Frame(got, c.images...); err != nil {
					t.Fatal(err)
				}
				if bad := diffBytes(got, c.rgb); bad >= 0 {
					t.Fatalf("frame byte %d (row %d, column %d, channel %d) is %d, Pillow's is %d",
						bad, bad/(3*fw), bad/3%fw, bad%3, got[bad], c.rgb[bad])
				}
			}
			if c.tensor != nil {
				x := make([]float32, 3*fw*fh)
				if err := p.Tensor(x, c.images...); err != nil {
					t.Fatal(err)
				}
				for i := range x {
					if math.Float32bits(x[i]) != math.Float32bits(c.tensor[i]) {
						t.Fatalf("tensor value %d is %v, the reference's %v", i, x[i], c.tensor[i])
					}
				}
			}
		})
	}
}

func diffBytes(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestImageTensorAllValues checks the [-1, 1] map of all 256 values bit
// for bit against the reference's float32 computation.
func TestImageTensorAllValues(t *testing.T) {
	want := readNPZ(t, filepath.Join(goldenDir, "image_scale.npz"), "scale")["scale"].Data
	if len(want) != 256 {
		t.Fatalf("scale has %d values, want 256", len(want))
	}
	frame := make([]byte, 3*256)
	for v := range 256 {
		frame[3*v], frame[3*v+1], frame[3*v+2] = byte(v), byte(v), byte(v)
	}
	x := make([]float32, 3*256)
	if err := ImageTensor(x, frame, 256, 1); err != nil {
		t.Fatal(err)
	}
	for c := range 3 {
		for v := range 256 {
			if got := x[c*256+v]; math.Float32bits(got) != math.Float32bits(want[v]) {
				t.Fatalf("channel %d, value %d: %v, the reference's %v", c, v, got, want[v])
			}
		}
	}
	if x[0] != -1 || x[255] != 1 {
		t.Fatalf("0 maps to %v and 255 to %v, want -1 and 1", x[0], x[255])
	}
}

// TestCropResizeGeometry checks spec §1.2's examples, a portrait image,
// upscaling and Python's round-half-even.
func TestCropResizeGeometry(t *testing.T) {
	for _, c := range []struct{ w, h, tw, th, rw, rh, left, top int }{
		{256, 256, 224, 224, 224, 224, 0, 0},
		{640, 480, 224, 224, 299, 224, 37, 0},
		{320, 240, 224, 224, 299, 224, 37, 0},
		{60, 50, 224, 224, 269, 224, 22, 0},
		{227, 333, 224, 224, 224, 329, 0, 52},
		{225, 450, 224, 224, 224, 448, 0, 112},
		{6, 3, 4, 4, 8, 4, 2, 0},
		// s = 1/2: the width 2.5 rounds to 2 (half to even), not 3.
		{5, 2, 1, 1, 2, 1, 0, 0},
		// s = 1/2: 3.5 rounds to 4.
		{7, 2, 1, 1, 4, 1, 1, 0},
	} {
		rw, rh, left, top, err := CropResizeGeometry(c.w, c.h, c.tw, c.th)
		if err != nil || rw != c.rw || rh != c.rh || left != c.left || top != c.top {
			t.Errorf("%d × %d to %d × %d: got %d × %d at (%d, %d), %v; want %d × %d at (%d, %d)",
				c.w, c.h, c.tw, c.th, rw, rh, left, top, err, c.rw, c.rh, c.left, c.top)
		}
	}
}

// TestPreprocessorRefusesBadInput checks every refusal names the problem.
func TestPreprocessorRefusesBadInput(t *testing.T) {
	p, err := NewPreprocessor(LiberoFrame())
	if err != nil {
		t.Fatal(err)
	}
	ok := Image{Width: 4, Height: 3, Pix: make([]byte, 36)}
	frame := make([]byte, FrameWidth*FrameHeight*3)
	for _, c := range []struct {
		name   string
		dst    []byte
		images []Image
		want   string
	}{
		{"one image", frame, []Image{ok}, "1 images for 2 cameras (agentview, wrist)"},
		{"zero width", frame, []Image{{Width: 0, Height: 3}, ok}, "camera 0 (agentview): image of 0 × 3"},
		{"short buffer", frame, []Image{ok, {Width: 4, Height: 3, Pix: make([]byte, 35)}}, "camera 1 (wrist): image of 4 × 3 (width × height) has 35 bytes: want 3 × 4 × 3 = 36"},
		{"huge", frame, []Image{{Width: MaxImageSide + 1, Height: 3}, ok}, "want each side in 1..8192"},
		{"extreme aspect", frame, []Image{{Width: 8192, Height: 1, Pix: make([]byte, 8192*3)}, ok}, "aspect ratio too extreme"},
		{"frame buffer", frame[1:], []Image{ok, ok}, "frame buffer of 301055 bytes: want 224 × 448 × 3 = 301056"},
	} {
		err := p.Frame(c.dst, c.images...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		cfg  FrameConfig
		want string
	}{
		{FrameConfig{TileWidth: 0, TileHeight: 224, Cameras: []Camera{{}}}, "tile of 0 × 224"},
		{FrameConfig{TileWidth: 224, TileHeight: 224}, "0 cameras: want 1 or 2"},
		{FrameConfig{TileWidth: 224, TileHeight: 224, Cameras: make([]Camera, 3)}, "3 cameras: want 1 or 2"},
		{FrameConfig{TileWidth: 224, TileHeight: 224, Cameras: []Camera{{}}, Concat: 7}, "concatenation concat(7)"},
	} {
		if _, err := NewPreprocessor(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
	if err := ImageTensor(make([]float32, 5), make([]byte, 6), 2, 1); err == nil || !strings.Contains(err.Error(), "image tensor of 5 values: want 1 × 3 × 1 × 2 = 6") {
		t.Errorf("short tensor: got %v", err)
	}
}

// TestFrameSteadyStateAllocatesNothing: same-sized images reuse the plans
// and the scratch.
func TestFrameSteadyStateAllocatesNothing(t *testing.T) {
	c := loadImageCase(t, goldenDir, "libero")
	p, err := NewPreprocessor(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 3*FrameWidth*FrameHeight)
	if err := p.Tensor(x, c.images...); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(3, func() {
		if err := p.Tensor(x, c.images...); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per frame after the first, want 0", n)
	}
}

// naiveTile is spec §1 done the plain way, for the comparison below: the
// flip as a copy, both passes over the whole image, then the crop.
func naiveTile(t *testing.T, img Image, flip bool, tw, th int) []byte {
	t.Helper()
	w, h := img.Width, img.Height
	src := append([]byte(nil), img.Pix...)
	if flip {
		for i := range w * h {
			j := w*h - 1 - i
			copy(src[3*i:3*i+3], img.Pix[3*j:3*j+3])
		}
	}
	rw, rh, left, top, err := CropResizeGeometry(w, h, tw, th)
	if err != nil {
		t.Fatal(err)
	}
	pass := func(in []byte, nIn, nOut, lines int, at func(line, i int) int) []byte {
		c := makeCoeffs(nIn, nOut, 0, nOut)
		out := make([]byte, nOut*lines*3)
		for l := range lines {
			for o := range nOut {
				for ch := range 3 {
					acc := int32(1 << 21)
					for k := range c.n[o] {
						acc += int32(in[at(l, c.lo[o]+k)*3+ch]) * c.k[o*c.ksize+k]
					}
					out[3*(l*nOut+o)+ch] = clip8(acc)
				}
			}
		}
		return out
	}
	cur, cw := src, w
	if rw != w {
		cur = pass(cur, w, rw, h, func(y, x int) int { return y*w + x })
		cw = rw
	}
	if rh != h {
		// Lines are columns: out[x][y]; transposed back below.
		t := pass(cur, h, rh, cw, func(x, y int) int { return y*cw + x })
		cur = make([]byte, len(t))
		for x := range cw {
			for y := range rh {
				copy(cur[3*(y*cw+x):3*(y*cw+x)+3], t[3*(x*rh+y):3*(x*rh+y)+3])
			}
		}
	}
	out := make([]byte, 0, tw*th*3)
	for y := range th {
		out = append(out, cur[3*((top+y)*cw+left):3*((top+y)*cw+left+tw)]...)
	}
	return out
}

// TestFrameMatchesNaiveResize compares the crop-first, flip-in-place
// resize with the plain one (naiveTile) over many small sizes, up- and
// downscaling, odd and even, both flips: the Pillow goldens hold a few
// sizes, this holds the optimisations to the plain definition on many.
func TestFrameMatchesNaiveResize(t *testing.T) {
	seed := uint32(1)
	next := func() byte { seed = seed*1664525 + 1013904223; return byte(seed >> 24) }
	for _, tile := range [][2]int{{8, 8}, {7, 5}, {4, 9}} {
		cfg := FrameConfig{TileWidth: tile[0], TileHeight: tile[1], Cameras: []Camera{{Name: "a"}, {Name: "b", Flip180: true}}}
		p, err := NewPreprocessor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		fw, fh := cfg.Size()
		frame := make([]byte, fw*fh*3)
		for w := 1; w <= 23; w += 2 {
			for h := 1; h <= 23; h += 3 {
				img := Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
				for i := range img.Pix {
					img.Pix[i] = next()
				}
				if err := p.Frame(frame, img, img); err != nil {
					t.Fatalf("tile %v, image %d × %d: %v", tile, w, h, err)
				}
				for cam, flip := range []bool{false, true} {
					want := naiveTile(t, img, flip, tile[0], tile[1])
					for y := range tile[1] {
						got := frame[y*fw*3+cam*tile[0]*3 : y*fw*3+(cam+1)*tile[0]*3]
						if bad := diffBytes(got, want[y*tile[0]*3:(y+1)*tile[0]*3]); bad >= 0 {
							t.Fatalf("tile %v, image %d × %d, flip %v: row %d differs at byte %d", tile, w, h, flip, y, bad)
						}
					}
				}
			}
		}
	}
}
