package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// build writes a safetensors image by hand: header length, JSON header,
// data.
func build(t *testing.T, header map[string]any, data []byte) []byte {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	return append(out, data...)
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func TestReadDTypes(t *testing.T) {
	data := f32bytes(1.5, -2)
	data = append(data, 0x00, 0x3c, 0x00, 0xc0) // f16 1, -2
	data = append(data, 0xc0, 0x3f, 0x80, 0xbf) // bf16 1.5, -1
	img := build(t, map[string]any{
		"a":            map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0, 8}},
		"h":            map[string]any{"dtype": "F16", "shape": []int{1, 2}, "data_offsets": []int{8, 12}},
		"b":            map[string]any{"dtype": "BF16", "shape": []int{2}, "data_offsets": []int{12, 16}},
		"__metadata__": map[string]string{"k": "v"},
	}, data)
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, want := range map[string][]float32{"a": {1.5, -2}, "h": {1, -2}, "b": {1.5, -1}} {
		got, err := f.Float32(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if f.Metadata()["k"] != "v" || strings.Join(f.Names(), ",") != "a,b,h" {
		t.Errorf("metadata %v names %v", f.Metadata(), f.Names())
	}
	if _, err := f.Float32("zz", nil); err == nil {
		t.Error("missing tensor read")
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	ok := map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0, 8}}}
	good := build(t, ok, f32bytes(1, 2))
	for _, tc := range []struct {
		name, want string
		img        []byte
	}{
		{"empty", "too short", nil},
		{"header past end", "does not fit", good[:20]},
		{"truncated data", "truncated file?", good[:len(good)-1]},
		{"huge header length", "does not fit", append(binary.LittleEndian.AppendUint64(nil, 1<<62), good[8:]...)},
		{"not json", "not a JSON", append(binary.LittleEndian.AppendUint64(nil, 8), []byte("nonsense")...)},
		{"size mismatch", "needs 12 bytes", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{3}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2, 3))},
		{"unknown dtype", "unknown dtype", build(t, map[string]any{"a": map[string]any{"dtype": "Q7", "shape": []int{2}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2))},
		{"negative dim", "negative", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{-2}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2))},
		{"giant shape", "larger than", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{1 << 40, 1 << 40}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2))},
		{"overlap", "overlap", build(t, map[string]any{
			"a": map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0, 8}},
			"b": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int{4, 8}}}, f32bytes(1, 2))},
		{"bad offsets", "data_offsets", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0}}}, f32bytes(1, 2))},
	} {
		_, err := Parse(tc.img)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none.safetensors")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := Parse(b)
		if err != nil {
			return
		}
		for _, n := range sf.Names() {
			sf.Float32(n, nil)
		}
	})
}
