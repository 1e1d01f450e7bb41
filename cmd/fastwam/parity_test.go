package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
)

// writeLoopGolden writes the tiny case_all golden with its full loop, the
// recorded schedule replaced by sigmas (nil keeps it).
func writeLoopGolden(t *testing.T, sigmas []float32) string {
	t.Helper()
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	if sigmas == nil {
		sigmas = c.LoopSigmas
	}
	flat := func(rows [][]float32) []float32 {
		var out []float32
		for _, r := range rows {
			out = append(out, r...)
		}
		return out
	}
	steps := len(c.LoopPred)
	arrays := append(npztest.Bundle(c, c.Pred),
		npztest.Array{Name: "loop_init_noise", Shape: []int{1, c.ActionTokens, c.ActionDim}, Data: c.LoopInit},
		npztest.Array{Name: "loop_sigmas", Shape: []int{len(sigmas)}, Data: sigmas},
		npztest.Array{Name: "loop_pred", Shape: []int{steps, 1, c.ActionTokens, c.ActionDim}, Data: flat(c.LoopPred)},
		npztest.Array{Name: "loop_latents", Shape: []int{steps, 1, c.ActionTokens, c.ActionDim}, Data: flat(c.LoopLatents)},
		npztest.Array{Name: "loop_actions", Shape: []int{1, c.ActionTokens, c.ActionDim}, Data: c.LoopActions})
	path := filepath.Join(t.TempDir(), "loop.npz")
	if err := npztest.Write(path, arrays...); err != nil {
		t.Fatal(err)
	}
	return path
}

// The N = 10 schedules of golden/reference.py (PyTorch, float32), printed by
// schedule(10, shift).tolist(): independent of expert.NewSchedule.
var (
	refSigmasShift5 = []float32{1.0, 0.97826087474823, 0.9523810148239136, 0.9210526347160339, 0.882352888584137,
		0.8333333134651184, 0.7692307829856873, 0.6818181872367859, 0.5555555820465088, 0.3571428656578064, 0.0}
	refSigmasShift3 = []float32{1.0, 0.964285671710968, 0.9230769872665405, 0.8749999403953552, 0.8181818127632141,
		0.75, 0.6666666865348816, 0.5625, 0.4285714626312256, 0.25, 0.0}
)

// TestParitySchedule: the schedule a golden records (loop_sigmas) is compared
// with the one parity runs; garbage, another shift and other steps are
// errors that show both schedules and the likely cause.
func TestParitySchedule(t *testing.T) {
	weights := tinyWeightsFile(t)
	parity := func(golden string, extra ...string) (int, string, string) {
		return runCmd(t, append([]string{"parity", "-golden", golden, "-weights", weights, "-chunks", "1"}, extra...)...)
	}
	// The reference's own schedule passes, and parity says it was checked.
	code, out, stderr := parity(writeLoopGolden(t, refSigmasShift5))
	if code != 0 || !strings.Contains(out, "schedule 10 steps, shift 5: the golden's loop_sigmas agree") {
		t.Fatalf("reference schedule: exit %d\n%s%s", code, out, stderr)
	}

	// Another shift: named, with both schedules and the fix.
	shift3 := writeLoopGolden(t, refSigmasShift3)
	code, out, stderr = parity(shift3)
	for _, want := range []string{
		"loop_sigmas differ from the schedule parity runs",
		"golden loop_sigmas        [1 0.964286 0.923077 0.875 0.818182 0.75 0.666667 0.5625 0.428571 0.25 0]",
		"parity, 10 steps shift 5 [1 0.978261 0.952381 0.921053 0.882353 0.833333 0.769231 0.681818 0.555556 0.357143 0]",
		"likely cause: the golden was made with shift 3 ", "run parity with -shift 3",
	} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("shift-3 golden: exit %d, stderr lacks %q\n%s%s", code, want, out, stderr)
		}
	}
	if strings.Contains(out, "check ") {
		t.Errorf("shift-3 golden: checks ran before the schedule was refused:\n%s", out)
	}
	// With that shift the schedule check passes (the loop itself, made
	// with shift 5, then fails the gate).
	code, out, stderr = parity(shift3, "-shift", "3")
	if code != 1 || strings.Contains(stderr, "loop_sigmas") || !strings.Contains(out, "schedule 10 steps, shift 3: the golden's loop_sigmas agree") ||
		!strings.Contains(stderr, "FAIL: lowest cosine") {
		t.Errorf("shift-3 golden with -shift 3: exit %d\n%s%s", code, out, stderr)
	}

	// Other steps than the golden's loop, given explicitly (the expected
	// schedule is reference.py's schedule(4, 5.0)).
	code, _, stderr = parity(writeLoopGolden(t, nil), "-steps", "4")
	if code != 1 || !strings.Contains(stderr, "its loop has 10 steps, -steps is 4") ||
		!strings.Contains(stderr, "-steps 4 -shift 5 gives [1 0.9375 0.833333 0.625 0]") {
		t.Errorf("-steps 4: exit %d\n%s", code, stderr)
	}

	// Garbage: not a schedule at all, or no shifted schedule.
	garbage := func(i int, v float32) []float32 {
		s := append([]float32(nil), refSigmasShift5...)
		s[i] = v
		return s
	}
	for _, tc := range []struct {
		sigmas []float32
		want   string
	}{
		{garbage(3, 0.99), "value 3 (0.99) does not fall below value 2 (0.952381)"},
		{garbage(0, 0.9), "the first is 0.9, not 1"},
		{garbage(10, 0.1), "the last is 0.1, not 0"},
		{[]float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "the last is 1, not 0"},
	} {
		code, out, stderr := parity(writeLoopGolden(t, tc.sigmas))
		if code != 1 || !strings.Contains(stderr, "are not a flow-matching schedule ("+tc.want) {
			t.Errorf("sigmas %v: exit %d, want 1 with %q\n%s%s", tc.sigmas, code, tc.want, out, stderr)
		}
	}
	code, _, stderr = parity(writeLoopGolden(t, garbage(4, 0.87)))
	if code != 1 || !strings.Contains(stderr, "likely cause: they are not a shifted schedule of 10 steps") {
		t.Errorf("perturbed schedule: exit %d\n%s", code, stderr)
	}
}

// withMetadata rewrites the safetensors file src (tensors unchanged) with
// the metadata entries set (an empty value removes the entry).
func withMetadata(t *testing.T, src []byte, set map[string]string) string {
	t.Helper()
	n := binary.LittleEndian.Uint64(src[:8])
	var header map[string]json.RawMessage
	if err := json.Unmarshal(src[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	if raw, ok := header["__metadata__"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range set {
		if v == "" {
			delete(meta, k)
		} else {
			meta[k] = v
		}
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	header["__metadata__"] = raw
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint64(len(h)))
	buf.Write(h)
	buf.Write(src[8+n:])
	path := filepath.Join(t.TempDir(), "weights.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParityModelProvenance: parity prints the head split and the number of
// action tokens it uses and where they come from; a split the checkpoint
// did not record is named in the failure; S can be given when the weights
// do not record it, and not against them.
func TestParityModelProvenance(t *testing.T) {
	code, out, stderr := runCmd(t, "parity", "-chunks", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"heads   2x16 (attention width 32) from the weights' fastwam_config metadata\n",
		"actions 32, the default: the weights do not record action_tokens (-action-tokens sets it)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("default parity lacks %q:\n%s", want, out)
		}
	}

	tiny, err := fs.ReadFile(golden.Tiny(), "tiny/weights.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	loop := writeLoopGolden(t, nil)
	// The exporter's record of an assumed split is shown.
	assumed := `{"num_heads": 2, "attn_head_dim": 16, "source": "assumed", "note": "assumed: the checkpoint does not record the head split; attention width 32 split with attn_head_dim 16"}`
	w := withMetadata(t, tiny, map[string]string{headSplitMetadataKey: assumed})
	code, out, stderr = runCmd(t, "parity", "-golden", loop, "-weights", w, "-chunks", "1")
	if code != 0 || !strings.Contains(out, "heads   2x16 (attention width 32) from the weights' fastwam_config metadata; the exporter recorded: assumed: the checkpoint does not record the head split") {
		t.Errorf("assumed split: exit %d\n%s%s", code, out, stderr)
	}

	// Issue 8's case: the model exported with a wrong head count (1x32
	// for the 2x16 model; the shapes cannot tell) fails the gate, and the
	// failure says the split was not the checkpoint's record.
	cfg := `{"hidden_dim": 64, "ffn_dim": 128, "num_heads": 1, "attn_head_dim": 32, "num_layers": 2, "text_dim": 32, "freq_dim": 256, "eps": 1e-06, "action_dim": 7}`
	wrong := `{"num_heads": 1, "attn_head_dim": 32, "source": "flags", "note": "from --num-heads 1; the checkpoint does not record the head split"}`
	w = withMetadata(t, tiny, map[string]string{"fastwam_config": cfg, headSplitMetadataKey: wrong})
	code, out, stderr = runCmd(t, "parity", "-golden", loop, "-weights", w, "-chunks", "1")
	if code != 1 || !strings.Contains(out, "heads   1x32 (attention width 32)") ||
		!strings.Contains(stderr, "the head split is not the checkpoint's own record: 1x32 (attention width 32) from the weights' fastwam_config metadata; the exporter recorded: from --num-heads 1") ||
		!strings.Contains(stderr, "re-export with the model's --num-heads") {
		t.Errorf("wrong split: exit %d, want 1 with a hint about the split\n%s%s", code, out, stderr)
	}

	// S: given when the weights do not record it; refused against them.
	code, out, stderr = runCmd(t, "parity", "-golden", loop, "-weights", tinyWeightsFile(t), "-chunks", "1", "-action-tokens", "32")
	if code != 0 || !strings.Contains(out, "actions 32 from -action-tokens") {
		t.Errorf("-action-tokens 32: exit %d\n%s%s", code, out, stderr)
	}
	cfg32 := strings.Replace(cfg, `"num_heads": 1, "attn_head_dim": 32`, `"num_heads": 2, "attn_head_dim": 16, "action_tokens": 32`, 1)
	w = withMetadata(t, tiny, map[string]string{"fastwam_config": cfg32})
	code, out, stderr = runCmd(t, "parity", "-golden", loop, "-weights", w, "-chunks", "1")
	if code != 0 || !strings.Contains(out, "actions 32 from the weights' fastwam_config metadata") {
		t.Errorf("recorded action_tokens: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := runCmd(t, "parity", "-golden", loop, "-weights", w, "-action-tokens", "16"); code != 2 ||
		!strings.Contains(stderr, "-action-tokens 16 contradicts action_tokens 32 in the weights' fastwam_config metadata") {
		t.Errorf("-action-tokens against the weights: exit %d\n%s", code, stderr)
	}
	// A golden of 16 action tokens with weights that do not say S: the
	// mismatch says to give -action-tokens, which then sizes the model.
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	c.ActionTokens, c.Latents = 16, c.Latents[:16*c.ActionDim]
	g16 := filepath.Join(t.TempDir(), "s16.npz")
	if err := npztest.Write(g16, npztest.Bundle(c, c.Pred[:16*c.ActionDim])...); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, "parity", "-golden", g16, "-weights", tinyWeightsFile(t))
	if code != 1 || !strings.Contains(stderr, "the golden has 16 action tokens and the backend 32, the default: the weights do not record action_tokens") ||
		!strings.Contains(stderr, "give -action-tokens 16") {
		t.Errorf("16-token golden: exit %d\n%s", code, stderr)
	}
	code, out, stderr = runCmd(t, "parity", "-golden", g16, "-weights", tinyWeightsFile(t), "-chunks", "1", "-action-tokens", "16")
	if !strings.Contains(out, "actions 16 from -action-tokens") || !strings.Contains(out, "latents [1,16,7]") {
		t.Errorf("16-token golden with -action-tokens 16: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := runCmd(t, "parity", "-action-tokens", "-3"); code != 2 || !strings.Contains(stderr, "-action-tokens") {
		t.Errorf("-action-tokens -3: exit %d\n%s", code, stderr)
	}
}
