package cpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/x448/float16"
)

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzParseWeights from the seed generator")

// fuzzSeedConfig is the smallest model worth fuzzing: one layer, width 4,
// one head of 2. Its safetensors file is about 4 KB, so a fuzzing run
// parses it tens of thousands of times a minute.
func fuzzSeedConfig() Config {
	return Config{HiddenDim: 4, FFNDim: 8, NumHeads: 1, HeadDim: 2, NumLayers: 1, TextDim: 2, FreqDim: 2,
		Eps: 1e-6, ActionDim: 1}.withDefaults()
}

// seedImage is a valid weights file of fuzzSeedConfig with the
// configuration in its metadata: every tensor in dtype (matrices) and
// vecDType (vectors), under prefix, with seeded values in [-1, 1).
func seedImage(t testing.TB, prefix, dtype, vecDType string, seed uint64) []byte {
	t.Helper()
	c := fuzzSeedConfig()
	r := rand.New(rand.NewPCG(seed, 7))
	m := map[string]tensorEntry{}
	for _, p := range params(c, nil) {
		dt := dtype
		if len(p.shape) == 1 {
			dt = vecDType
		}
		var b []byte
		for range p.numel() {
			v := 2*r.Float32() - 1
			switch dt {
			case "F32":
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			case "F16":
				b = binary.LittleEndian.AppendUint16(b, float16.Fromfloat32(v).Bits())
			case "BF16":
				b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(v)>>16))
			}
		}
		m[prefix+p.name] = tensorEntry{dt, p.shape, b}
	}
	cfg := configJSON(t, Config{HiddenDim: c.HiddenDim, FFNDim: c.FFNDim, NumHeads: c.NumHeads, HeadDim: c.HeadDim,
		NumLayers: c.NumLayers, TextDim: c.TextDim, FreqDim: c.FreqDim, Eps: c.Eps, ActionDim: c.ActionDim})
	return image(t, map[string]string{ConfigMetadataKey: cfg}, m, nil)
}

// fuzzSeeds are the committed seed corpus of FuzzParseWeights.
func fuzzSeeds(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"tiny_f32":                 seedImage(t, "", "F32", "F32", 1),
		"tiny_bf16_f16_checkpoint": seedImage(t, CheckpointPrefix, "BF16", "F16", 2),
	}
}

// corpusFile is the go test fuzz v1 encoding of one []byte input.
func corpusFile(b []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
}

// TestFuzzSeeds: the committed seeds are what the generator makes (run
// with -update-fuzz-seeds to rewrite them) and each is a valid file, so the
// fuzzer starts from inputs that reach the loading code.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseWeights")
	for name, img := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, corpusFile(img), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-fuzz-seeds)", err)
		}
		if !bytes.Equal(got, corpusFile(img)) {
			t.Errorf("%s is stale (run with -update-fuzz-seeds)", path)
		}
		w, err := ParseWeights(context.Background(), name, img, nil)
		if err != nil {
			t.Fatalf("seed %s: %v", name, err)
		}
		if w.Config() != fuzzSeedConfig() {
			t.Errorf("seed %s: config %+v, want %+v", name, w.Config(), fuzzSeedConfig())
		}
	}
}

// FuzzParseWeights: the loader on safetensors images that carry their own
// fastwam_config. It never panics, gives the same answer twice (problems
// are listed in a fixed order), and weights it accepts have a valid
// configuration, finite values, and no more parameters than the file has
// room for at two bytes each (memory bounded by the file). The seed corpus
// is in testdata/fuzz/FuzzParseWeights.
//
// A valid file is about 4 KB (41 tensor names), and Go minimizes every input
// that finds new coverage with an O(n^2) byte-subset search bounded only by
// -fuzzminimizetime (60 s by default), during which the execution counter
// does not move. Fuzz with a short minimization, e.g.
// go test -run '^$' -fuzz '^FuzzParseWeights$' -fuzzminimizetime 1x ./expert/cpu
// (about a million executions a minute on one core here).
func FuzzParseWeights(f *testing.F) {
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ParseWeights(ctx, "fuzz", b, nil)
		_, err2 := ParseWeights(ctx, "fuzz", b, nil)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two loads disagree: %v / %v", err, err2)
		}
		if err != nil {
			return
		}
		if err := w.Config().Validate(); err != nil {
			t.Fatalf("accepted an invalid configuration: %v", err)
		}
		if 2*w.NumParams() > len(b) {
			t.Fatalf("%d parameters from a %d-byte file", w.NumParams(), len(b))
		}
		n, err := checkAllFinite(w)
		if err != nil {
			t.Fatal(err)
		}
		if n != w.NumParams() {
			t.Fatalf("weights hold %d values, NumParams says %d", n, w.NumParams())
		}
	})
}

