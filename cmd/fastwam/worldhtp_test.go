package main

import (
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/replay"
	"github.com/fastwam/actionexpert/worldmodel"
)

// worldHTPBundle writes, one binary per graph, the double's world-model
// graphs for the embedded tiny world model (the LIBERO frame, its latent,
// its DiT's layers split 1 + rest) and the split action bundle for the
// embedded tiny expert. It returns the world graphs, the action graphs by
// name, and the paths of each set.
func worldHTPBundle(t *testing.T) (world []qnnfake.Graph, action map[string]qnnfake.Graph, worldPaths, actionPaths []string, d expert.Dims) {
	t.Helper()
	wf := worldFlags{blas: "auto", statsKey: "default", backend: worldBackendCPU}
	wm, cleanup, err := wf.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	md := wm.m.Dims()
	cleanup()
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	d = expert.Dims{Layers: c.Layers, Heads: 2, HeadDim: c.AttnWidth / 2, VideoTokens: md.VideoTokens,
		ContextTokens: md.ContextRows, TextDim: md.TextDim, ActionTokens: c.ActionTokens, ActionDim: c.ActionDim}
	if md.Layers != d.Layers || md.Width != c.AttnWidth {
		t.Fatalf("tiny world model (%d layers, width %d) does not match the tiny expert (%d, %d)", md.Layers, md.Width, d.Layers, c.AttnWidth)
	}
	fw, fh := wm.frame.Size()
	world = qnnfake.WorldModelGraphs(qnnfake.DataTypeFloat32, qnnfake.WorldDims{ImageHeight: fh, ImageWidth: fw,
		LatentChannels: worldmodel.LatentChannels, LatentHeight: fh / 16, LatentWidth: fw / 16, ContextRows: md.ContextRows,
		TextDim: md.TextDim, VideoTokens: md.VideoTokens, Width: md.Width, Layers: []int{1, md.Layers - 1}})
	action = map[string]qnnfake.Graph{}
	cg, sg := qnnfake.ActionContextGraph(qnnfake.DataTypeFloat32, d), qnnfake.ActionStepCtxGraph(qnnfake.DataTypeFloat32, d)
	action[cg.Name], action[sg.Name] = cg, sg
	dir := t.TempDir()
	write := func(g qnnfake.Graph) string {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, BuildID: "wm-cli-test", Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, g := range world {
		worldPaths = append(worldPaths, write(g))
	}
	actionPaths = []string{write(cg), write(sg)}
	return world, action, worldPaths, actionPaths, d
}

// TestReplayWorldHTP replays the image bag golden/policy with the world
// model's graphs (-world-backend htp) and the split expert (-backend htp)
// on the QNN double: every observation runs vae_encoder, prefill_0,
// prefill_1, then one action_context and ten action_step_ctx steps, each
// chained graph reading its predecessor's output buffer. The double's
// arithmetic is not the model's, so the chunks are mismatches against
// the CPU recording: exit 1, as expected.
func TestReplayWorldHTP(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	world, _, worldPaths, actionPaths, _ := worldHTPBundle(t)
	args := []string{"replay", "-backend", "htp", "-context-paths", strings.Join(actionPaths, ","), "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path,
		"-world-backend", "htp", "-world-context-paths", strings.Join(worldPaths, ",")}
	code, out, stderr := runCmd(t, append(args, policyBagDir)...)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (the double's chunks differ from the CPU recording)\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"4 chunks published", "FAIL: 4 of 4 recorded chunks fail", "VAE encoder and prefill on the HTP: vae_encoder -> prefill_0 (1 layers), prefill_1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The world model's contexts (opened first, in their own session) are
	// one spill-fill group.
	cr := lib.ContextRecords()
	if len(cr) != len(world)+2 {
		t.Fatalf("%d contexts, want %d", len(cr), len(world)+2)
	}
	for _, rc := range cr[:len(world)] {
		if !rc.Group || (rc.Seq > 1 && rc.FirstSeq != 1) {
			t.Errorf("world context %+v: want the three in one spill-fill group", rc)
		}
	}
	recs := lib.ExecuteRecords()
	one := []string{"vae_encoder", "prefill_0", "prefill_1", "action_context"}
	for range 10 {
		one = append(one, "action_step_ctx")
	}
	if len(recs) != policyCycles*len(one) {
		t.Fatalf("%d executes, want %d (%d observations of %d)", len(recs), policyCycles*len(one), policyCycles, len(one))
	}
	// The outputs of each graph by name and position, to check the links.
	for o := range policyCycles {
		rs := recs[o*len(one) : (o+1)*len(one)]
		for i, r := range rs {
			if r.Graph != one[i] {
				t.Fatalf("observation %d execute %d is %s, want %s", o, i, r.Graph, one[i])
			}
		}
		enc, p0, p1 := rs[0], rs[1], rs[2]
		in := func(g qnnfake.Graph, r qnnfake.ExecuteRecord, name string) uintptr {
			for i, tn := range g.Inputs {
				if tn.Name == name {
					return r.Inputs[i]
				}
			}
			t.Fatalf("%s has no input %s", g.Name, name)
			return 0
		}
		outp := func(g qnnfake.Graph, r qnnfake.ExecuteRecord, name string) uintptr {
			for i, tn := range g.Outputs {
				if tn.Name == name {
					return r.Outputs[i]
				}
			}
			t.Fatalf("%s has no output %s", g.Name, name)
			return 0
		}
		links := []struct {
			from qnnfake.Graph
			fr   qnnfake.ExecuteRecord
			out  string
			to   qnnfake.Graph
			tr   qnnfake.ExecuteRecord
			in   string
		}{
			{world[0], enc, "latent", world[1], p0, "latent"},
			{world[1], p0, "hidden_out", world[2], p1, "hidden"},
			{world[1], p0, "ctx_v", world[2], p1, "ctx_v"},
		}
		for _, l := range links {
			if a, b := outp(l.from, l.fr, l.out), in(l.to, l.tr, l.in); a == 0 || a != b {
				t.Errorf("observation %d: %s.%s at %#x, %s.%s reads %#x: want the same buffer", o, l.from.Name, l.out, a, l.to.Name, l.in, b)
			}
		}
	}
}

// TestWorldHTPActionsAreTheDoublesArithmetic is check (b) of the replay
// above, one level down: replay's report does not expose the expert's
// per-step predictions, so this runs the same CLI wiring (replay's
// htpFlags and worldFlags parsed from the same flags) on every
// observation of golden/policy and checks that the world model's K/V are
// exactly the double's arithmetic of the chain on the preprocessed frame
// and the context, and that each step's prediction is exactly the
// double's arithmetic of action_context then action_step_ctx on them. The
// node's sampler and post-processing that turn the predictions into the
// actions are the CPU path's code, unchanged.
func TestWorldHTPActionsAreTheDoublesArithmetic(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	world, action, worldPaths, actionPaths, d := worldHTPBundle(t)
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var h htpFlags
	var w worldFlags
	h.register(fs)
	w.register(fs)
	if err := fs.Parse([]string{"-context-paths", strings.Join(actionPaths, ","), "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path,
		"-world-backend", "htp", "-world-context-paths", strings.Join(worldPaths, ",")}); err != nil {
		t.Fatal(err)
	}
	wm, cleanup, err := w.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	b, _, err := h.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	reader, err := newImageBagReader(wm.frame)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := worldmodel.NewPreprocessor(wm.frame)
	if err != nil {
		t.Fatal(err)
	}
	fw, fh := wm.frame.Size()
	img := make([]float32, 3*fw*fh)
	out := replay.NewWorldOutput(wm.Dims())
	sg := action["action_step_ctx"]
	r := rand.New(rand.NewPCG(3, 4))
	n := 0
	for obs, err := range reader.Observations(t.Context(), policyBagDir) {
		if err != nil {
			t.Fatal(err)
		}
		if err := wm.Run(t.Context(), &obs, out); err != nil {
			t.Fatal(err)
		}
		if err := pre.Tensor(img, obs.Images...); err != nil {
			t.Fatal(err)
		}
		wk, wv := qnnfake.WorldModelExpected(world, img, out.Context)
		if !slices.Equal(out.Keys, wk) || !slices.Equal(out.Values, wv) {
			t.Fatalf("observation %d: the K/V are not the double's arithmetic of the chain", n)
		}
		if err := b.BindChunk(t.Context(), &expert.Chunk{VideoKeys: out.Keys, VideoValues: out.Values, Context: out.Context, ContextMask: out.Mask}); err != nil {
			t.Fatal(err)
		}
		mask := make([]float32, len(out.Mask))
		for i, m := range out.Mask {
			if m {
				mask[i] = 1
			}
		}
		cross := qnnfake.Expected(action["action_context"], [][]float32{out.Context})
		lat := make([]float32, d.ActionTokens*d.ActionDim)
		pred := make([]float32, len(lat))
		for s := range 3 {
			for i := range lat {
				lat[i] = float32(r.Float64()*2 - 1)
			}
			tau := 1 - float32(s)/3
			if err := b.Step(t.Context(), lat, tau, pred); err != nil {
				t.Fatal(err)
			}
			by := map[string][]float32{"latents_action": lat, "timestep": {tau}, "video_keys": wk, "video_values": wv,
				"cross_keys": cross[0], "cross_values": cross[1], "context_mask": mask}
			in := make([][]float32, len(sg.Inputs))
			for i, tn := range sg.Inputs {
				in[i] = by[tn.Name]
			}
			if want := qnnfake.Expected(sg, in)[0]; !slices.Equal(pred, want) {
				t.Fatalf("observation %d step %d: the prediction is not the double's arithmetic on the chain's K/V", n, s)
			}
		}
		n++
	}
	if n != policyCycles {
		t.Errorf("%d observations, want %d", n, policyCycles)
	}
}

// TestWorldHTPRefusals: the world model's HTP flags are refused, naming the
// flag and why, where they cannot apply.
func TestWorldHTPRefusals(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	_, _, worldPaths, actionPaths, _ := worldHTPBundle(t)
	libs := []string{"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-head-dim", "16"}
	wp := strings.Join(worldPaths, ",")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"same process, world on the CPU", []string{"replay", "-backend", "htp", "-context-paths", strings.Join(append(slices.Clone(actionPaths), worldPaths...), ","),
			"-world-model", "same_process", policyBagDir}, "-world-model same_process with -world-backend cpu: the world model's graphs would be loaded into the expert's session and never run"},
		{"same process, binaries twice", []string{"replay", "-backend", "htp", "-context-paths", strings.Join(append(slices.Clone(actionPaths), worldPaths...), ","),
			"-world-model", "same_process", "-world-backend", "htp", "-world-context-paths", wp, policyBagDir}, "are the same file; name each binary once"},
		{"same process, no world graphs", []string{"replay", "-backend", "htp", "-context-paths", strings.Join(actionPaths, ","),
			"-world-model", "same_process", "-world-backend", "htp", policyBagDir}, "-world-model same_process"},
		{"same process, CPU expert", []string{"replay", "-world-model", "same_process", "-world-backend", "htp", "-world-context-paths", wp, policyBagDir}, "-world-model"},
		{"no binaries", []string{"replay", "-world-backend", "htp", policyBagDir}, "-world-backend htp needs -world-context-paths"},
		{"paths without htp", []string{"replay", "-world-context-paths", wp, policyBagDir}, "-world-context-paths applies with -world-backend htp only"},
		{"unknown backend", []string{"replay", "-world-backend", "gpu", policyBagDir}, `-world-backend "gpu"`},
		{"empty path", []string{"replay", "-world-backend", "htp", "-world-context-paths", worldPaths[0] + ",," + worldPaths[1], policyBagDir}, "-world-context-paths"},
		{"not an image bag", []string{"replay", "-world-backend", "htp", "-world-context-paths", wp}, "the world model is not run"},
		{"missing graph", []string{"replay", "-world-backend", "htp", "-world-context-paths", worldPaths[0] + "," + worldPaths[2], policyBagDir}, "prefill_0"},
	} {
		code, out, stderr := runCmd(t, append(c.args[:1:1], append(slices.Clone(libs), c.args[1:]...)...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want a refusal naming %q\n%s%s", c.name, code, c.want, out, stderr)
		}
	}
}

// replayActions reads the ActionChunks of a replay's output bag (-o), by
// the cache sequence number they answer.
func replayActions(t *testing.T, dir string) map[uint64][]msgs.ActionRow {
	t.Helper()
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	chunks := map[uint64][]msgs.ActionRow{}
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != "/action_chunk" {
			continue
		}
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		chunks[c.KVSeq] = c.Actions
	}
	return chunks
}

