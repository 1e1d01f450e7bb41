package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// MakeImageOptions configure MakeImageBag.
type MakeImageOptions struct {
	// Dir is the bag folder to write, as MakeOptions.Dir (Replace alike).
	Dir     string
	Replace bool
	// Source is the image bag whose observations are the inputs: its
	// camera, proprio and instruction messages (Reader's topics) are
	// copied into the new bag as they are, with their types, definitions
	// and QoS.
	Source string
	Reader ObservationReader
	// World runs the world model on every observation; Backend denoises
	// (the CPU reference for a regression bag; the caller closes it).
	World   WorldModel
	Backend expert.Backend
	// Params are the node's (see BaseParams and ResolveTopics).
	Params params.Params
	// Timeout bounds the wait for each chunk; 0 means DefaultChunkTimeout.
	Timeout  time.Duration
	Logger   node.Logger
	Progress io.Writer
	// RecordWorld also records the world model's TextContext and
	// VideoKVCache for each observation, on the node's input topics, as
	// `ros2 bag record` of the whole policy does: a replay then checks
	// those caches against the world model (Options.Caches) and replays
	// the chunks on them.
	RecordWorld bool
}

// MakeImageBag writes a regression bag of the whole policy: the camera,
// proprio and instruction messages of o.Source, and for each of its
// observations the ActionChunk the node published when fed the world
// model's VideoKVCache and TextContext for it (as Run feeds them from an
// image bag: seq k for observation k, stamped with the observation). The
// world model's messages themselves are recorded only with
// o.RecordWorld; without them, replaying the bag runs the world model
// again.
func MakeImageBag(ctx context.Context, o MakeImageOptions) (*MakeResult, error) {
	switch {
	case o.Dir == "":
		return nil, errors.New("replay: make bag: no output folder")
	case o.Source == "":
		return nil, errors.New("replay: make bag: no image bag to take the observations from")
	case o.Reader == nil || len(o.Reader.Inputs()) == 0:
		return nil, errors.New("replay: make bag: no observation reader")
	case o.World == nil:
		return nil, errors.New("replay: make bag: no world model")
	case o.Backend == nil:
		return nil, errors.New("replay: make bag: no backend")
	}
	if err := CheckTransport(o.Params); err != nil {
		return nil, err
	}
	if err := checkWorldFits(o.World.Dims(), o.Backend.Dims()); err != nil {
		return nil, fmt.Errorf("replay: make bag: %w", err)
	}
	if err := checkMakeDir(o.Dir, o.Replace); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultChunkTimeout
	}
	// One walk to count and check the observations before anything is
	// written; the second feeds them.
	n := 0
	var start time.Time
	for obs, err := range o.Reader.Observations(ctx, o.Source) {
		if err != nil {
			return nil, fmt.Errorf("replay: make bag: image bag %s, observation %d: %w", o.Source, n, err)
		}
		if n == 0 {
			start = obs.LogTime
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("replay: make bag: image bag %s has no complete observation on %v", o.Source, o.Reader.Inputs())
	}
	return stageBag(o.Dir, o.Replace, n, o.Logger, func(staged string) (int, []MakeRefusal, error) {
		return o.write(ctx, staged, n, start)
	})
}

// checkWorldFits compares the world model's output shapes with the
// backend's inputs.
func checkWorldFits(w WorldDims, d expert.Dims) error {
	if err := w.check(); err != nil {
		return err
	}
	if w.Layers != d.Layers || w.VideoTokens != d.VideoTokens || w.AttnWidth != d.AttnWidth() || w.ContextTokens != d.ContextTokens || w.TextDim != d.TextDim {
		return fmt.Errorf("the world model emits K/V [%d, 1, %d, %d] and a context [1, %d, %d]; the action expert takes [%d, 1, %d, %d] and [1, %d, %d]: give weights of matching widths",
			w.Layers, w.VideoTokens, w.AttnWidth, w.ContextTokens, w.TextDim, d.Layers, d.VideoTokens, d.AttnWidth(), d.ContextTokens, d.TextDim)
	}
	return nil
}

// write copies the source's input topics into a new bag in dir, then
// records the node's chunks for its n observations.
func (o *MakeImageOptions) write(ctx context.Context, dir string, n int, start time.Time) (int, []MakeRefusal, error) {
	src, err := bag.OpenWith(ctx, o.Source, bag.ReaderOptions{Topics: o.Reader.Inputs()})
	if err != nil {
		return 0, nil, fmt.Errorf("replay: make bag: open %s: %w", o.Source, err)
	}
	defer src.Close()
	defs := map[string]string{}
	var topics []bag.Topic
	for _, t := range src.Topics() {
		if slices.Contains(o.Reader.Inputs(), t.Name) {
			topics = append(topics, t)
			defs[t.Type] = t.Definition
		}
	}
	w, err := bag.Create(dir, bag.WriterOptions{Definition: func(typ string) (string, error) {
		if d, ok := defs[typ]; ok && d != "" {
			return d, nil // the source's own, as recorded
		}
		return msgs.Definition(typ)
	}})
	if err != nil {
		return 0, nil, fmt.Errorf("replay: make bag: %w", err)
	}
	defer w.Close()
	for _, t := range topics {
		q := bag.DefaultQoS()
		if len(t.OfferedQoSProfiles) > 0 {
			q = t.OfferedQoSProfiles[0]
		}
		if err := w.AddTopic(t.Name, t.Type, q); err != nil {
			return 0, nil, fmt.Errorf("replay: make bag: %w", err)
		}
	}
	if o.RecordWorld {
		for _, t := range []struct {
			name, typ string
			qos       params.QoS
		}{{o.Params.Topics.Context, msgs.TypeTextContext, o.Params.QoS.Context}, {o.Params.Topics.KVCache, msgs.TypeVideoKVCache, o.Params.QoS.KVCache}} {
			if err := w.AddTopic(t.name, t.typ, bagQoS(t.qos)); err != nil {
				return 0, nil, fmt.Errorf("replay: make bag: %w", err)
			}
		}
	}
	count := 0
	for m, err := range src.Messages(ctx) {
		if err != nil {
			return 0, nil, fmt.Errorf("replay: make bag: read %s: %w", o.Source, err)
		}
		if err := w.Write(m.Topic, m.LogTime, m.Data); err != nil {
			return 0, nil, fmt.Errorf("replay: make bag: %w", err)
		}
		count++
	}

	next, stop := iter.Pull2(o.Reader.Observations(ctx, o.Source))
	defer stop()
	out := NewWorldOutput(o.World.Dims())
	cs := chunkSource{
		chunks: n, recordInputs: o.RecordWorld,
		next: func(k int) (time.Time, [2]bag.Message, error) {
			obs, err, ok := next()
			switch {
			case !ok:
				return time.Time{}, [2]bag.Message{}, fmt.Errorf("replay: make bag: image bag %s ended after %d observations, %d counted before", o.Source, k, n)
			case err != nil:
				return time.Time{}, [2]bag.Message{}, fmt.Errorf("replay: make bag: image bag %s, observation %d: %w", o.Source, k, err)
			}
			in, err := worldMessages(ctx, o.World, &obs, uint64(k), out, o.Params.Topics)
			return obs.Stamp, in, err
		},
	}
	made, refused, _, err := recordChunks(ctx, w, cs, o.Params, o.Backend, o.Logger, start, o.Timeout, o.Progress)
	if err != nil {
		return 0, nil, err
	}
	if err := w.Close(); err != nil {
		return 0, nil, fmt.Errorf("replay: make bag: %w", err)
	}
	return count + made, refused, nil
}
