package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
		{"header past end", "does not fit a 20-byte file: at most 12 bytes follow", good[:20]},
		{"header one byte longer than the file", "does not fit", append(binary.LittleEndian.AppendUint64(nil, uint64(len(good)-8+1)), good[8:]...)},
		{"header above the limit", "header length 104857608 exceeds the 104857600-byte limit", append(binary.LittleEndian.AppendUint64(nil, MaxHeader+8), good[8:]...)},
		{"header at the limit, file shorter", "header length 104857600 does not fit", append(binary.LittleEndian.AppendUint64(nil, MaxHeader), good[8:]...)},
		{"truncated data", "truncated file?", good[:len(good)-1]},
		{"huge header length", "header length 4611686018427387904 exceeds the 104857600-byte limit", append(binary.LittleEndian.AppendUint64(nil, 1<<62), good[8:]...)},
		{"not json", "not a JSON", append(binary.LittleEndian.AppendUint64(nil, 8), []byte("nonsense")...)},
		{"size mismatch", "needs 12 bytes", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{3}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2, 3))},
		{"unknown dtype", "unknown dtype", build(t, map[string]any{"a": map[string]any{"dtype": "Q7", "shape": []int{2}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2))},
		{"negative dim", "negative", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{-2}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2))},
		{"giant shape", "larger than", build(t, map[string]any{"a": map[string]any{"dtype": "F32", "shape": []int{1 << 40, 1 << 40}, "data_offsets": []int{0, 8}}}, f32bytes(1, 2))},
		{"overlap", `tensors "a" [0,8) and "b" [4,8) overlap`, build(t, map[string]any{
			"a": map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0, 8}},
			"b": map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int{4, 8}}}, f32bytes(1, 2))},
		{"1-byte overlap", `tensors "a" [0,8) and "b" [7,11) overlap`, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[7,11]}}`, f32bytes(1, 2, 3))},
		{"duplicate tensor", `header: the key "a" appears twice in one object; refusing the ambiguous JSON`, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32bytes(1, 2))},
		{"duplicate tensor, escaped", `header: the key "a" appears twice in one object`, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"\u0061":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"duplicate __metadata__", `header: the key "__metadata__" appears twice in one object`, raw(`{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"w"}}`, f32bytes(1, 2))},
		{"duplicate metadata key", `header: __metadata__ must map strings to strings: the key "fastwam_config" appears twice in one object`, raw(`{"__metadata__":{"fastwam_config":"{}","fastwam_config":"{\"hidden_dim\":8}"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"duplicate entry key", `tensor "a": the key "shape" appears twice in one object`, raw(`{"a":{"dtype":"F32","shape":[1],"shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"metadata not a string", `__metadata__ must map strings to strings: "k" is a JSON number, want a string`, raw(`{"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"metadata not an object", `__metadata__ must map strings to strings: is a JSON array, want an object`, raw(`{"__metadata__":["k"],"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"metadata value above the bound", `__metadata__ must map strings to strings: "fastwam_config" is a 1048579-byte string, more than the 1048576 bytes allowed for a metadata value`,
			raw(`{"__metadata__":{"fastwam_config":"`+strings.Repeat("x", MaxMetadataValue+1)+`"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"hole", `bytes [8,12) between tensor "a" and tensor "b" belong to no tensor; the ranges must tile the data section`, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, f32bytes(1, 2, 3, 4))},
		{"hole at the start", `bytes [0,4) between the start of the data section and tensor "a" belong to no tensor`, raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32bytes(1, 2))},
		{"trailing bytes", `1 trailing bytes [8,9) after tensor "a" belong to no tensor; the ranges must tile the data section`, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, append(f32bytes(1, 2), 0))},
		{"data but no tensor", `8 trailing bytes [0,8) after the start of the data section belong to no tensor`, raw(`{}`, f32bytes(1, 2))},
		{"rank above 64", `tensor "a": shape of 65 dimensions, more than 64`, raw(`{"a":{"dtype":"F32","shape":[`+strings.Repeat("1,", 64)+`2],"data_offsets":[0,8]}}`, f32bytes(1, 2))},
		{"entry above the bound", `tensor "a": its header entry is 4135 bytes, more than the 4096`, raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":"`+strings.Repeat("y", 4080)+`"}}`, f32bytes(1, 2))},
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
	// A FIFO would block os.Open until a writer came; it is refused at once.
	fifo := filepath.Join(t.TempDir(), "w.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fifo); err == nil || err.Error() != "safetensors: "+fifo+" is a named pipe (FIFO), want a safetensors weights file: not a regular file" {
		t.Errorf("FIFO: %v", err)
	}
}

// raw is a safetensors image of the header text h, as written, and data.
func raw(h string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), data...)
}