// checkAllFinite walks every parameter slice of w and counts the values.
func checkAllFinite(w *Weights) (int, error) {
	n := 0
	check := func(name string, v []float32) error {
		n += len(v)
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("accepted %s[%d] = %v", name, i, x)
			}
		}
		return nil
	}
	for _, s := range [][]float32{w.actionEnc, w.actionEncB, w.text0, w.text0B, w.text2, w.text2B,
		w.time0, w.time0B, w.time2, w.time2B, w.timeProj, w.timeProjB, w.head, w.headB} {
		if err := check("top-level weight", s); err != nil {
			return 0, err
		}
	}
	for l, L := range w.layers {
		for _, s := range [][]float32{L.mod, L.qkv, L.qkvB, L.normQ, L.normK, L.selfO, L.selfOB, L.crossQ, L.crossQB,
			L.crossNormQ, L.crossK, L.crossKB, L.crossNormK, L.crossV, L.crossVB, L.crossO, L.crossOB,
			L.norm3W, L.norm3B, L.ffn0, L.ffn0B, L.ffn2, L.ffn2B} {
			if err := check(fmt.Sprintf("layer %d weight", l), s); err != nil {
				return 0, err
			}
		}
	}
	// qkv and qkvB hold the three self-attention q, k, v tensors fused.
	return n, nil
}

// FuzzWeightsTable: the configuration-against-tensor-table checks, driven by
// a few small numbers instead of file bytes, so that the fuzzer's
// minimization (quadratic in the input's length) stays cheap and a cold
// minute runs many executions; FuzzParseWeights covers the bytes. The
// inputs are the configuration the metadata claims (which may contradict
// the tensors) and one edit of the seed model's tensor table: 0 none, 1 drop
// a tensor, 2 change one dimension of its shape by delta, 3 give it another
// dtype, 4 add an unexpected tensor, 5 move it under the checkpoint prefix
// alone. The loader must never panic, must agree with itself, must accept
// the untouched seed under its own configuration, and must refuse every
// edit that makes the table disagree with the configuration.
func FuzzWeightsTable(f *testing.F) {
	seed := fuzzSeedConfig()
	f.Add(uint16(seed.NumLayers), uint16(seed.HiddenDim), uint16(seed.FFNDim), uint16(seed.NumHeads),
		uint16(seed.HeadDim), uint16(seed.TextDim), uint16(seed.FreqDim), uint16(seed.ActionDim), uint8(0), uint16(0), int8(0))
	for edit := range uint8(6) {
		f.Add(uint16(1), uint16(4), uint16(8), uint16(1), uint16(2), uint16(2), uint16(2), uint16(1), edit, uint16(3), int8(1))
	}
	f.Add(uint16(30), uint16(1024), uint16(4096), uint16(24), uint16(128), uint16(4096), uint16(256), uint16(7), uint8(0), uint16(0), int8(0))
	f.Add(uint16(1), uint16(4), uint16(8), uint16(2), uint16(2), uint16(2), uint16(2), uint16(1), uint8(0), uint16(0), int8(0))

	// The seed model's tensors, made once: values do not matter here.
	base := map[string]tensorEntry{}
	var names []string
	for _, p := range params(seed, nil) {
		base[p.name] = tensorEntry{"F32", p.shape, make([]byte, 4*p.numel())}
		names = append(names, p.name)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, layers, hidden, ffn, heads, headDim, text, freq, actionDim uint16, edit uint8, which uint16, delta int8) {
		claimed := Config{NumLayers: int(layers), HiddenDim: int(hidden), FFNDim: int(ffn), NumHeads: int(heads),
			HeadDim: int(headDim), TextDim: int(text), FreqDim: int(freq), ActionDim: int(actionDim), Eps: seed.Eps}
		m := maps.Clone(base)
		name := names[int(which)%len(names)]
		e := m[name]
		edited := true
		switch edit % 6 {
		case 0:
			edited = false
		case 1:
			delete(m, name)
		case 2:
			shape := slices.Clone(e.shape)
			shape[int(which)%len(shape)] += int(delta)
			e.shape = shape
			m[name] = e
			edited = delta != 0
		case 3:
			e.dtype = []string{"I32", "F64", "U8", "BOOL"}[int(which)%4]
			m[name] = e
		case 4:
			m["blocks.0.extra"] = tensorEntry{"F32", []int{1}, make([]byte, 4)}
		case 5:
			delete(m, name)
			m[CheckpointPrefix+name] = e
		}
		img := image(t, map[string]string{ConfigMetadataKey: configJSON(t, claimed)}, m, nil)
		w, err := ParseWeights(ctx, "fuzz", img, nil)
		_, err2 := ParseWeights(ctx, "fuzz", img, nil)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two loads disagree: %v / %v", err, err2)
		}
		same := claimed.withDefaults() == seed
		switch {
		case same && !edited && err != nil:
			t.Fatalf("the seed model under its own configuration was refused: %v", err)
		case err == nil && edited:
			t.Fatalf("edit %d of %s was accepted", edit%6, name)
		case err == nil && !same:
			t.Fatalf("the seed model's tensors were accepted under another configuration %+v", claimed)
		case err == nil && 2*w.NumParams() > len(img):
			t.Fatalf("%d parameters from a %d-byte file", w.NumParams(), len(img))
		}
	})
}