// TestReplayWorldHTPSameProcess replays golden/policy with the world
// model's graphs in the action expert's QNN session (-backend htp
// -world-model same_process -world-backend htp, shared buffers): the five
// contexts are one session and one spill-fill group, every observation
// executes vae_encoder, prefill_0, prefill_1, action_context and ten
// action_step_ctx, the prefill ranges write their K/V through CUSTOM
// registrations straight into the addresses action_step_ctx reads its
// video_keys and video_values from, and the actions are bit for bit those
// of the same replay with the world model's chain in a session of its own
// (-world-model other_process).
func TestReplayWorldHTPSameProcess(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	world, action, worldPaths, actionPaths, d := worldHTPBundle(t)
	dir := t.TempDir()
	base := []string{"replay", "-backend", "htp", "-context-paths", strings.Join(actionPaths, ","), "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path,
		"-world-backend", "htp", "-world-context-paths", strings.Join(worldPaths, ",")}
	other, same := filepath.Join(dir, "other"), filepath.Join(dir, "same")
	code, out, stderr := runCmd(t, append(slices.Clone(base), "-o", other, policyBagDir)...)
	if code != 1 || !strings.Contains(out, "4 chunks published") {
		t.Fatalf("other_process: exit %d, want 1 with 4 chunks published\n%s%s", code, out, stderr)
	}
	ctx0, exec0, mem0 := len(lib.ContextRecords()), len(lib.ExecuteRecords()), len(lib.MemRecords())
	written0 := lib.MemHandleBytesWritten()

	code, out, stderr = runCmd(t, append(slices.Clone(base), "-world-model", "same_process", "-o", same, policyBagDir)...)
	if code != 1 {
		t.Fatalf("same_process: exit %d, want 1 (the double's chunks differ from the CPU recording)\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"4 chunks published", "FAIL: 4 of 4 recorded chunks fail",
		"world model in this process (vae_encoder, prefill_0, prefill_1)",
		"the world model's K/V written in place into the expert's inputs",
		"VAE encoder and prefill on the HTP: vae_encoder -> prefill_0 (1 layers), prefill_1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "K/V written in place into \"action_step_ctx\"") {
		t.Errorf("stderr lacks the binding line:\n%s", stderr)
	}

	// One session: the five contexts in one spill-fill group.
	cr := lib.ContextRecords()[ctx0:]
	if len(cr) != len(world)+len(action) {
		t.Fatalf("%d contexts, want %d", len(cr), len(world)+len(action))
	}
	for _, rc := range cr {
		if !rc.Group || (rc.Seq != cr[0].Seq && rc.FirstSeq != cr[0].Seq) {
			t.Errorf("context %+v: want all %d in the group of context %d", rc, len(cr), cr[0].Seq)
		}
	}
	// The K/V of both prefill ranges bound as CUSTOM regions.
	custom := 0
	for _, m := range lib.MemRecords()[mem0:] {
		if m.MemType == 2 { // QNN_MEM_TYPE_CUSTOM
			custom++
		}
	}
	if custom != 4 {
		t.Errorf("%d CUSTOM registrations, want 4 (keys and values of 2 ranges)", custom)
	}
	kvBytes := uint64(d.KVLen()) * 4
	if got := lib.MemHandleBytesWritten() - written0; got < policyCycles*2*kvBytes {
		t.Errorf("executes wrote %d bytes into registered memory, want at least the K/V of %d observations (%d)", got, policyCycles, policyCycles*2*kvBytes)
	}

	idx := func(ts []qnnfake.Tensor, name string) int {
		for i, tn := range ts {
			if tn.Name == name {
				return i
			}
		}
		t.Fatalf("no tensor %s", name)
		return -1
	}
	sg := action["action_step_ctx"]
	recs := lib.ExecuteRecords()[exec0:]
	one := []string{"vae_encoder", "prefill_0", "prefill_1", "action_context"}
	for range 10 {
		one = append(one, "action_step_ctx")
	}
	if len(recs) != policyCycles*len(one) {
		t.Fatalf("%d executes, want %d (%d observations of %d)", len(recs), policyCycles*len(one), policyCycles, len(one))
	}
	layer := uintptr(kvBytes) / uintptr(d.Layers) // one layer's slab, F32
	for o := range policyCycles {
		rs := recs[o*len(one) : (o+1)*len(one)]
		for i, r := range rs {
			if r.Graph != one[i] {
				t.Fatalf("observation %d execute %d is %s, want %s", o, i, r.Graph, one[i])
			}
		}
		for _, name := range []string{"video_keys", "video_values"} {
			in := rs[4].Inputs[idx(sg.Inputs, name)]
			p0, p1 := rs[1].Outputs[idx(world[1].Outputs, name)], rs[2].Outputs[idx(world[2].Outputs, name)]
			if in == 0 || p0 != in || p1 != in+layer {
				t.Errorf("observation %d: action_step_ctx reads %s at %#x, prefill_0 writes it at %#x and prefill_1 at %#x: want %#x and %#x (in place)",
					o, name, in, p0, p1, in, in+layer)
			}
		}
	}

	want, got := replayActions(t, other), replayActions(t, same)
	if len(want) != policyCycles || len(got) != len(want) {
		t.Fatalf("%d chunks with other_process, %d with same_process; want %d each", len(want), len(got), policyCycles)
	}
	for seq, w := range want {
		if g, ok := got[seq]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("cache %d: the same_process actions differ from the other_process ones", seq)
		}
	}
}

