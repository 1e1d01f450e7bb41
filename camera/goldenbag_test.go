package camera_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// The image bag shipped in golden/imagebag is made by this file:
//
//	go test ./camera -run TestGoldenImageBag -args -update-imagebag
//
// (it removes and rewrites ../golden/imagebag), and checked by the same
// test without the flag: every frame decoded against the scene it was
// drawn from, the states, stamps and instructions, the pairing, and, when
// their tools are installed, the bag read by Foxglove's independent MCAP
// and CDR readers and the compressed frames decoded by Pillow.
var updateImageBag = flag.Bool("update-imagebag", false, "rewrite ../golden/imagebag from goldenFrames")

const goldenBagDir = "../golden/imagebag"

// Golden bag layout: 4 cycles at 10 Hz; agentview 128 × 128 as
// CompressedImage, JPEG (quality 90) on even cycles and PNG on odd ones;
// wrist 64 × 64 as a raw bgr8 Image with 4 bytes of row padding, 3 ms
// after the agentview frame; the state 1 ms after it; the instruction
// latched, changed at cycle 2.
const (
	goldenCycles   = 4
	goldenPeriod   = 100 * time.Millisecond
	goldenAgentW   = 128
	goldenWristW   = 64
	goldenQuality  = 90
	goldenFirstSec = 1700000000
)

var goldenInstructions = [goldenCycles]string{
	"put the black bowl on the plate", "", "open the top drawer of the cabinet", "",
}

// scene draws a structured image: a vertical two-tone gradient (wall and
// table), a plate (light rectangle) and a bowl (dark disc) that moves with
// the cycle; the wrist view adds two gripper fingers.
func scene(w, cycle int, wrist bool) worldmodel.Image {
	img := worldmodel.Image{Width: w, Height: w, Pix: make([]byte, w*w*3)}
	cx := float64(w) * (0.3 + 0.1*float64(cycle))
	cy, r := float64(w)*0.6, float64(w)*0.12
	for y := range w {
		for x := range w {
			p := img.Pix[(y*w+x)*3:]
			if y < w/2 {
				p[0], p[1], p[2] = byte(180-y), byte(190-y/2), byte(210)
			} else {
				p[0], p[1], p[2] = byte(120+x/4), byte(90+x/8), byte(60)
			}
			if x > w/2 && x < w*7/8 && y > w*5/8 && y < w*7/8 {
				p[0], p[1], p[2] = 235, 235, 225
			}
			if dx, dy := float64(x)-cx, float64(y)-cy; dx*dx+dy*dy < r*r {
				p[0], p[1], p[2] = 30, 30, byte(40+20*cycle)
			}
			if wrist && y > w*3/4 && (x < w/5 || x > w*4/5) {
				p[0], p[1], p[2] = 70, 70, 75
			}
		}
	}
	return img
}

func goldenState(cycle int) []float64 {
	s := make([]float64, worldmodel.ProprioDim)
	for i := range s {
		s[i] = math.Round((0.1*float64(i)-0.3+0.01*float64(cycle))*1e6) / 1e6
	}
	return s
}

func goldenFrames() []camera.Frame {
	frames := make([]camera.Frame, goldenCycles)
	for k := range frames {
		at := time.Unix(goldenFirstSec, 0).Add(time.Duration(k) * goldenPeriod)
		codec := camera.JPEG
		if k%2 == 1 {
			codec = camera.PNG
		}
		frames[k] = camera.Frame{
			Stamp:       at,
			Instruction: goldenInstructions[k],
			State:       goldenState(k),
			StateStamp:  at.Add(time.Millisecond),
			Cameras: []camera.CameraFrame{
				{Image: scene(goldenAgentW, k, false), Codec: codec},
				{Image: scene(goldenWristW, k, true), Stamp: at.Add(3 * time.Millisecond), Encoding: "bgr8", StepPadding: 4},
			},
		}
	}
	return frames
}

func goldenBagOptions() camera.BagOptions {
	return camera.BagOptions{FrameIDs: []string{"agentview_optical", "wrist_optical"}, JPEGQuality: goldenQuality}
}

