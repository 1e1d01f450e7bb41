package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// fakeContext writes a context binary of the QNN test double holding the
// action_step graph sized like the tiny golden, and a bundle-format golden
// whose reference prediction is the double's output for the golden inputs.
func fakeContext(t *testing.T) (lib *qnnfake.Lib, ctxPath, goldenPath string) {
	t.Helper()
	lib = qnnfake.New(t, qnnfake.Variant{})
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	d := expert.Dims{Layers: c.Layers, Heads: 2, HeadDim: c.AttnWidth / 2, VideoTokens: c.VideoTokens,
		ContextTokens: c.ContextTokens, TextDim: c.TextDim, ActionTokens: c.ActionTokens, ActionDim: c.ActionDim}
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	ctxPath = filepath.Join(t.TempDir(), "action_step.bin")
	if err := os.WriteFile(ctxPath, qnnfake.Binary{SocModel: 77, Arch: 73, BuildID: "fake-build", Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	mask := make([]float32, len(c.Chunk.ContextMask))
	for i, m := range c.Chunk.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	want := qnnfake.Expected(g, [][]float32{c.Latents, {c.Timestep}, c.Chunk.VideoKeys, c.Chunk.VideoValues, c.Chunk.Context, mask})[0]
	goldenPath = filepath.Join(t.TempDir(), "action_step_io.npz")
	if err := npztest.Write(goldenPath, npztest.Bundle(c, want)...); err != nil {
		t.Fatal(err)
	}
	return lib, ctxPath, goldenPath
}

// TestParityHTPOnTestDouble runs parity through qnnrt and the HTP backend
// against the QNN test double: the double's output for the golden inputs is
// the reference, so every input must be wired right to pass.
func TestParityHTPOnTestDouble(t *testing.T) {
	lib, ctxPath, goldenPath := fakeContext(t)
	args := []string{"parity", "-backend", "htp", "-context", ctxPath, "-golden", goldenPath, "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-chunks", "2"}
	code, out, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"backend htp", "shared rpcmem buffers", "perf burst", "profiled execute ms", "PASS",
		"heads   2x16 (attention width 32): the graph fixes the width only; split with -head-dim 16\n",
		"actions 32 from the context binary's graph\n",
		"schedule 10 steps, shift 5: from -steps and -shift (the golden records no loop)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Without rpcmem the backend falls back to RAW buffers, says so, and
	// still passes.
	lib.SetRPCMemAvailable(false)
	code, out, stderr = runCmd(t, args...)
	if code != 0 || !strings.Contains(out, "RAW buffers") || !strings.Contains(stderr, "htp:") {
		t.Fatalf("fallback: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, _, stderr := runCmd(t, append(args, "-action-tokens", "16")...); code != 2 ||
		!strings.Contains(stderr, "-action-tokens 16 contradicts the context binary's graph, which takes 32 action tokens") {
		t.Errorf("-action-tokens against the graph: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "parity", "-backend", "htp", "-golden", goldenPath); code != 2 || !strings.Contains(stderr, "-context") {
		t.Errorf("missing -context: exit %d, %s", code, stderr)
	}
}

func TestInspect(t *testing.T) {
	lib, ctxPath, _ := fakeContext(t)
	code, out, stderr := runCmd(t, "inspect", "-system-lib", lib.Path, ctxPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"action_step", "latents_action", "video_keys", "pred_noise", "fake-build"} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	t.Log(out)
	bad := filepath.Join(t.TempDir(), "bad.bin")
	os.WriteFile(bad, []byte("not a context binary at all, sorry"), 0o644)
	if code, _, stderr := runCmd(t, "inspect", "-system-lib", lib.Path, bad); code == 0 || stderr == "" {
		t.Errorf("bad binary: exit %d %s", code, stderr)
	} else {
		t.Log(stderr)
	}
	if code, _, _ := runCmd(t, "inspect"); code != 2 {
		t.Errorf("no argument: exit %d, want 2", code)
	}
}

// TestMissingQNNLibraryHint: without the QNN libraries, inspect and parity
// -backend htp say which library was looked for, where, where it comes
// from, and the flag (or LD_LIBRARY_PATH) that points at it.
func TestMissingQNNLibraryHint(t *testing.T) {
	lib, ctxPath, goldenPath := fakeContext(t)
	dir := t.TempDir()
	t.Setenv("LD_LIBRARY_PATH", dir)
	absent := filepath.Join(dir, "libQnnHtp.so")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"inspect, soname", []string{"inspect", "-system-lib", "libQnnSystemAbsent.so", ctxPath}, []string{
			`load system library "libQnnSystemAbsent.so"`,
			"libQnnSystemAbsent.so (QNN's system library) was looked for by the dynamic loader in LD_LIBRARY_PATH (" + dir + "), the ld.so cache",
			"QNN SDK (QAIRT)", "-system-lib <dir>/libQnnSystemAbsent.so", "or add its folder to LD_LIBRARY_PATH"}},
		{"parity, backend path", []string{"parity", "-backend", "htp", "-context", ctxPath, "-golden", goldenPath,
			"-backend-lib", absent, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path}, []string{
			`load backend library "` + absent + `"`,
			"libQnnHtp.so (QNN's backend library) was looked for at that path only", "-backend-lib <dir>/libQnnHtp.so"}},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1: %s", tc.name, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, w, stderr)
			}
		}
	}
}

// TestParityHTPLogsAndVote runs parity with the QNN log at DEBUG: the
// library's formatted lines reach stderr with their level; -qnn-rpc-vote
// false sends the DCVS part alone; a profiler that cannot be read marks
// the device times missing and parity still passes.
func TestParityHTPLogsAndVote(t *testing.T) {
	lib, ctxPath, goldenPath := fakeContext(t)
	args := []string{"parity", "-backend", "htp", "-context", ctxPath, "-golden", goldenPath, "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-chunks", "1",
		"-qnn-log-level", "5"} // -qnn-rpc-vote is off by default
	lib.FailCall("profileGetEvents", 4950, 0)
	code, out, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	size := 0
	if fi, err := os.Stat(ctxPath); err == nil {
		size = int(fi.Size())
	}
	for _, want := range []string{
		"qnn INFO: fakeqnn v2.43.0.fakeqnn: logger 0x",
		fmt.Sprintf("qnn VERBOSE: deserializing context blob: %d bytes at 0x", size),
		fmt.Sprintf(`created from %d bytes: 1 graph(s), SoC 77, build "fake-build"`, size),
		`qnn DEBUG: graphExecute "action_step": 6 inputs, 1 outputs, execute 1, 1.500 ms (profile 0x`,
		"qnn ERROR: profileGetEvents: injected failure (call 1, code 4950) (error 4950)",
		"htp: qnnrt: graph \"action_step\": device execute times are missing",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, want := range []string{"perf burst (DCVS applied, RPC off)", "profiled execute ms (last chunk): missing", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, v := range lib.PowerVotes() {
		if v.Option != 1 {
			t.Errorf("RPC option %d sent without -qnn-rpc-vote", v.Option)
		}
	}
	t.Logf("stderr:\n%s", stderr)
	if code, _, stderr := runCmd(t, append(args[:len(args)-2], "-qnn-log-level", "6")...); code != 2 || !strings.Contains(stderr, "-qnn-log-level 6") {
		t.Errorf("level 6: exit %d %s", code, stderr)
	}
}

// TestParityReportsCloseErrors: a down-vote that fails when parity closes
// the HTP backend is reported and fails the command; it was dropped.
func TestParityReportsCloseErrors(t *testing.T) {
	lib, ctxPath, goldenPath := fakeContext(t)
	args := []string{"parity", "-backend", "htp", "-context", ctxPath, "-golden", goldenPath, "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-chunks", "1"}
	lib.FailCall("setPowerConfig", 13003, 2) // call 1: the DCVS vote; 2: the down-vote on close
	code, out, stderr := runCmd(t, args...)
	if code != 1 || !strings.Contains(stderr, "closing the backend") || !strings.Contains(stderr, "down-vote on close") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the failed down-vote\n%s", code, stderr, out)
	}
}
