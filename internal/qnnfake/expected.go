package qnnfake

import "math"

// Expected computes, in Go, the outputs the test double's graphExecute
// produces for g when the caller passes inputs (one float32 slice per graph
// input, in graph order, each with the tensor's element count), converted to
// float32 the way a runtime reads them back.
//
// The function, shared with the C library:
//
//	x_m  = input m converted to its declared type and decoded to float64
//	s_m  = (sum_i x_m[i] * (1 + 0.25*(i mod 7))) / n_m
//	y_j[i] = x_0[i mod n_0]*(1 + 0.5*j) + 0.01*sum_m (m+1)*s_m + 0.125*j
//
// then y_j converted to output j's declared type and decoded to float32.
// Float types round to nearest even; fixed-point types use
// q = clamp(round(y/scale) - offset, 0, 2^bits-1) and decode as
// (q + offset)*scale; INT_32 rounds and saturates; BOOL_8 is y != 0.
//
// Expected returns nil when inputs do not match g (count or lengths), when a
// tensor has a data type the test double does not compute with, or when a
// fixed-point tensor has no Quant: the cases in which the library's execute
// fails.
func Expected(g Graph, inputs [][]float32) [][]float32 {
	if len(inputs) != len(g.Inputs) {
		return nil
	}
	xs := make([][]float64, len(inputs))
	for m, t := range g.Inputs {
		if uint64(len(inputs[m])) != t.Elements() || !computable(t) {
			return nil
		}
		x := make([]float64, len(inputs[m]))
		for i, v := range inputs[m] {
			x[i] = decode(t, encode(t, float64(v)))
		}
		xs[m] = x
	}
	for _, t := range g.Outputs {
		if !computable(t) {
			return nil
		}
	}
	// Explicit float64 conversions keep the compiler from fusing a multiply
	// and an add (allowed by the Go spec on some architectures), so the sums
	// round exactly as the C library's (built with -ffp-contract=off).
	total := 0.0
	for m, x := range xs {
		sum := 0.0
		for i, v := range x {
			sum += float64(v * (1 + 0.25*float64(i%7)))
		}
		s := sum / float64(len(x))
		total += float64(float64(m+1) * s)
	}
	common := 0.01 * total
	out := make([][]float32, len(g.Outputs))
	for j, t := range g.Outputs {
		gain := 1 + 0.5*float64(j)
		bias := 0.125 * float64(j)
		y := make([]float32, t.Elements())
		for i := range y {
			x0 := 0.0
			if len(xs) > 0 {
				x0 = xs[0][i%len(xs[0])]
			}
			v := float64(float64(float64(x0*gain)+common) + bias)
			y[i] = float32(decode(t, encode(t, v)))
		}
		out[j] = y
	}
	return out
}

// computable reports whether the test double can execute with tensor t.
func computable(t Tensor) bool {
	switch t.DataType {
	case DataTypeFloat32, DataTypeFloat16, DataTypeBF16, DataTypeInt32, DataTypeBool8:
		return true
	case DataTypeUFixed8, DataTypeUFixed16:
		return t.Quant != nil && t.Quant.Scale != 0
	}
	return false
}

// encode converts v to t's data type and returns the stored value (float32
// for FLOAT_32, the raw bits for 16-bit floats, the integer otherwise) as a
// float64 that decode turns back into the real value.
func encode(t Tensor, v float64) float64 {
	switch t.DataType {
	case DataTypeFloat32:
		return float64(float32(v))
	case DataTypeFloat16:
		return float64(float64ToHalf(v))
	case DataTypeBF16:
		return float64(float64ToBF16(v))
	case DataTypeInt32:
		return clamp(math.Round(v), math.MinInt32, math.MaxInt32)
	case DataTypeBool8:
		if v != 0 {
			return 1
		}
		return 0
	case DataTypeUFixed8:
		return clamp(math.Round(v/float64(t.Quant.Scale))-float64(t.Quant.Offset), 0, 255)
	case DataTypeUFixed16:
		return clamp(math.Round(v/float64(t.Quant.Scale))-float64(t.Quant.Offset), 0, 65535)
	}
	return math.NaN()
}

// decode is the inverse of encode: the real value of a stored one.
func decode(t Tensor, q float64) float64 {
	switch t.DataType {
	case DataTypeFloat16:
		return halfToFloat64(uint16(q))
	case DataTypeBF16:
		return float64(math.Float32frombits(uint32(uint16(q)) << 16))
	case DataTypeUFixed8, DataTypeUFixed16:
		return float64(q+float64(t.Quant.Offset)) * float64(t.Quant.Scale)
	}
	return q
}

func clamp(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}

// float64ToHalf rounds v to IEEE binary16 (nearest, ties to even) directly
// from float64, so there is no double rounding through float32.
func float64ToHalf(v float64) uint16 {
	var sign uint16
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	switch {
	case math.IsNaN(v):
		return sign | 0x7e00
	case v >= 65520: // halfway between 65504 (largest finite) and 65536
		return sign | 0x7c00
	case v < 0x1p-14: // subnormal: multiples of 2^-24
		return sign | uint16(math.RoundToEven(v*0x1p24))
	}
	frac, exp := math.Frexp(v) // v = frac * 2^exp, frac in [0.5, 1)
	e := exp - 1
	m := math.RoundToEven((frac*2 - 1) * 1024)
	if m == 1024 {
		m, e = 0, e+1
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}

// halfToFloat64 decodes IEEE binary16 bits.
func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

// float64ToBF16 rounds v to bfloat16 (nearest, ties to even) directly from
// float64.
func float64ToBF16(v float64) uint16 {
	var sign uint16
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	switch {
	case math.IsNaN(v):
		return sign | 0x7fc0
	case v >= 0x1.ffp127: // halfway between the largest finite value and 2^128
		return sign | 0x7f80
	case v < 0x1p-126: // subnormal: multiples of 2^-133
		return sign | uint16(math.RoundToEven(v*0x1p133))
	}
	frac, exp := math.Frexp(v)
	e := exp - 1
	m := math.RoundToEven((frac*2 - 1) * 128)
	if m == 128 {
		m, e = 0, e+1
	}
	return sign | uint16(e+127)<<7 | uint16(m)
}
