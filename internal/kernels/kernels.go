package kernels

import "math"

// LayerNormModulate writes LN(x)·(1+scale)+shift row by row (width d), the
// parameter-free LayerNorm of norm1/norm2 followed by adaLN modulation.
func LayerNormModulate(out, x []float32, d int, scale, shift []float32, eps float64) {
	for r := 0; r*d < len(x); r++ {
		row, o := x[r*d:(r+1)*d], out[r*d:(r+1)*d]
		mu, inv := meanInvStd(row, eps)
		k := normAffineVector(o, row, mu, inv, scale, shift, true)
		normalise(o[k:], row[k:], mu, inv)
		for i := k; i < len(o); i++ {
			o[i] = o[i]*(1+scale[i]) + shift[i]
		}
	}
}

// LayerNormAffine writes LN(x)·w+bias row by row (width d): norm3.
func LayerNormAffine(out, x []float32, d int, w, bias []float32, eps float64) {
	for r := 0; r*d < len(x); r++ {
		row, o := x[r*d:(r+1)*d], out[r*d:(r+1)*d]
		mu, inv := meanInvStd(row, eps)
		k := normAffineVector(o, row, mu, inv, w, bias, false)
		normalise(o[k:], row[k:], mu, inv)
		for i := k; i < len(o); i++ {
			o[i] = o[i]*w[i] + bias[i]
		}
	}
}

// normalise writes float32((x − mu)·inv) for every x of row into o. Four
// elements at a time, so the float32-to-float64 conversions (each waits
// for the previous write of its register) form four chains, not one.
func normalise(o, row []float32, mu, inv float64) {
	o = o[:len(row)]
	i := 0
	for ; i+4 <= len(row); i += 4 {
		v0, v1, v2, v3 := float64(row[i]), float64(row[i+1]), float64(row[i+2]), float64(row[i+3])
		o[i], o[i+1], o[i+2], o[i+3] = float32((v0-mu)*inv), float32((v1-mu)*inv), float32((v2-mu)*inv), float32((v3-mu)*inv)
	}
	for ; i < len(row); i++ {
		o[i] = float32((float64(row[i]) - mu) * inv)
	}
}

// meanInvStd returns the mean and 1/sqrt(biased variance + eps) of row,
// both sums in float64 with four partial sums.
func meanInvStd(row []float32, eps float64) (mu, inv float64) {
	var lanes [4]float64
	i := laneSumsVector(row, 0, &lanes, false)
	s0, s1, s2, s3 := lanes[0], lanes[1], lanes[2], lanes[3]
	for ; i+4 <= len(row); i += 4 {
		s0 += float64(row[i])
		s1 += float64(row[i+1])
		s2 += float64(row[i+2])
		s3 += float64(row[i+3])
	}
	for ; i < len(row); i++ {
		s0 += float64(row[i])
	}
	mu = (s0 + s1 + s2 + s3) / float64(len(row))
	lanes = [4]float64{}
	i = laneSumsVector(row, mu, &lanes, true)
	q0, q1, q2, q3 := lanes[0], lanes[1], lanes[2], lanes[3]
	for ; i+4 <= len(row); i += 4 {
		d0, d1, d2, d3 := float64(row[i])-mu, float64(row[i+1])-mu, float64(row[i+2])-mu, float64(row[i+3])-mu
		q0 += d0 * d0
		q1 += d1 * d1
		q2 += d2 * d2
		q3 += d3 * d3
	}
	for ; i < len(row); i++ {
		d := float64(row[i]) - mu
		q0 += d * d
	}
	return mu, 1 / math.Sqrt((q0+q1+q2+q3)/float64(len(row))+eps)
}

// RMSNormRows normalises each row of width d by its root mean square and
// multiplies by the gain g.
func RMSNormRows(m []float32, d int, g []float32, eps float64) {
	RMSNormStrided(m, len(m)/d, d, d, 0, g, eps)
}

