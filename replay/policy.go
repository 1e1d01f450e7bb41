package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// Stage is one timed stage of a cycle.
type Stage struct {
	Name     string
	Duration time.Duration
}

// PolicyChunk is what the node published for one observation.
type PolicyChunk struct {
	Chunk int              // the observation's index
	Model msgs.ActionChunk // on topics.actions: the action expert's chunk
	// Executable is the chunk on actions.topic (un-normalised, gripper
	// mapped, limits applied), nil without actions.* post-processing.
	Executable *msgs.ActionChunk
	// World are the world model's stage times for the observation, as
	// its WorldOutput.Stages reported them, then the whole world model.
	World []Stage
}

// PolicyOptions configure RunPolicy.
type PolicyOptions struct {
	World   WorldModel
	Backend expert.Backend // the caller closes it
	// Params are the node's (see BaseParams and ResolveTopics).
	Params params.Params
	// Observations are the cycles to run, in order: observation k is
	// given seq k (and so the noise seed noise_seed + k).
	Observations iter.Seq2[Observation, error]
	// Timeout bounds the wait for each chunk; 0 means DefaultChunkTimeout.
	Timeout time.Duration
	Logger  node.Logger
}

// PolicyResult is what RunPolicy produced.
type PolicyResult struct {
	Chunks  []PolicyChunk
	Refused []MakeRefusal // chunks the actions.* limits refused
}

// RunPolicy runs the whole policy without ROS: each observation through
// the world model, and its VideoKVCache and TextContext through the node
// (the same pipeline as Run and MakeBag: pairing, the N-step denoise on
// o.Backend, actions.* post-processing), collecting the chunks it
// publishes. An observation the world model refuses, or a pair the node
// rejects, is an error.
func RunPolicy(ctx context.Context, o PolicyOptions) (*PolicyResult, error) {
	switch {
	case o.World == nil:
		return nil, errors.New("replay: policy: no world model")
	case o.Backend == nil:
		return nil, errors.New("replay: policy: no backend")
	case o.Observations == nil:
		return nil, errors.New("replay: policy: no observations")
	}
	if err := CheckTransport(o.Params); err != nil {
		return nil, err
	}
	if err := checkWorldFits(o.World.Dims(), o.Backend.Dims()); err != nil {
		return nil, fmt.Errorf("replay: policy: %w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultChunkTimeout
	}
	var all []Observation
	for obs, err := range o.Observations {
		if err != nil {
			return nil, fmt.Errorf("replay: policy: observation %d: %w", len(all), err)
		}
		all = append(all, obs)
	}
	if len(all) == 0 {
		return nil, errors.New("replay: policy: no observations")
	}
	out := NewWorldOutput(o.World.Dims())
	stages := make([][]Stage, len(all))
	cs := chunkSource{
		chunks: len(all),
		next: func(k int) (time.Time, [2]bag.Message, error) {
			began := time.Now()
			out.Stages = out.Stages[:0]
			in, err := worldMessages(ctx, o.World, &all[k], uint64(k), out, o.Params.Topics)
			stages[k] = append(append([]Stage(nil), out.Stages...), Stage{Name: "world model", Duration: time.Since(began)})
			return all[k].Stamp, in, err
		},
	}
	_, refused, chunks, err := recordChunks(ctx, nil, cs, o.Params, o.Backend, o.Logger, all[0].LogTime, o.Timeout, nil)
	if err != nil {
		return nil, err
	}
	for i := range chunks {
		chunks[i].World = stages[chunks[i].Chunk]
	}
	return &PolicyResult{Chunks: chunks, Refused: refused}, nil
}
