package camera_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// pillowKindsScript writes, with Pillow (an independent encoder and
// decoder), one structured image in each colour type a camera pipeline may
// send, as PNG and JPEG, and beside each file Pillow's own RGB decoding.
const pillowKindsScript = `
import sys, os
from PIL import Image, ImageDraw
out = sys.argv[1]
def scene(w, h):
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = (x * 255 // (w - 1), y * 255 // (h - 1), (x + y) * 100 // (w + h))
    d = ImageDraw.Draw(im)
    d.rectangle([w // 4, h // 4, w // 2, h // 2], fill=(240, 30, 60))
    d.ellipse([w // 2, h // 2, w - 3, h - 2], fill=(20, 40, 200))
    return im
base = scene(37, 29)
kinds = {
    "rgb.png": base,
    "l.png": base.convert("L"),
    "p.png": base.convert("P", palette=Image.ADAPTIVE, colors=16),
    "rgba.png": base.convert("RGBA"),
    "la.png": base.convert("LA"),
    "1.png": base.convert("1"),
    "rgb.jpg": base,
    "l.jpg": base.convert("L"),
    "rgb444.jpg": base,
    "rgb422.jpg": base,
    "l_odd.jpg": scene(5, 3).convert("L"),
    "rgb_narrow.jpg": scene(4, 9),
}
for name, im in kinds.items():
    path = os.path.join(out, name)
    if name.endswith(".jpg"):
        im.save(path, quality=92, subsampling=0 if "444" in name else 1 if "422" in name else 2)
    else:
        im.save(path)
    with Image.open(path) as back:
        open(path + ".rgb", "wb").write(back.convert("RGB").tobytes())
`

// TestPillowKinds decodes Pillow's PNGs (RGB, L, P, RGBA, LA, 1-bit) and
// JPEGs (RGB 4:2:0, 4:2:2 and 4:4:4, L, and sizes where libjpeg does not
// upsample smoothly) and compares with Pillow's decoding: PNG
// exactly, JPEG within the differences of two decoders.
func TestPillowKinds(t *testing.T) {
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import PIL").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		testenv.Missing(t, "no python3 that imports PIL; install python3-pil for the independent decoding check")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", pillowKindsScript, dir)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pillow: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.*g"))
	if err != nil || len(files) != 12 {
		t.Fatalf("%d files (%v)", len(files), err)
	}
	var lim camera.Limits
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(f + ".rgb")
		if err != nil {
			t.Fatal(err)
		}
		format := "png"
		if strings.HasSuffix(f, ".jpg") {
			format = "jpeg"
		}
		var got worldmodel.Image
		if err := lim.DecodeCompressed(&got, &msgs.CompressedImage{Format: format, Data: data}); err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if len(got.Pix) != len(want) {
			t.Fatalf("%s: %d × %d, %d bytes; Pillow %d bytes", filepath.Base(f), got.Width, got.Height, len(got.Pix), len(want))
		}
		worst, mean := diff(got.Pix, want)
		t.Logf("%s: against Pillow: largest difference %d, mean %.3f", filepath.Base(f), worst, mean)
		if format == "png" && worst != 0 {
			t.Errorf("%s: PNG decodings differ by up to %d", filepath.Base(f), worst)
		}
		// Go's IDCT rounds differently from libjpeg's; the chroma
		// upsampling and the colour conversion are libjpeg's.
		if worst > 3 || mean > 0.2 {
			t.Errorf("%s: JPEG decodings differ by up to %d, %.3f on average: want at most 3 and 0.2", filepath.Base(f), worst, mean)
		}
	}
}
