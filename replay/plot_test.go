package replay

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
)

// chunkOf builds an ActionChunk from rows of values.
func chunkOf(kvSeq uint64, rows ...[]float32) *msgs.ActionChunk {
	c := &msgs.ActionChunk{KVSeq: kvSeq, Steps: 10, Shift: 5, DenoiseMs: 10}
	for _, r := range rows {
		c.Actions = append(c.Actions, msgs.ActionRow{Values: r})
	}
	return c
}

func TestResidual(t *testing.T) {
	rec := chunkOf(0, []float32{0.5, -1, 2}, []float32{0, 0, 0})
	got := chunkOf(0, []float32{0.75, -1, 1.5}, []float32{0.125, 0, -0.25})
	row := Row{Recorded: &Recorded{Chunk: *rec}, Produced: got}
	for _, tc := range []struct {
		d    int
		want []float64
	}{
		{0, []float64{0.25, 0.125}},
		{1, []float64{0, 0}},
		{2, []float64{-0.5, -0.25}},
		{3, nil}, // past the action width
	} {
		res := residual(row, tc.d)
		if len(res) != len(tc.want) || (tc.want == nil) != (res == nil) {
			t.Errorf("dim %d: residual %v, want %v", tc.d, res, tc.want)
			continue
		}
		for k := range res {
			if res[k] != tc.want[k] {
				t.Errorf("dim %d row %d: residual %v, want %v (replayed - recorded)", tc.d, k, res[k], tc.want[k])
			}
		}
	}
	if res := residual(Row{Recorded: &Recorded{Chunk: *rec}}, 0); res != nil {
		t.Errorf("missing chunk: residual %v, want nil", res)
	}
	if res := residual(Row{Produced: got}, 0); res != nil {
		t.Errorf("new chunk: residual %v, want nil", res)
	}
	short := chunkOf(0, []float32{0.5, -1, 2})
	if res := residual(Row{Recorded: &Recorded{Chunk: *rec}, Produced: short}, 0); res != nil {
		t.Errorf("chunks of 2 and 1 rows: residual %v, want nil", res)
	}
	narrow := chunkOf(0, []float32{0.5, -1}, []float32{0, 0})
	if res := residual(Row{Recorded: &Recorded{Chunk: *rec}, Produced: narrow}, 0); res != nil {
		t.Errorf("rows of 3 and 2 values: residual %v, want nil", res)
	}
}

// TestChunkPoints checks the verdict each chunk is drawn with against the
// gate -min-cos 0.9999 -max-err 1e-3, including chunks just either side of
// it.
func TestChunkPoints(t *testing.T) {
	c := chunkOf(0, []float32{1})
	both := func(cos, maxErr float64, s Status) Row {
		return Row{Recorded: &Recorded{Chunk: *c}, Produced: c, Cosine: cos, MaxAbsErr: maxErr, Status: s}
	}
	rows := []Row{
		both(0.99991, 5e-4, StatusOK),                // near-miss, passing
		both(0.99989, 5e-4, StatusMismatch),          // near-miss, failing on the cosine
		both(0.9999, 1e-3, StatusOK),                 // exactly at both gates: passes
		both(1, 2e-3, StatusMismatch),                // failing on max |error| only
		both(math.NaN(), math.NaN(), StatusMismatch), // chunks of different sizes
		{Recorded: &Recorded{Chunk: *c}, Status: StatusMissing},
		{Produced: c, Status: StatusNew},
		{Status: StatusNoOutput}, // neither: not plotted
	}
	r := &Report{Rows: rows, MinCosine: 0.9999, MaxAbsErr: 1e-3}
	plotted := plottedRows(r)
	if len(plotted) != 7 {
		t.Fatalf("%d rows plotted, want 7 (the row with neither chunk is not)", len(plotted))
	}
	pts := chunkPoints(r, plotted)
	want := []struct {
		kind               chunkKind
		cosFails, errFails bool
		oneMinusCos        float64 // NaN: not compared
	}{
		{chunkPass, false, false, 9e-5},
		{chunkFail, true, false, 1.1e-4},
		{chunkPass, false, false, 1e-4},
		{chunkFail, false, true, 0},
		{chunkFail, true, true, math.NaN()},
		{chunkMissing, false, false, math.NaN()},
		{chunkNew, false, false, math.NaN()},
	}
	for i, w := range want {
		p := pts[i]
		if p.Index != i || p.Kind != w.kind || p.CosFails != w.cosFails || p.ErrFails != w.errFails {
			t.Errorf("chunk %d: index %d %v, cosine outside %v, max|err| outside %v; want %d %v %v %v",
				i, p.Index, p.Kind, p.CosFails, p.ErrFails, i, w.kind, w.cosFails, w.errFails)
		}
		if math.IsNaN(w.oneMinusCos) != math.IsNaN(p.OneMinusCos) || math.Abs(p.OneMinusCos-w.oneMinusCos) > 1e-12 {
			t.Errorf("chunk %d: 1 - cos %g, want %g", i, p.OneMinusCos, w.oneMinusCos)
		}
	}
	if got, want := failedNames(pts), "failing: kv_seq 0, kv_seq 0, kv_seq 0, kv_seq 0 (missing)"; got != want {
		t.Errorf("failedNames %q, want %q", got, want)
	}
	// With the max |error| gate off, no chunk fails it.
	r.MaxAbsErr = 0
	for i, p := range chunkPoints(r, plotted) {
		if p.ErrFails {
			t.Errorf("-max-err 0: chunk %d drawn outside the max |error| gate", i)
		}
	}
}

