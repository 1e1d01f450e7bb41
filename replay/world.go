package replay

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/worldmodel"
)

// Observation is one cycle of a robot's inputs: the camera images, the
// proprio state and the instruction in force, as an image bag records
// them.
type Observation struct {
	// Stamp is the observation's time: the header stamp of the
	// VideoKVCache and TextContext made from it, and so of its chunk.
	Stamp time.Time
	// LogTime is when the observation was complete in the bag (the log
	// time of its last message); the world model's messages are fed to
	// the node shortly after it.
	LogTime     time.Time
	Images      []worldmodel.Image // in the world model's camera order
	State       []float32          // the raw proprio values (spec §2.1)
	Instruction string
}

// ObservationReader walks the observations of an image bag: camera,
// proprio and instruction topics, paired into cycles.
type ObservationReader interface {
	// Inputs names the bag topics the observations are read from, fully
	// qualified.
	Inputs() []string
	// Observations yields the observations of the bag at path in
	// log-time order; an error ends the walk.
	Observations(ctx context.Context, path string) iter.Seq2[Observation, error]
}

// WorldDims are the shapes a world model emits: keys and values of
// [Layers, 1, VideoTokens, AttnWidth] and a context of [1, ContextTokens,
// TextDim].
type WorldDims struct {
	Layers, VideoTokens, AttnWidth int
	ContextTokens, TextDim         int
}

// check refuses non-positive or oversized dims.
func (d WorldDims) check() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"layers", d.Layers}, {"video tokens", d.VideoTokens}, {"attention width", d.AttnWidth}, {"context tokens", d.ContextTokens}, {"text width", d.TextDim}} {
		if v.n < 1 || v.n > math.MaxUint32 {
			return fmt.Errorf("replay: world model's %s %d; want 1 to %d", v.name, v.n, uint32(math.MaxUint32))
		}
	}
	return nil
}

// WorldOutput is one observation's world-model output in float32,
// caller-owned: Keys and Values of Layers × VideoTokens × AttnWidth,
// Context of ContextTokens × TextDim, Mask of ContextTokens.
type WorldOutput struct {
	Keys, Values []float32
	Context      []float32
	Mask         []bool
	// Stages, when the world model reports them, are its stage times
	// for the last Run (appended to; the caller resets it).
	Stages []Stage
}

// NewWorldOutput allocates a WorldOutput of the given dims.
func NewWorldOutput(d WorldDims) *WorldOutput {
	kv := d.Layers * d.VideoTokens * d.AttnWidth
	return &WorldOutput{
		Keys:    make([]float32, kv),
		Values:  make([]float32, kv),
		Context: make([]float32, d.ContextTokens*d.TextDim),
		Mask:    make([]bool, d.ContextTokens),
	}
}

// fits checks the buffers' lengths against d.
func (o *WorldOutput) fits(d WorldDims) error {
	kv := d.Layers * d.VideoTokens * d.AttnWidth
	if len(o.Keys) != kv || len(o.Values) != kv || len(o.Context) != d.ContextTokens*d.TextDim || len(o.Mask) != d.ContextTokens {
		return fmt.Errorf("replay: world output buffers of %d keys, %d values, %d context values and %d mask entries; want %d, %d, %d and %d",
			len(o.Keys), len(o.Values), len(o.Context), len(o.Mask), kv, kv, d.ContextTokens*d.TextDim, d.ContextTokens)
	}
	return nil
}

// WorldModel is the world model as a replay runs it: an observation in,
// the video K/V cache and the context out.
type WorldModel interface {
	// Dims are the shapes Run writes.
	Dims() WorldDims
	// Run writes the world model's output for obs into out, whose buffers
	// have the lengths Dims gives. An observation it refuses is an error;
	// out is then not valid.
	Run(ctx context.Context, obs *Observation, out *WorldOutput) error
}

// WorldInputs runs wm on obs and returns the node's two inputs for it:
// the TextContext and the VideoKVCache, with sequence number seq, stamped
// with obs.Stamp, every video token visible (a one-frame cache). out is
// the world model's scratch (see NewWorldOutput); the messages copy what
// they need of it.
func WorldInputs(ctx context.Context, wm WorldModel, obs *Observation, seq uint64, out *WorldOutput) (msgs.TextContext, msgs.VideoKVCache, error) {
	d := wm.Dims()
	if err := d.check(); err != nil {
		return msgs.TextContext{}, msgs.VideoKVCache{}, err
	}
	if err := out.fits(d); err != nil {
		return msgs.TextContext{}, msgs.VideoKVCache{}, err
	}
	if obs.Stamp.Unix() < 0 || obs.Stamp.Unix() > math.MaxInt32 {
		return msgs.TextContext{}, msgs.VideoKVCache{}, fmt.Errorf("replay: observation stamp %s is outside a ROS time's range", fmtTime(obs.Stamp))
	}
	if err := wm.Run(ctx, obs, out); err != nil {
		return msgs.TextContext{}, msgs.VideoKVCache{}, fmt.Errorf("replay: world model on the observation stamped %s: %w", fmtTime(obs.Stamp), err)
	}
	h := msgs.Header{Stamp: msgs.Time{Sec: int32(obs.Stamp.Unix()), Nanosec: uint32(obs.Stamp.Nanosecond())}, FrameID: "camera"}
	kvShape := []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth)}
	return msgs.TextContext{
			Header:        h,
			Seq:           seq,
			Instruction:   obs.Instruction,
			Context:       msgs.NewTensorF32([]uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}, out.Context),
			AttentionMask: append([]bool(nil), out.Mask...),
		}, msgs.VideoKVCache{
			Header: h,
			Seq:    seq,
			Keys:   msgs.NewTensorF32(kvShape, out.Keys),
			Values: msgs.NewTensorF32(kvShape, out.Values),
		}, nil
}

