package cpu

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/safetensors"
)

// image writes a safetensors image: the tensors in data order sorted by
// name, the header's keys in keyOrder (sorted when nil; a shuffled order
// checks that nothing depends on it), metadata when not nil.
func image(t testing.TB, meta map[string]string, m map[string]tensorEntry, keyOrder []string) []byte {
	t.Helper()
	entries := map[string]string{}
	if meta != nil {
		b, err := json.Marshal(meta)
		if err != nil {
			t.Fatal(err)
		}
		entries["__metadata__"] = string(b)
	}
	var data []byte
	for _, n := range slices.Sorted(maps.Keys(m)) {
		e := m[n]
		b, err := json.Marshal(map[string]any{"dtype": e.dtype, "shape": e.shape, "data_offsets": []int{len(data), len(data) + len(e.data)}})
		if err != nil {
			t.Fatal(err)
		}
		entries[n] = string(b)
		data = append(data, e.data...)
	}
	if keyOrder == nil {
		keyOrder = slices.Sorted(maps.Keys(entries))
	}
	var h []byte
	h = append(h, '{')
	for i, k := range keyOrder {
		if i > 0 {
			h = append(h, ',')
		}
		h = fmt.Appendf(h, "%q:%s", k, entries[k])
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), data...)
}

// tinyTensors reads the tiny golden weights into a tensor map and their
// metadata.
func tinyTensors(t testing.TB) (map[string]tensorEntry, map[string]string) {
	t.Helper()
	src, err := fs.ReadFile(golden.Tiny(), "tiny/weights.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]tensorEntry{}
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		b, _ := f.Bytes(n)
		m[n] = tensorEntry{info.DType, info.Shape, b}
	}
	return m, maps.Clone(f.Metadata())
}

func configJSON(t testing.TB, c Config) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// allocated is the number of bytes fn allocates on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLargeConfigInSmallFile is issue 8: the 489 KB tiny weights whose
// metadata claims a large model. The configuration is checked against the
// tensor table before anything is allocated, so the load fails fast with
// the mismatches named and allocates little (the old loader allocated
// every parameter first: 4 GB for the released model, out of memory for
// larger ones).
func TestLargeConfigInSmallFile(t *testing.T) {
	m, meta := tinyTensors(t)
	big := FullConfig()
	big.NumLayers, big.HiddenDim, big.FFNDim, big.TextDim = 60, 4096, 16384, 8192 // 14 G parameters, below MaxParams
	if n, ok := big.numParams(); !ok || n > MaxParams || n < 1<<33 {
		t.Fatalf("test config has %d parameters, want between 2^33 and MaxParams", n)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"released model", FullConfig(), []string{
			"(30 layers, hidden 1024, 24x128 heads, ffn 4096, text 4096)",
			"text 4096): 756 missing, 67 misshaped\n",
			"\n  missing blocks.2.cross_attn.k.bias [3072]\n  missing blocks.2.cross_attn.k.weight [3072 1024]\n",
			"action_encoder.weight has shape [64 7], want [1024 7]",
			"... and 748 more missing",
			"... and 59 more misshaped"}},
		{"14 G parameters", big, []string{
			"(60 layers, hidden 4096, 24x128 heads, ffn 16384, text 8192)",
			"blocks.0.cross_attn.o.weight has shape [64 32], want [4096 3072]",
			"8192): 1566 missing, 67 misshaped\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := maps.Clone(meta)
			md[ConfigMetadataKey] = configJSON(t, tc.cfg)
			img := image(t, md, m, nil)
			var err error
			n := allocated(func() { _, err = ParseWeights(context.Background(), "small.safetensors", img, nil) })
			var me *MismatchError
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want a *MismatchError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// Bound: a small multiple of the file (the problem list grows
			// with the configuration: 0.4-0.85 MB here, more under -race),
			// nothing like the parameters (4 GB and 56 GB).
			if limit := uint64(4 * len(img)); n > limit {
				t.Errorf("rejecting the file allocated %d bytes, want at most %d (4x the %d-byte file)", n, limit, len(img))
			}
			t.Logf("%d-byte file, %d problems, %d bytes allocated", len(img), len(me.Problems), n)
		})
	}
}

