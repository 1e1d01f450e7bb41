package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// TestParityHTPSplitLayout runs parity on the split bundle named with
// -context-paths, the world model's binaries resident in the same session
// (-world-model same_process): the golden is the double's arithmetic of
// action_context then action_step_ctx, so it passes only when the split
// graphs are the ones run and wired right. The same binaries with the
// world model in another process are refused, naming the parameter.
func TestParityHTPSplitLayout(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	d := expert.Dims{Layers: c.Layers, Heads: 2, HeadDim: c.AttnWidth / 2, VideoTokens: c.VideoTokens,
		ContextTokens: c.ContextTokens, TextDim: c.TextDim, ActionTokens: c.ActionTokens, ActionDim: c.ActionDim}
	cg, sg := qnnfake.ActionContextGraph(qnnfake.DataTypeFloat32, d), qnnfake.ActionStepCtxGraph(qnnfake.DataTypeFloat32, d)
	world := qnnfake.WorldModelGraphs(qnnfake.DataTypeFloat32, qnnfake.WorldDims{ImageHeight: 4, ImageWidth: 6,
		LatentChannels: 2, LatentHeight: 2, LatentWidth: 4, ContextRows: c.ContextTokens, TextDim: c.TextDim,
		VideoTokens: c.VideoTokens, Width: c.AttnWidth, Layers: []int{1, c.Layers - 1}})
	dir := t.TempDir()
	var paths []string
	for _, g := range append([]qnnfake.Graph{cg, sg}, world...) {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, BuildID: "fake-build", Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	mask := make([]float32, len(c.Chunk.ContextMask))
	for i, m := range c.Chunk.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	cross := qnnfake.Expected(cg, [][]float32{c.Chunk.Context})
	by := map[string][]float32{"latents_action": c.Latents, "timestep": {c.Timestep}, "video_keys": c.Chunk.VideoKeys,
		"video_values": c.Chunk.VideoValues, "cross_keys": cross[0], "cross_values": cross[1], "context_mask": mask}
	in := make([][]float32, len(sg.Inputs))
	for m, tn := range sg.Inputs {
		in[m] = by[tn.Name]
	}
	goldenPath := filepath.Join(dir, "split_io.npz")
	if err := npztest.Write(goldenPath, npztest.Bundle(c, qnnfake.Expected(sg, in)[0])...); err != nil {
		t.Fatal(err)
	}
	args := []string{"parity", "-backend", "htp", "-context-paths", strings.Join(paths, ","), "-golden", goldenPath,
		"-head-dim", "16", "-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-chunks", "2"}
	code, out, stderr := runCmd(t, append(args, "-world-model", "same_process")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"split action graphs", "world model in this process (vae_encoder, prefill_0, prefill_1)", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	recs := lib.ContextRecords()
	if len(recs) != 5 || !recs[4].Group {
		t.Errorf("contexts %+v: want the five in one group", recs)
	}
	if code, _, stderr := runCmd(t, args...); code == 0 || !strings.Contains(stderr, `"htp.world_model" is "other_process"`) {
		t.Errorf("world model binaries with other_process: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCmd(t, append(args, "-world-model", "elsewhere")...); code != 2 || !strings.Contains(stderr, "-world-model") {
		t.Errorf("-world-model elsewhere: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "parity", "-backend", "htp", "-context-paths", paths[0]+",,"+paths[1], "-golden", goldenPath); code != 2 || !strings.Contains(stderr, "-context-paths") {
		t.Errorf("empty path in -context-paths: exit %d\n%s", code, stderr)
	}
}

// TestReplayHTPSplit replays the embedded regression bag on the split
// bundle of the double (-context-paths): the backend line names the
// layout, and the record shows one action_context per chunk followed by
// its ten action_step_ctx steps. The double's chunks differ from the
// recorded ones (exit 1), as for the monolithic graph.
func TestReplayHTPSplit(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	d := expert.Dims{Layers: c.Layers, Heads: 2, HeadDim: c.AttnWidth / 2, VideoTokens: c.VideoTokens,
		ContextTokens: c.ContextTokens, TextDim: c.TextDim, ActionTokens: c.ActionTokens, ActionDim: c.ActionDim}
	dir := t.TempDir()
	var paths []string
	for _, g := range []qnnfake.Graph{qnnfake.ActionContextGraph(qnnfake.DataTypeFloat32, d), qnnfake.ActionStepCtxGraph(qnnfake.DataTypeFloat32, d)} {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, BuildID: "fake-build", Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	code, out, stderr := runCmd(t, "replay", "-backend", "htp", "-context-paths", strings.Join(paths, ","), "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path)
	if code != 1 || !strings.Contains(out, "backend  htp, split action graphs (action_context + action_step_ctx); world model in another process; 2 binaries") {
		t.Fatalf("exit %d, want 1 (the double's chunks differ) with the split layout\n%s%s", code, out, stderr)
	}
	var chunks, steps int
	for i, e := range lib.ExecuteRecords() {
		switch e.Graph {
		case "action_context":
			if i != chunks*11 {
				t.Fatalf("execute %d is action_context, want it every 11th (1 + 10 steps)", i)
			}
			chunks++
		case "action_step_ctx":
			steps++
		}
	}
	if chunks == 0 || steps != 10*chunks {
		t.Errorf("%d action_context and %d action_step_ctx executes, want 10 steps per chunk", chunks, steps)
	}
}
