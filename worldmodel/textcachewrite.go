package worldmodel

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// WriteTextEntry writes e as a text cache file (the format ReadTextEntry
// reads) to w: the tensor TextCacheTensor [e.Rows, e.Dim], stored as BF16
// when bf16 (each value rounded to the nearest bfloat16, ties to even) or
// as F32, and the metadata of the format (prompt, its SHA-256, the token
// count, the encoder). It refuses, before writing anything, an entry that
// ReadTextEntry would refuse: sizes out of its bounds, a token count
// outside 1..Rows, no encoder, a value that is not finite (or overflows
// bfloat16), or a nonzero value in the padding rows. The file's name in a
// cache directory is TextCacheFileName(e.Prompt).
func WriteTextEntry(w io.Writer, e *TextEntry, bf16 bool) error {
	if e.Rows < 1 || e.Dim < 1 || e.Rows > 1<<12 || e.Dim > 1<<16 {
		return fmt.Errorf("worldmodel: text entry of %d × %d: want 1..%d rows of 1..%d values", e.Rows, e.Dim, 1<<12, 1<<16)
	}
	if len(e.Text) != e.Rows*e.Dim {
		return fmt.Errorf("worldmodel: text entry of %d values: want %d × %d = %d", len(e.Text), e.Rows, e.Dim, e.Rows*e.Dim)
	}
	if e.Tokens < 1 || e.Tokens > e.Rows {
		return fmt.Errorf("worldmodel: text entry with %d tokens: want 1..%d", e.Tokens, e.Rows)
	}
	if e.Encoder == "" {
		return fmt.Errorf("worldmodel: text entry without an encoder: want the text encoder's identity")
	}
	size, dtype := 4, "F32"
	if bf16 {
		size, dtype = 2, "BF16"
	}
	data := make([]byte, len(e.Text)*size)
	for i, v := range e.Text {
		if i >= e.Tokens*e.Dim && v != 0 {
			return fmt.Errorf("worldmodel: text entry: value [%d][%d] is %v: the rows from %d (the token count) on must be zero", i/e.Dim, i%e.Dim, v, e.Tokens)
		}
		if bf16 {
			b := bfloat16Bits(v)
			if b&0x7f80 == 0x7f80 {
				return fmt.Errorf("worldmodel: text entry: value [%d][%d] is %v: want a finite number within bfloat16's range", i/e.Dim, i%e.Dim, v)
			}
			binary.LittleEndian.PutUint16(data[2*i:], b)
			continue
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("worldmodel: text entry: value [%d][%d] is %v: want a finite number", i/e.Dim, i%e.Dim, v)
		}
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	sum := sha256.Sum256([]byte(e.Prompt))
	header, err := json.Marshal(map[string]any{
		"__metadata__": map[string]string{
			metaFormat: TextCacheFormat, metaPrompt: e.Prompt, metaPromptSHA256: hex.EncodeToString(sum[:]),
			metaTokens: strconv.Itoa(e.Tokens), metaEncoder: e.Encoder,
		},
		TextCacheTensor: map[string]any{"dtype": dtype, "shape": []int{e.Rows, e.Dim}, "data_offsets": []int{0, len(data)}},
	})
	if err != nil {
		return fmt.Errorf("worldmodel: text entry header: %w", err)
	}
	for len(header)%8 != 0 { // the data starts 8-byte aligned (spaces are allowed)
		header = append(header, ' ')
	}
	var n8 [8]byte
	binary.LittleEndian.PutUint64(n8[:], uint64(len(header)))
	for _, b := range [][]byte{n8[:], header, data} {
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("worldmodel: writing a text entry: %w", err)
		}
	}
	return nil
}

// bfloat16Bits rounds v to the nearest bfloat16 (ties to even), as
// PyTorch's .to(torch.bfloat16) does for finite values; NaN stays NaN.
func bfloat16Bits(v float32) uint16 {
	u := math.Float32bits(v)
	if v != v {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}