// TestLoadAllocationIsBoundedByTheFile: a valid load allocates about the
// upcast parameters (4 bytes each) and the header, not more.
func TestLoadAllocationIsBoundedByTheFile(t *testing.T) {
	for _, name := range []string{"tiny/weights.safetensors", "tiny/weights_bf16.safetensors"} {
		b, err := fs.ReadFile(golden.Tiny(), name)
		if err != nil {
			t.Fatal(err)
		}
		var w *Weights
		n := allocated(func() { w, err = ParseWeights(context.Background(), name, b, nil) })
		if err != nil {
			t.Fatal(err)
		}
		params := uint64(4 * w.NumParams())
		if n < params || n > params+uint64(len(b))/2+256<<10 {
			t.Errorf("%s: load allocated %d bytes for %d bytes of float32 parameters from a %d-byte file", name, n, params, len(b))
		}
		if 2*w.NumParams() > len(b) {
			t.Errorf("%s: %d parameters from a %d-byte file", name, w.NumParams(), len(b))
		}
	}
}

// TestMismatchListingIsSortedAndDeterministic: missing, misshaped,
// wrongly typed and unexpected tensors are all listed, grouped by kind and
// sorted by name, identically whatever the header's key order.
func TestMismatchListingIsSortedAndDeterministic(t *testing.T) {
	m, meta := tinyTensors(t)
	delete(m, "head.bias")
	delete(m, "blocks.1.norm3.weight")
	delete(m, "blocks.0.ffn.2.bias")
	for _, n := range []string{"text_embedding.0.weight", "blocks.1.self_attn.q.weight"} {
		e := m[n]
		e.shape = []int{e.shape[1], e.shape[0]}
		m[n] = e
	}
	e := m["blocks.0.modulation"]
	e.dtype, e.shape = "I32", []int{1, 6, 64}
	m["blocks.0.modulation"] = e
	m["zzz.extra"] = tensorEntry{"F32", []int{1}, make([]byte, 4)}
	m["blocks.2.norm3.weight"] = tensorEntry{"F16", []int{64}, make([]byte, 128)}
	m["aaa.extra"] = tensorEntry{"BF16", []int{0}, nil}
	want := []Problem{
		{Missing, "blocks.0.ffn.2.bias", "", "[64]"},
		{Missing, "blocks.1.norm3.weight", "", "[64]"},
		{Missing, "head.bias", "", "[7]"},
		{Misshaped, "blocks.1.self_attn.q.weight", "[64 32]", "[32 64]"},
		{Misshaped, "text_embedding.0.weight", "[32 64]", "[64 32]"},
		{WrongDType, "blocks.0.modulation", "I32", "F32, F16 or BF16"},
		{Unexpected, "aaa.extra", "BF16[0]", ""},
		{Unexpected, "blocks.2.norm3.weight", "F16[64]", ""},
		{Unexpected, "zzz.extra", "F32[1]", ""},
	}
	keys := append(slices.Sorted(maps.Keys(m)), "__metadata__")
	r := rand.New(rand.NewPCG(8, 8))
	var first string
	for run := range 30 {
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		_, err := ParseWeights(context.Background(), "w.safetensors", image(t, meta, m, keys), nil)
		var me *MismatchError
		if !errors.As(err, &me) {
			t.Fatalf("got %v, want a *MismatchError", err)
		}
		if !slices.Equal(me.Problems, want) {
			t.Fatalf("run %d: problems\n%v\nwant\n%v", run, me.Problems, want)
		}
		if run == 0 {
			first = err.Error()
			continue
		}
		if err.Error() != first {
			t.Fatalf("run %d: message differs:\n%v\nfirst:\n%v", run, err, first)
		}
	}
	for _, line := range []string{
		"text 32): 3 missing, 2 misshaped, 1 wrong dtype, 3 unexpected\n",
		"\n  missing blocks.0.ffn.2.bias [64]\n  missing blocks.1.norm3.weight [64]\n  missing head.bias [7]\n  blocks.1.self_attn.q.weight has shape [64 32], want [32 64]\n",
		"blocks.0.modulation has dtype I32, want F32, F16 or BF16\n  unexpected tensor aaa.extra BF16[0]\n",
	} {
		if !strings.Contains(first, line) {
			t.Errorf("message lacks %q:\n%s", line, first)
		}
	}
}