// RMSNormStrided applies RMSNorm with gain g to the d-wide block at column
// off of each of the rows of m (row stride ld).
func RMSNormStrided(m []float32, rows, d, ld, off int, g []float32, eps float64) {
	for r := 0; r < rows; r++ {
		row := m[r*ld+off : r*ld+off+d]
		var lanes [4]float64 // four partial sums, four conversion chains
		i := laneSumsVector(row, 0, &lanes, true)
		q0, q1, q2, q3 := lanes[0], lanes[1], lanes[2], lanes[3]
		for ; i+4 <= len(row); i += 4 {
			v0, v1, v2, v3 := float64(row[i]), float64(row[i+1]), float64(row[i+2]), float64(row[i+3])
			q0 += v0 * v0
			q1 += v1 * v1
			q2 += v2 * v2
			q3 += v3 * v3
		}
		for ; i < len(row); i++ {
			v := float64(row[i])
			q0 += v * v
		}
		inv := float32(1 / math.Sqrt((q0+q1+q2+q3)/float64(d)+eps))
		for i := mulScaleVector(row, inv, g); i < len(row); i++ {
			row[i] = row[i] * inv * g[i]
		}
	}
}

// blockLen is the length of the float64 blocks the element-wise kernels
// convert their float32 data into. Converting a block first and computing
// on it second keeps the float32-to-float64 conversions (which write only
// the low half of a register, so each waits for the last use of that
// register) out of the chain of the computation: done inline, they chain
// every element's exp to the previous one's and cost 5 times the time.
const blockLen = 64

// SoftmaxRows replaces each of the rows of m (width and stride ld) by its
// softmax, subtracting the row maximum first; the exponentials and their
// sum are float64.
func SoftmaxRows(m []float32, rows, ld int) {
	var u [blockLen]float64
	for r := 0; r < rows; r++ {
		row := m[r*ld : (r+1)*ld]
		// The maximum only shifts the exponents: a NaN in the row makes
		// every weight NaN whether or not it is the maximum.
		mx := row[0]
		for _, v := range row[1:] {
			if v > mx {
				mx = v
			}
		}
		var s float64
		for lo := softmaxExpVector(row, mx, &s); lo < len(row); lo += blockLen {
			blk := row[lo:min(lo+blockLen, len(row))]
			ub := u[:len(blk)]
			for i, v := range blk {
				ub[i] = float64(v - mx)
			}
			Exp(ub)
			for _, e := range ub {
				s += e
			}
			for i, e := range ub {
				blk[i] = float32(e)
			}
		}
		inv := float32(1 / s)
		for i := range row {
			row[i] *= inv
		}
	}
}

// GELU applies the tanh approximation of GELU,
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), in the equal logistic form
// x / (1 + exp(−2·√(2/π)·(x + 0.044715·x³))): one exponential instead of a
// tanh, and no cancellation in 1 + tanh for negative x. It runs in float64
// and rounds once to float32.
func GELU(x []float32) {
	geluGo(geluVector(x))
}

// The constants of GELU's logistic form: −2·√(2/π) and the cubic term's
// coefficient.
const (
	geluScale = -2 * 0.7978845608028654
	geluCubic = 0.044715
)

// geluGo is GELU without vector kernels.
func geluGo(x []float32) {
	var u, e [blockLen]float64
	for lo := 0; lo < len(x); lo += blockLen {
		blk := x[lo:min(lo+blockLen, len(x))]
		ub, eb := u[:len(blk)], e[:len(blk)]
		for i, v := range blk {
			ub[i] = float64(v)
		}
		for i, v := range ub {
			eb[i] = geluScale * (v + geluCubic*v*v*v)
		}
		Exp(eb)
		for i, v := range ub {
			blk[i] = float32(v / (1 + eb[i]))
		}
	}
}

// SiLU applies x·sigmoid(x).
func SiLU(x []float32) {
	for i, v := range x {
		x[i] = float32(float64(v) / (1 + math.Exp(-float64(v))))
	}
}

