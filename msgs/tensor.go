package msgs

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unsafe"
)

// NewTensorF32 returns a float32 tensor of the given shape holding a
// little-endian copy of data. The shape is copied too, so the caller may
// reuse both slices. NewTensorF32 does not check that shape describes
// len(data) elements; Validate, MarshalCDR and AppendCDR do.
func NewTensorF32(shape []uint32, data []float32) Tensor {
	t := Tensor{
		Shape: append([]uint32(nil), shape...),
		DType: DTypeFloat32,
		Data:  make([]byte, 4*len(data)),
	}
	if hostLittleEndian() {
		copy(t.Data, f32Bytes(data))
	} else {
		for i, v := range data {
			binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
		}
	}
	return t
}

// NumElements returns the number of elements the shape describes: the
// product of its dimensions, or 0 for an empty shape (an empty tensor, as in
// a zero-value message). It fails when the product does not fit an int.
func (t Tensor) NumElements() (int, error) {
	n, err := t.numElements("Tensor")
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (t Tensor) numElements(path string) (int, *Error) {
	if len(t.Shape) == 0 {
		return 0, nil
	}
	n := uint64(1)
	for _, d := range t.Shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt {
			return 0, newError(path, ErrTensorShape, "shape %v has more than %d elements", t.Shape, math.MaxInt)
		}
		n = lo
	}
	return int(n), nil
}

// elemSize returns the bytes per element of a dtype and its name.
func elemSize(dtype uint8) (int, string, bool) {
	switch dtype {
	case DTypeFloat32:
		return 4, "float32", true
	case DTypeFloat16:
		return 2, "float16", true
	}
	return 0, "", false
}

// Validate checks that the tensor's dtype is known and that its data holds
// exactly the bytes its shape and dtype need.
func (t Tensor) Validate() error {
	if err := t.validate("Tensor"); err != nil {
		return err
	}
	return nil
}

func (t Tensor) validate(path string) *Error {
	size, name, ok := elemSize(t.DType)
	if !ok {
		return newError(path, ErrTensorShape, "dtype %d is not DTYPE_FLOAT32 (%d) or DTYPE_FLOAT16 (%d)", t.DType, DTypeFloat32, DTypeFloat16)
	}
	n, err := t.numElements(path)
	if err != nil {
		return err
	}
	hi, need := bits.Mul64(uint64(n), uint64(size))
	if hi != 0 || need != uint64(len(t.Data)) {
		if hi != 0 {
			return newError(path, ErrTensorShape, "shape %v needs 2^64 or more bytes of %s, got %d", t.Shape, name, len(t.Data))
		}
		return newError(path, ErrTensorShape, "shape %v needs %d bytes of %s, got %d", t.Shape, need, name, len(t.Data))
	}
	return nil
}

// DecodeF32Into writes the tensor's elements as float32 into dst, which must
// have exactly NumElements elements. A float32 tensor costs a single copy of
// its bytes (no per-element work on little-endian hosts); a float16 tensor is
// converted in one pass.
func (t Tensor) DecodeF32Into(dst []float32) error {
	const path = "Tensor"
	if err := t.validate(path); err != nil {
		return err
	}
	n, _ := t.numElements(path)
	if len(dst) != n {
		return newError(path, ErrMalformed, "destination has %d elements, shape %v has %d", len(dst), t.Shape, n)
	}
	switch t.DType {
	case DTypeFloat32:
		if hostLittleEndian() {
			copy(f32Bytes(dst), t.Data)
			return nil
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case DTypeFloat16:
		src := t.Data[:2*n]
		for i := range dst {
			dst[i] = f16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}

// f32Bytes reinterprets x as its bytes in host order, without copying.
func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
}

// hostLittleEndian reports whether the machine stores the low byte first.
func hostLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// f16ToF32 converts an IEEE 754 binary16 value to float32 exactly; NaN
// payloads are kept.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal: rebias the exponent from 15 to 127
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	default: // subnormal: mant * 2^-24, exact in float32
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
}

// String describes the tensor without its data, e.g.
// "Tensor{shape [2 3], float32, 24 bytes}".
func (t Tensor) String() string {
	_, name, ok := elemSize(t.DType)
	if !ok {
		name = fmt.Sprintf("dtype %d", t.DType)
	}
	return fmt.Sprintf("Tensor{shape %v, %s, %d bytes}", t.Shape, name, len(t.Data))
}
