package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policyImages writes a PNG agentview and a JPEG wrist camera image of
// structured content (gradients) into dir; bump changes one pixel of the
// PNG.
func policyImages(t *testing.T, dir string, bump bool) (string, string) {
	t.Helper()
	a := image.NewRGBA(image.Rect(0, 0, 128, 96))
	b := image.NewRGBA(image.Rect(0, 0, 160, 120))
	for y := range 96 {
		for x := range 128 {
			a.Set(x, y, color.RGBA{uint8(2 * x), uint8(2 * y), uint8(x + y), 255})
		}
	}
	for y := range 120 {
		for x := range 160 {
			b.Set(x, y, color.RGBA{uint8(255 - x), uint8(3 * y), 90, 255})
		}
	}
	if bump {
		a.Set(64, 48, color.RGBA{0, 255, 0, 255})
	}
	pa, pb := filepath.Join(dir, "agentview.png"), filepath.Join(dir, "wrist.jpg")
	var buf bytes.Buffer
	if err := png.Encode(&buf, a); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pa, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := jpeg.Encode(&buf, b, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return pa, pb
}

const (
	policyState       = "0.1,0.2,0.3,0.4,0.5,0.6,0.01,-0.01"
	policyInstruction = "put the bowl on the plate"
)

// policyJSONRun runs fastwam policy -json with args and decodes its output.
func policyJSONRun(t *testing.T, args ...string) policyJSON {
	t.Helper()
	code, out, stderr := runCmd(t, append([]string{"policy", "-json"}, args...)...)
	if code != 0 {
		t.Fatalf("policy %v: exit %d\n%s", args, code, stderr)
	}
	var got policyJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("policy -json output does not decode: %v\n%s", err, out)
	}
	return got
}

// One cycle from files, through the tiny world model and the tiny expert:
// a chunk of 32 finite rows of 7, every stage timed; the same inputs give
// the same bits, one changed pixel other actions.
func TestPolicyOneCycle(t *testing.T) {
	dir := t.TempDir()
	pa, pb := policyImages(t, dir, false)
	args := []string{"-image", pa, "-image", pb, "-state", policyState, "-instruction", policyInstruction}
	got := policyJSONRun(t, args...)
	if len(got.Chunks) != 1 || len(got.Refused) != 0 {
		t.Fatalf("%d chunks, %d refused; want 1, 0", len(got.Chunks), len(got.Refused))
	}
	c := got.Chunks[0]
	if len(c.Actions) != 32 || len(c.Actions[0]) != 7 {
		t.Fatalf("actions %d × %d; want 32 × 7", len(c.Actions), len(c.Actions[0]))
	}
	for _, r := range c.Actions {
		for _, v := range r {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("non-finite action %v", v)
			}
		}
	}
	for _, s := range []string{"preprocess", "vae", "text", "proprio", "prefill", "world model", "denoise"} {
		if _, ok := c.StagesMs[s]; !ok {
			t.Errorf("no %q stage time in %v", s, c.StagesMs)
		}
	}
	if !strings.Contains(got.WorldModel, "embedded golden/tiny/world") || !strings.Contains(got.WorldModel, "K/V [2, 1, 98, 32]") {
		t.Errorf("world model described as %q", got.WorldModel)
	}
	again := policyJSONRun(t, args...)
	if !sameRows(c.Actions, again.Chunks[0].Actions) {
		t.Error("the same inputs gave other actions")
	}
	dir2 := t.TempDir()
	qa, qb := policyImages(t, dir2, true)
	bumped := policyJSONRun(t, "-image", qa, "-image", qb, "-state", policyState, "-instruction", policyInstruction)
	if sameRows(c.Actions, bumped.Chunks[0].Actions) {
		t.Error("a changed pixel left the actions as they were")
	}
	state := policyJSONRun(t, "-image", pa, "-image", pb, "-state", "[0.1,0.2,0.3,0.4,0.5,0.6,0.01,-0.02]", "-instruction", policyInstruction)
	if sameRows(c.Actions, state.Chunks[0].Actions) {
		t.Error("a changed state left the actions as they were")
	}
	// The table prints the same chunk and, with post-processing, the
	// executable actions.
	code, out, stderr := runCmd(t, append([]string{"policy", "-p", "actions.norm_mode:=min/max"}, args...)...)
	if code != 0 {
		t.Fatalf("policy with min/max: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"actions (the expert's output): 32 rows", "executable actions (post-processed): 32 rows", "stages       preprocess"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func sameRows(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

// bombPNG is a valid PNG signature and IHDR declaring width × height, with
// no image data after it.
func bombPNG(width, height uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], width)
	binary.BigEndian.PutUint32(ihdr[4:], height)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk := append([]byte("IHDR"), ihdr...)
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

func TestPolicyRefusals(t *testing.T) {
	dir := t.TempDir()
	pa, pb := policyImages(t, dir, false)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full, err := os.ReadFile(pa)
	if err != nil {
		t.Fatal(err)
	}
	truncated := write("truncated.png", full[:len(full)/2])
	bomb := write("bomb.png", bombPNG(60000, 60000))
	text := write("notes.png", []byte("not an image at all"))
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"one image", []string{"-image", pa, "-state", policyState, "-instruction", policyInstruction}, 2, "1 -image files; the world model's frame takes 2 cameras (agentview, wrist)"},
		{"no state", []string{"-image", pa, "-image", pb, "-instruction", policyInstruction}, 2, "-state is needed"},
		{"short state", []string{"-image", pa, "-image", pb, "-state", "1,2,3", "-instruction", policyInstruction}, 2, "-state: 3 values; want 8"},
		{"NaN state", []string{"-image", pa, "-image", pb, "-state", "1,2,3,4,5,6,7,NaN", "-instruction", policyInstruction}, 2, "value 7 is NaN"},
		{"bad JSON state", []string{"-image", pa, "-image", pb, "-state", "[1,2,", "-instruction", policyInstruction}, 2, "not a JSON array"},
		{"unknown instruction", []string{"-image", pa, "-image", pb, "-state", policyState, "-instruction", "make coffee"}, 1, `instruction "make coffee": no text cache entry`},
		{"truncated PNG", []string{"-image", truncated, "-image", pb, "-state", policyState, "-instruction", policyInstruction}, 1, "truncated.png: camera: CompressedImage png of 128 × 96: corrupt"},
		{"decompression bomb", []string{"-image", bomb, "-image", pb, "-state", policyState, "-instruction", policyInstruction}, 1, "bomb.png: camera: CompressedImage png of 60000 × 60000 (width × height): image too large"},
		{"not an image", []string{"-image", text, "-image", pb, "-state", policyState, "-instruction", policyInstruction}, 1, "not a PNG or JPEG file"},
		{"bag and image", []string{"-bag", dir, "-image", pa}, 2, "-bag takes the observations from the bag"},
		{"world not a folder", []string{"-world", pa}, 2, "-world " + pa + ": not a folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, append([]string{"policy"}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q\n%s", code, stderr, c.code, c.want, out)
			}
			if strings.Contains(out, "actions (") {
				t.Errorf("a refused run printed actions:\n%s", out)
			}
		})
	}
}