// syntheticReport is a 200-chunk replay: the recorded actions a smooth
// trajectory, the replayed ones that plus a small error, one chunk a
// near-miss on each side of the cosine gate, one failing max |error|
// only, two missing and one produced without a recording, judged by the
// replay's own verdict code.
func syntheticReport(n int, failures bool) *Report {
	const rowsPer, dims = 32, 7
	r := &Report{Bag: "/tmp/synthetic_bag", MinCosine: 0.9999, MaxAbsErr: 0.05}
	for i := range n {
		rec := &msgs.ActionChunk{KVSeq: uint64(i), Steps: 10, Shift: 5, DenoiseMs: float32(9 + i%3)}
		got := &msgs.ActionChunk{KVSeq: uint64(i), Steps: 10, Shift: 5, DenoiseMs: float32(11 + i%5)}
		scale := 1e-5 // error relative to the signal
		if failures {
			switch i {
			case 40:
				scale = 0.0095 // just inside the cosine gate
			case 41:
				scale = 0.0175 // just outside
			case 150:
				scale = 0.002 // cosine fine; one value off by more than -max-err, below
			}
		}
		for k := range rowsPer {
			rv, gv := make([]float32, dims), make([]float32, dims)
			for d := range dims {
				x := float64(i*rowsPer+k) / 50
				v := math.Sin(x+float64(d)) * (0.5 + 0.1*float64(d))
				rv[d] = float32(v)
				gv[d] = float32(v + scale*math.Cos(3*x+float64(d*d)))
			}
			if failures && i == 150 && k == 7 {
				gv[3] += 0.08
			}
			rec.Actions = append(rec.Actions, msgs.ActionRow{Values: rv})
			got.Actions = append(got.Actions, msgs.ActionRow{Values: gv})
		}
		row := Row{Stamp: time.Unix(1700000000, 0).Add(time.Duration(i) * 100 * time.Millisecond), KVSeq: uint64(i),
			Recorded: &Recorded{Chunk: *rec}, Produced: got}
		if failures {
			switch i {
			case 90, 91:
				row.Produced = nil
			case n - 1:
				row.Recorded = nil
			}
		}
		row.judge(r.MinCosine, r.MaxAbsErr, rowInputs{kvFed: true, paired: true})
		r.Rows = append(r.Rows, row)
	}
	return r
}

