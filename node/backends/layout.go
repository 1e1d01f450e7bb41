package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/expert/htp/prefill"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/qnnrt"
)

// ProcessCeiling is the bytes of context binaries one process is known to
// map on the IQ-9075: 6.5 GB was seen to load and 7.0 GB to fail (issue
// 28). A layout whose binaries add up to more is refused; the world model
// then goes to a process of its own (htp.world_model other_process).
const ProcessCeiling int64 = 6_500_000_000

// HTPLayout is what the HTP backend's binaries hold, checked against the
// process layout (htp.world_model).
type HTPLayout struct {
	// Paths are htp.context_binary (when set), then htp.context_paths.
	Paths []string
	// Split is true for the split bundle (action_context once per chunk,
	// action_step_ctx per step), false for the monolithic graph.
	Split bool
	// WorldModel lists the world model's graphs in chain order
	// (vae_encoder, prefill_0, ...) when it shares the process, else nil.
	WorldModel []string
	// Bytes is the binaries' total size, at most ProcessCeiling.
	Bytes int64
}

// PlanHTP reads the metadata of every binary h names (with the QNN system
// library only: nothing is loaded on the device) and checks the graph set
// against h.WorldModel: no path twice, every file present, no graph twice,
// every graph one the layout runs (the action graph h.GraphName, or
// action_context and action_step_ctx together; vae_encoder and prefill_0
// .. prefill_{k-1} without a gap only when the world model shares the
// process), and the total size within ProcessCeiling.
func PlanHTP(h params.HTPParams) (HTPLayout, error) {
	var l HTPLayout
	if h.ContextBinary != "" {
		l.Paths = append(l.Paths, h.ContextBinary)
	}
	l.Paths = append(l.Paths, h.ContextPaths...)
	if len(l.Paths) == 0 {
		return l, errors.New(`parameter "htp.context_binary" (or "htp.context_paths") must name the context binary`)
	}
	same := false
	switch h.WorldModel {
	case params.WorldModelSameProcess:
		same = true
	case params.WorldModelOtherProcess, "":
	default:
		return l, fmt.Errorf("parameter \"htp.world_model\" must be %q or %q, got %q", params.WorldModelOtherProcess, params.WorldModelSameProcess, h.WorldModel)
	}
	graphName := h.GraphName
	if graphName == "" {
		graphName = htp.DefaultGraphName
	}
	var stats []os.FileInfo
	for i, p := range l.Paths {
		st, err := os.Stat(p)
		if err != nil {
			return l, fmt.Errorf("HTP context binary %d of %d: %w", i+1, len(l.Paths), err)
		}
		if !st.Mode().IsRegular() {
			return l, fmt.Errorf("HTP context binary %s is not a regular file", p)
		}
		for j, prev := range stats {
			if os.SameFile(prev, st) {
				return l, fmt.Errorf("HTP context binaries %s and %s are the same file; name each binary once", l.Paths[j], p)
			}
		}
		stats = append(stats, st)
		l.Bytes += st.Size()
	}
	if l.Bytes > ProcessCeiling {
		hint := ""
		if same {
			hint = fmt.Sprintf("; set \"htp.world_model\" to %q and run the world model in its own process", params.WorldModelOtherProcess)
		}
		return l, fmt.Errorf("the HTP binaries %q add up to %s, over the %s one process can map%s", l.Paths, gb(l.Bytes), gb(ProcessCeiling), hint)
	}
	lib, err := qnnrt.OpenSystem(qnnrt.Options{SystemPath: h.SystemLibrary})
	if err != nil {
		return l, fmt.Errorf("plan the HTP binaries: %w", err)
	}
	defer lib.Close()
	owner := map[string]string{} // graph -> binary
	var infos []*qnnrt.ContextInfo
	var world []string
	for _, p := range l.Paths {
		info, err := lib.ReadContextInfo(p)
		if err != nil {
			return l, fmt.Errorf("plan the HTP binaries: %w", err)
		}
		info.Path = p
		infos = append(infos, info)
		for _, g := range info.GraphNames() {
			if prev, dup := owner[g]; dup {
				return l, fmt.Errorf("graph %q is in both %s and %s; a graph must be in one binary of the bundle", g, prev, p)
			}
			owner[g] = p
			switch {
			case g == graphName, g == htp.ContextGraphName, g == htp.StepCtxGraphName:
			case isWorldGraph(g):
				if !same {
					return l, fmt.Errorf("%s holds the world model's graph %q, but parameter \"htp.world_model\" is %q: "+
						"name its binaries only with %q (then all contexts must fit in one process, %s)",
						p, g, params.WorldModelOtherProcess, params.WorldModelSameProcess, gb(ProcessCeiling))
				}
				world = append(world, g)
			default:
				return l, fmt.Errorf("%s holds graph %q, which no part of the layout runs: want %q (or %q with %q)%s",
					p, g, graphName, htp.ContextGraphName, htp.StepCtxGraphName, worldHint(same))
			}
		}
	}
	_, hasC := owner[htp.ContextGraphName]
	_, hasS := owner[htp.StepCtxGraphName]
	_, hasM := owner[graphName]
	switch {
	case hasC != hasS:
		have, miss := htp.ContextGraphName, htp.StepCtxGraphName
		if hasS {
			have, miss = miss, have
		}
		return l, fmt.Errorf("the split bundle needs both %q and %q: %s holds %q, and no binary of %q holds %q", htp.ContextGraphName, htp.StepCtxGraphName, owner[have], have, l.Paths, miss)
	case hasC && graphName == htp.DefaultGraphName:
		l.Split = true
	case !hasM:
		return l, fmt.Errorf("no binary of %q holds the action graph %q (nor both %q and %q)", l.Paths, graphName, htp.ContextGraphName, htp.StepCtxGraphName)
	}
	if same {
		names, err := prefill.GraphNames(infos)
		if err != nil {
			return l, fmt.Errorf("parameter \"htp.world_model\" is %q: %w", params.WorldModelSameProcess, err)
		}
		if len(names) != len(world) {
			return l, fmt.Errorf("the world model's graphs %q are not vae_encoder and prefill_0 .. prefill_k-1 without a gap (the chain found %q)", world, names)
		}
		l.WorldModel = names
	}
	return l, nil
}

