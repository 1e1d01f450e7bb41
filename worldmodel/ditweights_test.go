package worldmodel

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/safetensors"
)

// stTensor is one tensor of a safetensors file being written by a test.
type stTensor struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

// readST returns the tensors of a safetensors file in name order, and its
// metadata.
func readST(t *testing.T, path string) ([]stTensor, map[string]string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []stTensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		b, err := f.Bytes(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, stTensor{n, info.DType, info.Shape, slices.Clone(b)})
	}
	meta := map[string]string{}
	for k, v := range f.Metadata() {
		meta[k] = v
	}
	return ts, meta
}

// writeST writes a safetensors file; rawMeta, when not empty, is written
// as the metadata object verbatim (to test duplicate keys), else meta.
func writeST(t *testing.T, path string, ts []stTensor, meta map[string]string, rawMeta string) {
	t.Helper()
	var hdr bytes.Buffer
	hdr.WriteString("{")
	if rawMeta != "" {
		hdr.WriteString(`"__metadata__":` + rawMeta + ",")
	} else if len(meta) > 0 {
		b, _ := json.Marshal(meta)
		hdr.WriteString(`"__metadata__":` + string(b) + ",")
	}
	off := 0
	for i, x := range ts {
		sh, _ := json.Marshal(x.shape)
		if i > 0 {
			hdr.WriteString(",")
		}
		hdr.WriteString(`"` + x.name + `":{"dtype":"` + x.dtype + `","shape":` + string(sh) + `,"data_offsets":[` + strconv.Itoa(off) + "," + strconv.Itoa(off+len(x.data)) + "]}")
		off += len(x.data)
	}
	hdr.WriteString("}")
	for hdr.Len()%8 != 0 {
		hdr.WriteString(" ")
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(hdr.Len()))
	out.Write(hdr.Bytes())
	for _, x := range ts {
		out.Write(x.data)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// toF32 and toF16 re-store a BF16 tensor as F32 or F16 (exact for F32).
func toF32(x stTensor) stTensor {
	out := make([]byte, 2*len(x.data))
	for i := 0; i < len(x.data)/2; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(binary.LittleEndian.Uint16(x.data[2*i:]))<<16)
	}
	return stTensor{x.name, "F32", x.shape, out}
}

func toF16(x stTensor) stTensor {
	out := make([]byte, len(x.data))
	for i := 0; i < len(x.data)/2; i++ {
		f := math.Float32frombits(uint32(binary.LittleEndian.Uint16(x.data[2*i:])) << 16)
		binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(f).Bits())
	}
	return stTensor{x.name, "F16", x.shape, out}
}

