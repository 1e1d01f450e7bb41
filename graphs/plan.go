package graphs

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Default limits (issue 28): about 2 GB per context, with a margin, and a
// process seen to map 6.5 GB of contexts but not 7.0 GB.
const (
	DefaultContextLimit int64 = 1_800_000_000
	DefaultProcessLimit int64 = 6_000_000_000
)

// Options are a plan's inputs.
type Options struct {
	Action       ActionConfig
	World        WorldConfig
	VAE          VAEConfig
	Weights      Weights
	ContextLimit int64 // bytes of weights and constants per context (graph)
	ProcessLimit int64 // bytes of contexts per process
	// Processes is 1 (everything in one process) or 2 (the world model,
	// vae_encoder and the prefill chain, in process 0; the action graphs in
	// process 1, with the shared-memory hand-off between them).
	Processes int
}

// DefaultOptions is the real model in fp16 at the default limits, in one process.
func DefaultOptions() Options {
	return Options{Action: FullAction(), World: FullWorld(), VAE: FullVAE(), Weights: FP16,
		ContextLimit: DefaultContextLimit, ProcessLimit: DefaultProcessLimit, Processes: 1}
}

// Graph is one planned context.
type Graph struct {
	Name       string
	Lo, Hi     int // the video DiT layers [Lo, Hi) of a prefill graph; Lo = Hi = 0 otherwise
	Params     int64
	Bytes      int64
	Process    int
	Tensors    Tensors
	IsPrefill  bool
	TrimmedEnd bool // the last prefill range: its last layer is trimmed (no hidden_out)
}

// Layers is "a–b" for a prefill graph ("a" for one layer), "" otherwise.
func (g Graph) Layers() string {
	switch {
	case !g.IsPrefill:
		return "–"
	case g.Hi-g.Lo == 1:
		return fmt.Sprint(g.Lo)
	}
	return fmt.Sprintf("%d–%d", g.Lo, g.Hi-1)
}

// Plan is the chosen graph set.
type Plan struct {
	Options      Options
	Graphs       []Graph
	ProcessBytes []int64
	// MonolithicStep is the size of today's single action_step graph in
	// the same format, for comparison (it is not part of the plan).
	MonolithicStep int64
}

// ErrImpossible is wrapped by every error of limits no plan can meet.
var ErrImpossible = errors.New("no plan meets the limits")

// MakePlan chooses the prefill's contiguous layer ranges (the fewest
// contexts under the context limit, then the smallest largest context),
// adds vae_encoder, action_context and action_step_ctx, and places them in
// processes. Limits no plan can meet are an error wrapping ErrImpossible
// that names the graph or process and the bytes it needs.
func MakePlan(o Options) (*Plan, error) {
	if err := o.Action.validate(); err != nil {
		return nil, err
	}
	if err := o.World.validate(); err != nil {
		return nil, err
	}
	if err := o.VAE.validate(); err != nil {
		return nil, err
	}
	if o.Weights < FP16 || o.Weights > W4 {
		return nil, fmt.Errorf("weight format %v: want fp16, w8 or w4", o.Weights)
	}
	if o.ContextLimit <= 0 || o.ProcessLimit <= 0 {
		return nil, fmt.Errorf("context limit %d and process limit %d bytes: both must be positive", o.ContextLimit, o.ProcessLimit)
	}
	if o.Processes != 1 && o.Processes != 2 {
		return nil, fmt.Errorf("processes %d: want 1 or 2", o.Processes)
	}
	w := o.Weights
	p := &Plan{Options: o, ProcessBytes: make([]int64, o.Processes), MonolithicStep: ActionStepTensors(o.Action).Bytes(w)}
	single := func(name string, t Tensors) (Graph, error) {
		g := Graph{Name: name, Tensors: t, Params: t.Params(), Bytes: t.Bytes(w)}
		if g.Bytes > o.ContextLimit {
			return g, fmt.Errorf("%w: %s needs %s in %v, over the context limit of %s (this tool does not split it; try w8 or w4)",
				ErrImpossible, name, GB(g.Bytes), w, GB(o.ContextLimit))
		}
		return g, nil
	}
	vae, err := single("vae_encoder", VAETensors(o.VAE))
	if err != nil {
		return nil, err
	}
	ranges, err := prefillRanges(o)
	if err != nil {
		return nil, err
	}
	p.Graphs = append(p.Graphs, vae)
	for i, r := range ranges {
		t := rangeTensors(o.World, r[0], r[1])
		p.Graphs = append(p.Graphs, Graph{Name: fmt.Sprintf("prefill_%d", i), Lo: r[0], Hi: r[1], Tensors: t,
			Params: t.Params(), Bytes: t.Bytes(w), IsPrefill: true, TrimmedEnd: r[1] == o.World.Layers})
	}
	ac, err := single("action_context", ActionContextTensors(o.Action))
	if err != nil {
		return nil, err
	}
	as, err := single("action_step_ctx", ActionStepCtxTensors(o.Action))
	if err != nil {
		return nil, err
	}
	p.Graphs = append(p.Graphs, ac, as)
	for i := range p.Graphs {
		g := &p.Graphs[i]
		if o.Processes == 2 && strings.HasPrefix(g.Name, "action_") {
			g.Process = 1
		}
		p.ProcessBytes[g.Process] += g.Bytes
	}
	for i, b := range p.ProcessBytes {
		if b > o.ProcessLimit {
			hint := "use -processes 2, or w8 or w4 weights"
			if o.Processes == 2 {
				hint = "use w8 or w4 weights"
			}
			return nil, fmt.Errorf("%w: process %d (%s) needs %s of contexts in %v, over the process limit of %s; %s",
				ErrImpossible, i, processRole(o.Processes, i), GB(b), w, GB(o.ProcessLimit), hint)
		}
	}
	return p, nil
}

