package kernels

//go:noescape
func addSquaresAVX2(s *float64, x *float32, n int, b float32)

//go:noescape
func scaleSiLUAVX2(o, x *float32, n int, b float32, s *float32, gain float32, k *siluConsts) int

// splat32 is one float32 constant over the eight lanes of a vector
// register; splatU32 one integer.
type (
	splat32  [8]float32
	splatU32 [8]uint32
)

func splat32Of(v float32) splat32  { return splat32{v, v, v, v, v, v, v, v} }
func splatU32Of(v uint32) splatU32 { return splatU32{v, v, v, v, v, v, v, v} }

// siluConsts are the constants of scaleSiLUAVX2 in the order of the
// offsets rmssilu_amd64.s defines: expf32's, and 1.
type siluConsts struct {
	log2e, round, ln2Hi, ln2Lo          splat32
	p0, p1, p2, p3, p4, p5, one, lo, hi splat32
	roundBits, bias                     splatU32
}

// sk holds scaleSiLUAVX2's constants. It is set once and only read.
var sk = siluConsts{
	log2e: splat32Of(expfLog2e), round: splat32Of(expfRound),
	ln2Hi: splat32Of(expfLn2Hi), ln2Lo: splat32Of(expfLn2Lo),
	p0: splat32Of(expfP0), p1: splat32Of(expfP1), p2: splat32Of(expfP2),
	p3: splat32Of(expfP3), p4: splat32Of(expfP4), p5: splat32Of(expfP5),
	one: splat32Of(1), lo: splat32Of(expfMin), hi: splat32Of(expfMax),
	roundBits: splatU32Of(expfRoundB), bias: splatU32Of(127),
}

// addSquaresVector does AddSquares for the leading multiple of four of x
// and returns how many it did. s is at least as long as x.
func addSquaresVector(s []float64, x []float32, b float32) int {
	n := len(x) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = s[n-1]
	addSquaresAVX2(&s[0], &x[0], n, b)
	return n
}

// scaleSiLUVector does ScaleSiLU (with SiLU) for the leading multiple of
// eight of x, eight at a time, handing the groups of eight with an
// exponent −f outside [−87, 88] or a NaN to scaleSiLUGo, and returns how
// many it did. o and s are at least as long as x.
func scaleSiLUVector(o, x []float32, b float32, s []float32, g float32) int {
	done := 0
	for hasAVX2 && len(x) >= 8 {
		n := len(x) &^ 7
		_, _ = o[n-1], s[n-1]
		k := scaleSiLUAVX2(&o[0], &x[0], n, b, &s[0], g, &sk)
		o, x, s, done = o[k:], x[k:], s[k:], done+k
		if len(x) < 8 {
			break
		}
		scaleSiLUGo(o[:8], x[:8], b, s[:8], g)
		o, x, s, done = o[8:], x[8:], s[8:], done+8
	}
	return done
}
