package golden

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"slices"
)

// Array is one array of an .npz file, read as float32 (whatever its
// numeric dtype), with its row-major shape.
type Array struct {
	Shape []int
	Data  []float32
}

// ParseArrays reads the arrays named by keys from an .npz image, for
// goldens that are not in the single-step format of Parse (such as the
// real-time chunking chain, tiny/rtc_chunks.npz); name is used in messages.
//
// The image is as hostile as Parse's: every named array must be present,
// once; all their headers are read and checked against their zip entries
// (and the entries against the archive) before any data is allocated, each
// member is inflated no further than its declared size, and its values must
// be finite. Other members are not read. Errors name the file, the array and
// the reason. Loading stops when ctx is cancelled.
func ParseArrays(ctx context.Context, name string, b []byte, keys ...string) (map[string]Array, error) {
	a, err := openArchive(name, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, err
	}
	l := &loader{ctx: ctx, a: a}
	heads := make([]*array, len(keys))
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			return nil, fmt.Errorf("golden: %s: array %q requested twice", name, k)
		}
		heads[i] = l.need(k)
	}
	if l.err != nil {
		return nil, l.err
	}
	out := make(map[string]Array, len(keys))
	for i, x := range heads {
		v := l.floats(x)
		if l.err != nil {
			return nil, l.err
		}
		out[keys[i]] = Array{Shape: slices.Clone(x.header.shape), Data: v}
	}
	return out, nil
}

// LoadTinyArrays is ParseArrays on one of the embedded tiny files (see
// Tiny).
func LoadTinyArrays(ctx context.Context, name string, keys ...string) (map[string]Array, error) {
	b, err := fs.ReadFile(Tiny(), name)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	return ParseArrays(ctx, name, b, keys...)
}

// Rows checks that the array's shape is want (a negative entry matches any
// size) and returns its data cut along the first axis, one slice (sharing
// Data) per index of that axis: for goldens whose first axis counts chunks
// or steps.
func (a Array) Rows(want ...int) ([][]float32, error) {
	if len(a.Shape) != len(want) {
		return nil, fmt.Errorf("golden: array of shape %v, want %v", a.Shape, want)
	}
	for i, w := range want {
		if w >= 0 && a.Shape[i] != w {
			return nil, fmt.Errorf("golden: array of shape %v, want %v", a.Shape, want)
		}
	}
	if len(a.Shape) == 0 {
		return nil, fmt.Errorf("golden: a scalar array has no rows, want shape %v", want)
	}
	n := 1
	for _, d := range a.Shape[1:] {
		n *= d
	}
	return split(a.Data, n), nil
}
