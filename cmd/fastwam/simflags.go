package main

import (
	"context"
	"fmt"

	"github.com/fastwam/actionexpert/asyncsim"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

// simFlags are the flags async-sim and cycle share: the closed-loop
// simulation's inputs, noise, logging and CPU backend.
type simFlags struct {
	seed, drift uint64
	verbose     bool
	cpu         cpuFlags
}

// register declares -seed, -drift, -v (described by verboseDoc), -blas and
// -threads on fs, with the node's defaults def.
func (s *simFlags) register(fs *cmdFlags, def params.Params, verboseDoc string) {
	fs.Uint64Var(&s.seed, "seed", def.NoiseSeed, "noise_seed: chunk noise is Noise(seed + observation seq)")
	fs.Uint64Var(&s.drift, "drift", 0, "feed a seeded drift of the first pair (this seed) instead of cycling through the pairs")
	fs.BoolVar(&s.verbose, "v", false, verboseDoc)
	fs.StringVar(&s.cpu.blas, "blas", "auto", "CPU backend: auto, openblas or gonum")
	fs.IntVar(&s.cpu.threads, "threads", 0, "CPU backend: worker goroutines of the step (0: one per CPU)")
}

// check refuses a -blas or -threads no CPU backend takes.
func (s *simFlags) check() error {
	switch s.cpu.blas {
	case "auto", "openblas", "gonum":
	default:
		return usageError("-blas %q: want auto, openblas or gonum", s.cpu.blas)
	}
	if s.cpu.threads < 0 {
		return usageError("-threads %d: want 0 (one per CPU) or more", s.cpu.threads)
	}
	return nil
}

// simSetup is what both simulations run on: the embedded regression bag's
// input pairs, the CPU backend sized for them (with the embedded tiny
// weights) and its description, and the node's parameters for it.
type simSetup struct {
	pairs   []asyncsim.Pair
	backend expert.Backend
	desc    string
	params  params.Params
}

// open loads the embedded regression bag's pairs (under the node's default
// topics) and opens the CPU backend for their shapes; the caller closes
// the backend.
func (s *simFlags) open(ctx context.Context) (*simSetup, error) {
	bagTopics := params.Default()
	if err := replay.ResolveTopics(&bagTopics, "/"); err != nil {
		return nil, err
	}
	pairs, err := asyncsim.LoadRegression(ctx, bagTopics.Topics.KVCache, bagTopics.Topics.Context)
	if err != nil {
		return nil, err
	}
	kv, ctxShape := pairs[0].KVShape, pairs[0].ContextShape
	if len(kv) != 4 || len(ctxShape) != 3 {
		return nil, fmt.Errorf("embedded regression bag: tensor shapes %v and %v; want [layers,1,tokens,width] and [1,tokens,width]", kv, ctxShape)
	}
	b, desc, err := s.cpu.open(ctx, int(kv[2]), int(ctxShape[1]), true)
	if err != nil {
		return nil, err
	}
	p := replay.BaseParams(params.BackendCPU)
	p.CPU.Weights = embeddedWeightsFile
	p.NoiseSeed = s.seed
	return &simSetup{pairs: pairs, backend: b, desc: desc, params: p}, nil
}

// simError is the error of a simulation run: exit status 130 when ctx was
// cancelled (an interrupt).
func simError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: 130, err: err}
	}
	return err
}