// TestConfigLimits: absurd numbers are refused with the field and the
// limit before anything is multiplied or allocated.
func TestConfigLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"layers", func(c *Config) { c.NumLayers = 1 << 40 }, "config num_layers is 1099511627776, above the limit of 1024"},
		{"hidden", func(c *Config) { c.HiddenDim = 1<<16 + 1 }, "config hidden_dim is 65537, above the limit of 65536"},
		{"ffn", func(c *Config) { c.FFNDim = math.MaxInt }, "config ffn_dim is 9223372036854775807, above the limit of 65536"},
		{"heads", func(c *Config) { c.NumHeads = 4096 }, "config num_heads is 4096, above the limit of 1024"},
		{"head dim", func(c *Config) { c.HeadDim = 2048 }, "config attn_head_dim is 2048, above the limit of 1024"},
		{"attention width", func(c *Config) { c.NumHeads, c.HeadDim = 1024, 1024 }, "attention width num_heads*attn_head_dim = 1024*1024 = 1048576 is above the limit of 65536"},
		{"text", func(c *Config) { c.TextDim = 1 << 20 }, "config text_dim is 1048576, above the limit of 65536"},
		{"action dim", func(c *Config) { c.ActionDim = 1 << 13 }, "config action_dim is 8192, above the limit of 4096"},
		{"action tokens", func(c *Config) { c.ActionSteps = 1025 }, "config action_tokens is 1025, above the limit of 1024"},
		{"video tokens", func(c *Config) { c.VideoTokens = 1 << 17 }, "config video_tokens is 131072, above the limit of 65536"},
		{"negative", func(c *Config) { c.ContextTokens = -1 }, "config context_tokens must be positive, got -1"},
		{"eps", func(c *Config) { c.Eps = math.Inf(1) }, "config eps must be in (0, 1], got +Inf"},
		{"eps NaN", func(c *Config) { c.Eps = math.NaN() }, "config eps must be in (0, 1], got NaN"},
		{"parameter count", func(c *Config) { c.NumLayers, c.HiddenDim, c.FFNDim = 1024, 1<<16, 1<<16 },
			"config describes more than 17179869184 parameters (1024 layers, hidden 65536"},
	} {
		c := FullConfig()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := FullConfig().Validate(); err != nil {
		t.Errorf("released configuration: %v", err)
	}
	// The limits are checked when a file's configuration is read, before
	// the tensor table is looked at.
	m, meta := tinyTensors(t)
	meta[ConfigMetadataKey] = `{"hidden_dim":64,"ffn_dim":128,"num_heads":2,"attn_head_dim":16,"num_layers":1000000,"text_dim":32,"freq_dim":256,"action_dim":7}`
	_, err := ParseWeights(context.Background(), "w.safetensors", image(t, meta, m, nil), nil)
	if err == nil || !strings.Contains(err.Error(), "w.safetensors: cpu: config num_layers is 1000000, above the limit of 1024") {
		t.Errorf("absurd num_layers in the metadata: %v", err)
	}
	meta[ConfigMetadataKey] = `{"hidden_dim":1e30}`
	_, err = ParseWeights(context.Background(), "w.safetensors", image(t, meta, m, nil), nil)
	if err == nil || !strings.Contains(err.Error(), "metadata fastwam_config") {
		t.Errorf("non-integer hidden_dim in the metadata: %v", err)
	}
}

// TestCheckedArithmetic: the counting arithmetic reports overflow instead
// of wrapping.
func TestCheckedArithmetic(t *testing.T) {
	var k checked
	if got := k.mul(1<<20, 1<<20, 1<<20); got != 1<<60 || k.overflow {
		t.Errorf("mul(2^20, 2^20, 2^20) = %d, overflow %v", got, k.overflow)
	}
	if k.mul(1<<32, 1<<31); !k.overflow {
		t.Error("2^32 * 2^31 did not overflow")
	}
	k = checked{}
	if k.sum(math.MaxInt, 1); !k.overflow {
		t.Error("MaxInt + 1 did not overflow")
	}
	k = checked{}
	if k.mul(0, math.MaxInt, math.MaxInt); k.overflow {
		t.Error("0 * MaxInt * MaxInt overflowed")
	}
}

