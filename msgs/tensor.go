package msgs

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/x448/float16"
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

// checkBlock is the number of bytes DecodeF32Checked and DecodeF16Checked
// copy and check at a time when a tensor is below the non-temporal size
// or the CPU has no such kernel; a block that holds a non-finite value is
// then scanned for its index, from the cache.
const checkBlock = 64 << 10

// DecodeF32Checked writes the tensor's elements as float32 into dst, which
// must have exactly NumElements elements, and checks every element in the
// same pass over the data: it stops at the first NaN or infinity and
// returns its index and value, or -1 when every element is finite. From a
// reported index on, dst holds unspecified values. On amd64 with AVX2 and
// F16C, a tensor of 4 MiB or more (as float32) is copied or converted in
// one pass with non-temporal stores, which leave it out of the caches.
// On arm64 the copies and conversions use NEON, with ordinary stores.
func (t Tensor) DecodeF32Checked(dst []float32) (int, float32, error) {
	return t.decodeF32Checked(dst, &hostKernels)
}

// decodeF32Checked is DecodeF32Checked with the kernel set k.
func (t Tensor) decodeF32Checked(dst []float32, k *kernels) (int, float32, error) {
	n, err := t.checkedDst(len(dst))
	if err != nil {
		return -1, 0, err
	}
	switch t.DType {
	case DTypeFloat32:
		if !hostLittleEndian() {
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
				if !finite32(dst[i]) {
					return i, dst[i], nil
				}
			}
			return -1, 0, nil
		}
		if i := k.copy32(dst, t.Data); i >= 0 {
			return i, math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])), nil
		}
	case DTypeFloat16:
		if i := k.f16ToF32Checked(dst[:n], t.Data); i >= 0 {
			return i, f16ToF32(binary.LittleEndian.Uint16(t.Data[2*i:])), nil
		}
	}
	return -1, 0, nil
}

// DecodeF16Checked writes the tensor's elements as IEEE 754 binary16 bit
// patterns into dst, which must have exactly NumElements elements, and
// checks every element in the same pass, as DecodeF32Checked does: it
// returns the index and value of the first NaN or infinity of the
// tensor's own values, or -1. A float16 tensor is copied; a float32 one is
// converted rounding to nearest even, so a finite value beyond the
// binary16 range becomes an infinity, as a cast does (it is not reported:
// the check is on the values as sent). Non-temporal stores are used as in
// DecodeF32Checked, from 4 MiB of binary16 output.
func (t Tensor) DecodeF16Checked(dst []uint16) (int, float32, error) {
	return t.decodeF16Checked(dst, &hostKernels)
}

// decodeF16Checked is DecodeF16Checked with the kernel set k.
func (t Tensor) decodeF16Checked(dst []uint16, k *kernels) (int, float32, error) {
	n, err := t.checkedDst(len(dst))
	if err != nil {
		return -1, 0, err
	}
	switch t.DType {
	case DTypeFloat16:
		src := t.Data[:2*n]
		if !hostLittleEndian() {
			for i := range dst {
				dst[i] = binary.LittleEndian.Uint16(src[2*i:])
				if dst[i]&0x7c00 == 0x7c00 {
					return i, f16ToF32(dst[i]), nil
				}
			}
			return -1, 0, nil
		}
		if i := k.copy16(dst, src); i >= 0 {
			return i, f16ToF32(binary.LittleEndian.Uint16(src[2*i:])), nil
		}
	case DTypeFloat32:
		src := t.Data[:4*n]
		if !hostLittleEndian() {
			for i := range dst {
				v := math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
				if !finite32(v) {
					return i, v, nil
				}
				dst[i] = f32ToF16(v)
			}
			return -1, 0, nil
		}
		if i := k.f32ToF16Checked(dst, src); i >= 0 {
			return i, math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:])), nil
		}
	}
	return -1, 0, nil
}

// f32BitsToF16 is f32ToF16 of the float32 with bits b, with a fast path
// for the values whose binary16 result is normal or overflows: rebias the
// exponent (subtract 112 << 23), then round the 13 dropped bits to
// nearest even by adding 0xfff plus the kept part's lowest bit; a carry
// runs into the exponent, up to the infinity 0x7c00, as it must.
func f32BitsToF16(b uint32) uint16 {
	abs := b & 0x7fffffff
	if abs-0x38800000 < 0x47800000-0x38800000 { // 2^-14 <= |v| < 2^16
		return uint16(b>>16)&0x8000 | uint16((abs-0x38000000+0xfff+(abs>>13)&1)>>13)
	}
	return f32ToF16(math.Float32frombits(b))
}

