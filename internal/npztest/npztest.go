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
	members := make([]Member, len(arrays))
	for i, a := range arrays {
		npy, err := NPY(a)
		if err != nil {
			return nil, err
		}
		members[i] = Member{Name: a.Name + ".npy", Data: npy}
	}
	return Zip(members...)
}

// Member is one zip member of an archive written by Zip: Data stored, or
// deflated when Deflate is set. Raw, when set, replaces the entry: its
// bytes are written as the compressed data and Header's sizes, CRC and
// method are written as they are (for entries that lie about their size).
type Member struct {
	Name    string
	Data    []byte
	Deflate bool
	Raw     []byte
	Header  *zip.FileHeader
}

// Zip writes the members, in order and with their names as given
// (duplicates included), as a zip archive.
func Zip(members ...Member) ([]byte, error) {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, m := range members {
		if m.Raw != nil {
			h := *m.Header
			h.Name = m.Name
			w, err := z.CreateRaw(&h)
			if err != nil {
				return nil, err
			}
			if _, err := w.Write(m.Raw); err != nil {
				return nil, err
			}
			continue
		}
		method := zip.Store
		if m.Deflate {
			method = zip.Deflate
		}
		w, err := z.CreateHeader(&zip.FileHeader{Name: m.Name, Method: method})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(m.Data); err != nil {
			return nil, err
		}
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Header returns the .npy header numpy writes for a, version 1.0: the dict
// literal with its keys sorted, padded with spaces and a newline so that
// the data starts at a multiple of 64.
func Header(a Array) (string, error) {
	descr, n := "", 0
	switch v := a.Data.(type) {
	case []float32:
		descr, n = "<f4", len(v)
	case []float64:
		descr, n = "<f8", len(v)
	case []bool:
		descr, n = "|b1", len(v)
	case []int64:
		descr, n = "<i8", len(v)
	default:
		return "", fmt.Errorf("npztest: %s: unsupported data %T", a.Name, a.Data)
	}
	want := 1
	dims := make([]string, len(a.Shape))
	for i, d := range a.Shape {
		want *= d
		dims[i] = fmt.Sprint(d)
	}
	if want != n {
		return "", fmt.Errorf("npztest: %s: shape %v holds %d elements, data has %d", a.Name, a.Shape, want, n)
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
	return header + "\n", nil
}

// Payload returns the little-endian data of a.
func Payload(a Array) ([]byte, error) {
	var payload []byte
	switch v := a.Data.(type) {
	case []float32:
		for _, x := range v {
			payload = binary.LittleEndian.AppendUint32(payload, math.Float32bits(x))
		}
	case []float64:
		for _, x := range v {
			payload = binary.LittleEndian.AppendUint64(payload, math.Float64bits(x))
		}
	case []bool:
		for _, x := range v {
			b := byte(0)
			if x {
				b = 1
			}
			payload = append(payload, b)
		}
	case []int64:
		for _, x := range v {
			payload = binary.LittleEndian.AppendUint64(payload, uint64(x))
		}
	default:
		return nil, fmt.Errorf("npztest: %s: unsupported data %T", a.Name, a.Data)
	}
	return payload, nil
}

// Raw assembles a .npy image of the given format version (1, 2 or 3) from
// a header text, written as it is, and the data.
func Raw(version int, header string, data []byte) []byte {
	out := []byte("\x93NUMPY")
	out = append(out, byte(version), 0)
	if version == 1 {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(header)))
	} else {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(header)))
	}
	out = append(out, header...)
	return append(out, data...)
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

// NPY encodes one .npy (format 1.0) image as numpy.save does.
func NPY(a Array) ([]byte, error) {
	header, err := Header(a)
	if err != nil {
		return nil, err
	}
	payload, err := Payload(a)
	if err != nil {
		return nil, err
	}
	return Raw(1, header, payload), nil
}
