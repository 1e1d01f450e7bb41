package worldmodel

import "fmt"

// Text context sizes of the released model (spec §0, §3).
const (
	TextRows = 128  // Lt: the tokenizer's max_length
	TextDim  = 4096 // T: UMT5-XXL's width
)

// AssembleContext writes the [1, Lt+1, T] context (spec §2.4) into dst:
// the Lt text rows (text, [Lt, T] row-major, padding rows already zero as
// the text cache guarantees) then the proprio token (row, [T]) as the last
// row. T is len(row); Lt is len(text)/T.
func AssembleContext(dst, text, row []float32) error {
	t := len(row)
	if t < 1 {
		return fmt.Errorf("worldmodel: empty proprio token")
	}
	if len(text) < t || len(text)%t != 0 {
		return fmt.Errorf("worldmodel: text of %d values is not a whole number (≥ 1) of rows of the token's %d", len(text), t)
	}
	if len(dst) != len(text)+t {
		return fmt.Errorf("worldmodel: context buffer of %d values: want (%d + 1) × %d = %d", len(dst), len(text)/t, t, len(text)+t)
	}
	copy(dst, text)
	copy(dst[len(text):], row)
	return nil
}

// ContextMask sets the context mask (spec §3.3): every row, the zeroed
// padding rows included, is attended, so the mask is all true.
func ContextMask(dst []bool) {
	for i := range dst {
		dst[i] = true
	}
}