// firstNonFiniteBytes32 is firstNonFinite32 over little-endian bytes,
// one value at a time: for short tails.
func firstNonFiniteBytes32(b []byte) int {
	for i := 0; i+3 < len(b); i += 4 {
		if binary.LittleEndian.Uint32(b[i:])&0x7f800000 == 0x7f800000 {
			return i / 4
		}
	}
	return -1
}

// checkedDst validates the tensor and a destination of n elements.
func (t Tensor) checkedDst(n int) (int, error) {
	const path = "Tensor"
	if err := t.validate(path); err != nil {
		return 0, err
	}
	want, _ := t.numElements(path)
	if n != want {
		return 0, newError(path, ErrMalformed, "destination has %d elements, shape %v has %d", n, t.Shape, want)
	}
	return want, nil
}

func finite32(v float32) bool { return math.Float32bits(v)&0x7f800000 != 0x7f800000 }

// firstNonFinite32 returns the index of the first NaN or infinite value of
// x, or -1. It tests two values per 64-bit word when x is 8-byte aligned
// (a whole-slice allocation or a device buffer): adding the lowest
// exponent bit to each lane's exponent bits carries into the lane's sign
// position exactly when they are all ones, and never across lanes.
func firstNonFinite32(x []float32) int {
	const (
		exp  = 0x7f800000_7f800000
		lsb  = 0x00800000_00800000 // the lowest exponent bit of each lane
		tops = 0x80000000_80000000
	)
	blocks := 0
	if len(x) >= 8 && uintptr(unsafe.Pointer(unsafe.SliceData(x)))%8 == 0 {
		blocks = len(x) / 8
		words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), 4*blocks)
		for b := 0; b < blocks; b++ {
			w := words[4*b : 4*b+4 : 4*b+4]
			if ((w[0]&exp+lsb)|(w[1]&exp+lsb)|(w[2]&exp+lsb)|(w[3]&exp+lsb))&tops != 0 {
				return scan32(x, 8*b, 8*b+8)
			}
		}
	}
	return scan32(x, 8*blocks, len(x))
}

func scan32(x []float32, lo, hi int) int {
	for i := lo; i < hi; i++ {
		if !finite32(x[i]) {
			return i
		}
	}
	return -1
}

// firstNonFinite16 is firstNonFinite32 for binary16 bit patterns, four
// per word.
func firstNonFinite16(x []uint16) int {
	const (
		exp  = 0x7c00_7c00_7c00_7c00
		lsb  = 0x0400_0400_0400_0400
		tops = 0x8000_8000_8000_8000
	)
	blocks := 0
	if len(x) >= 16 && uintptr(unsafe.Pointer(unsafe.SliceData(x)))%8 == 0 {
		blocks = len(x) / 16
		words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), 4*blocks)
		for b := 0; b < blocks; b++ {
			w := words[4*b : 4*b+4 : 4*b+4]
			if ((w[0]&exp+lsb)|(w[1]&exp+lsb)|(w[2]&exp+lsb)|(w[3]&exp+lsb))&tops != 0 {
				return scan16(x, 16*b, 16*b+16)
			}
		}
	}
	return scan16(x, 16*blocks, len(x))
}

func scan16(x []uint16, lo, hi int) int {
	for i := lo; i < hi; i++ {
		if x[i]&0x7c00 == 0x7c00 {
			return i
		}
	}
	return -1
}

// halves views little-endian binary16 bytes as uint16 values, in place,
// and reports whether it could: only on a little-endian host and when b
// is 2-byte aligned (as a CDR message's 4-byte-aligned payload is).
func halves(b []byte) ([]uint16, bool) {
	if !hostLittleEndian() || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%2 != 0 {
		return nil, false
	}
	if len(b) < 2 {
		return nil, true
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2), true
}

// f32ToF16 converts to IEEE 754 binary16, rounding to nearest even;
// overflow gives ±Inf, NaN stays NaN.
func f32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }
