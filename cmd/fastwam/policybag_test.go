package main

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// The image-policy regression bag golden/policy is made by this file:
//
//	OPENBLAS_CORETYPE=Prescott go test ./cmd/fastwam -run TestPolicyBag -args -update-policybag
//
// which writes the image bag of policyFrames (camera.WriteBag) to a
// temporary folder, then runs
//
//	fastwam bag make -images <that bag> -o golden/policy -force
//
// (the embedded tiny world model and action expert, the CPU reference
// backend; the Prescott kernels make OpenBLAS's results the same on any
// x86 machine, as for golden/regression).
var updatePolicyBag = flag.Bool("update-policybag", false, "rewrite ../../golden/policy from policyFrames")

const policyBagDir = "../../golden/policy"

// Policy bag layout: 4 cycles at 10 Hz; agentview 128 × 96 as
// CompressedImage (JPEG quality 90 on even cycles, PNG on odd ones);
// wrist 64 × 64 as a raw rgb8 Image 2 ms after it; the state
// (Float64MultiArray) 1 ms after the agentview frame; the instruction
// latched, one of the tiny text cache's, changed at cycle 2.
const (
	policyCycles   = 4
	policyPeriod   = 100 * time.Millisecond
	policyFirstSec = 1700000000
)

var policyInstructions = [policyCycles]string{"put the bowl on the plate", "", "open the top drawer of the cabinet", ""}

// policyScene draws a structured w × h image: a gradient, a light block
// and a dark square that moves with the cycle.
func policyScene(w, h, cycle int, wrist bool) worldmodel.Image {
	img := worldmodel.Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
	bx, by, bs := w/4+cycle*w/10, h/2, max(w, h)/8
	for y := range h {
		for x := range w {
			p := img.Pix[(y*w+x)*3:]
			p[0], p[1], p[2] = byte(60+x*120/w), byte(80+y*100/h), byte(150)
			if x > w*5/8 && y > h*5/8 {
				p[0], p[1], p[2] = 230, 228, 220
			}
			if x >= bx && x < bx+bs && y >= by && y < by+bs {
				p[0], p[1], p[2] = 25, 30, byte(50+30*cycle)
			}
			if wrist && y > h*3/4 && (x < w/6 || x > w*5/6) {
				p[0], p[1], p[2] = 70, 72, 75
			}
		}
	}
	return img
}

func policyFrames() []camera.Frame {
	frames := make([]camera.Frame, policyCycles)
	for k := range frames {
		at := time.Unix(policyFirstSec, 0).Add(time.Duration(k) * policyPeriod)
		codec := camera.JPEG
		if k%2 == 1 {
			codec = camera.PNG
		}
		state := make([]float64, worldmodel.ProprioDim)
		for i := range state {
			state[i] = math.Round((0.05*float64(i)-0.2+0.02*float64(k))*1e6) / 1e6
		}
		frames[k] = camera.Frame{
			Stamp: at, Instruction: policyInstructions[k], State: state, StateStamp: at.Add(time.Millisecond),
			Cameras: []camera.CameraFrame{
				{Image: policyScene(128, 96, k, false), Codec: codec},
				{Image: policyScene(64, 64, k, true), Stamp: at.Add(2 * time.Millisecond), Encoding: "rgb8"},
			},
		}
	}
	return frames
}

