package worldmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/fastwam/actionexpert/safetensors"
)

// PromptPrefix is upstream's DEFAULT_PROMPT (spec §3.1): the prompt is this
// followed by the task's instruction, unchanged.
const PromptPrefix = "A video recorded from a robot's point of view executing the following instruction: "

// Prompt is the text encoder's prompt for a task's instruction (spec §3.1).
func Prompt(task string) string { return PromptPrefix + task }

// The text cache's file format (docs/world-model.md): one safetensors file
// per prompt, named TextCacheFileName(prompt), holding one tensor,
// TextCacheTensor, of shape [Lt, T] and dtype BF16 or F32, whose rows from
// the token count on are zero, and these __metadata__ strings.
const (
	TextCacheFormat  = "fastwam-text-cache/1" // the "format" value
	TextCacheTensor  = "context"
	TextCacheExt     = ".text.safetensors"
	metaFormat       = "format"
	metaPrompt       = "prompt"        // the prompt, exactly
	metaPromptSHA256 = "prompt_sha256" // lower-case hex SHA-256 of the prompt's UTF-8 bytes
	metaTokens       = "tokens"        // n: the real tokens, </s> included, 1..Lt
	metaEncoder      = "encoder"       // the text encoder's identity
)

// TextCacheFileName is the name of a prompt's entry in a cache directory:
// the lower-case hex SHA-256 of the prompt (as upstream names its cache
// files) and TextCacheExt.
func TextCacheFileName(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	return hex.EncodeToString(sum[:]) + TextCacheExt
}

// ErrNoTextEntry is returned (wrapped) when the cache has no entry for an
// instruction.
var ErrNoTextEntry = errors.New("no text cache entry")

// TextCache is a directory of per-instruction text embeddings, the
// output of the text encoder (spec §3.4).
type TextCache struct {
	Dir       string
	Rows, Dim int    // Lt and T the model expects (TextRows, TextDim)
	Encoder   string // when not empty, an entry's encoder must be exactly this
}

// TextEntry is one instruction's text rows.
type TextEntry struct {
	Prompt  string
	Tokens  int    // n: rows 0..n-1 are the encoder's, rows n..Lt-1 zero
	Encoder string // the encoder's identity, as the file states it
	Rows    int    // Lt
	Dim     int    // T
	Text    []float32
}

// Lookup reads the entry of a task's instruction: the file
// TextCacheFileName(Prompt(task)) in Dir. A missing file is a miss,
// ErrNoTextEntry, naming the instruction and the file expected; a file
// that is there is read as ReadTextEntry reads it.
func (c TextCache) Lookup(task string) (*TextEntry, error) {
	prompt := Prompt(task)
	path := filepath.Join(c.Dir, TextCacheFileName(prompt))
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("worldmodel: instruction %q: %w: %s does not exist (write it from the encoder's output with golden/text_cache.py)", task, ErrNoTextEntry, path)
	}
	return ReadTextEntry(path, prompt, c.Rows, c.Dim, c.Encoder)
}

// ReadTextEntry reads a text cache file and checks it against the format:
// exactly one tensor, TextCacheTensor, BF16 or F32, of shape [rows, dim];
// the metadata's format, its prompt equal to prompt and its SHA-256 to the
// prompt's (and to the file's name when that has the cache's form); the
// token count n in 1..rows; every value finite; and every value of rows n
// and after zero. A nonzero padding value is refused rather than zeroed:
// upstream's model sees zeros there (spec §3.3), and a file whose padding
// is not zero was not written by golden/text_cache.py, which zeroes it.
// When encoder is not empty the file's encoder must equal it.
func ReadTextEntry(path, prompt string, rows, dim int, encoder string) (*TextEntry, error) {
	if rows < 1 || dim < 1 || rows > 1<<12 || dim > 1<<16 {
		return nil, fmt.Errorf("worldmodel: text of %d × %d: want 1..%d rows of 1..%d values", rows, dim, 1<<12, 1<<16)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: text cache: %w", err)
	}
	defer f.Close()
	e, err := readTextEntry(f, prompt, rows, dim, encoder)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: text cache %s: %w", path, err)
	}
	if base := filepath.Base(path); len(base) == 64+len(TextCacheExt) && base != TextCacheFileName(prompt) {
		return nil, fmt.Errorf("worldmodel: text cache %s: the file is named for another prompt's SHA-256 (want %s)", path, TextCacheFileName(prompt))
	}
	return e, nil
}

func readTextEntry(f *safetensors.File, prompt string, rows, dim int, encoder string) (*TextEntry, error) {
	meta := f.Metadata()
	if got := meta[metaFormat]; got != TextCacheFormat {
		return nil, fmt.Errorf("metadata %q is %q: want %q", metaFormat, got, TextCacheFormat)
	}
	if got := meta[metaPrompt]; got != prompt {
		return nil, fmt.Errorf("metadata %q is %q: want the prompt %q", metaPrompt, got, prompt)
	}
	sum := sha256.Sum256([]byte(prompt))
	if got, want := meta[metaPromptSHA256], hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("metadata %q is %q: want %s, the prompt's", metaPromptSHA256, got, want)
	}
	n, err := strconv.Atoi(meta[metaTokens])
	if err != nil || n < 1 || n > rows {
		return nil, fmt.Errorf("metadata %q is %q: want the token count, 1..%d", metaTokens, meta[metaTokens], rows)
	}
	enc, ok := meta[metaEncoder]
	if !ok || enc == "" {
		return nil, fmt.Errorf("metadata %q is missing: want the text encoder's identity", metaEncoder)
	}
	if encoder != "" && enc != encoder {
		return nil, fmt.Errorf("written by the encoder %q: want %q", enc, encoder)
	}
	if names := f.Names(); !slices.Equal(names, []string{TextCacheTensor}) {
		return nil, fmt.Errorf("tensors %q: want exactly one, %q", names, TextCacheTensor)
	}
	info, _ := f.Info(TextCacheTensor)
	if info.DType != "BF16" && info.DType != "F32" {
		return nil, fmt.Errorf("%q has dtype %s: want BF16 (the encoder's own numbers) or F32", TextCacheTensor, info.DType)
	}
	if !slices.Equal(info.Shape, []int{rows, dim}) {
		return nil, fmt.Errorf("%q has shape %v: want [%d, %d]", TextCacheTensor, info.Shape, rows, dim)
	}
	text, err := f.Float32(TextCacheTensor, make([]float32, rows*dim))
	if err != nil {
		return nil, err
	}
	for i, v := range text {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%q[%d][%d] is %v: want finite values", TextCacheTensor, i/dim, i%dim, v)
		}
		if i >= n*dim && v != 0 {
			return nil, fmt.Errorf("%q[%d][%d] is %v: the rows from %d (the token count) on must be zero, as the model sees them",
				TextCacheTensor, i/dim, i%dim, v, n)
		}
	}
	return &TextEntry{Prompt: prompt, Tokens: n, Encoder: enc, Rows: rows, Dim: dim, Text: text}, nil
}
