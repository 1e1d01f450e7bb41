package replay

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotDims is the number of action dimensions plotted (the LIBERO action
// space); a chunk with fewer leaves the extra panels empty.
const plotDims = 7

// The figure: a header strip with the verdict above a grid of plotCols
// panels a row, each panel plotWidth/plotCols x plotPanelHeight at
// plotDPI. The first row holds the per-chunk cosine and max |error|
// against the gate, then come the residuals of the action dimensions
// whose residual is not exactly 0 everywhere (the header names the ones
// that are), and last the denoise time.
const (
	plotCols        = 2
	plotWidth       = 14 * vg.Inch
	plotHeader      = 0.8 * vg.Inch
	plotPanelHeight = 3.44 * vg.Inch
	plotDPI         = 96
)

// plotLayout is what WritePlot draws: the dimensions given a residual
// panel, the dimensions whose residual is exactly 0 in every compared
// chunk (no panel: the header says so), and the grid's rows.
type plotLayout struct {
	dims, zeroDims []int
	rows           int
}

func layoutOf(r *Report) plotLayout {
	var l plotLayout
	rows := plottedRows(r)
	for d := range plotDims {
		zero, compared := true, false
		for _, row := range rows {
			res := residual(row, d)
			if res == nil {
				continue
			}
			compared = true
			for _, v := range res {
				if v != 0 {
					zero = false
				}
			}
		}
		if compared && zero {
			l.zeroDims = append(l.zeroDims, d)
		} else {
			l.dims = append(l.dims, d)
		}
	}
	panels := 2 + len(l.dims) + 1
	l.rows = (panels + plotCols - 1) / plotCols
	return l
}

// PlotSize is the size in pixels of the PNG that WritePlot writes for r:
// its height grows with the number of residual panels.
func PlotSize(r *Report) (width, height int) {
	h := plotHeader + vg.Length(layoutOf(r).rows)*plotPanelHeight
	return int(math.Round(float64(plotWidth/vg.Inch) * plotDPI)), int(math.Round(float64(h/vg.Inch) * plotDPI))
}

// The log-scale panels cannot show 0, which is what a bit-exact replay
// gives for 1 - cosine and max |error|: zeros are drawn on a row of
// their own at the bottom of the panel, a decade below the smallest
// non-zero value (or the gate), with its tick labelled "0" in both
// panels. maxOneMinusCos is where the 1 - cosine axis ends: 1 - cos
// cannot exceed 2.
const maxOneMinusCos = 2

// Colours of the plot (functions, not variables: no package-level mutable
// state). Failed and missing chunks are told apart by colour and by glyph,
// so the plot still reads in grey scale.
func rgb(r, g, b uint8) color.RGBA { return color.RGBA{R: r, G: g, B: b, A: 0xff} }

func colourOK() color.RGBA      { return rgb(0x1f, 0x4e, 0x9a) } // dark blue
func colourFail() color.RGBA    { return rgb(0xd6, 0x27, 0x28) } // red
func colourMissing() color.RGBA { return rgb(0x60, 0x60, 0x60) } // dark grey
func colourGate() color.RGBA    { return rgb(0xe0, 0x7b, 0x00) } // orange

// Bands behind a failed or a missing chunk, over the whole panel.
func bandFail() color.RGBA    { return rgb(0xff, 0xd8, 0xd8) }
func bandMissing() color.RGBA { return rgb(0xdc, 0xdc, 0xc4) } // a warm grey no antialiased line or text makes

// chunkKind is how a chunk is drawn.
type chunkKind int

const (
	chunkPass    chunkKind = iota // compared, within the gate
	chunkFail                     // compared, outside the gate (or not comparable)
	chunkMissing                  // recorded, not produced by the replay
	chunkNew                      // produced, nothing recorded: nothing to compare
)

func (k chunkKind) String() string {
	switch k {
	case chunkPass:
		return "pass"
	case chunkFail:
		return "fail"
	case chunkMissing:
		return "missing"
	case chunkNew:
		return "new"
	}
	return "chunkKind(" + strconv.Itoa(int(k)) + ")"
}

// chunkPoint is what the plot draws for one chunk in the gate panels.
type chunkPoint struct {
	Index int    // position on the x axis: the chunk spans [Index, Index+1)
	KVSeq uint64 // the table and the error name chunks by kv_seq
	Kind  chunkKind
	// OneMinusCos and MaxAbsErr compare the chunk with the recorded one;
	// NaN when there is nothing to compare (missing, new, or chunks of
	// different sizes).
	OneMinusCos, MaxAbsErr float64
	// CosFails and ErrFails say which side of its gate each measure is.
	// ErrFails is false when the max |error| gate is off (-max-err 0).
	CosFails, ErrFails bool
}

// plottedRows returns the rows that have a recorded or a produced chunk,
// in stamp order: an input that gave neither is not drawn, nor a recorded
// chunk whose inputs are not in the bag (StatusNotComparable), which the
// replay could not reproduce.
func plottedRows(r *Report) []Row {
	var rows []Row
	for _, row := range r.Rows {
		if (row.Recorded != nil || row.Produced != nil) && row.Status != StatusNotComparable {
			rows = append(rows, row)
		}
	}
	return rows
}

// chunkPoints classifies each plotted row and places its measures against
// the report's gate (r.MinCosine, r.MaxAbsErr).
func chunkPoints(r *Report, rows []Row) []chunkPoint {
	pts := make([]chunkPoint, len(rows))
	for i, row := range rows {
		p := chunkPoint{Index: i, KVSeq: row.KVSeq, OneMinusCos: math.NaN(), MaxAbsErr: math.NaN()}
		switch {
		case row.Recorded != nil && row.Produced != nil:
			p.Kind = chunkPass
			if row.Status.Failed() {
				p.Kind = chunkFail
			}
			p.OneMinusCos, p.MaxAbsErr = 1-row.Cosine, row.MaxAbsErr
			p.CosFails = !(row.Cosine >= r.MinCosine)
			p.ErrFails = r.MaxAbsErr > 0 && !(row.MaxAbsErr <= r.MaxAbsErr)
		case row.Recorded != nil:
			p.Kind = chunkMissing
		default:
			p.Kind = chunkNew
		}
		pts[i] = p
	}
	return pts
}

// residual returns replayed - recorded of action dimension d for each row
// of the chunk, or nil when the row has no pair of chunks to compare or
// the two differ in shape.
func residual(row Row, d int) []float64 {
	if row.Recorded == nil || row.Produced == nil {
		return nil
	}
	rec, got := row.Recorded.Chunk.Actions, row.Produced.Actions
	if len(rec) != len(got) {
		return nil
	}
	out := make([]float64, len(rec))
	for k := range rec {
		if len(rec[k].Values) != len(got[k].Values) || d >= len(rec[k].Values) {
			return nil
		}
		out[k] = float64(got[k].Values[d]) - float64(rec[k].Values[d])
	}
	return out
}

// WritePlot draws the report as a PNG file of PlotSize pixels, made to
// tell a near-miss from a pass:
//   - the per-chunk 1 - cosine and max |replayed - recorded|, on log
//     scales, with the gates (r.MinCosine, r.MaxAbsErr) drawn;
//   - for each of the 7 action dimensions, the residual replayed -
//     recorded of every row of every chunk, the chunks laid end to end;
//   - the denoise time of each chunk, recorded and replayed.
//
// Chunks failing the gate are drawn in red over a pale red band, chunks
// the replay did not produce as a grey band with a square marker; a
// legend in each panel says which is which.
func WritePlot(r *Report, path string) error {
	rows := plottedRows(r)
	if len(rows) == 0 {
		return errors.New("replay: plot: no recorded or produced chunks to plot, want at least one")
	}
	pts := chunkPoints(r, rows)
	lay := layoutOf(r)
	var panels []*plot.Plot
	p, err := cosinePlot(r, pts)
	if err != nil {
		return err
	}
	panels = append(panels, p)
	if p, err = maxErrPlot(r, pts); err != nil {
		return err
	}
	panels = append(panels, p)
	for i, d := range lay.dims {
		if p, err = residualPlot(r, rows, pts, d, i == 0); err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if p, err = latencyPlot(rows, pts); err != nil {
		return err
	}
	panels = append(panels, p)
	plots := make([][]*plot.Plot, lay.rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, plotCols)
	}
	for i, p := range panels {
		plots[i/plotCols][i%plotCols] = p
	}

	w, h := PlotSize(r)
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(w)*vg.Inch/plotDPI, vg.Length(h)*vg.Inch/plotDPI), vgimg.UseDPI(plotDPI))
	dc := draw.New(img)
	drawHeader(draw.Crop(dc, vg.Millimeter*6, -vg.Millimeter*6, dc.Max.Y-dc.Min.Y-plotHeader, -vg.Millimeter*3), r, pts, lay)
	tiles := draw.Tiles{Rows: lay.rows, Cols: plotCols, PadX: vg.Millimeter * 8, PadY: vg.Millimeter * 8,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -plotHeader))
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("replay: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("replay: plot: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("replay: plot: %w", err)
	}
	return nil
}

// drawHeader writes the figure's headline into c: the verdict, large and
// in the pass or fail colour, then the failing chunks and the dimensions
// whose residual is exactly 0 (they get no panel).
func drawHeader(c draw.Canvas, r *Report, pts []chunkPoint, lay plotLayout) {
	verdict, details := verdictLine(r, pts)
	big := plot.New().Title.TextStyle
	big.XAlign, big.YAlign = draw.XLeft, draw.YTop
	big.Font.Size = vg.Points(18)
	big.Color = colourOK()
	if strings.Contains(verdict, "FAIL") {
		big.Color = colourFail()
	}
	y := c.Max.Y
	c.FillText(big, vg.Point{X: c.Min.X, Y: y}, verdict)
	y -= big.Height(verdict) * 1.25
	small := big
	small.Font.Size = vg.Points(11)
	small.Color = color.Black
	if len(lay.zeroDims) > 0 {
		details = append(details, fmt.Sprintf("residual exactly 0 in every compared chunk (no panel): action dim %s", joinInts(lay.zeroDims)))
	}
	for _, line := range details {
		c.FillText(small, vg.Point{X: c.Min.X, Y: y}, line)
		y -= small.Height(line) * 1.3
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// verdictLine is the figure's headline, what the gate says overall, and
// the names of the failing chunks when there are any.
func verdictLine(r *Report, pts []chunkPoint) (string, []string) {
	var fail, missing, compared int
	for _, p := range pts {
		switch p.Kind {
		case chunkFail:
			fail++
			compared++
		case chunkMissing:
			missing++
		case chunkPass:
			compared++
		}
	}
	verdict := "PASS"
	if fail+missing > 0 || r.Err() != nil {
		verdict = "FAIL"
	}
	line := fmt.Sprintf("%s: %s, %d compared, %d outside the gate, %d missing", filepath.Base(r.Bag), verdict, compared, fail, missing)
	if r.NotComparable > 0 {
		line += fmt.Sprintf(", %d not comparable", r.NotComparable)
	}
	var details []string
	if names := failedNames(pts); names != "" {
		details = append(details, names)
	}
	return line, details
}

// failedNames names the failing and missing chunks by kv_seq, as the
// table and the error do, at most maxNamed of them.
func failedNames(pts []chunkPoint) string {
	var parts []string
	n := 0
	for _, p := range pts {
		if p.Kind != chunkFail && p.Kind != chunkMissing {
			continue
		}
		n++
		if len(parts) == maxNamed {
			continue
		}
		s := "kv_seq " + strconv.FormatUint(p.KVSeq, 10)
		if p.Kind == chunkMissing {
			s += " (missing)"
		}
		parts = append(parts, s)
	}
	if n == 0 {
		return ""
	}
	out := "failing: " + strings.Join(parts, ", ")
	if n > len(parts) {
		out += fmt.Sprintf(" and %d more", n-len(parts))
	}
	return out
}

// newChunkPlot is a panel with the chunks on the x axis, n of them.
func newChunkPlot(title, ylabel string, n int) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "chunk (index, in stamp order)"
	p.X.Tick.Marker = chunkTicks(n)
	p.X.Min, p.X.Max = 0, float64(n)
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(18)
	return p
}

// decadeTicks labels the powers of ten of a log axis as 1e-4 and so on
// (gonum's LogTicks prints 1.0000000000000004e-07), every decade up to
// eight of them, else every second or third.
type decadeTicks struct{}

// Ticks implements plot.Ticker.
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0 && hi > lo) {
		return nil
	}
	e0, e1 := int(math.Ceil(math.Log10(lo)-1e-9)), int(math.Floor(math.Log10(hi)+1e-9))
	step := 1
	for (e1-e0)/step > 8 {
		step++
	}
	var ticks []plot.Tick
	for e := e0; e <= e1; e++ {
		t := plot.Tick{Value: math.Pow(10, float64(e))}
		if e%step == 0 {
			t.Label = "1e" + strconv.Itoa(e)
			if e == 0 {
				t.Label = "1"
			}
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// zeroTicks are decadeTicks above the zero row, and the zero row's own
// tick labelled "0".
type zeroTicks struct{ zero float64 }

// Ticks implements plot.Ticker.
func (z zeroTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := []plot.Tick{{Value: z.zero, Label: "0"}}
	return append(ticks, (decadeTicks{}).Ticks(3*z.zero, hi)...)
}

// logPanel is a log-scale gate panel for one measure: v(p) per chunk, on
// an axis that ends at ceiling at the most, zeros on the panel's zero row,
// with the gate at gate (none when gate <= 0).
func logPanel(p *plot.Plot, pts []chunkPoint, v func(chunkPoint) float64, fails func(chunkPoint) bool, ceiling, gate float64, gateName string) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range pts {
		if x := v(c); x > 0 && !math.IsInf(x, 0) {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	if gate > 0 {
		lo, hi = math.Min(lo, gate), math.Max(hi, gate)
	}
	if lo > hi { // no value above 0 and no gate: an arbitrary decade
		lo, hi = 1e-9, 1e-9
	}
	zero := math.Pow(10, math.Floor(math.Log10(lo))-1)
	// The top of the panel is left for the legend and the markers of
	// missing chunks: the axis spans as few decades as the data allow, so
	// that a near-miss stands apart from the gate.
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = zeroTicks{zero: zero}
	decades := math.Log10(hi / zero)
	p.Y.Min = zero / 2
	p.Y.Max = math.Min(ceiling, hi*math.Pow(10, math.Max(1.5, 0.6*decades)))
	top := math.Min(p.Y.Max, hi*math.Pow(10, math.Max(0.7, 0.2*decades))) // where missing and incomparable chunks are drawn
	floor := zero
	bands, err := shadeChunks(p, pts)
	if err != nil {
		return err
	}
	if gate > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: gate}, {X: p.X.Max, Y: gate}})
		if err != nil {
			return fmt.Errorf("replay: plot: gate: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: colourGate(), Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}
		p.Add(l)
		p.Legend.Add(gateName, l)
	}
	// The band says how the chunk fared; the glyph how this measure did
	// against its own gate (a chunk failing on max |error| alone has a
	// passing cosine over a red band).
	var pass, fail, missing plotter.XYs
	for _, c := range pts {
		x := float64(c.Index) + 0.5
		switch c.Kind {
		case chunkMissing:
			missing = append(missing, plotter.XY{X: x, Y: top})
		case chunkPass, chunkFail:
			y := v(c)
			switch {
			case math.IsNaN(y) || math.IsInf(y, 0): // not comparable: drawn at the top
				y = top
			case y <= 0:
				y = floor
			}
			if fails(c) || math.IsNaN(v(c)) || math.IsInf(v(c), 0) {
				fail = append(fail, plotter.XY{X: x, Y: y})
			} else {
				pass = append(pass, plotter.XY{X: x, Y: y})
			}
		}
	}
	return addPoints(p, []pointSeries{
		{"within its gate", pass, draw.GlyphStyle{Color: colourOK(), Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}, nil},
		{"outside its gate (or not comparable, at the top)", fail, draw.GlyphStyle{Color: colourFail(), Radius: vg.Points(3.5), Shape: draw.CrossGlyph{}}, nil},
		{"missing chunk: recorded, not produced", missing, draw.GlyphStyle{Color: colourMissing(), Radius: vg.Points(3), Shape: draw.BoxGlyph{}}, bands.missing},
	}, bands)
}

// pointSeries is one legend entry of scattered points, with the band
// drawn under it in the legend when there is one.
type pointSeries struct {
	name  string
	xys   plotter.XYs
	glyph draw.GlyphStyle
	band  plot.Thumbnailer
}

// addPoints adds the series, then the failed-chunk band's legend entry.
func addPoints(p *plot.Plot, series []pointSeries, bands chunkBands) error {
	for _, s := range series {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return fmt.Errorf("replay: plot: %s: %w", s.name, err)
		}
		sc.GlyphStyle = s.glyph
		p.Add(sc)
		if s.band != nil {
			p.Legend.Add(s.name, s.band, sc)
		} else {
			p.Legend.Add(s.name, sc)
		}
	}
	if bands.failed != nil {
		p.Legend.Add("failed chunk (outside the gate)", bands.failed)
	}
	return nil
}

// cosinePlot draws 1 - cosine per chunk against the -min-cos gate.
func cosinePlot(r *Report, pts []chunkPoint) (*plot.Plot, error) {
	p := newChunkPlot("1 - cosine(replayed, recorded) per chunk", "1 - cosine (log; 0 on its own row)", len(pts))
	gate := 1 - r.MinCosine
	err := logPanel(p, pts, func(c chunkPoint) float64 { return c.OneMinusCos }, func(c chunkPoint) bool { return c.CosFails },
		maxOneMinusCos, gate, fmt.Sprintf("gate: -min-cos %g (1 - cos = %.3g)", r.MinCosine, gate))
	return p, err
}

// maxErrPlot draws max |replayed - recorded| per chunk against the
// -max-err gate, when there is one.
func maxErrPlot(r *Report, pts []chunkPoint) (*plot.Plot, error) {
	title := "max |replayed - recorded| per chunk"
	if r.MaxAbsErr <= 0 {
		title += " (no gate: -max-err 0)"
	}
	p := newChunkPlot(title, "max |error|, action units (log; 0 on its own row)", len(pts))
	err := logPanel(p, pts, func(c chunkPoint) float64 { return c.MaxAbsErr }, func(c chunkPoint) bool { return c.ErrFails },
		math.Inf(1), r.MaxAbsErr, fmt.Sprintf("gate: -max-err %g", r.MaxAbsErr))
	return p, err
}

// chunkBands are the first band of each kind a panel drew, for its
// legend (nil when it drew none).
type chunkBands struct {
	failed, missing plot.Thumbnailer
}

// shadeChunks draws a band over the panel's y range behind each failed
// (pale red) and missing (warm grey) chunk.
func shadeChunks(p *plot.Plot, pts []chunkPoint) (chunkBands, error) {
	var bands chunkBands
	for _, c := range pts {
		var fill color.Color
		switch c.Kind {
		case chunkFail:
			fill = bandFail()
		case chunkMissing:
			fill = bandMissing()
		default:
			continue
		}
		x0, x1 := float64(c.Index), float64(c.Index+1)
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: p.Y.Min}, {X: x1, Y: p.Y.Min}, {X: x1, Y: p.Y.Max}, {X: x0, Y: p.Y.Max}})
		if err != nil {
			return bands, fmt.Errorf("replay: plot: %w", err)
		}
		band.Color = fill
		band.LineStyle.Width = 0
		p.Add(band)
		switch {
		case c.Kind == chunkFail && bands.failed == nil:
			bands.failed = band
		case c.Kind == chunkMissing && bands.missing == nil:
			bands.missing = band
		}
	}
	return bands, nil
}

// residualPlot draws replayed - recorded of dimension d, one line per
// chunk so that no line joins the end of a chunk to the next one; the
// lines of failed chunks are red, the ±max-err gate is drawn when there is
// one.
func residualPlot(r *Report, rows []Row, pts []chunkPoint, d int, legend bool) (*plot.Plot, error) {
	var lines [2][]plotter.XYs // [0] passing chunks, [1] failing ones
	m := 0.0
	recLo, recHi := math.Inf(1), math.Inf(-1)
	for i, row := range rows {
		if row.Recorded != nil {
			for _, a := range row.Recorded.Chunk.Actions {
				if d < len(a.Values) {
					v := float64(a.Values[d])
					recLo, recHi = math.Min(recLo, v), math.Max(recHi, v)
				}
			}
		}
		res := residual(row, d)
		if res == nil {
			continue
		}
		xys := make(plotter.XYs, len(res))
		for k, y := range res {
			xys[k] = plotter.XY{X: float64(i) + float64(k)/float64(len(res)), Y: y}
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				m = math.Max(m, math.Abs(y))
			}
		}
		j := 0
		if pts[i].Kind == chunkFail {
			j = 1
		}
		lines[j] = append(lines[j], xys)
	}
	title := fmt.Sprintf("action dim %d: residual", d)
	if recLo <= recHi {
		title += fmt.Sprintf(" (recorded values in [%.3g, %.3g])", recLo, recHi)
	}
	if m == 0 { // no chunk of this dimension was compared (layoutOf gives exact zeros no panel)
		title += ", nothing compared"
		m = 1e-6
	}
	// Only the first residual panel has a legend (the others draw the
	// same way), and room above the data for it.
	p := newChunkPlot(title, "replayed - recorded (action units)", len(rows))
	p.Y.Min, p.Y.Max = -1.15*m, 1.15*m
	if legend {
		p.Y.Max = 2.2 * m
	}
	bands, err := shadeChunks(p, pts)
	if err != nil {
		return nil, err
	}
	if r.MaxAbsErr > 0 && r.MaxAbsErr < p.Y.Max {
		for _, y := range []float64{r.MaxAbsErr, -r.MaxAbsErr} {
			l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: p.X.Max, Y: y}})
			if err != nil {
				return nil, fmt.Errorf("replay: plot: gate: %w", err)
			}
			l.LineStyle = draw.LineStyle{Color: colourGate(), Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}
			p.Add(l)
			if y > 0 && legend {
				p.Legend.Add(fmt.Sprintf("gate: ±%g (-max-err)", r.MaxAbsErr), l)
			}
		}
	}
	for j, name := range []string{"residual, chunk within the gate", "residual, chunk outside the gate"} {
		style := draw.LineStyle{Color: colourOK(), Width: vg.Points(1)}
		if j == 1 {
			style = draw.LineStyle{Color: colourFail(), Width: vg.Points(1.4)}
		}
		for i, xys := range lines[j] {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("replay: plot: dim %d: %w", d, err)
			}
			l.LineStyle = style
			p.Add(l)
			if i == 0 && legend {
				p.Legend.Add(name, l)
			}
		}
	}
	if legend {
		if bands.failed != nil {
			p.Legend.Add("failed chunk", bands.failed)
		}
		if bands.missing != nil {
			p.Legend.Add("missing chunk: no residual", bands.missing)
		}
	}
	return p, nil
}

// chunkTicks labels whole chunk indexes, at most about ten of them (a
// step of 1, 2 or 5 times a power of ten), with a minor tick at every
// chunk up to 100 chunks.
func chunkTicks(n int) plot.Ticker {
	step := 0
	for m := 1; step == 0; m *= 10 {
		for _, s := range []int{1, 2, 5} {
			if n/(s*m) <= 10 {
				step = s * m
				break
			}
		}
	}
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for v := int(math.Ceil(lo)); float64(v) <= hi; v++ {
			t := plot.Tick{Value: float64(v)}
			if v%step == 0 {
				t.Label = strconv.Itoa(v)
			}
			if v%step == 0 || n <= 100 {
				ticks = append(ticks, t)
			}
		}
		return ticks
	})
}

// latencyPlot draws the denoise time of each chunk, recorded and replayed.
func latencyPlot(rows []Row, pts []chunkPoint) (*plot.Plot, error) {
	p := newChunkPlot("denoise time per chunk", "denoise time (ms)", len(rows))
	var rec, prod plotter.XYs
	top := 0.0
	for i, row := range rows {
		x := float64(i) + 0.5
		if row.Recorded != nil {
			rec = append(rec, plotter.XY{X: x, Y: float64(row.Recorded.Chunk.DenoiseMs)})
			top = math.Max(top, float64(row.Recorded.Chunk.DenoiseMs))
		}
		if row.Produced != nil {
			prod = append(prod, plotter.XY{X: x, Y: float64(row.Produced.DenoiseMs)})
			top = math.Max(top, float64(row.Produced.DenoiseMs))
		}
	}
	p.Y.Min, p.Y.Max = 0, math.Max(top*1.4, 1e-3)
	if _, err := shadeChunks(p, pts); err != nil {
		return nil, err
	}
	// Glyphs only while they stay apart.
	glyphs := len(rows) <= 50
	for _, s := range []struct {
		name  string
		xys   plotter.XYs
		style draw.LineStyle
		shape draw.GlyphDrawer
	}{
		{"recorded", rec, draw.LineStyle{Color: color.Black, Width: vg.Points(1)}, draw.CircleGlyph{}},
		{"replayed", prod, draw.LineStyle{Color: colourOK(), Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}, draw.TriangleGlyph{}},
	} {
		if len(s.xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, fmt.Errorf("replay: plot: latency: %w", err)
		}
		l.LineStyle = s.style
		if !glyphs {
			p.Add(l)
			p.Legend.Add(s.name, l)
			continue
		}
		pts.GlyphStyle = draw.GlyphStyle{Color: s.style.Color, Radius: vg.Points(2), Shape: s.shape}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return p, nil
}