// header builds a header object with its keys in the given order (the JSON
// decoder sees them in this order; the map it fills is iterated randomly).
func header(keys []string, entries map[string]string) []byte {
	var h []byte
	h = append(h, '{')
	for i, k := range keys {
		if i > 0 {
			h = append(h, ',')
		}
		h = append(h, fmt.Sprintf("%q:%s", k, entries[k])...)
	}
	h = append(h, '}')
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(out, h...)
}

// TestZeroSizeTensorsOverlapNothing: an empty range holds no byte, so it
// never overlaps, wherever it sits; before the fix a tensor at [0,0] next
// to one at [0,8] was reported as overlapping depending on map order.
func TestZeroSizeTensorsOverlapNothing(t *testing.T) {
	entries := map[string]string{
		"empty0":   `{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`,
		"a":        `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`,
		"inside":   `{"dtype":"F16","shape":[0,3],"data_offsets":[4,4]}`,
		"atEnd":    `{"dtype":"BF16","shape":[5,0],"data_offsets":[16,16]}`,
		"b":        `{"dtype":"F32","shape":[2],"data_offsets":[8,16]}`,
		"inside2":  `{"dtype":"F32","shape":[0],"data_offsets":[4,4]}`,
		"scalar0d": `{"dtype":"F32","shape":[],"data_offsets":[16,20]}`,
	}
	keys := slices.Sorted(maps.Keys(entries))
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		img := append(header(keys, entries), f32bytes(1, 2, 3, 4, 5)...)
		f, err := Parse(img)
		if err != nil {
			t.Fatalf("run %d, key order %v: %v", run, keys, err)
		}
		for _, n := range []string{"empty0", "inside", "atEnd", "inside2"} {
			v, err := f.Float32(n, nil)
			if err != nil || len(v) != 0 {
				t.Fatalf("%s = %v, %v; want an empty tensor", n, v, err)
			}
		}
		if v, err := f.Float32("scalar0d", nil); err != nil || len(v) != 1 || v[0] != 5 {
			t.Fatalf("scalar = %v, %v; want [5]", v, err)
		}
	}
}

// TestOverlapIsDeterministic: with several overlapping tensors, every key
// order reports the same pair.
func TestOverlapIsDeterministic(t *testing.T) {
	entries := map[string]string{
		"z": `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`,
		"y": `{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`,
		"x": `{"dtype":"F32","shape":[2],"data_offsets":[4,12]}`,
		"e": `{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`,
		"w": `{"dtype":"F32","shape":[1],"data_offsets":[12,16]}`,
	}
	const want = `tensors "y" [0,8) and "z" [0,8) overlap`
	keys := slices.Sorted(maps.Keys(entries))
	r := rand.New(rand.NewPCG(3, 4))
	for run := range 200 {
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		_, err := Parse(append(header(keys, entries), f32bytes(1, 2, 3, 4)...))
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Fatalf("run %d, key order %v: got %v, want an error ending %q", run, keys, err, want)
		}
	}
}

// TestFirstProblemIsDeterministic: a file with two bad tensors always
// names the same one (the first by name).
func TestFirstProblemIsDeterministic(t *testing.T) {
	entries := map[string]string{
		"b": `{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}`,
		"a": `{"dtype":"F32","shape":[3],"data_offsets":[0,8]}`,
		"c": `{"dtype":"F32","shape":[2],"data_offsets":[0,80]}`,
	}
	keys := slices.Sorted(maps.Keys(entries))
	r := rand.New(rand.NewPCG(5, 6))
	for run := range 100 {
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		_, err := Parse(append(header(keys, entries), f32bytes(1, 2)...))
		if err == nil || !strings.Contains(err.Error(), `tensor "a": shape [3] of F32 is larger than the 8-byte data section`) {
			t.Fatalf("run %d: %v", run, err)
		}
	}
}

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzParse from the seed generator")

