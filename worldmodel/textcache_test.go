package worldmodel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// textValue is the test entries' value at (row, column): exact in bf16.
func textValue(r, c, dim int) float32 { return float32((r*dim+c)%251)/8 - 15 }

// textFile is a text cache file to write; the zero fields take the
// defaults of a good file.
type textFile struct {
	prompt  string
	rows    int
	dim     int
	n       int
	dtype   string // "BF16" (default) or "F32" or another
	meta    map[string]string
	poke    func(v []float32) // changes the values before writing
	extra   bool              // a second tensor
	name    string            // the file name (default: TextCacheFileName(prompt))
	dropKey string            // a metadata key to leave out
}

func writeTextFile(t *testing.T, dir string, f textFile) string {
	t.Helper()
	if f.dtype == "" {
		f.dtype = "BF16"
	}
	meta := map[string]string{
		"format": TextCacheFormat, "prompt": f.prompt, "tokens": strconv.Itoa(f.n), "encoder": "test-encoder",
		"prompt_sha256": strings.TrimSuffix(TextCacheFileName(f.prompt), TextCacheExt),
	}
	for k, v := range f.meta {
		meta[k] = v
	}
	delete(meta, f.dropKey)
	v := make([]float32, f.rows*f.dim)
	for r := range f.n {
		for c := range f.dim {
			v[r*f.dim+c] = textValue(r, c, f.dim)
		}
	}
	if f.poke != nil {
		f.poke(v)
	}
	var data []byte
	for _, x := range v {
		if f.dtype == "F32" {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
		} else {
			data = binary.LittleEndian.AppendUint16(data, uint16(math.Float32bits(x)>>16))
		}
	}
	header := map[string]any{"__metadata__": meta,
		"context": map[string]any{"dtype": f.dtype, "shape": []int{f.rows, f.dim}, "data_offsets": []int{0, len(data)}}}
	if f.extra {
		header["other"] = map[string]any{"dtype": "F32", "shape": []int{1}, "data_offsets": []int{len(data), len(data) + 4}}
		data = append(data, 0, 0, 0, 0)
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	b = append(append(b, h...), data...)
	name := f.name
	if name == "" {
		name = TextCacheFileName(f.prompt)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func checkEntry(t *testing.T, e *TextEntry, rows, dim, n int) {
	t.Helper()
	if e.Tokens != n || e.Rows != rows || e.Dim != dim || len(e.Text) != rows*dim {
		t.Fatalf("entry of %d tokens, %d × %d, %d values: want %d tokens, %d × %d", e.Tokens, e.Rows, e.Dim, len(e.Text), n, rows, dim)
	}
	for r := range rows {
		for c := range dim {
			want := float32(0)
			if r < n {
				want = textValue(r, c, dim)
			}
			if got := e.Text[r*dim+c]; got != want {
				t.Fatalf("text[%d][%d] = %v, want %v", r, c, got, want)
			}
		}
	}
}

// TestTextCacheLookup reads a BF16 and an F32 entry by instruction, and
// reports a miss with ErrNoTextEntry, naming the instruction.
func TestTextCacheLookup(t *testing.T) {
	dir := t.TempDir()
	const task = "put both the alphabet soup and the tomato sauce in the basket"
	writeTextFile(t, dir, textFile{prompt: Prompt(task), rows: 8, dim: 6, n: 3})
	writeTextFile(t, dir, textFile{prompt: Prompt("open the drawer"), rows: 8, dim: 6, n: 8, dtype: "F32"})
	c := TextCache{Dir: dir, Rows: 8, Dim: 6, Encoder: "test-encoder"}
	e, err := c.Lookup(task)
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, e, 8, 6, 3)
	if e.Prompt != "A video recorded from a robot's point of view executing the following instruction: "+task || e.Encoder != "test-encoder" {
		t.Errorf("entry's prompt %q, encoder %q", e.Prompt, e.Encoder)
	}
	e, err = c.Lookup("open the drawer")
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, e, 8, 6, 8)
	_, err = c.Lookup("open the drawer ") // not the same instruction
	if !errors.Is(err, ErrNoTextEntry) || !strings.Contains(err.Error(), `instruction "open the drawer ": no text cache entry`) {
		t.Errorf("miss: got %v", err)
	}
}

// TestTextCacheRefusesBadFiles checks every refusal names the problem.
func TestTextCacheRefusesBadFiles(t *testing.T) {
	const task = "pick up the book"
	p := Prompt(task)
	for _, c := range []struct {
		name string
		f    textFile
		want string
	}{
		{"nonzero padding", textFile{poke: func(v []float32) { v[5*6+2] = 0.25 }}, `"context"[5][2] is 0.25: the rows from 3 (the token count) on must be zero`},
		{"NaN", textFile{poke: func(v []float32) { v[1] = float32(math.NaN()) }}, `"context"[0][1] is NaN: want finite values`},
		{"format", textFile{meta: map[string]string{"format": "other/1"}}, `metadata "format" is "other/1": want "fastwam-text-cache/1"`},
		{"other prompt", textFile{meta: map[string]string{"prompt": Prompt("pick up the cup")}}, `metadata "prompt" is`},
		{"sha", textFile{meta: map[string]string{"prompt_sha256": "00"}}, `metadata "prompt_sha256" is "00"`},
		{"tokens zero", textFile{meta: map[string]string{"tokens": "0"}}, `metadata "tokens" is "0": want the token count, 1..8`},
		{"tokens big", textFile{meta: map[string]string{"tokens": "9"}}, `metadata "tokens" is "9"`},
		{"no encoder", textFile{dropKey: "encoder"}, `metadata "encoder" is missing`},
		{"other encoder", textFile{meta: map[string]string{"encoder": "fp32-umt5"}}, `written by the encoder "fp32-umt5": want "test-encoder"`},
		{"F16", textFile{dtype: "F16"}, `"context" has dtype F16: want BF16`},
		{"shape", textFile{rows: 4}, `"context" has shape [4 6]: want [8, 6]`},
		{"extra tensor", textFile{extra: true}, `tensors ["context" "other"]: want exactly one, "context"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := c.f
			f.prompt, f.n = p, 3
			if f.rows == 0 {
				f.rows = 8
			}
			f.dim = 6
			writeTextFile(t, dir, f)
			_, err := TextCache{Dir: dir, Rows: 8, Dim: 6, Encoder: "test-encoder"}.Lookup(task)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	// A file holding another prompt's entry under this prompt's name.
	dir := t.TempDir()
	writeTextFile(t, dir, textFile{prompt: Prompt("pick up the cup"), rows: 8, dim: 6, n: 3, name: TextCacheFileName(p)})
	if _, err := (TextCache{Dir: dir, Rows: 8, Dim: 6}).Lookup(task); err == nil || !strings.Contains(err.Error(), `metadata "prompt" is "A video recorded from a robot's point of view executing the following instruction: pick up the cup"`) {
		t.Errorf("another prompt's file: got %v", err)
	}
	// A truncated file: the safetensors reader's error.
	path := writeTextFile(t, dir, textFile{prompt: p, rows: 8, dim: 6, n: 3})
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, b[:len(b)-2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (TextCache{Dir: dir, Rows: 8, Dim: 6}).Lookup(task); err == nil || !strings.Contains(err.Error(), "text cache: safetensors:") {
		t.Errorf("truncated file: got %v", err)
	}
}

// TestTextCacheTool runs golden/text_cache.py on an upstream-style .pt
// file made here (bf16 context with nonzero padding, the mask of 5
// tokens), and reads the entry it writes: padding zeroed, values kept.
func TestTextCacheTool(t *testing.T) {
	python := python3With(t, "torch, numpy", "install python3-torch for golden/text_cache.py's test")
	const task, rows, dim, n = "turn on the stove", 128, 16, 5
	prompt := Prompt(task)
	upstream, out := t.TempDir(), t.TempDir()
	sha := strings.TrimSuffix(TextCacheFileName(prompt), TextCacheExt)
	script := `
import sys, torch
rows, dim, n = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
k = torch.arange(rows * dim, dtype=torch.float64).reshape(rows, dim)
ctx = ((k % 251) / 8 - 15).to(torch.bfloat16)
ctx[n:] += 0.5  # the encoder's raw outputs in the padding rows
mask = torch.zeros(rows, dtype=torch.bool)
mask[:n] = True
torch.save({"context": ctx, "mask": mask}, sys.argv[1])
`
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pt := filepath.Join(upstream, sha+".t5_len128.wan22ti2v5b.pt")
	if b, err := exec.CommandContext(ctx, python, "-c", script, pt, strconv.Itoa(rows), strconv.Itoa(dim), strconv.Itoa(n)).CombinedOutput(); err != nil {
		t.Fatalf("making the .pt: %v\n%s", err, b)
	}
	tool := filepath.Join("..", "golden", "text_cache.py")
	cmd := exec.CommandContext(ctx, python, tool, "--cache-dir", upstream, "-o", out, "--task", task, "--encoder", "test-encoder")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", tool, err, b)
	}
	e, err := TextCache{Dir: out, Rows: rows, Dim: dim, Encoder: "test-encoder"}.Lookup(task)
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, e, rows, dim, n)
	// A task with no upstream file: the tool says which.
	cmd = exec.CommandContext(ctx, python, tool, "--cache-dir", upstream, "-o", out, "--task", "no such task")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "no upstream cache file for: 'no such task'") {
		t.Errorf("missing upstream file: %v\n%s", err, b)
	}
}
