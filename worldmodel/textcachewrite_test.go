package worldmodel

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteTextEntry writes entries with WriteTextEntry and reads them
// back with TextCache.Lookup: F32 values exactly, BF16 values rounded to
// the nearest bfloat16 (ties to even); and checks that what ReadTextEntry
// would refuse is refused before anything is written.
func TestWriteTextEntry(t *testing.T) {
	const task, rows, dim, n = "pick up the book", 6, 4, 3
	text := make([]float32, rows*dim)
	for i := range n * dim {
		text[i] = float32(i)*0.37 - 2
	}
	// Rounding cases (the bfloat16 spacing at 1 is 2^-7): 1 + 2^-8 is a
	// tie, to even 1; 1 + 3·2^-8 a tie, to even 1 + 2^-6; 1 + 2^-8 + 2^-20
	// rounds up to 1 + 2^-7.
	text[0], text[1], text[2] = 1+1.0/256, 1+3.0/256, 1+1.0/256+1.0/(1<<20)
	wantBF16 := []float32{1, 1 + 4.0/256, 1 + 2.0/256}
	for _, bf16 := range []bool{false, true} {
		dir := t.TempDir()
		e := &TextEntry{Prompt: Prompt(task), Tokens: n, Encoder: "enc", Rows: rows, Dim: dim, Text: text}
		var buf bytes.Buffer
		if err := WriteTextEntry(&buf, e, bf16); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, TextCacheFileName(Prompt(task))), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := TextCache{Dir: dir, Rows: rows, Dim: dim, Encoder: "enc"}.Lookup(task)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tokens != n || got.Encoder != "enc" {
			t.Errorf("bf16 %v: %d tokens, encoder %q", bf16, got.Tokens, got.Encoder)
		}
		for i, v := range got.Text {
			switch {
			case !bf16 && v != text[i]:
				t.Errorf("f32: value %d is %v, want %v", i, v, text[i])
			case bf16 && i < len(wantBF16) && v != wantBF16[i]:
				t.Errorf("bf16: value %d is %v, want %v (rounded from %v)", i, v, wantBF16[i], text[i])
			case bf16 && math.Abs(float64(v-text[i])) > math.Abs(float64(text[i]))/256:
				t.Errorf("bf16: value %d is %v, more than half a bfloat16 step from %v", i, v, text[i])
			}
		}
	}
	good := func() *TextEntry {
		return &TextEntry{Prompt: "p", Tokens: n, Encoder: "enc", Rows: rows, Dim: dim, Text: append([]float32(nil), text...)}
	}
	for _, c := range []struct {
		name string
		edit func(e *TextEntry)
		bf16 bool
		want string
	}{
		{"nonzero padding", func(e *TextEntry) { e.Text[n*dim+1] = 0.5 }, true, "value [3][1] is 0.5: the rows from 3 (the token count) on must be zero"},
		{"no tokens", func(e *TextEntry) { e.Tokens = 0 }, true, "text entry with 0 tokens: want 1..6"},
		{"too many tokens", func(e *TextEntry) { e.Tokens = 7 }, true, "text entry with 7 tokens: want 1..6"},
		{"no encoder", func(e *TextEntry) { e.Encoder = "" }, false, "without an encoder"},
		{"short text", func(e *TextEntry) { e.Text = e.Text[:5] }, false, "text entry of 5 values: want 6 × 4 = 24"},
		{"no rows", func(e *TextEntry) { e.Rows = 0 }, false, "text entry of 0 × 4"},
		{"NaN", func(e *TextEntry) { e.Text[2] = float32(math.NaN()) }, false, "value [0][2] is NaN: want a finite number"},
		{"NaN in bf16", func(e *TextEntry) { e.Text[2] = float32(math.NaN()) }, true, "value [0][2] is NaN: want a finite number within bfloat16's range"},
		{"beyond bf16", func(e *TextEntry) { e.Text[3] = math.MaxFloat32 }, true, "value [0][3] is 3.4028235e+38: want a finite number within bfloat16's range"},
	} {
		e := good()
		c.edit(e)
		var buf bytes.Buffer
		err := WriteTextEntry(&buf, e, c.bf16)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written", c.name, buf.Len())
		}
	}
}
