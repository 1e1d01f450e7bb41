package asyncsim

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotDims is the number of action dimensions plotted at most (the first
// ones).
const plotDims = 4

// plotInstants is the number of control instants plotted at most (the
// first ones): more make the seams unreadable.
const plotInstants = 128

func modeStyle(i int) draw.LineStyle {
	switch i {
	case 0:
		return draw.LineStyle{Color: color.Gray{Y: 0x60}, Width: vg.Points(1.2)}
	case 1:
		return draw.LineStyle{Color: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, Width: vg.Points(1.2)}
	default:
		return draw.LineStyle{Color: color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, Width: vg.Points(1.2),
			Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
	}
}

// WritePlot draws the executed action stream of every mode of r as a PNG
// file: one panel per action dimension (the first 4), x the control
// instant, one line per mode, a dotted vertical line at every seam (an
// instant where the executed chunk changed; the modes share their timing)
// and a mark on each mode's line at the seam's incoming action.
func WritePlot(r *Result, path string) error {
	if len(r.Modes) == 0 || len(r.Modes[0].Executed) == 0 {
		return errors.New("asyncsim: plot: no executed actions to plot")
	}
	dims := min(len(r.Modes[0].Executed[0].Values), plotDims)
	if dims == 0 {
		return errors.New("asyncsim: plot: the executed actions have no values")
	}
	total := r.Modes[0].Executed[len(r.Modes[0].Executed)-1].K + 1
	last := min(total, plotInstants) - 1
	plots := make([][]*plot.Plot, dims)
	for d := range dims {
		p, err := dimPlot(r, d, last)
		if err != nil {
			return err
		}
		plots[d] = []*plot.Plot{p}
	}
	title := fmt.Sprintf("executed actions, seams dotted (d %d, horizon %d, dt %v)", r.Delay, r.Horizon, r.ControlPeriod)
	if last+1 < total {
		title += fmt.Sprintf(": the first %d of %d instants", last+1, total)
	}
	plots[0][0].Title.Text = title + "; dim 0"

	img := vgimg.NewWith(vgimg.UseWH(14*vg.Inch, vg.Length(2.2*float64(dims))*vg.Inch), vgimg.UseDPI(96))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: dims, Cols: 1, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("asyncsim: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("asyncsim: plot: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("asyncsim: plot: %w", err)
	}
	return nil
}

// dimPlot draws dimension d of the instants up to last.
func dimPlot(r *Result, d, last int) (*plot.Plot, error) {
	p := plot.New()
	if d > 0 {
		p.Title.Text = fmt.Sprintf("dim %d", d)
	}
	p.X.Label.Text = "control instant"
	p.Legend.Top = true
	p.Legend.Left = true
	lo, hi := math.Inf(1), math.Inf(-1)
	type drawn struct {
		line  plotter.XYs
		seams plotter.XYs
	}
	var all []drawn
	var seamKs []int
	for i := range r.Modes {
		var dr drawn
		ex := r.Modes[i].Executed
		for j, a := range ex {
			if a.K > last || d >= len(a.Values) {
				continue
			}
			y := float64(a.Values[d])
			lo, hi = math.Min(lo, y), math.Max(hi, y)
			dr.line = append(dr.line, plotter.XY{X: float64(a.K), Y: y})
			if j > 0 && !a.Held && a.ChunkSeq != ex[j-1].ChunkSeq {
				dr.seams = append(dr.seams, plotter.XY{X: float64(a.K), Y: y})
				if i == 0 {
					seamKs = append(seamKs, a.K)
				}
			}
		}
		all = append(all, dr)
	}
	if lo > hi {
		return p, nil
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	p.Y.Min, p.Y.Max = lo-0.05*(hi-lo), hi+0.35*(hi-lo)
	p.X.Min, p.X.Max = 0, float64(last)
	for _, k := range seamKs {
		l, err := plotter.NewLine(plotter.XYs{{X: float64(k), Y: p.Y.Min}, {X: float64(k), Y: p.Y.Max}})
		if err != nil {
			return nil, fmt.Errorf("asyncsim: plot: %w", err)
		}
		l.LineStyle = draw.LineStyle{Color: color.Gray{Y: 0xb0}, Width: vg.Points(0.6), Dashes: []vg.Length{vg.Points(1), vg.Points(2)}}
		p.Add(l)
	}
	for i, dr := range all {
		if len(dr.line) == 0 {
			continue
		}
		st := modeStyle(i)
		l, err := plotter.NewLine(dr.line)
		if err != nil {
			return nil, fmt.Errorf("asyncsim: plot: %w", err)
		}
		l.LineStyle = st
		p.Add(l)
		p.Legend.Add(r.Modes[i].Mode.String(), l)
		if len(dr.seams) > 0 {
			sc, err := plotter.NewScatter(dr.seams)
			if err != nil {
				return nil, fmt.Errorf("asyncsim: plot: %w", err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: st.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
			p.Add(sc)
		}
	}
	return p, nil
}
