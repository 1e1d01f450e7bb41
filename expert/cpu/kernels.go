package cpu

import "math"

// layerNormModulate writes LN(x)·(1+scale)+shift row by row (width d), the
// parameter-free LayerNorm of norm1/norm2 followed by adaLN modulation.
func layerNormModulate(out, x []float32, d int, scale, shift []float32, eps float64) {
	for r := 0; r*d < len(x); r++ {
		row, o := x[r*d:(r+1)*d], out[r*d:(r+1)*d]
		mu, inv := meanInvStd(row, eps)
		for i, v := range row {
			n := float32((float64(v) - mu) * inv)
			o[i] = n*(1+scale[i]) + shift[i]
		}
	}
}

// layerNormAffine writes LN(x)·w+bias row by row (width d): norm3.
func layerNormAffine(out, x []float32, d int, w, bias []float32, eps float64) {
	for r := 0; r*d < len(x); r++ {
		row, o := x[r*d:(r+1)*d], out[r*d:(r+1)*d]
		mu, inv := meanInvStd(row, eps)
		for i, v := range row {
			o[i] = float32((float64(v)-mu)*inv)*w[i] + bias[i]
		}
	}
}

// meanInvStd returns the mean and 1/sqrt(biased variance + eps) of row.
func meanInvStd(row []float32, eps float64) (mu, inv float64) {
	var s float64
	for _, v := range row {
		s += float64(v)
	}
	mu = s / float64(len(row))
	var q float64
	for _, v := range row {
		d := float64(v) - mu
		q += d * d
	}
	return mu, 1 / math.Sqrt(q/float64(len(row))+eps)
}

// rmsNormRows normalises each row of width d by its root mean square and
// multiplies by the gain g.
func rmsNormRows(m []float32, d int, g []float32, eps float64) {
	rmsNormStrided(m, len(m)/d, d, d, 0, g, eps)
}

// rmsNormStrided applies RMSNorm with gain g to the d-wide block at column
// off of each of the rows of m (row stride ld).
func rmsNormStrided(m []float32, rows, d, ld, off int, g []float32, eps float64) {
	for r := 0; r < rows; r++ {
		row := m[r*ld+off : r*ld+off+d]
		var q float64
		for _, v := range row {
			q += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(q/float64(d)+eps))
		for i, v := range row {
			row[i] = v * inv * g[i]
		}
	}
}

// softmaxRows replaces each of the rows of m (width and stride ld) by its
// softmax, subtracting the row maximum first.
func softmaxRows(m []float32, rows, ld int) {
	for r := 0; r < rows; r++ {
		row := m[r*ld : (r+1)*ld]
		mx := row[0]
		for _, v := range row[1:] {
			mx = max(mx, v)
		}
		var s float64
		for i, v := range row {
			e := math.Exp(float64(v - mx))
			row[i] = float32(e)
			s += e
		}
		inv := float32(1 / s)
		for i := range row {
			row[i] *= inv
		}
	}
}

// geluInPlace applies the tanh approximation of GELU.
func geluInPlace(x []float32) {
	const c = 0.7978845608028654 // sqrt(2/pi)
	for i, v := range x {
		u := float64(v)
		x[i] = float32(0.5 * u * (1 + math.Tanh(c*(u+0.044715*u*u*u))))
	}
}

// siluInPlace applies x·sigmoid(x).
func siluInPlace(x []float32) {
	for i, v := range x {
		x[i] = float32(float64(v) / (1 + math.Exp(-float64(v))))
	}
}

// addGated adds gate⊙y to x row by row (gate has the row width d).
func addGated(x, y, gate []float32, d int) {
	for r := 0; r*d < len(x); r++ {
		xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
		for i := range xr {
			xr[i] += gate[i] * yr[i]
		}
	}
}
