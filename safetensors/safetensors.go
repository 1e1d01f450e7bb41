// Package safetensors reads tensors from the safetensors format that PyTorch
// users export checkpoints to: an 8-byte little-endian header length, a JSON
// header naming every tensor's dtype, shape and byte range, then the raw
// little-endian data.
//
// A File maps the data read-only and validates the whole header when it is
// opened, so a truncated or inconsistent file is reported before any tensor
// is read. Float tensors stored as F32, F16 or BF16 are read as float32
// (upcasting is exact).
package safetensors

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/internal/strictjson"
	"github.com/x448/float16"
)

// MaxHeader bounds the JSON header a file may declare (the format's own
// reference implementation refuses headers above 100 MB). A header is
// checked against the bytes really present before it is decoded, so a
// small file cannot make the reader decode more than it holds.
const MaxHeader = 100 << 20

// Info describes one tensor of a file.
type Info struct {
	Name   string
	DType  string // "F32", "F16", "BF16", ...
	Shape  []int
	Offset int64 // byte range within the data section
	Size   int64
}

// NumElements is the product of the shape (1 for a scalar).
func (i Info) NumElements() int {
	n := 1
	for _, d := range i.Shape {
		n *= d
	}
	return n
}

// File is an open safetensors file.
type File struct {
	path     string
	mapping  []byte // the whole file, mapped read-only
	data     []byte // the data section within mapping
	tensors  map[string]Info
	metadata map[string]string
}

// Open maps the file at path and validates its header.
func Open(path string) (*File, error) {
	f, size, err := regfile.Open(path, "a safetensors weights file")
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	if size < 8 {
		return nil, fmt.Errorf("safetensors: %s: file has %d bytes, too short for the 8-byte header length", path, size)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("safetensors: %s: file too large to map", path)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("safetensors: map %s: %w", path, err)
	}
	sf, err := parse(m)
	if err != nil {
		syscall.Munmap(m)
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	sf.path = path
	sf.mapping = m
	return sf, nil
}

// Parse validates an in-memory safetensors image; the File views b.
func Parse(b []byte) (*File, error) {
	f, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return f, nil
}

type entry struct {
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

func parse(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%d bytes, too short for the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeader {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit on a safetensors header", n, MaxHeader)
	}
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("header length %d does not fit a %d-byte file: at most %d bytes follow the length (truncated or not safetensors)", n, len(b), len(b)-8)
	}
	f := &File{data: b[8+n:], tensors: map[string]Info{}}
	// The header is walked in place: a value is decoded only after its size
	// has been checked, and a key seen twice is refused (a JSON decoder
	// would keep the last silently).
	type member struct {
		name string
		raw  []byte // a slice of the header
	}
	var members []member
	err := strictjson.Object(b[8:8+n], func(name string, raw []byte) error {
		if name == "__metadata__" {
			return f.readMetadata(raw)
		}
		members = append(members, member{name, raw})
		return nil
	})
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return nil, fmt.Errorf("header is not a JSON object: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	// Tensors are checked in name order so that a file with several
	// problems always reports the same one.
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	spans := make([]Info, 0, len(members))
	for _, m := range members {
		if len(m.raw) > maxEntry {
			return nil, fmt.Errorf("tensor %q: its header entry is %d bytes, more than the %d a dtype, a shape of up to %d dimensions and two offsets take",
				m.name, len(m.raw), maxEntry, maxRank)
		}
		if err := strictjson.NoDuplicates(m.raw); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", m.name, err)
		}
		var e entry
		if err := json.Unmarshal(m.raw, &e); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", m.name, err)
		}
		info, err := check(m.name, e, int64(len(f.data)))
		if err != nil {
			return nil, err
		}
		f.tensors[m.name] = info
		spans = append(spans, info)
	}
	if err := checkLayout(spans, int64(len(f.data))); err != nil {
		return nil, err
	}
	return f, nil
}

// MaxMetadataValue bounds each __metadata__ value, as written in the header
// (escapes included). The configuration it carries is a few hundred bytes;
// a configuration file beside the weights has the same bound.
const MaxMetadataValue = 1 << 20

// maxRank bounds a tensor's dimensions (numpy's NPY_MAXDIMS).
const maxRank = 64

// maxEntry bounds a tensor's header entry: its dtype, maxRank dimensions
// of up to 20 digits, two offsets, and room for spaces.
const maxEntry = 4096

