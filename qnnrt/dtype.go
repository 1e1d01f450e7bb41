package qnnrt

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/x448/float16"
)

// DataType is a QNN tensor data type (Qnn_DataType_t).
type DataType uint32

// The QNN data types.
const (
	Int8          DataType = 0x008
	Int16         DataType = 0x016
	Int32         DataType = 0x032
	Int64         DataType = 0x064
	Uint8         DataType = 0x108
	Uint16        DataType = 0x116
	Uint32        DataType = 0x132
	Uint64        DataType = 0x164
	Float16       DataType = 0x216
	BFloat16      DataType = 0x226
	Float32       DataType = 0x232
	Float64       DataType = 0x264
	SFixedPoint4  DataType = 0x304
	SFixedPoint8  DataType = 0x308
	SFixedPoint16 DataType = 0x316
	SFixedPoint32 DataType = 0x332
	UFixedPoint4  DataType = 0x404
	UFixedPoint8  DataType = 0x408
	UFixedPoint16 DataType = 0x416
	UFixedPoint32 DataType = 0x432
	Bool8         DataType = 0x508
	StringType    DataType = 0x608
	Undefined     DataType = 0x7fffffff
)

// String returns the QNN name without the QNN_DATATYPE_ prefix, e.g.
// "FLOAT_16".
func (d DataType) String() string {
	switch d {
	case Int8:
		return "INT_8"
	case Int16:
		return "INT_16"
	case Int32:
		return "INT_32"
	case Int64:
		return "INT_64"
	case Uint8:
		return "UINT_8"
	case Uint16:
		return "UINT_16"
	case Uint32:
		return "UINT_32"
	case Uint64:
		return "UINT_64"
	case Float16:
		return "FLOAT_16"
	case BFloat16:
		return "BFLOAT_16"
	case Float32:
		return "FLOAT_32"
	case Float64:
		return "FLOAT_64"
	case SFixedPoint4:
		return "SFIXED_POINT_4"
	case SFixedPoint8:
		return "SFIXED_POINT_8"
	case SFixedPoint16:
		return "SFIXED_POINT_16"
	case SFixedPoint32:
		return "SFIXED_POINT_32"
	case UFixedPoint4:
		return "UFIXED_POINT_4"
	case UFixedPoint8:
		return "UFIXED_POINT_8"
	case UFixedPoint16:
		return "UFIXED_POINT_16"
	case UFixedPoint32:
		return "UFIXED_POINT_32"
	case Bool8:
		return "BOOL_8"
	case StringType:
		return "STRING"
	case Undefined:
		return "UNDEFINED"
	}
	return fmt.Sprintf("DATATYPE_0x%x", uint32(d))
}

// Size returns the bytes per element, or 0 for a type without a whole-byte
// element size (4-bit fixed point, strings, undefined, unknown).
func (d DataType) Size() int {
	switch d {
	case Int8, Uint8, SFixedPoint8, UFixedPoint8, Bool8:
		return 1
	case Int16, Uint16, Float16, BFloat16, SFixedPoint16, UFixedPoint16:
		return 2
	case Int32, Uint32, Float32, SFixedPoint32, UFixedPoint32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// codec converts between float32 and a tensor's data type. The runtime
// converts for FLOAT_32, FLOAT_16, BFLOAT_16 and UFIXED_POINT_8/16 (scale
// and offset: real = (q + offset) * scale). The host is little-endian
// (amd64, arm64), as QNN tensors are.
type codec struct {
	dt     DataType
	scale  float64
	offset float64
	qmax   float64
}

// newCodec returns the converter for t, or an error naming t when the
// runtime cannot convert its type.
func newCodec(t TensorInfo) (codec, error) {
	c := codec{dt: t.DataType}
	switch t.DataType {
	case Float32, Float16, BFloat16:
		return c, nil
	case UFixedPoint8, UFixedPoint16:
		q := t.Quant
		if !q.Defined {
			return c, fmt.Errorf("qnnrt: tensor %q is %s without quantization parameters", t.Name, t.DataType)
		}
		if q.Encoding != encodingScaleOffset && q.Encoding != encodingBwScaleOffset {
			return c, fmt.Errorf("qnnrt: tensor %q is %s with quantization encoding %d; only scale/offset (0, 2) is supported",
				t.Name, t.DataType, q.Encoding)
		}
		if !(q.Scale > 0) || math.IsInf(float64(q.Scale), 0) {
			return c, fmt.Errorf("qnnrt: tensor %q is %s with scale %v; want a positive finite scale", t.Name, t.DataType, q.Scale)
		}
		c.scale, c.offset = float64(q.Scale), float64(q.Offset)
		c.qmax = 255
		if t.DataType == UFixedPoint16 {
			c.qmax = 65535
		}
		return c, nil
	}
	return c, fmt.Errorf("qnnrt: tensor %q has data type %s; the runtime converts float32 only to FLOAT_32, FLOAT_16, BFLOAT_16, UFIXED_POINT_8 and UFIXED_POINT_16",
		t.Name, t.DataType)
}

// encode converts src into dst, which holds exactly len(src) elements of
// the codec's type.
func (c codec) encode(dst unsafe.Pointer, src []float32) {
	n := len(src)
	if n == 0 {
		return
	}
	switch c.dt {
	case Float32:
		copy(unsafe.Slice((*float32)(dst), n), src)
	case Float16:
		d := unsafe.Slice((*uint16)(dst), n)
		for i, v := range src {
			d[i] = f32ToF16(v)
		}
	case BFloat16:
		d := unsafe.Slice((*uint16)(dst), n)
		for i, v := range src {
			d[i] = f32ToBF16(v)
		}
	case UFixedPoint8:
		d := unsafe.Slice((*uint8)(dst), n)
		for i, v := range src {
			d[i] = uint8(c.quantize(v))
		}
	case UFixedPoint16:
		d := unsafe.Slice((*uint16)(dst), n)
		for i, v := range src {
			d[i] = uint16(c.quantize(v))
		}
	}
}

// decode converts the len(dst) elements at src into dst.
func (c codec) decode(dst []float32, src unsafe.Pointer) {
	n := len(dst)
	if n == 0 {
		return
	}
	switch c.dt {
	case Float32:
		copy(dst, unsafe.Slice((*float32)(src), n))
	case Float16:
		for i, h := range unsafe.Slice((*uint16)(src), n) {
			dst[i] = f16ToF32(h)
		}
	case BFloat16:
		for i, h := range unsafe.Slice((*uint16)(src), n) {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
	case UFixedPoint8:
		for i, q := range unsafe.Slice((*uint8)(src), n) {
			dst[i] = float32((float64(q) + c.offset) * c.scale)
		}
	case UFixedPoint16:
		for i, q := range unsafe.Slice((*uint16)(src), n) {
			dst[i] = float32((float64(q) + c.offset) * c.scale)
		}
	}
}

// quantize maps v to clamp(round(v/scale) - offset, 0, qmax); NaN maps to
// the code of 0.
func (c codec) quantize(v float32) float64 {
	x := float64(v)
	if x != x {
		x = 0
	}
	q := math.Round(x/c.scale) - c.offset
	if q < 0 {
		return 0
	}
	if q > c.qmax {
		return c.qmax
	}
	return q
}

// f32ToF16 converts to IEEE binary16, rounding to nearest even; overflow
// gives ±Inf, NaN stays NaN.
func f32ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// f16ToF32 converts IEEE binary16 to float32 exactly.
func f16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// f32ToBF16 converts to bfloat16, rounding to nearest even; NaN stays NaN.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
