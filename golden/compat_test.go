package golden

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// verdict is numpy's reading of one member (testdata/make_npz_refs.py).
type verdict struct {
	OK     bool      `json:"ok"`
	Error  string    `json:"error"`
	Shape  []int     `json:"shape"`
	DType  string    `json:"dtype"`
	Values []float64 `json:"values"`
}

// TestHeadersAgreeWithNumpy reads every member of numpy_headers.npz, one
// .npy header variant each, and compares the outcome with numpy.load's:
// the same shape and values where numpy reads the array, an error where
// numpy raises one, except for the refusals listed below.
func TestHeadersAgreeWithNumpy(t *testing.T) {
	var want map[string]verdict
	b, err := os.ReadFile("testdata/numpy_headers.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile("testdata/numpy_headers.npz")
	if err != nil {
		t.Fatal(err)
	}
	// Files numpy reads and we refuse on purpose, with our reason.
	refused := map[string]string{
		"trailing_data": "but the member holds 28 after its", // numpy ignores bytes after the data
		"fortran_2d":    "Fortran-ordered",                   // the case's arrays are C-ordered
		"complex":       `descr "<c8" is not supported`,      // not a real type
		"native_order":  `descr "f4" is not supported`,       // the byte order is the writer's machine's
	}
	a, err := openArchive("numpy_headers.npz", strings.NewReader(string(img)), int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.order) != len(want) || len(want) < 60 {
		t.Fatalf("%d members, %d verdicts", len(a.order), len(want))
	}
	accepted := 0
	for _, key := range a.order {
		v, ok := want[key]
		if !ok {
			t.Errorf("%s: no numpy verdict", key)
			continue
		}
		x, err := a.open(t.Context(), key)
		var got []float32
		if err == nil {
			err = fortran(x.header)
		}
		if err == nil {
			got, err = x.read(t.Context())
		}
		if reason, ok := refused[key]; ok {
			if !v.OK {
				t.Errorf("%s: numpy refuses it now (%s); drop it from the deliberate refusals", key, v.Error)
			}
			if err == nil || !strings.Contains(err.Error(), reason) {
				t.Errorf("%s: got %v, want our refusal %q", key, err, reason)
			}
			continue
		}
		switch {
		case v.OK && err != nil:
			t.Errorf("%s: numpy reads shape %v %s, we refuse: %v", key, v.Shape, v.DType, err)
		case !v.OK && err == nil:
			t.Errorf("%s: numpy refuses (%s), we read shape %v", key, v.Error, x.header.shape)
		case v.OK:
			accepted++
			if !slices.Equal(x.header.shape, v.Shape) || x.header.dtype.descr != v.DType {
				t.Errorf("%s: shape %v %s, numpy %v %s", key, x.header.shape, x.header.dtype.descr, v.Shape, v.DType)
			}
			if len(got) != len(v.Values) {
				t.Errorf("%s: %d values, numpy %d", key, len(got), len(v.Values))
				continue
			}
			for i := range got {
				if got[i] != float32(v.Values[i]) {
					t.Errorf("%s: value %d is %v, numpy %v", key, i, got[i], v.Values[i])
				}
			}
		}
	}
	if accepted < 25 {
		t.Errorf("only %d variants read", accepted)
	}
}

// TestGoldenAgreesWithNumpy parses numpy_golden.npz, a golden case written
// by numpy.savez_compressed with some headers rewritten (keys in another
// order, versions 2.0 and 3.0), and compares every array with numpy's.
func TestGoldenAgreesWithNumpy(t *testing.T) {
	var want map[string][]float64
	b, err := os.ReadFile("testdata/numpy_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	c, err := Load(t.Context(), "testdata/numpy_golden.npz")
	if err != nil {
		t.Fatal(err)
	}
	flat := func(rows [][]float32) []float32 { return slices.Concat(rows...) }
	mask := make([]float32, len(c.Chunk.ContextMask))
	for i, m := range c.Chunk.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	got := map[string][]float32{
		"latents_action": c.Latents, "timestep": {c.Timestep}, "video_keys": c.Chunk.VideoKeys,
		"video_values": c.Chunk.VideoValues, "context": c.Chunk.Context, "context_mask": mask, "pred_noise": c.Pred,
		"step_timesteps": c.StepTimesteps, "step_latents": flat(c.StepLatents), "step_pred": flat(c.StepPred),
		"loop_init_noise": c.LoopInit, "loop_sigmas": c.LoopSigmas, "loop_pred": flat(c.LoopPred),
		"loop_latents": flat(c.LoopLatents), "loop_actions": c.LoopActions, "pred_noise_bf16": c.Extra["pred_noise_bf16"],
	}
	if len(got) != len(want) {
		t.Errorf("numpy has %d arrays, we compare %d", len(want), len(got))
	}
	for k, w := range want {
		g := got[k]
		if len(g) != len(w) {
			t.Errorf("%s: %d values, numpy %d", k, len(g), len(w))
			continue
		}
		for i := range g {
			if g[i] != float32(w[i]) {
				t.Errorf("%s[%d] = %v, numpy %v", k, i, g[i], w[i])
			}
		}
	}
	if d := c.Dims(); d.Layers != 1 || d.VideoTokens != 2 || c.AttnWidth != 4 || d.ContextTokens != 2 || d.TextDim != 4 ||
		d.ActionTokens != 2 || d.ActionDim != 3 || len(c.LoopPred) != 2 || len(c.Skipped) != 0 {
		t.Errorf("dims %s, %d loop steps, skipped %v", d, len(c.LoopPred), c.Skipped)
	}
}

// FuzzHeader feeds arbitrary header texts to the .npy header parser: no
// panic, and an accepted header's element count is its shape's product.
func FuzzHeader(f *testing.F) {
	for _, s := range []string{
		"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n",
		"{'shape': (0x2, 0o3, 0b1_1), \"fortran_order\": True, u'descr': '>' 'i8'}",
		"\n# c\n{'descr': '\\x3cf2', 'fortran_order': False, 'shape': ((2), 3L,),}\n",
		"({'descr': r'|b1', 'fortran_order': False, 'shape': (), 'descr': '<f8'})",
	} {
		f.Add(byte(1), s)
		f.Add(byte(3), s)
	}
	f.Fuzz(func(t *testing.T, version byte, text string) {
		img := []byte("\x93NUMPY")
		img = append(img, version, 0)
		if version == 1 {
			img = append(img, byte(len(text)), byte(len(text)>>8))
		} else {
			img = append(img, byte(len(text)), byte(len(text)>>8), byte(len(text)>>16), byte(len(text)>>24))
		}
		img = append(img, text...)
		h, err := readNPYHeader(bytes.NewReader(img))
		if err != nil {
			return
		}
		n := int64(1)
		for _, d := range h.shape {
			if d < 0 {
				t.Fatalf("negative dimension in %v", h.shape)
			}
			n *= int64(d)
		}
		if n != h.count || h.dataOff != int64(len(img)) || h.dtype.size < 1 || h.dtype.size > 8 {
			t.Fatalf("shape %v, count %d, data at %d of %d, dtype %+v", h.shape, h.count, h.dataOff, len(img), h.dtype)
		}
	})
}