// readMetadata reads the header's __metadata__ object: strings to strings,
// each value at most MaxMetadataValue bytes, no key twice.
func (f *File) readMetadata(raw []byte) error {
	f.metadata = map[string]string{}
	err := strictjson.Object(raw, func(k string, v []byte) error {
		if kind := strictjson.Kind(v); kind != "string" {
			return fmt.Errorf("%q is a JSON %s, want a string", k, kind)
		}
		if len(v) > MaxMetadataValue {
			return fmt.Errorf("%q is a %d-byte string, more than the %d bytes allowed for a metadata value", k, len(v), MaxMetadataValue)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
		f.metadata[k] = s
		return nil
	})
	if err != nil {
		return fmt.Errorf("__metadata__ must map strings to strings: %w", err)
	}
	return nil
}

// checkLayout checks that the tensors' byte ranges tile the data section,
// as the format's reference implementation requires: no two share a byte,
// no byte lies between two of them, and none follows the last. Zero-length
// ranges hold no byte and sit anywhere inside the section.
func checkLayout(spans []Info, dataLen int64) error {
	spans = slices.DeleteFunc(spans, func(i Info) bool { return i.Size == 0 })
	if err := checkOverlap(spans); err != nil {
		return err
	}
	next, after := int64(0), "the start of the data section"
	for _, s := range spans {
		if s.Offset > next {
			return fmt.Errorf("bytes [%d,%d) between %s and tensor %q belong to no tensor; the ranges must tile the data section",
				next, s.Offset, after, s.Name)
		}
		next, after = s.Offset+s.Size, fmt.Sprintf("tensor %q", s.Name)
	}
	if next != dataLen {
		return fmt.Errorf("%d trailing bytes [%d,%d) after %s belong to no tensor; the ranges must tile the data section",
			dataLen-next, next, dataLen, after)
	}
	return nil
}

// checkOverlap reports the first two tensors whose byte ranges share a byte.
// Zero-length ranges hold no byte and overlap nothing, so the caller leaves
// them out. The order (begin, end, name) is total, so the same file always
// names the same pair.
func checkOverlap(spans []Info) error {
	slices.SortFunc(spans, func(a, b Info) int {
		if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Size, b.Size); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		if cur.Offset < prev.Offset+prev.Size {
			return fmt.Errorf("tensors %q [%d,%d) and %q [%d,%d) overlap",
				prev.Name, prev.Offset, prev.Offset+prev.Size, cur.Name, cur.Offset, cur.Offset+cur.Size)
		}
	}
	return nil
}

// elemSize is the byte size of the dtypes this package knows.
func elemSize(dtype string) int64 {
	switch dtype {
	case "F64", "I64", "U64":
		return 8
	case "F32", "I32", "U32":
		return 4
	case "F16", "BF16", "I16", "U16":
		return 2
	case "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2":
		return 1
	}
	return 0
}

func check(name string, e entry, dataLen int64) (Info, error) {
	es := elemSize(e.DType)
	if es == 0 {
		return Info{}, fmt.Errorf("tensor %q: unknown dtype %q", name, e.DType)
	}
	if len(e.Offsets) != 2 {
		return Info{}, fmt.Errorf("tensor %q: data_offsets must be [begin, end], got %v", name, e.Offsets)
	}
	if len(e.Shape) > maxRank {
		return Info{}, fmt.Errorf("tensor %q: shape of %d dimensions, more than %d", name, len(e.Shape), maxRank)
	}
	numel := int64(1)
	shape := make([]int, len(e.Shape))
	for i, d := range e.Shape {
		if d < 0 {
			return Info{}, fmt.Errorf("tensor %q: negative dimension in shape %v", name, e.Shape)
		}
		if d > 0 && numel > dataLen/es/d {
			return Info{}, fmt.Errorf("tensor %q: shape %v of %s is larger than the %d-byte data section (truncated file?)", name, e.Shape, e.DType, dataLen)
		}
		numel *= d
		shape[i] = int(d)
	}
	lo, hi := e.Offsets[0], e.Offsets[1]
	if lo < 0 || hi < lo || hi > dataLen {
		return Info{}, fmt.Errorf("tensor %q: byte range [%d,%d) outside the %d-byte data section (truncated file?)", name, lo, hi, dataLen)
	}
	if hi-lo != numel*es {
		return Info{}, fmt.Errorf("tensor %q: shape %v of %s needs %d bytes, range holds %d", name, e.Shape, e.DType, numel*es, hi-lo)
	}
	return Info{Name: name, DType: e.DType, Shape: shape, Offset: lo, Size: hi - lo}, nil
}

// Close unmaps the file. Slices returned by Bytes become invalid.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping, f.data = nil, nil
	if err := syscall.Munmap(m); err != nil {
		return fmt.Errorf("safetensors: unmap %s: %w", f.path, err)
	}
	return nil
}

// Metadata returns the header's __metadata__ entries (nil when absent).
func (f *File) Metadata() map[string]string { return f.metadata }

// Names lists the tensor names in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Info returns the description of the named tensor.
func (f *File) Info(name string) (Info, bool) {
	i, ok := f.tensors[name]
	return i, ok
}

// ErrNotFound is returned (wrapped) when a requested tensor is absent.
var ErrNotFound = errors.New("tensor not found")

// Bytes returns the raw little-endian bytes of the named tensor. The slice
// views the mapping and is valid until Close.
func (f *File) Bytes(name string) ([]byte, error) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %q: %w", name, ErrNotFound)
	}
	return f.data[i.Offset : i.Offset+i.Size], nil
}

// Float32 reads the named tensor as float32, upcasting F16 and BF16 exactly.
// dst is used when it has the right length; otherwise a new slice is made.
func (f *File) Float32(name string, dst []float32) ([]float32, error) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %q: %w", name, ErrNotFound)
	}
	b := f.data[i.Offset : i.Offset+i.Size]
	n := i.NumElements()
	if len(dst) != n {
		dst = make([]float32, n)
	}
	switch i.DType {
	case "F32":
		for k := range dst {
			dst[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		}
	case "F16":
		for k := range dst {
			dst[k] = float16.Frombits(binary.LittleEndian.Uint16(b[2*k:])).Float32()
		}
	case "BF16":
		for k := range dst {
			dst[k] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*k:])) << 16)
		}
	default:
		return nil, fmt.Errorf("safetensors: %q has dtype %s, want F32, F16 or BF16", name, i.DType)
	}
	return dst, nil
}