func TestGoldenImageBag(t *testing.T) {
	if *updateImageBag {
		if err := os.RemoveAll(goldenBagDir); err != nil {
			t.Fatal(err)
		}
		if err := camera.WriteBag(goldenBagDir, goldenFrames(), goldenBagOptions()); err != nil {
			t.Fatal(err)
		}
	}
	var total int64
	for _, name := range []string{"metadata.yaml", "imagebag_0.mcap"} {
		st, err := os.Stat(filepath.Join(goldenBagDir, name))
		if err != nil {
			t.Fatalf("%v (make it with: go test ./camera -run TestGoldenImageBag -args -update-imagebag)", err)
		}
		total += st.Size()
	}
	if total > 300<<10 {
		t.Errorf("golden/imagebag is %d bytes, want under 300 KiB", total)
	}
	// Writing the frames again gives the same bytes: the bag is what
	// goldenFrames describes.
	again := filepath.Join(t.TempDir(), "imagebag")
	if err := camera.WriteBag(again, goldenFrames(), goldenBagOptions()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"metadata.yaml", "imagebag_0.mcap"} {
		a, _ := os.ReadFile(filepath.Join(goldenBagDir, name))
		b, _ := os.ReadFile(filepath.Join(again, name))
		if !bytes.Equal(a, b) {
			t.Errorf("golden/imagebag/%s differs from what goldenFrames writes now: regenerate it", name)
		}
	}

	ctx := t.Context()
	br, err := camera.OpenBag(ctx, goldenBagDir, camera.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	frames := goldenFrames()
	n := 0
	for o, err := range br.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if n >= len(frames) {
			t.Fatalf("more than %d observations", len(frames))
		}
		f := frames[n]
		wantInstr := goldenInstructions[0]
		if n >= 2 {
			wantInstr = goldenInstructions[2]
		}
		if o.Instruction != wantInstr || !o.ImageStamps[0].Equal(f.Stamp) || !o.ImageStamps[1].Equal(f.Stamp.Add(3*time.Millisecond)) ||
			!o.Stamp.Equal(f.Stamp.Add(3*time.Millisecond)) || !o.StateStamp.Equal(f.Stamp.Add(time.Millisecond)) {
			t.Fatalf("observation %d: instruction %q, stamps %v (newest %v), state at %v", n, o.Instruction, o.ImageStamps, o.Stamp, o.StateStamp)
		}
		for i, v := range f.State {
			if o.State[i] != float32(v) {
				t.Fatalf("observation %d: state %v, want %v", n, o.State, f.State)
			}
		}
		// wrist: raw bgr8, exact; agentview: PNG exact, JPEG close.
		if !bytes.Equal(o.Images[1].Pix, f.Cameras[1].Image.Pix) {
			t.Fatalf("observation %d: wrist image differs", n)
		}
		worst, mean := diff(o.Images[0].Pix, f.Cameras[0].Image.Pix)
		if f.Cameras[0].Codec == camera.PNG && worst != 0 {
			t.Fatalf("observation %d: PNG agentview differs by up to %d", n, worst)
		}
		if mean > 2 {
			t.Fatalf("observation %d: JPEG agentview differs by %.2f on average (at most %d), want ≤ 2", n, mean, worst)
		}
		t.Logf("observation %d: agentview %v, largest difference %d, mean %.3f", n, f.Cameras[0].Codec, worst, mean)
		n++
	}
	if st := br.Stats(); n != goldenCycles || st.UnpairedFrames != 0 || st.Messages != goldenCycles*3+2 {
		t.Fatalf("%d observations, stats %+v; want %d, none unpaired, %d messages", n, st, goldenCycles, goldenCycles*3+2)
	}
}

func diff(a, b []byte) (worst int, mean float64) {
	sum := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		d = max(d, -d)
		worst, sum = max(worst, d), sum+d
	}
	return worst, float64(sum) / float64(len(a))
}

// TestGoldenImageBagIndependently reads golden/imagebag with Foxglove's
// MCAP and CDR readers (msgs/testdata/xcheck) and decodes its compressed
// frames with Pillow, comparing with this package's reading.
func TestGoldenImageBagIndependently(t *testing.T) {
	ctx := t.Context()
	var compressed [][]byte
	var formats []string
	var ours []worldmodel.Image
	r, err := bag.Open(goldenBagDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var lim camera.Limits
	for m, err := range r.Messages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != camera.DefaultAgentviewTopic {
			continue
		}
		var c msgs.CompressedImage
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		var img worldmodel.Image
		if err := lim.DecodeCompressed(&img, &c); err != nil {
			t.Fatal(err)
		}
		compressed, formats, ours = append(compressed, bytes.Clone(c.Data)), append(formats, c.Format), append(ours, img)
	}
	if len(compressed) != goldenCycles {
		t.Fatalf("%d agentview frames, want %d", len(compressed), goldenCycles)
	}
	t.Run("foxglove", func(t *testing.T) { foxgloveReadsGoldenBag(t, compressed, formats) })
	t.Run("pillow", func(t *testing.T) { pillowDecodes(t, compressed, ours) })
}