// AddGated adds gate⊙y to x row by row (gate has the row width d).
func AddGated(x, y, gate []float32, d int) {
	for r := 0; r*d < len(x); r++ {
		xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
		for i := range xr {
			xr[i] += gate[i] * yr[i]
		}
	}
}

// exp2Frac holds 2^(j/64), j = 0..63, for Exp. It is computed once
// and only read: a lookup table, not state.
var exp2Frac = func() (t [64]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 64)
	}
	return t
}()

// Exp replaces every x in u by e^x, in float64 to within about
// 3 ulp (relative error below 6e-16, TestExpAccuracy): after rounding to
// float32 it agrees with math.Exp except, rarely, by one float32 ulp. It is
// about twice as fast as math.Exp and has no call per element:
// x = (64m + j)·ln2/64 + r with |r| <= ln2/128, and e^x = 2^m · 2^(j/64) · e^r
// with a degree-5 Taylor polynomial for e^r. Outside [-708, 709] (where 2^m
// or the result leaves the normal float64 range) and for NaN it is math.Exp.
// Where the CPU allows, four values go at a time (kernels_amd64.s) through the
// same operations, with the same results; expGo is the portable loop.
func Exp(u []float64) {
	u = expVector(u)
	expGo(u)
}

// The constants of expGo (and of the vector kernel).
const (
	expLn2Hi   = 6.93147180369123816490e-01 // ln2 = expLn2Hi + expLn2Lo, expLn2Hi with 32 significant bits
	expLn2Lo   = 1.90821492927058770002e-10
	expLog2e   = 1.44269504088896338700e+00
	expRound52 = 0x1.8p52 // adding and subtracting it rounds to an integer (|v| < 2^51)
)

// expGo is Exp one value at a time.
func expGo(u []float64) {
	for i, x := range u {
		if !(x >= -708 && x <= 709) {
			u[i] = math.Exp(x)
			continue
		}
		k := (x*(64*expLog2e) + expRound52) - expRound52
		r := x - k*(expLn2Hi/64) - k*(expLn2Lo/64)
		ki := int64(k)
		p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120)))))
		u[i] = p * exp2Frac[ki&63] * math.Float64frombits(uint64((ki>>6)+1023)<<52)
	}
}

// Rope rotates one token's row of heads dh-wide blocks (head-major) by
// the token's angle table: in every head, the interleaved pair j (elements
// 2j and 2j+1, the complex number x[2j] + i·x[2j+1]) is multiplied by
// cs[j] + i·sn[j], for j < dh/2 (action-step.md §3.6). The rotation runs in
// float64 and rounds once to float32, as the reference's complex128 does.
// A per-pair table serves both the 1-D RoPE of the action expert
// (RopeTables) and the 3-D RoPE of the video DiT (world-model.md §5.4).
func Rope(row []float32, heads, dh int, cs, sn []float64) {
	if ropeVector(row, heads, dh, cs, sn) {
		return
	}
	half := dh / 2
	for h := 0; h < heads; h++ {
		hd := row[h*dh : (h+1)*dh]
		for j := 0; j < half; j++ {
			x0, x1 := float64(hd[2*j]), float64(hd[2*j+1])
			hd[2*j] = float32(x0*cs[j] - x1*sn[j])
			hd[2*j+1] = float32(x0*sn[j] + x1*cs[j])
		}
	}
}

// RopeTables returns the 1-D RoPE tables [n, dh/2]: cos and sin of s·ω_j,
// ω_j = 10000^(−2j/dh), for positions s = 0..n−1 and j < dh/2, in float64.
func RopeTables(n, dh int) (cos, sin []float64) {
	half := dh / 2
	cos, sin = make([]float64, n*half), make([]float64, n*half)
	for j := 0; j < half; j++ {
		w := 1 / math.Pow(10000, float64(2*j)/float64(dh))
		for s := 0; s < n; s++ {
			sin[s*half+j], cos[s*half+j] = math.Sincos(float64(s) * w)
		}
	}
	return cos, sin
}
