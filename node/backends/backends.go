// Package backends opens the step backend that the node's parameters name:
// the QNN HTP backend (package expert/htp) or the CPU reference (package
// expert/cpu). It is the one place that knows how each is built, so the
// node binary and `fastwam replay` configure them alike.
package backends

import (
	"context"
	"fmt"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/qnnrt"
)

// Open creates the backend p.Backend names from p.HTP or p.CPU. logf, when
// not nil, receives the backend's warnings (such as the HTP shared-buffer
// fallback). The caller closes the backend; closing the HTP backend
// withdraws its performance vote.
func Open(ctx context.Context, p node.Params, logf func(format string, args ...any)) (expert.Backend, error) {
	switch p.Backend {
	case node.BackendHTP:
		return OpenHTP(ctx, p.HTP, logf)
	case node.BackendCPU:
		return OpenCPU(ctx, p.CPU)
	}
	return nil, fmt.Errorf("backends: unknown backend %q (want %q or %q)", p.Backend, node.BackendHTP, node.BackendCPU)
}

// OpenHTP loads the context binary and holds the configured performance
// vote until the backend is closed.
func OpenHTP(ctx context.Context, h node.HTPParams, logf func(format string, args ...any)) (*htp.Backend, error) {
	mode, err := qnnrt.ParsePerfMode(h.PerformanceMode)
	if err != nil {
		return nil, fmt.Errorf("parameter \"htp.performance_mode\": %w", err)
	}
	b, err := htp.New(ctx, htp.Options{
		ContextPath:   h.ContextBinary,
		GraphName:     h.GraphName,
		BackendLib:    h.BackendLibrary,
		SystemLib:     h.SystemLibrary,
		RPCMemLib:     h.RPCMemLibrary,
		PerfMode:      mode,
		SharedBuffers: h.SharedBuffers,
		Logf:          logf,
	})
	if err != nil {
		return nil, fmt.Errorf("open HTP backend: %w", err)
	}
	return b, nil
}

// OpenCPU loads the weights and sizes the inputs as c says; ctx stops a
// long load between tensors.
func OpenCPU(ctx context.Context, c node.CPUParams) (*cpu.Backend, error) {
	w, err := cpu.LoadWeights(ctx, c.Weights, nil)
	if err != nil {
		return nil, fmt.Errorf("open CPU backend: %w", err)
	}
	if w, err = w.ForInputs(c.VideoTokens, c.ContextTokens); err != nil {
		return nil, fmt.Errorf("open CPU backend: %w", err)
	}
	b, err := cpu.New(w, cpu.Options{Threads: c.Threads})
	if err != nil {
		return nil, fmt.Errorf("open CPU backend: %w", err)
	}
	return b, nil
}