// writePolicySource writes the image bag of policyFrames into a new folder
// under a temporary directory and returns it.
func writePolicySource(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "images")
	if err := camera.WriteBag(dir, policyFrames(), camera.BagOptions{FrameIDs: []string{"agentview_optical", "wrist_optical"}, JPEGQuality: 90}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPolicyBag is the acceptance test of the whole policy's regression
// workflow: `fastwam replay golden/policy` runs each observation through
// the world model and the node and passes, bit for bit.
func TestPolicyBag(t *testing.T) {
	if *updatePolicyBag {
		src := writePolicySource(t)
		code, out, stderr := runCmd(t, "bag", "make", "-images", src, "-o", policyBagDir, "-force")
		if code != 0 {
			t.Fatalf("bag make -images: exit %d\n%s\n%s", code, out, stderr)
		}
		t.Log(out)
	}
	code, out, stderr := runCmd(t, "replay", "-max-err", "1e-4", policyBagDir)
	if code != 0 {
		t.Fatalf("replay %s: exit %d\n%s\n%s", policyBagDir, code, out, stderr)
	}
	if n := len(okRowRE.FindAllString(out, -1)); n != policyCycles {
		t.Errorf("%d passing rows, want %d:\n%s", n, policyCycles, out)
	}
	for _, want := range []string{"PASS: 4 chunks compared", "world model embedded golden/tiny/world"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestPolicyBagIsCurrent checks that golden/policy's camera, proprio and
// instruction messages are those policyFrames writes today, byte for
// byte (its chunks are checked by TestPolicyBag's replay).
func TestPolicyBagIsCurrent(t *testing.T) {
	src := writePolicySource(t)
	topics := defaultImageTopics()
	read := func(path string) []bag.Message {
		r, err := bag.OpenWith(t.Context(), path, bag.ReaderOptions{Topics: topics})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []bag.Message
		for m, err := range r.Messages(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	got, want := read(policyBagDir), read(src)
	if len(got) != len(want) || len(got) != 3*policyCycles+2 {
		t.Fatalf("golden/policy has %d input messages, the generator writes %d (want %d): rewrite it (see updatePolicyBag)", len(got), len(want), 3*policyCycles+2)
	}
	for i := range got {
		if got[i].Topic != want[i].Topic || !got[i].LogTime.Equal(want[i].LogTime) || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("message %d (%s at %v) differs from the generator's (%s at %v): rewrite golden/policy (see updatePolicyBag)",
				i, got[i].Topic, got[i].LogTime, want[i].Topic, want[i].LogTime)
		}
	}
}

// One flipped bit of one wrist pixel changes that observation's world
// model output and so its chunk (max |error| about 1e-3 against about
// 1e-6 for the untouched ones on other OpenBLAS kernels): the replay with
// the gate -max-err 1e-4 fails, naming that chunk alone.
func TestPolicyBagTamperedImageFails(t *testing.T) {
	r, err := bag.Open(policyBagDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := filepath.Join(t.TempDir(), "tampered")
	defs := map[string]string{}
	for _, tp := range r.Topics() {
		defs[tp.Type] = tp.Definition
	}
	w, err := bag.Create(dir, bag.WriterOptions{Definition: func(typ string) (string, error) { return defs[typ], nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range r.Topics() {
		if err := w.AddTopic(tp.Name, tp.Type, tp.OfferedQoSProfiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	wrist, n := camera.DefaultWristTopic, 0
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		data := m.Data
		if m.Topic == wrist {
			if n == 2 {
				var im msgs.Image
				if err := im.UnmarshalCDR(m.Data); err != nil {
					t.Fatal(err)
				}
				im.Data = slices.Clone(im.Data)
				im.Data[len(im.Data)/2] ^= 0x10
				if data, err = im.MarshalCDR(); err != nil {
					t.Fatal(err)
				}
			}
			n++
		}
		if err := w.Write(m.Topic, m.LogTime, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, "replay", "-max-err", "1e-4", dir)
	if code != 1 {
		t.Fatalf("replay of a tampered image bag: exit %d, want 1\n%s\n%s", code, out, stderr)
	}
	if n := len(okRowRE.FindAllString(out, -1)); n != policyCycles-1 {
		t.Errorf("%d passing rows, want %d (all but the tampered one):\n%s", n, policyCycles-1, out)
	}
	if !strings.Contains(stderr, "kv_seq 2") {
		t.Errorf("the failure does not name chunk kv_seq 2:\n%s", stderr)
	}
	_ = os.RemoveAll(dir)
}

// World-model flags where no world model runs, and bag make's chunk
// flags with -images, are usage errors before any work.
func TestImageBagFlagsRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-world", policyBagDir, embeddedBag(t)}, "holds the node's inputs, not camera images: the world model is not run"},
		{[]string{"bag", "make", "-images", policyBagDir, "-o", out, "-chunks", "3"}, "-chunks does not apply with -images"},
		{[]string{"bag", "make", "-images", policyBagDir, "-o", out, "-golden", "x.npz"}, "-golden does not apply with -images"},
		{[]string{"bag", "make", "-o", out, "-vae", "v.safetensors"}, "-vae applies with -images only"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused bag make left its output folder")
	}
}

// fastwam policy with no flags runs golden/policy's first observation: its
// chunk is the one the bag recorded for it (the same pipeline; within the
// OpenBLAS kernels' last bits).
func TestPolicyDefaultIsBagChunk(t *testing.T) {
	got := policyJSONRun(t)
	if len(got.Chunks) != 1 {
		t.Fatalf("%d chunks, want 1", len(got.Chunks))
	}
	r, err := bag.OpenWith(t.Context(), policyBagDir, bag.ReaderOptions{Topics: []string{"/action_chunk"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var first msgs.ActionChunk
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if err := first.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		break
	}
	c := got.Chunks[0]
	if c.Seq != first.Seq || c.Stamp != fmtStamp(stampOf(first.Header.Stamp)) || len(c.Actions) != len(first.Actions) {
		t.Fatalf("policy chunk seq %d stamp %s, %d rows; the bag's first: seq %d stamp %s, %d rows",
			c.Seq, c.Stamp, len(c.Actions), first.Seq, fmtStamp(stampOf(first.Header.Stamp)), len(first.Actions))
	}
	worst := 0.0
	for i, row := range c.Actions {
		for j, v := range row {
			worst = math.Max(worst, math.Abs(float64(v)-float64(first.Actions[i].Values[j])))
		}
	}
	if worst > 1e-4 {
		t.Errorf("policy's chunk differs from the bag's by max |error| %g, want ≤ 1e-4", worst)
	}
	t.Logf("max |error| against the recorded chunk: %g", worst)
}
