package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/expert/htp/prefill"
	"github.com/fastwam/actionexpert/node/backends"
	"github.com/fastwam/actionexpert/node/params"
)

// sameProcess is the action expert's HTP backend with the world model's
// graph chain attached to its session (-backend htp -world-model
// same_process -world-backend htp): every context in one session and one
// spill-fill group, as backends.OpenHTPSet opens them, and with
// -shared-buffers the chain's K/V outputs bound into the expert's
// video_keys and video_values (prefill.Chain.BindKV).
//
// A bound chain writes into the expert's inputs whenever it runs, so a
// run must not fall inside a chunk: sameProcess serialises the chain's
// runs with the expert's binds and steps, and a step of a chunk whose
// inputs were written before a later run of the chain fails (naming why)
// instead of denoising another observation's K/V. The replay runs an
// observation's world model only once the previous chunk has settled, so
// this fires only after a chunk timeout.
type sameProcess struct {
	*htp.Backend
	layout  backends.HTPLayout
	chain   *prefill.Chain
	inPlace bool // every K/V output of the chain is bound

	mu     sync.Mutex // held over a chain run, a chunk bind, a step, Reload and Close
	runs   uint64     // chain runs so far
	fedAt  uint64     // runs when the expert's current chunk was written
	closed bool
}

var _ expert.InputBinder = (*sameProcess)(nil)

// openSameProcess opens the expert's HTP backend on the binaries of
// -context-paths (and -context) plus worldPaths (-world-context-paths) in
// one session and attaches the world model's chain to it, as
// backends.OpenHTPSet does (with this command's HTP options: profiling,
// head dim, ADSP path, which OpenHTPSet's parameters do not carry).
func (f *htpFlags) openSameProcess(ctx context.Context, worldPaths string) (*sameProcess, string, error) {
	wp, err := params.ParsePaths(worldPaths)
	if err != nil {
		return nil, "", usageError("-world-context-paths: %v", err)
	}
	paths, err := params.ParsePaths(f.paths)
	if err != nil {
		return nil, "", usageError("-context-paths: %v", err)
	}
	all := append(paths, wp...)
	if f.context == "" && len(all) == 0 {
		return nil, "", usageError("-backend htp needs -context <action_step context binary> (or -context-paths with the split bundle's binaries)")
	}
	layout, err := backends.PlanHTP(params.HTPParams{ContextBinary: f.context, ContextPaths: all, WorldModel: params.WorldModelSameProcess,
		GraphName: f.graph, SystemLibrary: f.systemLib})
	if err != nil {
		return nil, "", fmt.Errorf("-world-model %s: %w", params.WorldModelSameProcess, withLoadHint(err))
	}
	if len(layout.WorldModel) == 0 {
		return nil, "", usageError("-world-model %s with -world-backend htp: no binary of -context-paths or -world-context-paths holds the world model's graphs (vae_encoder, prefill_0 ..)", params.WorldModelSameProcess)
	}
	b, desc, err := f.openLayout(ctx, layout)
	if err != nil {
		return nil, "", err
	}
	s := &sameProcess{Backend: b, layout: layout}
	logf := func(format string, args ...any) { fmt.Fprintf(f.stderr, "htp: "+format+"\n", args...) }
	if s.chain, s.inPlace, err = backends.AttachWorldModel(b, f.shared, logf); err != nil {
		return nil, "", errors.Join(fmt.Errorf("-world-model %s: %w", params.WorldModelSameProcess, err), b.Close())
	}
	how := "the world model's K/V copied on the host into the expert's inputs (-shared-buffers=false)"
	if f.shared {
		how = "the world model's K/V copied on the host into the expert's inputs (not every output could be bound, see the log)"
		if s.inPlace {
			how = "the world model's K/V written in place into the expert's inputs"
		}
	}
	return s, desc + "; " + how, nil
}

// ExecuteTimes returns the device execute time of the last chunk's
// steps, as htpTimed does.
func (s *sameProcess) ExecuteTimes() []time.Duration { return htpTimed{s.Backend}.ExecuteTimes() }

// Inputs implements expert.InputBinder: the chunk written into the views
// is the one of the chain's latest run.
func (s *sameProcess) Inputs() (expert.InputViews, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fedAt = s.runs
	return s.Backend.Inputs()
}

// BindChunk binds c (copied into the expert's inputs, over what the chain
// wrote).
func (s *sameProcess) BindChunk(ctx context.Context, c *expert.Chunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fedAt = s.runs
	return s.Backend.BindChunk(ctx, c)
}

// Step runs one step, refused when the chain has run since the chunk's
// inputs were written: they may then hold the next observation's K/V.
func (s *sameProcess) Step(ctx context.Context, latents []float32, tau float32, pred []float32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs != s.fedAt {
		return fmt.Errorf("htp: the world model's chain ran %d time(s) after this chunk's inputs were written, and with -world-model %s it writes into them: "+
			"the chunk's K/V may be another observation's (did a chunk time out?)", s.runs-s.fedAt, params.WorldModelSameProcess)
	}
	return s.Backend.Step(ctx, latents, tau, pred)
}

// Reload rebuilds the session after a DSP subsystem restart and
// re-attaches the chain (and its binding) to it, as HTPSet.Reload does.
func (s *sameProcess) Reload(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Backend.Reload(ctx); err != nil {
		return err
	}
	if err := s.chain.Reattach(s.Backend.Session()); err != nil {
		return fmt.Errorf("htp: reload: the world model's chain: %w", err)
	}
	return nil
}

// Close releases the chain, then the backend and its session; a second
// call does nothing.
func (s *sameProcess) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.chain.Close(), s.Backend.Close())
}

// worldKV is the world model's KV stage (worldmodel.ModelOptions.KV) on a
// sameProcess: the attached chain, its runs counted and serialised with
// the expert's chunks.
func (s *sameProcess) worldKV() *sameProcessKV { return &sameProcessKV{s: s} }

// sameProcessKV is a worldmodel.KVStage running the chain of a
// sameProcess.
type sameProcessKV struct{ s *sameProcess }

// ImageLen is the values of the VAE encoder's image input.
func (k *sameProcessKV) ImageLen() int { return k.s.chain.ImageLen() }

// ContextLen is the values of the text context input.
func (k *sameProcessKV) ContextLen() int { return k.s.chain.ContextLen() }

// KVLen is the values of the keys (and of the values).
func (k *sameProcessKV) KVLen() int { return k.s.chain.KVLen() }

// RunKV runs the chain; bound, its graphs write the K/V into the expert's
// inputs, and keys and values get a copy from there (the replay sends
// them to the node in a VideoKVCache message, as ROS would).
func (k *sameProcessKV) RunKV(ctx context.Context, image, text []float32, keys, values expert.TensorView) error {
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("htp: the world model's chain: backend closed")
	}
	s.runs++
	return s.chain.RunKV(ctx, image, text, keys, values)
}

// String describes the chain and where it runs.
func (k *sameProcessKV) String() string {
	return k.s.chain.String() + ", in the action expert's session (one spill-fill group)"
}

// describeLayout is the backend line's description of an opened HTP
// backend on layout.
func describeLayout(b *htp.Backend, layout backends.HTPLayout, perf string) string {
	buffers := "RAW buffers"
	if b.SharedBuffers() {
		buffers = "shared rpcmem buffers"
	}
	where := strings.Join(layout.Paths, ", ")
	if len(layout.Paths) > 1 || layout.Split {
		where = layout.String()
	}
	return fmt.Sprintf("htp, %s, perf %s, %s", where, perf, buffers)
}
