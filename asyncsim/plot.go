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

// plotDims is the number of action dimensions plotted at most: all of the
// LIBERO action space's 7.
const plotDims = 7

// The figure's geometry: a header strip (title and legend, so that no
// legend covers a line) above one panel per dimension.
const (
	plotWidth       = 14 * vg.Inch
	plotHeader      = 0.9 * vg.Inch
	plotPanelHeight = 2 * vg.Inch
)

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
// file: one panel per action dimension (up to 7), x the control
// instant, one line per mode, a dotted vertical line at every seam (an
// instant where the executed chunk changed; the modes share their timing)
// and a mark on each mode's line at the seam's incoming action. The title
// and the legend stand in a strip above the panels.
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
	legend := plot.NewLegend()
	for d := range dims {
		p, lines, err := dimPlot(r, d, last)
		if err != nil {
			return err
		}
		plots[d] = []*plot.Plot{p}
		if d == 0 {
			for i, l := range lines {
				if l != nil {
					legend.Add("rtc "+r.Modes[i].Mode.String(), l)
				}
			}
		}
	}
	title := fmt.Sprintf("executed actions, seams dotted, a dot at each seam's incoming action (d %d, horizon %d, dt %v)", r.Delay, r.Horizon, r.ControlPeriod)
	if last+1 < total {
		title += fmt.Sprintf(": the first %d of %d instants", last+1, total)
	}

	img := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeader+vg.Length(dims)*plotPanelHeight), vgimg.UseDPI(96))
	dc := draw.New(img)
	head := draw.Crop(dc, vg.Millimeter*6, -vg.Millimeter*6, dc.Max.Y-dc.Min.Y-plotHeader, -vg.Millimeter*3)
	titleStyle := plot.New().Title.TextStyle
	titleStyle.XAlign = draw.XLeft
	head.FillText(titleStyle, vg.Point{X: head.Min.X, Y: head.Max.Y - titleStyle.Height(title)}, title)
	legend.Top, legend.Left = true, false
	legend.Draw(head)
	tiles := draw.Tiles{Rows: dims, Cols: 1, PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -plotHeader))
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

// dimPlot draws dimension d of the instants up to last, and returns the
// line of each mode (nil for a mode with nothing drawn) for the legend.
func dimPlot(r *Result, d, last int) (*plot.Plot, []*plotter.Line, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("dim %d", d)
	p.X.Label.Text = "control instant"
	lines := make([]*plotter.Line, len(r.Modes))
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
		return p, lines, nil
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	p.Y.Min, p.Y.Max = lo-0.05*(hi-lo), hi+0.05*(hi-lo)
	p.X.Min, p.X.Max = 0, float64(last)
	for _, k := range seamKs {
		l, err := plotter.NewLine(plotter.XYs{{X: float64(k), Y: p.Y.Min}, {X: float64(k), Y: p.Y.Max}})
		if err != nil {
			return nil, nil, fmt.Errorf("asyncsim: plot: %w", err)
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
			return nil, nil, fmt.Errorf("asyncsim: plot: %w", err)
		}
		l.LineStyle = st
		p.Add(l)
		lines[i] = l
		if len(dr.seams) > 0 {
			sc, err := plotter.NewScatter(dr.seams)
			if err != nil {
				return nil, nil, fmt.Errorf("asyncsim: plot: %w", err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: st.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
			p.Add(sc)
		}
	}
	return p, lines, nil
}
