package worldmodel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// vaeFileParts splits golden/vae/weights.safetensors into its header (as
// a map of raw JSON values) and its data section.
func vaeFileParts(t *testing.T) (map[string]json.RawMessage, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "golden", "vae", "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var h map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	return h, b[8+n:]
}

// writeVAEFile writes a safetensors file of header h and data.
func writeVAEFile(t *testing.T, h map[string]json.RawMessage, data []byte) string {
	t.Helper()
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	b = append(append(b, hb...), data...)
	p := filepath.Join(t.TempDir(), "vae.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// entryOf decodes one header entry.
type stEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

func entryOf(t *testing.T, h map[string]json.RawMessage, name string) stEntry {
	t.Helper()
	var e stEntry
	if err := json.Unmarshal(h[name], &e); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return e
}

func setEntry(t *testing.T, h map[string]json.RawMessage, name string, e stEntry) {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	h[name] = b
}

// TestVAEWeightsFileRefused checks LoadVAEWeights on files: a missing
// tensor, a wrong shape, a non-finite value, a header that lies about a
// tensor's size or the file's, and a truncated file are each refused with
// an error naming the file and the tensor or the size; extra tensors (the
// released file's decoder.* and conv2.*) are ignored.
func TestVAEWeightsFileRefused(t *testing.T) {
	const gamma = "encoder.middle.0.residual.0.gamma"
	for _, c := range []struct {
		name string
		edit func(h map[string]json.RawMessage, data []byte) []byte
		want string // "" for success
	}{
		{"as written", func(map[string]json.RawMessage, []byte) []byte { return nil }, ""},
		{"extra decoder and conv2 tensors", func(h map[string]json.RawMessage, data []byte) []byte {
			n := int64(len(data))
			setEntry(t, h, "decoder.conv1.weight", stEntry{"BF16", []int{2}, []int64{n, n + 4}})
			setEntry(t, h, "conv2.bias", stEntry{"BF16", []int{2}, []int64{n + 4, n + 8}})
			return append(data, 0, 0, 0, 0, 0, 0, 0, 0)
		}, ""},
		{"missing tensor", func(h map[string]json.RawMessage, data []byte) []byte {
			h["encoder.head.2.bias.renamed"] = h["encoder.head.2.bias"]
			delete(h, "encoder.head.2.bias")
			return nil
		}, `"encoder.head.2.bias": no such tensor`},
		{"wrong shape", func(h map[string]json.RawMessage, data []byte) []byte {
			e := entryOf(t, h, gamma)
			e.Shape = []int{e.Shape[0] / 2, 2, 1, 1}
			setEntry(t, h, gamma, e)
			return nil
		}, gamma + " has shape [8 2 1 1] (16 values), want [16 1 1 1]"},
		{"non-finite value", func(h map[string]json.RawMessage, data []byte) []byte {
			e := entryOf(t, h, gamma)
			binary.LittleEndian.PutUint16(data[e.Offsets[0]+6:], uint16(math.Float32bits(float32(math.Inf(-1)))>>16))
			return data
		}, gamma + ": value 3 is -Inf, want a finite number"},
		{"a tensor's size lies", func(h map[string]json.RawMessage, data []byte) []byte {
			e := entryOf(t, h, gamma)
			e.Offsets[1] += 2
			setEntry(t, h, gamma, e)
			return nil
		}, `tensor "` + gamma + `": shape [16 1 1 1] of BF16 needs 32 bytes, range holds 34`},
		{"offsets beyond the data", func(h map[string]json.RawMessage, data []byte) []byte {
			e := entryOf(t, h, "conv1.bias")
			e.Offsets = []int64{int64(len(data)) + 10, int64(len(data)) + 10 + 192}
			setEntry(t, h, "conv1.bias", e)
			return nil
		}, `tensor "conv1.bias": byte range [290514,290706) outside the 290504-byte data section`},
		{"truncated", func(h map[string]json.RawMessage, data []byte) []byte { return data[:len(data)-100] }, "outside the 290404-byte data section (truncated file?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, data := vaeFileParts(t)
			data = append([]byte(nil), data...)
			if d := c.edit(h, data); d != nil {
				data = d
			}
			p := writeVAEFile(t, h, data)
			w, err := LoadVAEWeights(p)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if w.Dim != 4 {
					t.Fatalf("d = %d, want 4", w.Dim)
				}
				return
			}
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, p, c.want)
			}
			if c.name == "missing tensor" && !errors.Is(err, ErrNoTensor) {
				t.Fatalf("error %v does not wrap ErrNoTensor", err)
			}
		})
	}
	// A header length beyond the file.
	h, data := vaeFileParts(t)
	p := writeVAEFile(t, h, data)
	b, _ := os.ReadFile(p)
	binary.LittleEndian.PutUint64(b, uint64(len(b)))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadVAEWeights(p); err == nil || !strings.Contains(err.Error(), "does not fit a") {
		t.Fatalf("header length beyond the file: %v", err)
	}
}