// fuzzSeeds are the committed seed corpus of FuzzParse: small valid files
// that reach every dtype, metadata, scalars and zero-length tensors.
func fuzzSeeds(t *testing.T) map[string][]byte {
	data := f32bytes(1.5, -2)
	data = append(data, 0x00, 0x3c, 0x00, 0xc0) // f16 1, -2
	data = append(data, 0xc0, 0x3f, 0x80, 0xbf) // bf16 1.5, -1
	data = append(data, 1, 0, 0, 0, 7, 9)       // i32 1, u8 7, 9
	return map[string][]byte{
		"dtypes": build(t, map[string]any{
			"a":            map[string]any{"dtype": "F32", "shape": []int{2}, "data_offsets": []int{0, 8}},
			"h":            map[string]any{"dtype": "F16", "shape": []int{1, 2}, "data_offsets": []int{8, 12}},
			"b":            map[string]any{"dtype": "BF16", "shape": []int{2}, "data_offsets": []int{12, 16}},
			"i":            map[string]any{"dtype": "I32", "shape": []int{}, "data_offsets": []int{16, 20}},
			"u":            map[string]any{"dtype": "U8", "shape": []int{2, 1}, "data_offsets": []int{20, 22}},
			"empty":        map[string]any{"dtype": "F32", "shape": []int{0, 4}, "data_offsets": []int{0, 0}},
			"__metadata__": map[string]string{"fastwam_config": `{"hidden_dim":4}`},
		}, data),
		"one": build(t, map[string]any{
			"w": map[string]any{"dtype": "F32", "shape": []int{2, 2}, "data_offsets": []int{0, 16}},
		}, f32bytes(1, 2, 3, 4)),
	}
}

// TestFuzzSeeds: the committed seeds are what fuzzSeeds makes (run with
// -update-fuzz-seeds to rewrite them) and each parses.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	for name, img := range fuzzSeeds(t) {
		enc := []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(img)) + ")\n")
		path := filepath.Join(dir, name)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, enc, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-fuzz-seeds)", err)
		}
		if !bytes.Equal(got, enc) {
			t.Errorf("%s is stale (run with -update-fuzz-seeds)", path)
		}
		if _, err := Parse(img); err != nil {
			t.Errorf("seed %s: %v", name, err)
		}
	}
}

// FuzzParse: Parse never panics, gives the same answer twice (the checks
// run in a fixed order), and a File it accepts keeps every tensor inside
// the data section, with a byte size matching its shape, non-empty ranges
// tiling the section, and float tensors readable. The seed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := Parse(b)
		_, err2 := Parse(b)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("two parses disagree: %v / %v", err, err2)
		}
		if err != nil {
			return
		}
		var spans []Info
		for _, n := range sf.Names() {
			info, _ := sf.Info(n)
			if info.Offset < 0 || info.Size < 0 || info.Offset+info.Size > int64(len(sf.data)) {
				t.Fatalf("%s: range [%d,+%d) outside the %d-byte data section", n, info.Offset, info.Size, len(sf.data))
			}
			if got := int64(info.NumElements()) * elemSize(info.DType); got != info.Size {
				t.Fatalf("%s: %d elements of %s in %d bytes", n, info.NumElements(), info.DType, info.Size)
			}
			if info.Size > 0 {
				spans = append(spans, info)
			}
			v, err := sf.Float32(n, nil)
			switch info.DType {
			case "F32", "F16", "BF16":
				if err != nil || len(v) != info.NumElements() {
					t.Fatalf("%s: Float32 = %d values, %v; want %d", n, len(v), err, info.NumElements())
				}
			default:
				if err == nil {
					t.Fatalf("%s: Float32 of %s succeeded", n, info.DType)
				}
			}
		}
		if err := checkLayout(spans, int64(len(sf.data))); err != nil {
			t.Fatalf("accepted a file with %v", err)
		}
	})
}