func foxgloveReadsGoldenBag(t *testing.T, compressed [][]byte, formats []string) {
	dir, err := filepath.Abs(filepath.Join("..", "msgs", "testdata", "xcheck"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node is not installed; the independent cross-check needs node 20+")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@mcap", "core")); err != nil {
		testenv.Missing(t, "cross-check packages not installed; run `npm ci` in %s", dir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", filepath.Join(dir, "xcheck.mjs"), "readbag", goldenBagDir).Output()
	if err != nil {
		t.Fatalf("node xcheck.mjs readbag: %v", err)
	}
	var got struct {
		Files []struct {
			Channels []struct {
				Topic      string            `json:"topic"`
				SchemaName string            `json:"schemaName"`
				Metadata   map[string]string `json:"metadata"`
			} `json:"channels"`
			Messages []struct {
				Topic   string         `json:"topic"`
				Message map[string]any `json:"value"`
			} `json:"messages"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("readbag output: %v\n%.500s", err, out)
	}
	if len(got.Files) != 1 {
		t.Fatalf("%d files", len(got.Files))
	}
	types := map[string]string{}
	for _, c := range got.Files[0].Channels {
		types[c.Topic] = c.SchemaName
		if q := c.Metadata[bag.QoSMetadataKey]; c.Topic == camera.DefaultInstructionTopic && !strings.Contains(q, "durability: 1\n") {
			t.Errorf("instruction topic offers %q, want durability 1 (transient local)", q)
		}
	}
	wantTypes := map[string]string{camera.DefaultAgentviewTopic: msgs.TypeCompressedImage, camera.DefaultWristTopic: msgs.TypeImage,
		camera.DefaultProprioTopic: msgs.TypeFloat64MultiArray, camera.DefaultInstructionTopic: msgs.TypeString}
	if fmt.Sprint(types) != fmt.Sprint(wantTypes) {
		t.Errorf("channel schemas %v, want %v", types, wantTypes)
	}
	counts := map[string]int{}
	agent := 0
	frames := goldenFrames()
	for _, m := range got.Files[0].Messages {
		counts[m.Topic]++
		switch m.Topic {
		case camera.DefaultAgentviewTopic:
			if m.Message["format"] != formats[agent] || m.Message["data"] != b64(compressed[agent]) {
				t.Errorf("agentview %d: format %v or data differ", agent, m.Message["format"])
			}
			agent++
		case camera.DefaultWristTopic:
			k := counts[m.Topic] - 1
			want, _ := camera.EncodeImage(frames[k].Cameras[1].Image, "bgr8", 4)
			if m.Message["encoding"] != "bgr8" || m.Message["width"] != 64.0 || m.Message["height"] != 64.0 || m.Message["step"] != 196.0 || m.Message["data"] != b64(want.Data) {
				t.Errorf("wrist %d: %v × %v %v step %v, or data differ", k, m.Message["width"], m.Message["height"], m.Message["encoding"], m.Message["step"])
			}
		case camera.DefaultProprioTopic:
			k := counts[m.Topic] - 1
			if fmt.Sprint(m.Message["data"]) != fmt.Sprint(frames[k].State) {
				t.Errorf("state %d: %v, want %v", k, m.Message["data"], frames[k].State)
			}
		case camera.DefaultInstructionTopic:
			if d := m.Message["data"]; d != goldenInstructions[0] && d != goldenInstructions[2] {
				t.Errorf("instruction %v", d)
			}
		}
	}
	want := map[string]int{camera.DefaultAgentviewTopic: 4, camera.DefaultWristTopic: 4, camera.DefaultProprioTopic: 4, camera.DefaultInstructionTopic: 2}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("messages per topic %v, want %v", counts, want)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// pillowScript prints, for each file, Pillow's RGB decoding as raw bytes.
const pillowScript = `
import sys
from PIL import Image
for path in sys.argv[1:]:
    with Image.open(path) as im:
        open(path + ".rgb", "wb").write(im.convert("RGB").tobytes())
`

func pillowDecodes(t *testing.T, compressed [][]byte, ours []worldmodel.Image) {
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
	var paths []string
	for i, c := range compressed {
		p := filepath.Join(dir, fmt.Sprintf("frame%d", i))
		if err := os.WriteFile(p, c, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"-c", pillowScript}, paths...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pillow: %v\n%s", err, out)
	}
	for i, p := range paths {
		want, err := os.ReadFile(p + ".rgb")
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != len(ours[i].Pix) {
			t.Fatalf("frame %d: Pillow gives %d bytes, we %d", i, len(want), len(ours[i].Pix))
		}
		worst, mean := diff(ours[i].Pix, want)
		t.Logf("frame %d (%s): Go against Pillow: largest difference %d, mean %.3f", i, sniffName(compressed[i]), worst, mean)
		if sniffName(compressed[i]) == "png" && worst != 0 {
			t.Errorf("frame %d: PNG decodings differ by up to %d", i, worst)
		}
		// The IDCTs round differently.
		if worst > 3 || mean > 0.2 {
			t.Errorf("frame %d: JPEG decodings differ by up to %d, %.3f on average: want at most 3 and 0.2", i, worst, mean)
		}
	}
}

func sniffName(b []byte) string {
	if len(b) > 1 && b[0] == 0xff {
		return "jpeg"
	}
	return "png"
}