func isWorldGraph(g string) bool {
	if g == prefill.EncoderGraph {
		return true
	}
	n, ok := strings.CutPrefix(g, prefill.PrefillPrefix)
	if !ok {
		return false
	}
	i, err := strconv.Atoi(n)
	return err == nil && i >= 0 && strconv.Itoa(i) == n
}

func worldHint(same bool) string {
	if same {
		return fmt.Sprintf(", or the world model's %q and %q..", prefill.EncoderGraph, prefill.PrefillPrefix+"0")
	}
	return ""
}

func gb(n int64) string { return fmt.Sprintf("%.2f GB", float64(n)/1e9) }

// HTPSet is the HTP backend of the action expert and, when the world model
// shares the process, its graph chain on the same session (one spill-fill
// group). It is an expert.Backend (the embedded *htp.Backend); Close
// releases both.
type HTPSet struct {
	*htp.Backend
	// Layout is the checked graph set.
	Layout HTPLayout
	world  *prefill.Chain
}

// WorldModel returns the world model's chain (a worldmodel.KVStage), or
// nil when it runs in another process.
func (s *HTPSet) WorldModel() *prefill.Chain { return s.world }

// Reload rebuilds the backend's session after a DSP subsystem restart
// (htp.Backend.Reload) and the world model's chain on it.
func (s *HTPSet) Reload(ctx context.Context) error {
	if err := s.Backend.Reload(ctx); err != nil {
		return err
	}
	if s.world != nil {
		if err := s.world.Reattach(s.Backend.Session()); err != nil {
			return fmt.Errorf("htp: reload: the world model's chain: %w", err)
		}
	}
	return nil
}

// Close releases the world model's chain, then the backend and its
// session.
func (s *HTPSet) Close() error {
	var errs []error
	if s.world != nil {
		errs = append(errs, s.world.Close())
		s.world = nil
	}
	errs = append(errs, s.Backend.Close())
	return errors.Join(errs...)
}

// OpenHTPSet plans the binaries (PlanHTP), opens the action expert's HTP
// backend on all of them in one session and, with htp.world_model
// same_process, attaches the world model's chain to that session.
func OpenHTPSet(ctx context.Context, h params.HTPParams, log node.Logger) (*HTPSet, error) {
	l, err := PlanHTP(h)
	if err != nil {
		return nil, fmt.Errorf("open HTP backend: %w", err)
	}
	o, err := htpOptions(h, log)
	if err != nil {
		return nil, err
	}
	o.ContextPath, o.ContextPaths, o.CoGraphs = "", l.Paths, l.WorldModel
	b, err := htp.New(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("open HTP backend: %w", err)
	}
	s := &HTPSet{Backend: b, Layout: l}
	if len(l.WorldModel) > 0 {
		logf := func(string, ...any) {}
		if log != nil {
			logf = log.Infof
		}
		if s.world, _, err = AttachWorldModel(b, h.SharedBuffers, logf); err != nil {
			return nil, errors.Join(fmt.Errorf("open HTP backend: %w", err), b.Close())
		}
	}
	return s, nil
}

// AttachWorldModel attaches the world model's graph chain to b's session
// (b loaded its binaries: htp.Options.CoGraphs) and, with shared buffers,
// binds the chain's K/V outputs into the expert's video_keys and
// video_values, so that the prefill graphs write them in place with no
// host copy (prefill.Chain.BindKV; an output that does not match keeps
// the copy, said in one line to logf). inPlace reports that every output
// is bound. On an error nothing stays attached; b is the caller's.
func AttachWorldModel(b *htp.Backend, shared bool, logf func(format string, args ...any)) (chain *prefill.Chain, inPlace bool, err error) {
	chain, err = prefill.Attach(b.Session(), shared)
	if err != nil {
		return nil, false, fmt.Errorf("the world model's chain: %w", err)
	}
	if !shared {
		return chain, false, nil
	}
	if inPlace, err = chain.BindKV(b.KVGraph(), htp.NameVideoKeys, htp.NameVideoValues, logf); err != nil {
		return nil, false, errors.Join(fmt.Errorf("binding the world model's K/V into the expert's inputs: %w", err), chain.Close())
	}
	return chain, inPlace, nil
}

// String says in one line what the layout runs, for logs.
func (l HTPLayout) String() string {
	action := "monolithic action graph"
	if l.Split {
		action = "split action graphs (action_context + action_step_ctx)"
	}
	world := "world model in another process"
	if len(l.WorldModel) > 0 {
		world = "world model in this process (" + strings.Join(l.WorldModel, ", ") + ")"
	}
	base := make([]string, len(l.Paths))
	for i, p := range l.Paths {
		base[i] = filepath.Base(p)
	}
	return fmt.Sprintf("%s; %s; %d binaries (%s), %s of %s", action, world, len(l.Paths), strings.Join(base, ", "), gb(l.Bytes), gb(ProcessCeiling))
}