// TestSyntheticVerdicts checks that the synthetic report holds what the
// plot test relies on: near-misses either side of the gate.
func TestSyntheticVerdicts(t *testing.T) {
	r := syntheticReport(200, true)
	want := map[int]Status{0: StatusOK, 40: StatusOK, 41: StatusMismatch, 90: StatusMissing, 91: StatusMissing, 150: StatusMismatch, 199: StatusNew}
	for i, s := range want {
		if r.Rows[i].Status != s {
			t.Errorf("chunk %d: %s (cosine %.6f, max|err| %.3g), want %s", i, r.Rows[i].Status, r.Rows[i].Cosine, r.Rows[i].MaxAbsErr, s)
		}
	}
	if c := r.Rows[40].Cosine; !(c >= 0.9999 && c < 0.99995) {
		t.Errorf("chunk 40: cosine %.6f, want a near-miss just inside the gate 0.9999", c)
	}
	if c := r.Rows[41].Cosine; !(c < 0.9999 && c > 0.9998) {
		t.Errorf("chunk 41: cosine %.6f, want a near-miss just outside the gate 0.9999", c)
	}
	if c := r.Rows[150].Cosine; !(c >= 0.9999) {
		t.Errorf("chunk 150: cosine %.6f, want it within the gate (it fails on max |error| only)", c)
	}
}

func TestFailedNames(t *testing.T) {
	var pts []chunkPoint
	for i := range 14 {
		pts = append(pts, chunkPoint{Index: i, KVSeq: uint64(100 + i), Kind: chunkFail})
	}
	pts[1].Kind, pts[2].Kind = chunkPass, chunkMissing
	want := "failing: kv_seq 100, kv_seq 102 (missing), kv_seq 103, kv_seq 104, kv_seq 105, kv_seq 106, kv_seq 107, kv_seq 108, kv_seq 109, kv_seq 110 and 3 more"
	if got := failedNames(pts); got != want {
		t.Errorf("failedNames\n got %q\nwant %q", got, want)
	}
	if got := failedNames(pts[1:2]); got != "" {
		t.Errorf("failedNames of a passing chunk: %q, want none", got)
	}
}

// colourCount counts the pixels of img of exactly the colour c.
func colourCount(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(bl>>8) == c.B && uint8(a>>8) == c.A {
				n++
			}
		}
	}
	return n
}

// writeAndRead writes the plot of r and decodes it.
func writeAndRead(t *testing.T, r *Report, name string) image.Image {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := WritePlot(r, path); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("FASTWAM_PLOT_DIR"); dir != "" { // to look at it
		data, _ := os.ReadFile(path)
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	w, h := PlotSize(r)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("plot is %dx%d pixels, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
	return img
}

// TestPlot200Chunks draws a 200-chunk replay with near-misses, failures
// and missing chunks, and one where every chunk passes: the failed and
// missing bands appear in the first and not in the second, the gate in
// both.
func TestPlot200Chunks(t *testing.T) {
	if w, h := PlotSize(syntheticReport(200, true)); w != 1344 || h != 1728 {
		t.Errorf("PlotSize %dx%d, want 1344x1728 (14 x 18 in at 96 dpi: header and 5 rows of panels)", w, h)
	}
	bad := writeAndRead(t, syntheticReport(200, true), "replay_failures.png")
	good := writeAndRead(t, syntheticReport(200, false), "replay_pass.png")
	for _, c := range []struct {
		name        string
		colour      color.RGBA
		inBad, inOK bool
	}{
		{"failed-chunk band", bandFail(), true, false},
		{"missing-chunk band", bandMissing(), true, false},
		{"gate line", colourGate(), true, true},
	} {
		nb, ng := colourCount(bad, c.colour), colourCount(good, c.colour)
		if (nb > 0) != c.inBad || (ng > 0) != c.inOK {
			t.Errorf("%s: %d pixels in the plot with failures (want some: %v), %d in the passing one (want some: %v)", c.name, nb, c.inBad, ng, c.inOK)
		}
	}
	// Not a blank canvas: the passing plot draws its residuals.
	if n := colourCount(good, colourOK()); n < 1000 {
		t.Errorf("passing plot: %d pixels in the residual colour, want a drawn plot", n)
	}
}

func TestPlotErrors(t *testing.T) {
	if err := WritePlot(&Report{}, filepath.Join(t.TempDir(), "x.png")); err == nil || !strings.Contains(err.Error(), "no recorded or produced chunks") {
		t.Errorf("empty report: %v, want an error saying there is nothing to plot", err)
	}
	if err := WritePlot(syntheticReport(3, false), filepath.Join(t.TempDir(), "no", "such", "dir.png")); err == nil {
		t.Error("plot into a missing directory: no error")
	}
}

// exactReport is a replay that reproduced every chunk bit for bit.
func exactReport(n int) *Report {
	r := syntheticReport(n, false)
	for i := range r.Rows {
		if r.Rows[i].Recorded == nil || r.Rows[i].Produced == nil {
			continue
		}
		c := r.Rows[i].Recorded.Chunk
		c.Actions = make([]msgs.ActionRow, len(c.Actions))
		for k, a := range r.Rows[i].Recorded.Chunk.Actions {
			c.Actions[k] = msgs.ActionRow{Values: append([]float32(nil), a.Values...)}
		}
		r.Rows[i].Produced = &c
		r.Rows[i].Cosine, r.Rows[i].MaxAbsErr = 1, 0
	}
	return r
}

// TestPlotExactReplay: a bit-exact replay draws no flat residual panels
// (the header names the dimensions instead), so the figure has the gate
// panels and the denoise time only; its 1 - cosine and max |error| are on
// the zero row, labelled 0.
func TestPlotExactReplay(t *testing.T) {
	r := exactReport(20)
	lay := layoutOf(r)
	if len(lay.dims) != 0 || len(lay.zeroDims) != plotDims || lay.rows != 2 {
		t.Fatalf("layout of an exact replay: %+v, want no residual panel, all %d dimensions exactly 0, 2 rows", lay, plotDims)
	}
	if w, h := PlotSize(r); w != 1344 || h != 737 {
		t.Errorf("PlotSize %dx%d, want 1344x737 (header and 2 rows)", w, h)
	}
	writeAndRead(t, r, "replay_exact.png")
	// One dimension off by a little gets its panel back.
	for i := range r.Rows {
		if r.Rows[i].Produced != nil && r.Rows[i].Recorded != nil {
			r.Rows[i].Produced.Actions[0].Values[2] += 1e-3
			break
		}
	}
	if lay := layoutOf(r); len(lay.dims) != 1 || lay.dims[0] != 2 || lay.rows != 2 {
		t.Errorf("layout with dim 2 off: %+v, want one panel (dim 2), 2 rows (4 panels)", lay)
	}
}

// TestLogPanelAxis: the 1 - cosine axis never runs past 2, and zeros sit
// on a row of their own, labelled 0, below every non-zero value.
func TestLogPanelAxis(t *testing.T) {
	pts := []chunkPoint{{Index: 0, Kind: chunkFail, OneMinusCos: 1.2}, {Index: 1, Kind: chunkPass, OneMinusCos: 0}, {Index: 2, Kind: chunkPass, OneMinusCos: 3e-8}}
	p := newChunkPlot("t", "y", len(pts))
	if err := logPanel(p, pts, func(c chunkPoint) float64 { return c.OneMinusCos }, func(c chunkPoint) bool { return c.OneMinusCos > 1e-4 },
		maxOneMinusCos, 1e-4, "gate"); err != nil {
		t.Fatal(err)
	}
	if p.Y.Max > 2 || p.Y.Max < 1.2 {
		t.Errorf("1 - cos axis ends at %g, want within [1.2, 2]", p.Y.Max)
	}
	ticks := p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)
	if len(ticks) == 0 || ticks[0].Label != "0" || !(ticks[0].Value < 3e-8) || !(ticks[0].Value > p.Y.Min) {
		t.Errorf("first tick %+v (axis from %g), want the zero row labelled 0 below 3e-8", ticks[0], p.Y.Min)
	}
	for _, tk := range ticks[1:] {
		if tk.Value <= ticks[0].Value {
			t.Errorf("tick %+v at or below the zero row", tk)
		}
	}
}