// worldFeed runs wm on every observation of obs and yields the node's
// inputs for it as recorded messages: the TextContext on topics.Context
// at the observation's log time + contextDelay, then the VideoKVCache on
// topics.KVCache at + kvDelay, the timing of a bag MakeBag writes.
// Observation k gets seq k. Errors end the walk.
func worldFeed(ctx context.Context, wm WorldModel, obs iter.Seq2[Observation, error], topics params.Topics) iter.Seq2[bag.Message, error] {
	return func(yield func(bag.Message, error) bool) {
		out := NewWorldOutput(wm.Dims())
		var seq uint64
		for o, err := range obs {
			if err != nil {
				yield(bag.Message{}, err)
				return
			}
			if err := ctx.Err(); err != nil {
				yield(bag.Message{}, err)
				return
			}
			in, err := worldMessages(ctx, wm, &o, seq, out, topics)
			if err != nil {
				yield(bag.Message{}, err)
				return
			}
			for _, m := range in {
				if !yield(m, nil) {
					return
				}
			}
			seq++
		}
	}
}

// worldMessages are observation o's two input messages, encoded, on
// their topics at their log times.
func worldMessages(ctx context.Context, wm WorldModel, o *Observation, seq uint64, out *WorldOutput, topics params.Topics) ([2]bag.Message, error) {
	c, kv, err := WorldInputs(ctx, wm, o, seq, out)
	if err != nil {
		return [2]bag.Message{}, err
	}
	cd, err := c.MarshalCDR()
	if err != nil {
		return [2]bag.Message{}, fmt.Errorf("replay: encode the TextContext of the observation stamped %s: %w", fmtTime(o.Stamp), err)
	}
	kd, err := kv.MarshalCDR()
	if err != nil {
		return [2]bag.Message{}, fmt.Errorf("replay: encode the VideoKVCache of the observation stamped %s: %w", fmtTime(o.Stamp), err)
	}
	return [2]bag.Message{
		{Topic: topics.Context, Type: msgs.TypeTextContext, LogTime: o.LogTime.Add(contextDelay), Data: cd},
		{Topic: topics.KVCache, Type: msgs.TypeVideoKVCache, LogTime: o.LogTime.Add(kvDelay), Data: kd},
	}, nil
}

// WorldRecording is what Scan found of an image bag: where the
// observations come from.
type WorldRecording struct {
	Reader       ObservationReader
	Observations int
	Dims         WorldDims
}

// IsImageBag reports whether the bag at path is an image bag for r: it
// has none of the node's input topics (topics.KVCache, topics.Context)
// and every topic r reads. A bag with both is a recording of the whole
// policy, not an image bag: its recorded inputs are replayed (Scan) and
// its caches can be checked against the world model (HasObservations,
// Options.Caches).
func IsImageBag(ctx context.Context, path string, topics params.Topics, r ObservationReader) (bool, error) {
	b, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: []string{topics.Actions}})
	if err != nil {
		return false, fmt.Errorf("replay: open bag: %w", err)
	}
	defer b.Close()
	has := map[string]bool{}
	for _, t := range b.Topics() {
		has[t.Name] = true
	}
	if has[topics.KVCache] || has[topics.Context] {
		return false, nil
	}
	images := len(r.Inputs()) > 0
	for _, name := range r.Inputs() {
		images = images && has[name]
	}
	return images, nil
}

// ScanImages reads an image bag once: it walks its observations with r
// (decoding every one, so that a bad one fails here) and collects the
// ActionChunks recorded on topics.Actions, as Scan does for a bag of the
// node's inputs. The Recording's input shapes are those wm emits; Run
// then needs Options.World.
func ScanImages(ctx context.Context, path string, topics params.Topics, r ObservationReader, d WorldDims) (*Recording, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	rec := &Recording{Path: path, Topics: topics, World: &WorldRecording{Reader: r, Dims: d}}
	n := 0
	for o, err := range r.Observations(ctx, path) {
		if err != nil {
			return nil, fmt.Errorf("replay: image bag %s, observation %d: %w", path, n, err)
		}
		if n == 0 {
			rec.Start = o.LogTime
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("replay: image bag %s has no complete observation on %v", path, r.Inputs())
	}
	if err := rec.scanActions(ctx); err != nil {
		return nil, err
	}
	rec.World.Observations, rec.KVCount, rec.ContextCount = n, n, n
	rec.KVShape = []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth)}
	rec.ContextShape = []uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}
	return rec, nil
}

// inputs are the messages Run feeds the node: the bag's own on the
// input topics, or for an image bag the world model's for each
// observation. close releases what they hold.
func (rec *Recording) inputs(ctx context.Context, o *Options) (seq iter.Seq2[bag.Message, error], close func() error, err error) {
	if rec.World == nil {
		r, err := bag.OpenWith(ctx, rec.Path, bag.ReaderOptions{Topics: []string{rec.Topics.KVCache, rec.Topics.Context}})
		if err != nil {
			return nil, nil, fmt.Errorf("replay: open bag: %w", err)
		}
		return r.Messages(ctx), r.Close, nil
	}
	if o.World == nil {
		return nil, nil, errors.New("replay: the bag holds camera inputs: give a world model (Options.World)")
	}
	if got := o.World.Dims(); got != rec.World.Dims {
		return nil, nil, fmt.Errorf("replay: the world model emits %+v, the recording was scanned for %+v", got, rec.World.Dims)
	}
	return worldFeed(ctx, o.World, rec.World.Reader.Observations(ctx, rec.Path), rec.Topics), func() error { return nil }, nil
}
