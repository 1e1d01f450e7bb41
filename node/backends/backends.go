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
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/qnnrt"
)

// Open creates the backend p.Backend names from p.HTP or p.CPU. log, when
// not nil, receives the backend's warnings (such as the HTP shared-buffer
// fallback) at WARN and, for the HTP backend, the QNN library's log lines
// at their level. The caller closes the backend; closing the HTP backend
// withdraws its performance vote.
func Open(ctx context.Context, p params.Params, log node.Logger) (expert.Backend, error) {
	switch p.Backend {
	case params.BackendHTP:
		s, err := OpenHTPSet(ctx, p.HTP, log)
		if err != nil {
			return nil, err
		}
		if log != nil {
			log.Infof("HTP layout: %s", s.Layout)
		}
		return s, nil
	case params.BackendCPU:
		return OpenCPU(ctx, p.CPU)
	}
	return nil, fmt.Errorf("backends: unknown backend %q (want %q or %q)", p.Backend, params.BackendHTP, params.BackendCPU)
}

// OpenHTP loads the context binaries (htp.context_binary and
// htp.context_paths, planned by PlanHTP) and holds the configured
// performance vote until the backend is closed. The QNN library logs at
// h.LogLevel to log: ERROR to Errorf, WARN to Warnf, INFO to Infof,
// VERBOSE and DEBUG to Debugf, each prefixed "qnn: ". With htp.world_model
// same_process the world model's contexts are loaded too but not used:
// OpenHTPSet gives their chain.
func OpenHTP(ctx context.Context, h params.HTPParams, log node.Logger) (*htp.Backend, error) {
	s, err := OpenHTPSet(ctx, h, log)
	if err != nil {
		return nil, err
	}
	return s.Backend, nil
}

// htpOptions converts h to the backend's options (the binaries aside).
func htpOptions(h params.HTPParams, log node.Logger) (htp.Options, error) {
	mode, err := qnnrt.ParsePerfMode(h.PerformanceMode)
	if err != nil {
		return htp.Options{}, fmt.Errorf("parameter \"htp.performance_mode\": %w", err)
	}
	if h.LogLevel < int(qnnrt.LogError) || h.LogLevel > int(qnnrt.LogDebug) {
		return htp.Options{}, fmt.Errorf("parameter \"htp.log_level\" is %d; want 1 (error) to 5 (debug)", h.LogLevel)
	}
	var logf func(string, ...any)
	var sink func(qnnrt.LogLine)
	if log != nil {
		logf, sink = log.Warnf, QNNLogSink(log)
	}
	return htp.Options{
		ContextPath:   h.ContextBinary,
		GraphName:     h.GraphName,
		BackendLib:    h.BackendLibrary,
		SystemLib:     h.SystemLibrary,
		RPCMemLib:     h.RPCMemLibrary,
		PerfMode:      mode,
		SharedBuffers: h.SharedBuffers,
		LogLevel:      h.LogLevel,
		LogSink:       sink,
		RPCVote:       h.RPCVote,
		Logf:          logf,
	}, nil
}

// QNNLogSink routes QNN log lines to log by level: ERROR to Errorf, WARN
// to Warnf, INFO to Infof, VERBOSE, DEBUG (and unknown levels) to Debugf.
func QNNLogSink(log node.Logger) func(qnnrt.LogLine) {
	return func(l qnnrt.LogLine) {
		switch l.Level {
		case qnnrt.LogError:
			log.Errorf("qnn: %s", l.Text)
		case qnnrt.LogWarn:
			log.Warnf("qnn: %s", l.Text)
		case qnnrt.LogInfo:
			log.Infof("qnn: %s", l.Text)
		default:
			log.Debugf("qnn: %s", l.Text)
		}
	}
}

// OpenCPU loads the weights and sizes the inputs as c says; ctx stops a
// long load between tensors.
func OpenCPU(ctx context.Context, c params.CPUParams) (*cpu.Backend, error) {
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
