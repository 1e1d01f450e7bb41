package worldmodel

import "gonum.org/v1/gonum/blas"

// The encoder's 3×3 convolutions run without im2col: each is nine
// products, one per kernel tap (dy, dx), accumulating (beta = 1) into one
// output, the tap's [Out, In] weights times the input shifted by the tap.
// The input sits in e.pad with its zero border in place, so a shifted
// input is a plain matrix: In rows (one per channel plane, ldb the plane's
// length) of oh·wp values, wp being the padded row width. The output rows
// are as wide (oh·wp, in e.wide); their last wp − ow columns are discarded
// when the valid ones, plus the bias (and the residual, when given), are
// copied into the activation.
//
// Stride 1 (conv3, spec §4.1: a zero border of 1): each channel plane is
// (h + 2) × (w + 2), the image at row 1, column 1; wp = w + 2.
//
// Stride 2 (Down, spec §4.4: one zero column on the right, one zero row at
// the bottom): the input is split into its four phases (even/odd rows ×
// even/odd columns), each channel's phase plane (oh + 1) × (ow + 1) with a
// zero last row and column, phase (a, b) holding x[2i + a, 2j + b]; tap
// (dy, dx) reads phase (dy mod 2, dx mod 2) shifted by (dy/2, dx/2);
// wp = ow + 1.
//
// The products read at most 2 values past the last plane (only for the
// discarded columns): e.pad has that slack.

// padSlack is the values e.pad holds past its last plane.
const padSlack = 2

// convTaps returns cv's weights [Out, In, 3, 3] as nine [Out, In] matrices,
// tap by tap: t[(3·dy + dx)·Out·In + o·In + i] = W[o, i, dy, dx].
func convTaps(cv *Conv) []float32 {
	oi := cv.Out * cv.In
	t := make([]float32, 9*oi)
	for q := range oi {
		for tap := range 9 {
			t[tap*oi+q] = cv.W[q*9+tap]
		}
	}
	return t
}

// padGeometry is the padded row width, the plane length and the number of
// planes per channel (1, or the 4 phases) of a 3×3 convolution's input
// [c, h, w] with the given stride.
func padGeometry(h, w, stride int) (wp, plane, phases int) {
	if stride == 1 {
		return w + 2, (h + 2) * (w + 2), 1
	}
	oh, ow := h/2, w/2
	return ow + 1, (oh + 1) * (ow + 1), 4
}

// conv3 writes the 3×3 convolution cv with the given stride of the input
// e.pad already holds (laid out for cv.In channels of h × w, see above)
// into y [Out, oh, ow], adding the bias and, when add is not nil, add
// [Out, oh, ow] (each value of add is read before y's at its index is
// written).
func (e *VAEEncoder) conv3(y []float32, cv *Conv, h, w, stride int, add []float32) {
	e.conv3Products(cv, h, w, stride)
	oh, ow := h/stride, w/stride
	wp, _, _ := padGeometry(h, w, stride)
	e.compact = compactTask{y: y, src: e.wide, add: add, bias: cv.B, oh: oh, ow: ow, wp: wp}
	e.pool.run(cv.Out, cv.Out*oh*ow, &e.compact)
}

// conv3Products leaves the 3×3 convolution cv's products, without the
// bias, in e.wide [Out, oh, wp].
func (e *VAEEncoder) conv3Products(cv *Conv, h, w, stride int) {
	oh := h / stride
	wp, plane, _ := padGeometry(h, w, stride)
	nw := oh * wp
	oi := cv.Out * cv.In
	taps := e.taps[cv]
	wide := e.wide[:cv.Out*nw]
	for dy := range 3 {
		for dx := range 3 {
			tap := 3*dy + dx
			src, off := 0, dy*wp+dx
			if stride == 2 {
				src, off = (2*(dy%2)+dx%2)*cv.In*plane, (dy/2)*wp+dx/2
			}
			beta := float32(1)
			if tap == 0 {
				beta = 0
			}
			e.gemm.Sgemm(blas.NoTrans, blas.NoTrans, cv.Out, nw, cv.In, 1, taps[tap*oi:(tap+1)*oi], cv.In,
				e.pad[src+off:], plane, beta, wide, nw)
		}
	}
}

