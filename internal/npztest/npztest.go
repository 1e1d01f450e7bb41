// Package npztest writes .npz archives as numpy.savez does (an
// uncompressed zip of version 1.0 .npy members named <key>.npy), for tests
// that need golden files written independently of the reader under test.
package npztest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/fastwam/actionexpert/golden"
)

// Array is one array of an archive. Data is []float32, []float64, []bool
// or []int64; Shape is row-major and its product must match len(Data).
type Array struct {
	Name  string
	Shape []int
	Data  any
}

// Bytes encodes the arrays as an .npz archive.
func Bytes(arrays ...Array) ([]byte, error) {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, a := range arrays {
		npy, err := encode(a)
		if err != nil {
			return nil, err
		}
		w, err := z.CreateHeader(&zip.FileHeader{Name: a.Name + ".npy", Method: zip.Store})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(npy); err != nil {
			return nil, err
		}
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write encodes the arrays into the file at path.
func Write(path string, arrays ...Array) error {
	b, err := Bytes(arrays...)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Bundle returns the arrays of the device bundle's golden format for a
// case: its six inputs (the mask as float32 ones and zeros) and pred as
// pred_noise.
func Bundle(c *golden.Case, pred []float32) []Array {
	mask := make([]float32, len(c.Chunk.ContextMask))
	for i, m := range c.Chunk.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	kv := []int{c.Layers, 1, c.VideoTokens, c.AttnWidth}
	return []Array{
		{"latents_action", []int{1, c.ActionTokens, c.ActionDim}, c.Latents},
		{"timestep", []int{1}, []float32{c.Timestep}},
		{"video_keys", kv, c.Chunk.VideoKeys},
		{"video_values", kv, c.Chunk.VideoValues},
		{"context", []int{1, c.ContextTokens, c.TextDim}, c.Chunk.Context},
		{"context_mask", []int{1, c.ContextTokens}, mask},
		{"pred_noise", []int{1, c.ActionTokens, c.ActionDim}, pred},
	}
}

// encode writes one .npy (format 1.0) image.
func encode(a Array) ([]byte, error) {
	var descr string
	var payload []byte
	n := 0
	switch v := a.Data.(type) {
	case []float32:
		descr, n = "<f4", len(v)
		for _, x := range v {
			payload = binary.LittleEndian.AppendUint32(payload, math.Float32bits(x))
		}
	case []float64:
		descr, n = "<f8", len(v)
		for _, x := range v {
			payload = binary.LittleEndian.AppendUint64(payload, math.Float64bits(x))
		}
	case []bool:
		descr, n = "|b1", len(v)
		for _, x := range v {
			b := byte(0)
			if x {
				b = 1
			}
			payload = append(payload, b)
		}
	case []int64:
		descr, n = "<i8", len(v)
		for _, x := range v {
			payload = binary.LittleEndian.AppendUint64(payload, uint64(x))
		}
	default:
		return nil, fmt.Errorf("npztest: %s: unsupported data %T", a.Name, a.Data)
	}
	want := 1
	dims := make([]string, len(a.Shape))
	for i, d := range a.Shape {
		want *= d
		dims[i] = fmt.Sprint(d)
	}
	if want != n {
		return nil, fmt.Errorf("npztest: %s: shape %v holds %d elements, data has %d", a.Name, a.Shape, want, n)
	}
	shape := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	shape += ")"
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	// The magic, version and length take 10 bytes; numpy pads the header
	// with spaces and a newline to a multiple of 64.
	for (10+len(header)+1)%64 != 0 {
		header += " "
	}
	header += "\n"
	out := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	out = append(out, header...)
	return append(out, payload...), nil
}