func processRole(n, i int) string {
	switch {
	case n == 1:
		return "world model and action expert"
	case i == 0:
		return "world model"
	}
	return "action expert"
}

// rangeTensors is prefill graph [lo, hi): its layers (the last one trimmed
// if hi is the model's last), the stem for lo = 0, and its RoPE tables.
func rangeTensors(c WorldConfig, lo, hi int) Tensors {
	t := WorldRangeConstants(c)
	if lo == 0 {
		t = t.Add(WorldStemTensors(c))
	}
	for l := lo; l < hi; l++ {
		if l == c.Layers-1 {
			t = t.Add(WorldLastLayerTensors(c))
		} else {
			t = t.Add(WorldLayerTensors(c))
		}
	}
	return t
}

// prefillRanges partitions [0, N) into the fewest contiguous ranges whose
// graphs fit the context limit, and among those, the one with the smallest
// largest graph (balanced sizes; ties: the earliest split points).
func prefillRanges(o Options) ([][2]int, error) {
	n, w := o.World.Layers, o.Weights
	size := func(lo, hi int) int64 { return rangeTensors(o.World, lo, hi).Bytes(w) }
	for l := range n {
		if b := size(l, l+1); b > o.ContextLimit {
			what := fmt.Sprintf("prefill layer %d", l)
			if l == 0 {
				what = "prefill layer 0 with the patch embedding and text MLP"
			}
			return nil, fmt.Errorf("%w: %s alone needs %s in %v, over the context limit of %s",
				ErrImpossible, what, GB(b), w, GB(o.ContextLimit))
		}
	}
	// best[k][i]: the smallest largest graph covering [0, i) with k ranges; cut[k][i] its last start.
	const inf = int64(1) << 62
	best := [][]int64{make([]int64, n+1)}
	for i := 1; i <= n; i++ {
		best[0][i] = inf
	}
	cut := [][]int{make([]int, n+1)}
	for k := 1; k <= n; k++ {
		row, crow := make([]int64, n+1), make([]int, n+1)
		row[0] = inf
		for i := 1; i <= n; i++ {
			row[i] = inf
			for j := 0; j < i; j++ {
				if best[k-1][j] == inf {
					continue
				}
				s := size(j, i)
				if s > o.ContextLimit {
					continue
				}
				if m := max(best[k-1][j], s); m < row[i] {
					row[i], crow[i] = m, j
				}
			}
		}
		best, cut = append(best, row), append(cut, crow)
		if row[n] < inf {
			out := make([][2]int, k)
			for i, kk := n, k; kk > 0; kk-- {
				j := cut[kk][i]
				out[kk-1] = [2]int{j, i}
				i = j
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: no partition of the %d prefill layers fits %s per context", ErrImpossible, n, GB(o.ContextLimit))
}

// GB formats bytes as decimal gigabytes (10^9), the unit of the limits.
func GB(b int64) string { return fmt.Sprintf("%.3f GB", float64(b)/1e9) }

// Write prints the plan as a table: graph, layers, parameters, bytes, process.
func (p *Plan) Write(out io.Writer) error {
	o := p.Options
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "graph\tlayers\tparameters\tbytes (%v)\tprocess\t\n", o.Weights)
	for _, g := range p.Graphs {
		name := g.Name
		if g.TrimmedEnd {
			name += " (last layer trimmed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t\n", name, g.Layers(), g.Params, GB(g.Bytes), g.Process)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	w := o.Weights
	if _, err := fmt.Fprintf(out, "per layer (%v): video DiT %s, its trimmed last %s, prefill_0's stem %s; action step %s\n",
		w, GB(WorldLayerTensors(o.World).Bytes(w)), GB(WorldLastLayerTensors(o.World).Bytes(w)),
		GB(WorldStemTensors(o.World).Bytes(w)), GB(ActionStepLayerTensors(o.Action).Bytes(w))); err != nil {
		return err
	}
	for i, b := range p.ProcessBytes {
		if _, err := fmt.Fprintf(out, "process %d (%s): %s of %s\n", i, processRole(o.Processes, i), GB(b), GB(o.ProcessLimit)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "context limit %s; largest context %s; today's monolithic action_step would be %s\n",
		GB(o.ContextLimit), GB(p.largest()), GB(p.MonolithicStep))
	return err
}

func (p *Plan) largest() int64 {
	var m int64
	for _, g := range p.Graphs {
		m = max(m, g.Bytes)
	}
	return m
}

// Ranges is the prefill's layer ranges as golden/export/export.py's --ranges reads them ("0:5,5:10,...").
func (p *Plan) Ranges() string {
	var parts []string
	for _, g := range p.Graphs {
		if g.IsPrefill {
			parts = append(parts, fmt.Sprintf("%d:%d", g.Lo, g.Hi))
		}
	}
	return strings.Join(parts, ",")
}