// conv1x1 writes the 1×1 convolution cv of x [In, n] into y [Out, n]: one
// product on the activation as it is, then the bias.
func (e *VAEEncoder) conv1x1(y, x []float32, cv *Conv, n int) {
	y = y[:cv.Out*n]
	e.gemm.Sgemm(blas.NoTrans, blas.NoTrans, cv.Out, n, cv.In, 1, cv.W, cv.In, x[:cv.In*n], n, 0, y, n)
	e.compact = compactTask{y: y, src: y, bias: cv.B, oh: 1, ow: n, wp: n}
	e.pool.run(cv.Out, cv.Out*n, &e.compact)
}

// compactTask copies the valid columns of src [Out, oh, wp] into y
// [Out, oh, ow] adding the bias and, when add is not nil, add, over a range
// of output channels: y = (src + b) + add, rounded to float32 at each
// step. src may be y when wp = ow.
type compactTask struct {
	y, src, add, bias []float32
	oh, ow, wp        int
}

func (t *compactTask) run(lo, hi int) {
	n := t.oh * t.ow
	for o := lo; o < hi; o++ {
		b := t.bias[o]
		for r := range t.oh {
			s := t.src[(o*t.oh+r)*t.wp:][:t.ow]
			d := t.y[o*n+r*t.ow:][:t.ow]
			if t.add == nil {
				for j, v := range s {
					d[j] = v + b
				}
				continue
			}
			a := t.add[o*n+r*t.ow:][:t.ow]
			for j, v := range s {
				d[j] = v + b + a[j]
			}
		}
	}
}

// phaseInput writes x [c, h, w] into e.pad as its four phases, laid out
// for a stride-2 3×3 convolution.
func (e *VAEEncoder) phaseInput(x []float32, c, h, w int) {
	e.phase = phaseTask{pad: e.pad, x: x, c: c, h: h, w: w}
	e.pool.run(c, c*h*w, &e.phase)
}

// phaseTask is phaseInput over a range of channels.
type phaseTask struct {
	pad, x  []float32
	c, h, w int
}

func (t *phaseTask) run(lo, hi int) {
	h, w := t.h, t.w
	oh, ow := h/2, w/2
	wp, plane, _ := padGeometry(h, w, 2)
	for ci := lo; ci < hi; ci++ {
		x := t.x[ci*h*w : (ci+1)*h*w]
		for a := range 2 {
			for b := range 2 {
				p := t.pad[((2*a+b)*t.c+ci)*plane:][:plane]
				for i := range oh {
					d := p[i*wp : (i+1)*wp]
					s := x[(2*i+a)*w+b:]
					for j := range ow {
						d[j] = s[2*j]
					}
					d[ow] = 0
				}
				clear(p[oh*wp:])
			}
		}
	}
}

// padLength is the length e.pad needs for every 3×3 convolution of the
// encoder on height × width images, and wideLength e.wide's.
func padLength(w *VAEWeights, height, width int) (pad, wide int) {
	need := func(cv *Conv, h, wd, stride int) {
		wp, plane, phases := padGeometry(h, wd, stride)
		pad = max(pad, phases*cv.In*plane+padSlack)
		wide = max(wide, cv.Out*(h/stride)*wp)
	}
	h, wd := height/2, width/2
	need(&w.Conv1, h, wd, 1)
	for s := range w.Stages {
		st := &w.Stages[s]
		for r := range st.Res {
			need(&st.Res[r].Conv2, h, wd, 1)
			need(&st.Res[r].Conv6, h, wd, 1)
		}
		if st.Down != nil {
			need(st.Down, h, wd, 2)
			h, wd = h/2, wd/2
		}
	}
	for _, rb := range []*ResBlock{&w.Middle0, &w.Middle2} {
		need(&rb.Conv2, h, wd, 1)
		need(&rb.Conv6, h, wd, 1)
	}
	need(&w.Head, h, wd, 1)
	return pad, wide
}

// allConv3 lists the encoder's 3×3 convolutions.
func allConv3(w *VAEWeights) []*Conv {
	cs := []*Conv{&w.Conv1}
	for s := range w.Stages {
		st := &w.Stages[s]
		for r := range st.Res {
			cs = append(cs, &st.Res[r].Conv2, &st.Res[r].Conv6)
		}
		if st.Down != nil {
			cs = append(cs, st.Down)
		}
	}
	return append(cs, &w.Middle0.Conv2, &w.Middle0.Conv6, &w.Middle2.Conv2, &w.Middle2.Conv6, &w.Head)
}
