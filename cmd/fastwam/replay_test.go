package main

import (
	"context"
	"fmt"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
	"github.com/fastwam/actionexpert/msgs"
)

// okRow matches a table row that passed.
var okRowRE = regexp.MustCompile(`(?m)^1700000000\.\d{9}\s+\d+\s+\d+\s+1\.0000000\d+\s+\S+\s+[\d.]+\s+[\d.]+\s+ok$`)

// TestReplayDefault is the README's "run the main job": the embedded
// regression bag on the CPU backend passes and prints a row per chunk.
func TestReplayDefault(t *testing.T) {
	code, out, stderr := runCmd(t, "replay")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if n := len(okRowRE.FindAllString(out, -1)); n != 8 {
		t.Errorf("%d passing rows, want 8:\n%s", n, out)
	}
	for _, want := range []string{"embedded golden/regression", "backend  cpu", "10 steps, shift 5, noise seed 0 + kv_seq", "PASS: 8 chunks compared"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(stderr, "replay: 8/8") {
		t.Errorf("progress printed for an 8-chunk bag by default:\n%s", stderr)
	}
}

// embeddedBag copies the embedded regression bag into a temporary folder.
func embeddedBag(t *testing.T) string {
	t.Helper()
	dir, err := golden.ExtractRegressionBag(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// tamperedBag rewrites the regression bag with bag.Writer, one recorded
// action value of chunk kv_seq 5 changed by +1.
func tamperedBag(t *testing.T) string {
	t.Helper()
	r, err := bag.Open(embeddedBag(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dst := filepath.Join(t.TempDir(), "tampered")
	w, err := bag.Create(dst, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range r.Topics() {
		if err := w.AddTopic(tp.Name, tp.Type, tp.OfferedQoSProfiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	tampered := 0
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == msgs.TypeActionChunk {
			var c msgs.ActionChunk
			if err := c.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			if c.KVSeq == 5 {
				c.Actions[10].Values[4]++
				if m.Data, err = c.MarshalCDR(); err != nil {
					t.Fatal(err)
				}
				tampered++
			}
		}
		if err := w.Write(m.Topic, m.LogTime, m.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if tampered != 1 {
		t.Fatalf("tampered with %d chunks, want 1", tampered)
	}
	return dst
}

func TestReplayTamperedBagExits1(t *testing.T) {
	code, out, stderr := runCmd(t, "replay", tamperedBag(t))
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "FAIL: 1 of 8 recorded chunks: chunk kv_seq 5 stamp 1700000000.500000000 (cosine") {
		t.Errorf("error does not name the chunk:\n%s", stderr)
	}
	if n := len(okRowRE.FindAllString(out, -1)); n != 7 || !regexp.MustCompile(`(?m)^1700000000\.500000000\s+5\s.*FAIL: cosine`).MatchString(out) {
		t.Errorf("table: %d passing rows, want 7, and a FAIL row for kv_seq 5:\n%s", n, out)
	}
	t.Log(stderr)
}

// TestReplayHTPOnTestDouble runs the pipeline end to end on the HTP
// backend over the QNN test double. Its graph, like the compiled ones, has
// no visibility input, so the backend refuses the chunks of the bag that
// attend to 4 of the 8 video tokens (case_first4) before any compute, and
// the node rejects those inputs (reason visible_video, no backend error and
// no reload); it denoises the others, which do not match the CPU
// reference's recorded chunks. The report says all this cleanly.
func TestReplayHTPOnTestDouble(t *testing.T) {
	lib, ctxPath, _ := fakeContext(t)
	code, out, stderr := runCmd(t, "replay", "-backend", "htp", "-context", ctxPath, "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"backend  htp", "8 paired, 4 chunks published, 4 rejected, 0 dropped, 0 backend errors",
		"FAIL: 8 of 8 recorded chunks fail (4 compared"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for k := range 8 {
		verdict := `FAIL: cosine 0\.\d+ < 0\.9999`
		if k%2 == 1 {
			verdict = "MISSING: rejected: visible_video"
		}
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^1700000000\.%d00000000\s+%d\s.*%s$`, k, k, verdict))
		if !re.MatchString(out) {
			t.Errorf("no row for kv_seq %d matching %s:\n%s", k, re, out)
		}
	}
	for _, want := range []string{"attends to 4 of 8 video tokens",
		"fastwam replay: FAIL: 8 of 8 recorded chunks: chunk kv_seq 0 stamp 1700000000.000000000 (cosine"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestReplayOutputPlotProgress(t *testing.T) {
	dir := t.TempDir()
	outBag, plotPath := filepath.Join(dir, "out"), filepath.Join(dir, "replay.png")
	code, out, stderr := runCmd(t, "replay", "-o", outBag, "-plot", plotPath, "-progress", "on", "-v", embeddedBag(t))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"replay: 8/8 chunks (100%)", "node: INFO active: /video_kv_cache + /text_context -> /action_chunk"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(out, "output   "+outBag) || !strings.Contains(out, "plot     "+plotPath) {
		t.Errorf("output does not name the bag and plot:\n%s", out)
	}
	r, err := bag.Open(outBag)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	chunks := 0
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic == "/action_chunk" {
			var c msgs.ActionChunk
			if err := c.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			chunks++
		}
	}
	if chunks != 8 {
		t.Errorf("output bag holds %d ActionChunks, want 8", chunks)
	}
	f, err := os.Open(plotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("plot: %v", err)
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.mcap")
	os.WriteFile(garbage, []byte("not a bag, only a sentence"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{garbage}, 1, "replay: open bag"},
		{[]string{filepath.Join(dir, "absent")}, 1, "absent"},
		{[]string{"a", "b"}, 2, "at most one bag"},
		{[]string{"-progress", "sometimes"}, 2, "-progress"},
		{[]string{"-backend", "gpu"}, 2, "-backend"},
		{[]string{"-backend", "htp"}, 2, "-context"},
		{[]string{"-p", "steps"}, 2, "name:=value"},
		{[]string{"-p", "stepz:=3"}, 2, `did you mean "steps"`},
		{[]string{"-p", "topics.kv_cache:=/robot/kv"}, 1, "no topic /robot/kv"},
		{[]string{"-namespace", "robot"}, 2, "namespace"},
		{[]string{"-p", "kv_transport:=shm"}, 2, `kv_transport "shm" is not replayable`},
	} {
		code, out, stderr := runCmd(t, append([]string{"replay"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("replay %q: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, stderr)
		}
	}
	if code, out, stderr := runCmd(t, "bag", "make", "-o", filepath.Join(dir, "shm"), "-p", "kv_transport:=shm"); code != 2 || !strings.Contains(stderr, "no segment to read") {
		t.Errorf("bag make -p kv_transport:=shm: exit %d, want 2 saying why\n%s%s", code, out, stderr)
	}
	// -p overrides the recorded schedule: with 4 steps nothing matches.
	code, out, stderr := runCmd(t, "replay", "-p", "steps:=4")
	if code != 1 || !strings.Contains(out, "4 steps") || !strings.Contains(stderr, "FAIL: 8 of 8") {
		t.Errorf("-p steps:=4: exit %d\n%s%s", code, out, stderr)
	}
}

func TestBagMake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made")
	code, out, stderr := runCmd(t, "bag", "make", "-o", dir, "-chunks", "3")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"wrote " + dir + ": 3 chunks, 9 messages", "expected chunks: the CPU reference's output"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = runCmd(t, "replay", dir)
	if code != 0 || !strings.Contains(out, "PASS: 3 chunks compared") {
		t.Fatalf("replay of the made bag: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, _, stderr := runCmd(t, "bag", "make", "-o", dir); code != 2 || !strings.Contains(stderr, "-force") {
		t.Errorf("existing folder: exit %d %s", code, stderr)
	}
	// Another golden, another seed base, and a replacement with -force.
	caseFile := filepath.Join(t.TempDir(), "case.npz")
	b, err := fs.ReadFile(golden.Tiny(), "tiny/case_first4.npz")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(caseFile, b, 0o644)
	code, out, stderr = runCmd(t, "bag", "make", "-force", "-o", dir, "-chunks", "2", "-golden", caseFile,
		"-weights", tinyWeightsFile(t), "-p", "noise_seed:=7", "-p", "steps:=3")
	if code != 0 || !strings.Contains(out, "3 steps, shift 5, noise seed 7") {
		t.Fatalf("make -force -golden: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runCmd(t, "replay", dir)
	if code != 0 || !strings.Contains(out, "3 steps, shift 5, noise seed 7 + kv_seq") || !strings.Contains(out, "PASS: 2 chunks compared") {
		t.Errorf("replay takes the schedule from the recorded chunks: exit %d\n%s\n%s", code, out, stderr)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bag"}, "subcommand"},
		{[]string{"bag", "frob"}, `unknown command "frob"`},
		{[]string{"bag", "make"}, "needs -o"},
		{[]string{"bag", "make", "-o", dir, "-chunks", "0"}, "-chunks"},
		{[]string{"bag", "make", "-o", dir + "-new", "-golden", caseFile}, "-weights"},
	} {
		if code, _, stderr := runCmd(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, want 2 with %q\n%s", tc.args, code, tc.want, stderr)
		}
	}
	if code, _, _ := runCmd(t, "bag", "-h"); code != 0 {
		t.Errorf("bag -h: exit %d", code)
	}
}

// TestReplayProgressAuto: progress lines come by default on bags of more
// than 20 chunks only (the 8-chunk default is checked in TestReplayDefault).
func TestReplayProgressAuto(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "long")
	if code, out, stderr := runCmd(t, "bag", "make", "-o", dir, "-chunks", "21"); code != 0 {
		t.Fatalf("bag make: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := runCmd(t, "replay", dir)
	if code != 0 || !strings.Contains(stderr, "replay: 21/21 chunks (100%)") {
		t.Errorf("exit %d, stderr:\n%s%s", code, stderr, out)
	}
	if code, _, stderr := runCmd(t, "replay", "-progress", "off", dir); code != 0 || strings.Contains(stderr, "replay: 21/21") {
		t.Errorf("-progress off: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestBackendParams: the backend parameters of -p (backend, cpu.*, htp.*)
// are used by replay and bag make as the flags of the same meaning would
// be, and refused, naming the parameter and why, when the command cannot
// use them or they contradict a flag.
func TestBackendParams(t *testing.T) {
	weights := tinyWeightsFile(t)
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := os.WriteFile(bad, []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Used: the weights named by -p are loaded (a bad file fails, naming
	// it; the tiny weights pass), and so is the thread count.
	if code, out, stderr := runCmd(t, "replay", "-p", "cpu.weights:="+bad); code != 1 || !strings.Contains(stderr, bad) || out != "" {
		t.Errorf("-p cpu.weights:=<bad file>: exit %d, want 1 naming %s\n%s%s", code, bad, out, stderr)
	}
	if code, _, stderr := runCmd(t, "replay", "-p", "cpu.weights:="+filepath.Join(t.TempDir(), "nonexistent")); code != 1 || !strings.Contains(stderr, "nonexistent") {
		t.Errorf("-p cpu.weights:=<nonexistent>: exit %d, want 1 naming it\n%s", code, stderr)
	}
	if code, out, stderr := runCmd(t, "replay", "-p", "cpu.weights:="+weights, "-p", "cpu.threads:=1", "-p", "cpu.video_tokens:=8"); code != 0 || !strings.Contains(out, "PASS: 8 chunks") {
		t.Errorf("-p cpu.weights:=<tiny weights>: exit %d\n%s%s", code, out, stderr)
	}
	// -p backend:=htp selects the HTP backend, which then needs its context.
	if code, _, stderr := runCmd(t, "replay", "-p", "backend:=htp"); code != 2 || !strings.Contains(stderr, "-backend htp needs -context") {
		t.Errorf("-p backend:=htp: exit %d\n%s", code, stderr)
	}
	lib, ctxPath, _ := fakeContext(t)
	code, out, stderr := runCmd(t, "replay", "-p", "backend:=htp", "-p", "htp.context_binary:="+ctxPath, "-head-dim", "16",
		"-p", "htp.backend_library:="+lib.Path, "-p", "htp.system_library:="+lib.Path, "-p", "htp.rpcmem_library:="+lib.Path,
		"-p", "htp.performance_mode:=balanced", "-p", "htp.shared_buffers:=false")
	if code != 1 || !strings.Contains(out, "backend  htp, "+ctxPath+", perf balanced (DCVS applied, RPC not sent), RAW buffers") {
		t.Errorf("htp backend from -p: exit %d, want 1 (the double's chunks differ) with the backend from the parameters\n%s%s", code, out, stderr)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-p", "htp.context_binary:=/x.bin"}, "-p htp.context_binary: a parameter of the htp backend, but this replay runs the cpu backend"},
		{[]string{"replay", "-backend", "htp", "-context", "/x.bin", "-p", "cpu.weights:=/w"}, "-p cpu.weights: a parameter of the cpu backend, but this replay runs the htp backend"},
		{[]string{"replay", "-weights", "/a", "-p", "cpu.weights:=/b"}, "-p cpu.weights:=/b contradicts -weights /a"},
		{[]string{"replay", "-threads", "2", "-p", "cpu.threads:=1"}, "-p cpu.threads:=1 contradicts -threads 2"},
		{[]string{"replay", "-backend", "cpu", "-p", "backend:=htp"}, "-p backend:=htp contradicts -backend cpu"},
		{[]string{"replay", "-p", "cpu.video_tokens:=4"}, "-p cpu.video_tokens:=4: the bag's inputs have 8"},
		{[]string{"replay", "-p", "cpu.context_tokens:=9"}, "-p cpu.context_tokens:=9: the bag's inputs have 5"},
		{[]string{"bag", "make", "-o", filepath.Join(t.TempDir(), "b"), "-p", "backend:=htp"}, "bag make runs the CPU reference backend"},
		{[]string{"bag", "make", "-o", filepath.Join(t.TempDir(), "b"), "-p", "htp.graph_name:=g"}, "-p htp.graph_name: a parameter of the htp backend, but bag make runs the cpu backend"},
		{[]string{"bag", "make", "-o", filepath.Join(t.TempDir(), "b"), "-weights", "/a", "-p", "cpu.weights:=/b"}, "contradicts -weights /a"},
		{[]string{"bag", "make", "-o", filepath.Join(t.TempDir(), "b"), "-p", "cpu.video_tokens:=3"}, "the golden cases' inputs have 8"},
	} {
		if code, out, stderr := runCmd(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("%q: exit %d, want 2 with %q\n%s%s", tc.args, code, tc.want, out, stderr)
		}
	}
	// bag make takes its weights from -p cpu.weights too.
	dir := filepath.Join(t.TempDir(), "made")
	if code, out, stderr := runCmd(t, "bag", "make", "-o", dir, "-chunks", "1", "-p", "cpu.weights:="+bad); code != 1 || !strings.Contains(stderr, bad) {
		t.Errorf("bag make -p cpu.weights:=<bad file>: exit %d, want 1 naming it\n%s%s", code, out, stderr)
	}
}

// The robot's shared bringup file is taken by -params-file: other nodes'
// parameters under /** are skipped (named with -v), the node's own apply,
// later files override earlier ones, -p overrides both, and the robot's
// backend choice does not switch the replay off the CPU backend.
func TestReplayParamsFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	shared := write("bringup.yaml", "/**:\n  ros__parameters: {use_sim_time: true, robot_base_frame: base_link}\n"+
		"fastwam_action_expert:\n  ros__parameters: {backend: htp, htp: {context_binary: /robot/m.bin}}\n")
	code, out, stderr := runCmd(t, "replay", "-v", "-params-file", shared)
	if code != 0 || !strings.Contains(out, "PASS: 8 chunks") || !strings.Contains(out, "backend  cpu") {
		t.Fatalf("shared bringup file: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "ignoring 1 parameter(s) this node does not declare: robot_base_frame") {
		t.Errorf("no info line naming robot_base_frame:\n%s", stderr)
	}
	period := write("period.yaml", "/fastwam_action_expert:\n  ros__parameters: {sync: {policy: latest}}\n")
	if code, out, stderr := runCmd(t, "replay", "-params-file", shared, "-params-file", period); !strings.Contains(out, "sync latest") {
		t.Errorf("sync.policy from the second file: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := runCmd(t, "replay", "-params-file", period, "-p", "sync.policy:=exact"); code != 0 || !strings.Contains(out, "sync exact") {
		t.Errorf("-p after the file: exit %d\n%s%s", code, out, stderr)
	}
	own := write("own.yaml", "/fastwam_action_expert:\n  ros__parameters: {stesp: 4}\n")
	if code, _, stderr := runCmd(t, "replay", "-params-file", own); code != 2 || !strings.Contains(stderr, `unknown parameter "stesp" (did you mean "steps"?)`) {
		t.Errorf("unknown name under the node's own name: exit %d\n%s", code, stderr)
	}
}

// bag make -golden takes a world model's inputs alone: an npz of
// video_keys, video_values, context and context_mask, with no latents and
// no reference prediction, becomes a bag that replays.
func TestBagMakeFromInputsOnly(t *testing.T) {
	c, err := golden.LoadTiny(context.Background(), "tiny/case_first4.npz")
	if err != nil {
		t.Fatal(err)
	}
	var inputs []npztest.Array
	for _, a := range npztest.Bundle(c, c.Pred) {
		if strings.HasPrefix(a.Name, "video_") || strings.HasPrefix(a.Name, "context") {
			inputs = append(inputs, a)
		}
	}
	file := filepath.Join(t.TempDir(), "world_model.npz")
	if err := npztest.Write(file, inputs...); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "wm")
	code, out, stderr := runCmd(t, "bag", "make", "-o", dir, "-chunks", "2", "-golden", file, "-weights", tinyWeightsFile(t))
	if code != 0 {
		t.Fatalf("bag make from inputs only: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr = runCmd(t, "replay", dir); code != 0 || !strings.Contains(out, "PASS: 2 chunks compared") {
		t.Errorf("replay of the bag: exit %d\n%s%s", code, out, stderr)
	}
}

// filteredBag rewrites the regression bag without the messages drop
// returns true for (given the message and its seq: the kv_seq of an
// ActionChunk).
func filteredBag(t *testing.T, drop func(typ string, seq uint64) bool) string {
	t.Helper()
	r, err := bag.Open(embeddedBag(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dst := filepath.Join(t.TempDir(), "filtered")
	w, err := bag.Create(dst, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range r.Topics() {
		if err := w.AddTopic(tp.Name, tp.Type, tp.OfferedQoSProfiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		var seq uint64
		switch m.Type {
		case msgs.TypeVideoKVCache:
			var kv msgs.VideoKVCache
			err = kv.UnmarshalCDR(m.Data)
			seq = kv.Seq
		case msgs.TypeTextContext:
			var c msgs.TextContext
			err = c.UnmarshalCDR(m.Data)
			seq = c.Seq
		case msgs.TypeActionChunk:
			var c msgs.ActionChunk
			err = c.UnmarshalCDR(m.Data)
			seq = c.KVSeq
		}
		if err != nil {
			t.Fatal(err)
		}
		if drop(m.Type, seq) {
			continue
		}
		if err := w.Write(m.Topic, m.LogTime, m.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestReplayLiveRecording: `ros2 bag record` of a live session misses the
// first pair's inputs but records its chunk. That chunk is NOT COMPARABLE
// (its inputs are not in the bag): the table, the JSON and the JUnit XML
// (a skipped case with the reason) say so, the summary counts it, and the
// replay passes on the others (exit 0). It used to be MISSING, exit 1. A
// bag in which no recorded chunk is comparable fails, saying why.
func TestReplayLiveRecording(t *testing.T) {
	live := filteredBag(t, func(typ string, seq uint64) bool {
		return seq == 0 && (typ == msgs.TypeVideoKVCache || typ == msgs.TypeTextContext)
	})
	dir := t.TempDir()
	jsonPath, junitPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	code, out, stderr := runCmd(t, "replay", "-json", jsonPath, "-junit", junitPath, live)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s\n%s", code, out, stderr)
	}
	if !regexp.MustCompile(`(?m)^1700000000\.000000000\s+0\s.*NOT COMPARABLE: its inputs are not in the bag \(no VideoKVCache with this stamp, no TextContext with seq 0;`).MatchString(out) {
		t.Errorf("no NOT COMPARABLE row for kv_seq 0 with the reason:\n%s", out)
	}
	if n := len(okRowRE.FindAllString(out, -1)); n != 7 {
		t.Errorf("%d passing rows, want 7:\n%s", n, out)
	}
	t.Log(out)
	if !regexp.MustCompile(`(?m)^PASS: 7 chunks compared, .*, 1 recorded chunks NOT COMPARABLE \(its inputs are not in the bag\)$`).MatchString(out) {
		t.Errorf("summary does not count the chunk that is not comparable:\n%s", out)
	}
	js, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"passed": true`, `"not_comparable": 1`, `"status": "NOT COMPARABLE"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js)
		}
	}
	xml, err := os.ReadFile(junitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(xml), `failures="0"`) || !strings.Contains(string(xml), `skipped="1"`) ||
		!strings.Contains(string(xml), `<skipped message="NOT COMPARABLE: its inputs are not in the bag`) {
		t.Errorf("JUnit does not skip the chunk with the reason:\n%s", xml)
	}

	// Only the cache, or only the context, missing: not comparable either.
	for _, typ := range []string{msgs.TypeVideoKVCache, msgs.TypeTextContext} {
		half := filteredBag(t, func(tp string, seq uint64) bool { return seq == 0 && tp == typ })
		if code, out, stderr := runCmd(t, "replay", half); code != 0 || !strings.Contains(out, "NOT COMPARABLE") {
			t.Errorf("without the first %s: exit %d\n%s\n%s", typ, code, out, stderr)
		}
	}

	// The chunks of the first four pairs, the inputs of the last four:
	// nothing is comparable, and that fails.
	apart := filteredBag(t, func(typ string, seq uint64) bool { return (typ == msgs.TypeActionChunk) == (seq >= 4) })
	code, out, stderr = runCmd(t, "replay", apart)
	if code != 1 || !strings.Contains(stderr, "FAIL: none of the 4 recorded chunks is comparable: their inputs are not in the bag") {
		t.Errorf("chunks and inputs of different pairs: exit %d, want 1 saying nothing is comparable\n%s\n%s", code, out, stderr)
	}
	// No recorded chunk: nothing to compare, and that fails too.
	inputsOnly := filteredBag(t, func(typ string, _ uint64) bool { return typ == msgs.TypeActionChunk })
	code, out, stderr = runCmd(t, "replay", inputsOnly)
	if code != 1 || !strings.Contains(stderr, "FAIL: nothing to compare: the bag has no ActionChunks recorded on /action_chunk") {
		t.Errorf("a bag of inputs only: exit %d, want 1 saying there is nothing to compare\n%s\n%s", code, out, stderr)
	}
}

// TestBagMakeAndReplayRefused is step 3 of docs/robot.md at the command
// line: with limits in refuse mode that stop every chunk, bag make lists
// each refused chunk and its reason and writes the bag at once, and replay
// of a bag recorded without limits names each chunk REFUSED and exits 1,
// without waiting for the chunk timeout (here 5 s, far above the run;
// each refused chunk used to wait for it).
func TestBagMakeAndReplayRefused(t *testing.T) {
	post := []string{"-p", "actions.norm_mode:=min/max", "-p", "actions.stats_file:=../../actions/testdata/dataset_stats.json"}
	limits := append(slices.Clone(post), "-p", "actions.limits.mode:=refuse",
		"-p", "actions.limits.min:=[-1e-9,-1e-9,-1e-9,-1e-9,-1e-9,-1e-9,-1e-9]", "-p", "actions.limits.max:=[1e-9,1e-9,1e-9,1e-9,1e-9,1e-9,1e-9]")
	dir := filepath.Join(t.TempDir(), "refused")
	code, out, stderr := runCmd(t, append([]string{"bag", "make", "-o", dir, "-chunks", "2", "-timeout", "5s"}, limits...)...)
	if code != 0 {
		t.Fatalf("bag make: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{
		"chunk 0 stamp 1700000000.000000000: refused by the action limits: bounds (its inputs are in the bag, with no ActionChunk)",
		"chunk 1 stamp 1700000000.100000000: refused by the action limits: bounds",
		"2 chunks (2 refused by the action limits, 0 recorded), 4 messages",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bag make output lacks %q:\n%s", want, out)
		}
	}
	recorded := filepath.Join(t.TempDir(), "recorded")
	if code, out, stderr := runCmd(t, append([]string{"bag", "make", "-o", recorded, "-chunks", "2"}, post...)...); code != 0 {
		t.Fatalf("bag make without limits: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr = runCmd(t, append(append([]string{"replay", "-timeout", "5s"}, limits...), recorded)...)
	if code != 1 || strings.Contains(out, "timed out") ||
		!regexp.MustCompile(`(?m)^1700000000\.100000000\s+1\s.*REFUSED: refused by the action limits: bounds`).MatchString(out) ||
		!strings.Contains(out, "2 refused by the action limits (bounds 2)") ||
		!strings.Contains(stderr, "FAIL: 2 of 2 recorded chunks: chunk kv_seq 0 stamp 1700000000.000000000 (refused by the action limits: bounds)") {
		t.Errorf("replay with refusing limits: exit %d, want 1 naming each refused chunk\n%s\n%s", code, out, stderr)
	}
}