// TestDiTWeightsContract loads variants of the golden weight file that the
// contract allows (the last layer trimmed to its required tensors, no
// head, F32 storage) with the same K/V, and refuses the ones it does not,
// naming what is wrong.
func TestDiTWeightsContract(t *testing.T) {
	src := filepath.Join(ditGoldenDir, "weights.safetensors")
	ts, meta := readST(t, src)
	dir := t.TempDir()
	base, err := LoadDiTWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	c := loadDiTCase(t, base, nil, "dit_49.npz")
	kWant, vWant := f32KV(c.d)
	if err := c.d.Prefill(t.Context(), c.ref["latent"].Data, c.ref["context"].Data, kWant, vWant); err != nil {
		t.Fatal(err)
	}
	last := "blocks." + strconv.Itoa(base.Config.NumLayers-1) + "."
	lastRequired := map[string]bool{"modulation": true, "self_attn.k.weight": true, "self_attn.k.bias": true,
		"self_attn.v.weight": true, "self_attn.v.bias": true, "self_attn.norm_k.weight": true}
	filter := func(keep func(stTensor) bool) []stTensor {
		var out []stTensor
		for _, x := range ts {
			if keep(x) {
				out = append(out, x)
			}
		}
		return out
	}
	mapT := func(f func(stTensor) stTensor) []stTensor {
		out := make([]stTensor, len(ts))
		for i, x := range ts {
			out[i] = f(x)
		}
		return out
	}
	accepted := []struct {
		name string
		ts   []stTensor
		same bool // K/V bit-identical to the golden file's
	}{
		{"last layer trimmed", filter(func(x stTensor) bool {
			r, ok := strings.CutPrefix(x.name, last)
			return !ok || lastRequired[r]
		}), true},
		{"no head", filter(func(x stTensor) bool { return !strings.HasPrefix(x.name, "head.") }), true},
		{"F32 storage", mapT(toF32), true},
		{"F16 storage", mapT(toF16), false},
	}
	for _, tc := range accepted {
		p := filepath.Join(dir, "ok.safetensors")
		writeST(t, p, tc.ts, meta, "")
		w, err := LoadDiTWeights(p)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		d, err := NewDiT(w, nil, c.d.size)
		if err != nil {
			t.Fatal(err)
		}
		k, v := f32KV(d)
		if err := d.Prefill(t.Context(), c.ref["latent"].Data, c.ref["context"].Data, k, v); err != nil {
			t.Fatal(err)
		}
		if tc.same && (!slices.Equal(k.F32, kWant.F32) || !slices.Equal(v.F32, vWant.F32)) {
			t.Errorf("%s: K/V differ from the golden file's", tc.name)
		}
		if !tc.same {
			if cos := expert.Cosine(k.F32, kWant.F32); cos < 0.999 {
				t.Errorf("%s: K cosine %v to the golden file's", tc.name, cos)
			}
		}
	}
	nanT := func(name string) []stTensor {
		return mapT(func(x stTensor) stTensor {
			if x.name == name {
				x = toF32(x)
				binary.LittleEndian.PutUint32(x.data[4:], math.Float32bits(float32(math.Inf(1))))
			}
			return x
		})
	}
	withMeta := func(cfg string) map[string]string { return map[string]string{DiTConfigMetadataKey: cfg} }
	cfgJSON := meta[DiTConfigMetadataKey]
	refused := []struct {
		name    string
		ts      []stTensor
		meta    map[string]string
		rawMeta string
		want    string
	}{
		{"missing tensor", filter(func(x stTensor) bool { return x.name != "blocks.0.ffn.2.bias" }), meta, "", `missing "blocks.0.ffn.2.bias"`},
		{"missing last-layer k", filter(func(x stTensor) bool { return x.name != last+"self_attn.k.weight" }), meta, "", `missing "` + last + `self_attn.k.weight"`},
		{"missing proprio", filter(func(x stTensor) bool { return x.name != "proprio_encoder.bias" }), meta, "", `missing "proprio_encoder.bias"`},
		{"unknown key", append(slices.Clone(ts), stTensor{"blocks.9.extra", "F32", []int{1}, make([]byte, 4)}), meta, "", `unexpected tensor "blocks.9.extra"`},
		{"prefixed keys", mapT(func(x stTensor) stTensor { x.name = "mixtures.video." + x.name; return x }), meta, "", `unexpected tensor "mixtures.video.`},
		{"misshaped", mapT(func(x stTensor) stTensor {
			if x.name == "blocks.1.norm3.weight" {
				x.shape = []int{8, 6}
			}
			return x
		}), meta, "", `"blocks.1.norm3.weight" has shape [8, 6], want [48]`},
		{"integer dtype", mapT(func(x stTensor) stTensor {
			if x.name == "patch_embedding.bias" {
				x.dtype = "I16"
			}
			return x
		}), meta, "", `"patch_embedding.bias" has dtype I16`},
		{"infinite value", nanT("blocks.0.self_attn.q.weight"), meta, "", `"blocks.0.self_attn.q.weight": value 1 is +Inf`},
		{"infinite time weight", nanT("time_projection.1.weight"), meta, "", `"time_projection.1.weight": value 1 is +Inf`},
		{"no metadata: full size assumed", ts, nil, "", `"blocks.0.cross_attn.k.bias" has shape [48], want [3072]`},
		{"unknown config field", ts, withMeta(strings.Replace(cfgJSON, "{", `{"eps":1,`, 1)), "", `unknown field "eps"`},
		{"missing config field", ts, withMeta(strings.Replace(cfgJSON, `"proprio_dim":8,`, "", 1)), "", `field "proprio_dim" missing`},
		{"non-integer config field", ts, withMeta(strings.Replace(cfgJSON, `"num_layers":2`, `"num_layers":2.5`, 1)), "", `"num_layers" is 2.5`},
		{"duplicate config field", ts, nil, `{"` + DiTConfigMetadataKey + `":` + jsonString(strings.Replace(cfgJSON, "{", `{"num_layers":1,`, 1)) + `}`, `num_layers`},
		{"config with bad RoPE head dim", ts, withMeta(strings.Replace(strings.Replace(cfgJSON, `"num_heads":2`, `"num_heads":3`, 1), `"head_dim":24`, `"head_dim":16`, 1)), "", "RoPE"},
		{"config with more layers", ts, withMeta(strings.Replace(cfgJSON, `"num_layers":2`, `"num_layers":3`, 1)), "", `missing "blocks.2.modulation"`},
	}
	for _, tc := range refused {
		p := filepath.Join(dir, "bad.safetensors")
		writeST(t, p, tc.ts, tc.meta, tc.rawMeta)
		_, err := LoadDiTWeights(p)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
	}
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }
