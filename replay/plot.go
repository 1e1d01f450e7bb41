package replay

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/fastwam/actionexpert/msgs"
)

// Colours and sizes of the plot.
func recordedStyle() draw.LineStyle {
	return draw.LineStyle{Color: color.Black, Width: vg.Points(1.2)}
}

func producedStyle() draw.LineStyle {
	return draw.LineStyle{Color: color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, Width: vg.Points(1.2),
		Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
}

// plotDims is the number of action dimensions plotted (the LIBERO action
// space); a chunk with fewer leaves the extra panels empty.
const plotDims = 7

// WritePlot draws the report as a PNG file: for each of the 7 action
// dimensions, the recorded and the produced actions with the chunks laid
// end to end (x = chunk index + row / rows per chunk), and the denoise time
// of each chunk, recorded and replayed.
func WritePlot(r *Report, path string) error {
	var rows []Row
	for _, row := range r.Rows {
		if row.Recorded != nil || row.Produced != nil {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return errors.New("replay: plot: no recorded or produced chunks to plot")
	}
	plots := make([][]*plot.Plot, 4)
	for i := range plots {
		plots[i] = make([]*plot.Plot, 2)
	}
	for d := range plotDims {
		p, err := actionPlot(rows, d)
		if err != nil {
			return err
		}
		plots[d/2][d%2] = p
	}
	lat, err := latencyPlot(rows)
	if err != nil {
		return err
	}
	plots[3][1] = lat
	plots[0][0].Title.Text = fmt.Sprintf("%s: action dim 0", filepath.Base(r.Bag))

	img := vgimg.NewWith(vgimg.UseWH(14*vg.Inch, 15*vg.Inch), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 4, Cols: 2, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			p.Draw(canvases[i][j])
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

// actionPlot draws dimension d of every chunk, one line per chunk and
// source, so that no line joins the end of a chunk to the next one. The
// chunks failing the gate are shaded.
func actionPlot(rows []Row, d int) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("action dim %d", d)
	p.X.Label.Text = "chunk (+ row / rows per chunk)"
	p.X.Tick.Marker = chunkTicks(len(rows))
	p.Legend.Top = true
	type series struct {
		name  string
		style draw.LineStyle
		lines []plotter.XYs
	}
	all := []*series{{name: "recorded", style: recordedStyle()}, {name: "replayed", style: producedStyle()}}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, row := range rows {
		var rec *msgs.ActionChunk
		if row.Recorded != nil {
			rec = &row.Recorded.Chunk
		}
		for j, c := range []*msgs.ActionChunk{rec, row.Produced} {
			if c == nil {
				continue
			}
			var xys plotter.XYs
			for k, a := range c.Actions {
				if d < len(a.Values) {
					y := float64(a.Values[d])
					xys = append(xys, plotter.XY{X: float64(i) + float64(k)/float64(len(c.Actions)), Y: y})
					lo, hi = math.Min(lo, y), math.Max(hi, y)
				}
			}
			if len(xys) > 0 {
				all[j].lines = append(all[j].lines, xys)
			}
		}
	}
	if lo > hi { // nothing to draw in this dimension
		return p, nil
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	// Room above the data for the legend.
	p.Y.Min, p.Y.Max = lo-0.05*(hi-lo), hi+0.3*(hi-lo)
	if err := shadeFailures(p, rows); err != nil {
		return nil, err
	}
	for _, s := range all {
		for i, xys := range s.lines {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("replay: plot: %w", err)
			}
			l.LineStyle = s.style
			p.Add(l)
			if i == 0 {
				p.Legend.Add(s.name, l)
			}
		}
	}
	return p, nil
}

// shadeFailures marks the chunks that fail the gate with a pale band over
// the plot's y range.
func shadeFailures(p *plot.Plot, rows []Row) error {
	first := true
	for i, row := range rows {
		if !row.Status.Failed() {
			continue
		}
		x0, x1 := float64(i), float64(i+1)
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: p.Y.Min}, {X: x1, Y: p.Y.Min}, {X: x1, Y: p.Y.Max}, {X: x0, Y: p.Y.Max}})
		if err != nil {
			return fmt.Errorf("replay: plot: %w", err)
		}
		band.Color = color.RGBA{R: 0xff, G: 0xd8, B: 0xd8, A: 0xff}
		band.LineStyle.Width = 0
		p.Add(band)
		if first {
			p.Legend.Add("failed chunk", band)
			first = false
		}
	}
	return nil
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

// latencyPlot draws the denoise time of each chunk.
func latencyPlot(rows []Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "denoise time per chunk"
	p.X.Label.Text = "chunk"
	p.X.Tick.Marker = chunkTicks(len(rows))
	p.Y.Label.Text = "ms"
	p.Legend.Top = true
	var rec, prod plotter.XYs
	top := 0.0
	for i, row := range rows {
		if row.Recorded != nil {
			rec = append(rec, plotter.XY{X: float64(i), Y: float64(row.Recorded.Chunk.DenoiseMs)})
			top = math.Max(top, float64(row.Recorded.Chunk.DenoiseMs))
		}
		if row.Produced != nil {
			prod = append(prod, plotter.XY{X: float64(i), Y: float64(row.Produced.DenoiseMs)})
			top = math.Max(top, float64(row.Produced.DenoiseMs))
		}
	}
	p.Y.Min, p.Y.Max = 0, math.Max(top*1.3, 1e-3)
	for _, s := range []struct {
		name  string
		xys   plotter.XYs
		style draw.LineStyle
		shape draw.GlyphDrawer
	}{
		{"recorded", rec, recordedStyle(), draw.CircleGlyph{}},
		{"replayed", prod, producedStyle(), draw.TriangleGlyph{}},
	} {
		if len(s.xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, fmt.Errorf("replay: plot: latency: %w", err)
		}
		l.LineStyle = s.style
		pts.GlyphStyle = draw.GlyphStyle{Color: s.style.Color, Radius: vg.Points(2.5), Shape: s.shape}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return p, nil
}