// TestNumParamsMatchesTheTensorList: the closed-form count Validate bounds
// is the number of parameters the loader allocates, and both agree with the
// independent reference (golden/test_reference.py, test_param_counts:
// 824 tensors and 1,020,886,023 parameters for the released model, 68 and
// 120,647 for the tiny one).
func TestNumParamsMatchesTheTensorList(t *testing.T) {
	tiny, _ := fs.ReadFile(golden.Tiny(), "tiny/config.json")
	tc, err := parseConfig(tiny)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{FullConfig(), tc.withDefaults(), fuzzSeedConfig()} {
		sum := 0
		for _, p := range params(c, nil) {
			sum += p.numel()
		}
		n, ok := c.numParams()
		if !ok || n != sum {
			t.Errorf("%+v: numParams %d (ok %v), tensor list %d", c, n, ok, sum)
		}
	}
	for _, want := range []struct {
		c               Config
		tensors, params int
	}{{FullConfig(), 824, 1_020_886_023}, {tc.withDefaults(), 68, 120_647}} {
		n, _ := want.c.numParams()
		if n != want.params || len(params(want.c, nil)) != want.tensors {
			t.Errorf("%d layers: %d parameters in %d tensors, want %d in %d", want.c.NumLayers, n, len(params(want.c, nil)), want.params, want.tensors)
		}
	}
}

// TestLoadStopsAtCancellation: a cancelled context stops the load before
// the next tensor.
func TestLoadStopsAtCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join("..", "..", "golden", "tiny", "weights.safetensors")
	_, err := LoadWeights(ctx, path, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "weights.safetensors stopped after 0 of 68 tensors") {
		t.Errorf("got %v, want context.Canceled after 0 of 68 tensors", err)
	}
	if _, err := Load(ctx, path, nil, Options{BLAS: "gonum"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Load: %v", err)
	}
}

// TestConfigFileBesideIsBounded: a huge config.json beside the weights
// is refused without reading it whole.
func TestConfigFileBesideIsBounded(t *testing.T) {
	m, _ := tinyTensors(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(p, image(t, nil, m, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	big := append([]byte(`{"hidden_dim":64,`), make([]byte, MaxConfigBytes)...)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadWeights(context.Background(), p, nil)
	if err == nil || !strings.Contains(err.Error(), "config.json is 1048593 bytes, more than the 1048576 allowed for a configuration JSON file") {
		t.Errorf("huge config.json: %v", err)
	}
}

// TestWeightsFilesThatAreNotFiles: a FIFO given as the weights or found as
// the configuration beside them is refused at once (os.Open would wait for
// a writer forever).
func TestWeightsFilesThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "w.safetensors")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadWeights(context.Background(), fifo, nil)
	if want := "safetensors: " + fifo + " is a named pipe (FIFO), want a safetensors weights file: not a regular file"; err == nil || err.Error() != want {
		t.Errorf("FIFO weights: got %v\nwant %s", err, want)
	}
	m, _ := tinyTensors(t)
	p := filepath.Join(dir, "x.safetensors")
	if err := os.WriteFile(p, image(t, nil, m, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "x.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadWeights(context.Background(), p, nil)
	if want := "cpu: configuration: " + filepath.Join(dir, "x.json") + " is a named pipe (FIFO), want a configuration JSON file: not a regular file"; err == nil || err.Error() != want {
		t.Errorf("FIFO config: got %v\nwant %s", err, want)
	}
}

// TestDuplicateConfigKey: a configuration naming a key twice is refused,
// in the metadata and beside the weights (a JSON decoder keeps the last
// copy silently).
func TestDuplicateConfigKey(t *testing.T) {
	m, meta := tinyTensors(t)
	tiny := meta[ConfigMetadataKey]
	dup := strings.Replace(tiny, "{", `{"num_layers":1,`, 1)
	md := maps.Clone(meta)
	md[ConfigMetadataKey] = dup
	_, err := ParseWeights(context.Background(), "dup.safetensors", image(t, md, m, nil), nil)
	if want := `dup.safetensors: metadata fastwam_config: cpu: configuration JSON: the key "num_layers" appears twice in one object`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("metadata: got %v\nwant %s...", err, want)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(p, image(t, nil, m, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(dup), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadWeights(context.Background(), p, nil)
	if want := filepath.Join(dir, "config.json") + `: cpu: configuration JSON: the key "num_layers" appears twice in one object`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("config.json: got %v\nwant %s...", err, want)
	}
}

// TestCompareNames: numbers in names compare as numbers, and the order is
// total (names equal but for leading zeros still differ).
func TestCompareNames(t *testing.T) {
	want := []string{"a", "a.01", "a.1", "a.2", "a.10", "a.10.b", "a.10b", "b.9", "b.9.x", "b.10", "blocks.2.x", "blocks.10.a"}
	r := rand.New(rand.NewPCG(9, 9))
	for range 50 {
		got := slices.Clone(want)
		r.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortFunc(got, compareNames)
		if !slices.Equal(got, want) {
			t.Fatalf("sorted %v, want %v", got, want)
		}
	}
}