// TestSameProcessChainRunInsideChunk: with the world model's chain bound
// into the expert's inputs, a chain run after a chunk's inputs were
// written (a chunk still denoising, say after a replay's chunk timeout)
// overwrites them, so the chunk's next step is refused, naming why, and
// the next chunk written after the run steps again; the step after a
// proper order (run, then Inputs, then BindInputs) sees exactly the
// chain's K/V in the expert's inputs, with no copy from the host.
func TestSameProcessChainRunInsideChunk(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	world, _, worldPaths, actionPaths, d := worldHTPBundle(t)
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var h htpFlags
	h.register(fs)
	if err := fs.Parse([]string{"-context-paths", strings.Join(actionPaths, ","), "-head-dim", "16", "-world-model", "same_process",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path}); err != nil {
		t.Fatal(err)
	}
	s, _, err := h.openSameProcess(t.Context(), strings.Join(worldPaths, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.inPlace {
		t.Fatal("the chain's K/V are not bound into the expert's inputs")
	}
	kv := s.worldKV()
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
		return x
	}
	keys, values := make([]float32, kv.KVLen()), make([]float32, kv.KVLen())
	run := func() ([]float32, []float32) {
		img, text := rnd(kv.ImageLen()), rnd(kv.ContextLen())
		if err := kv.RunKV(t.Context(), img, text, expert.TensorView{F32: keys}, expert.TensorView{F32: values}); err != nil {
			t.Fatal(err)
		}
		wk, wv := qnnfake.WorldModelExpected(world, img, text)
		if !slices.Equal(keys, wk) || !slices.Equal(values, wv) {
			t.Fatal("the chain's K/V are not the double's arithmetic")
		}
		return text, wk
	}
	feed := func(text []float32) {
		v, err := s.Inputs()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(v.VideoKeys.F32, keys) || !slices.Equal(v.VideoValues.F32, values) {
			t.Fatal("the expert's inputs do not hold the chain's K/V before anything was copied into them")
		}
		copy(v.Context.F32, text)
		mask := make([]bool, d.ContextTokens)
		for i := range mask {
			mask[i] = true
		}
		if err := s.BindInputs(t.Context(), mask, d.VideoTokens); err != nil {
			t.Fatal(err)
		}
	}
	lat, pred := rnd(d.ActionTokens*d.ActionDim), make([]float32, d.ActionTokens*d.ActionDim)
	text, _ := run()
	feed(text)
	if err := s.Step(t.Context(), lat, 1, pred); err != nil {
		t.Fatal(err)
	}
	run() // inside the chunk: its K/V are the next observation's now
	if err := s.Step(t.Context(), lat, 0.5, pred); err == nil || !strings.Contains(err.Error(), "ran 1 time(s) after this chunk's inputs were written") {
		t.Fatalf("step after a chain run inside the chunk: %v, want a refusal", err)
	}
	feed(text)
	if err := s.Step(t.Context(), lat, 0.5, pred); err != nil {
		t.Fatalf("step of a chunk written after the run: %v", err)
	}
}
