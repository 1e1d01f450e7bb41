package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/proc"
	"github.com/fastwam/actionexpert/internal/progress"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// Defaults of MakeOptions.
const (
	DefaultPeriod = 100 * time.Millisecond
	// DefaultStartUnix is the stamp (Unix seconds) of a made bag's first
	// chunk: fixed, so that a bag made twice holds the same inputs.
	DefaultStartUnix = 1_700_000_000
)

// Input timing of a made bag: the context is logged 5 ms and the cache
// 20 ms after the observation's stamp.
const (
	contextDelay = 5 * time.Millisecond
	kvDelay      = 20 * time.Millisecond
)

// perturbScale scales the seeded noise added to the context of every
// chunk after the first pass over the cases (the goldens' contexts have
// unit standard deviation).
const perturbScale = 0.1

// perturbSeed is the first seed of those perturbations (chunk k uses
// perturbSeed + k).
const perturbSeed = 0x5eed_0000

// MakeOptions configure MakeBag.
type MakeOptions struct {
	// Dir is the bag folder to write. It must not exist unless Replace is
	// set; then it must be a bag folder (metadata.yaml and .mcap files
	// only), which is replaced once the new bag is complete.
	Dir     string
	Replace bool
	// Chunks is the number of observations (a context and a cache each).
	Chunks int
	// Cases are the golden inputs, used in turn: chunk k takes case k mod
	// len(Cases). The first len(Cases) chunks are the cases as they are;
	// later ones add a small seeded perturbation to the context, so that
	// every chunk differs. The cases must share their shapes.
	Cases []*golden.Case
	// Backend denoises; the CPU reference for a regression bag. The caller
	// closes it.
	Backend expert.Backend
	// Params are the node's (see BaseParams and ResolveTopics).
	Params params.Params
	// Start is the stamp of chunk 0 (zero means DefaultStartUnix); chunk k
	// is stamped Start + k*Period (zero Period means DefaultPeriod).
	Start  time.Time
	Period time.Duration
	// Timeout bounds the wait for each chunk; 0 means DefaultChunkTimeout.
	Timeout time.Duration
	Logger  node.Logger
	// Progress receives a progress line every DefaultProgressEvery and at
	// the end; nil for none.
	Progress io.Writer
}

// MakeResult describes a bag MakeBag wrote.
type MakeResult struct {
	Dir      string
	Chunks   int
	Messages int
	Elapsed  time.Duration
	// Refused lists the chunks the actions.* limits refused: their inputs
	// are in the bag, with no ActionChunk (the node published none).
	Refused []MakeRefusal
}

// MakeRefusal is a chunk of a made bag that the actions.* limits refused.
type MakeRefusal struct {
	Chunk  int
	Stamp  time.Time
	Reason string // actions.Reason*, comma-separated
}

// String names the chunk by index and stamp, as replay's table prints
// stamps, and says why it was refused.
func (r MakeRefusal) String() string {
	return fmt.Sprintf("chunk %d stamp %s: %s", r.Chunk, fmtTime(r.Stamp), refusedNote(r.Reason))
}

// MakeBag writes a regression bag: for each chunk a TextContext and a
// VideoKVCache built from the golden cases (seq k, stamps Period apart),
// run through the node exactly as Run replays them, and the ActionChunk
// the node published, all with the node's offered QoS. The recorded
// chunks are thus the output of o.Backend on these inputs.
func MakeBag(ctx context.Context, o MakeOptions) (*MakeResult, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return stageBag(o.Dir, o.Replace, o.Chunks, o.Logger, func(staged string) (int, []MakeRefusal, error) {
		return o.write(ctx, staged)
	})
}

// stageBag writes a bag with write into a staging folder beside dir, then
// moves it to dir (replacing dir, a checked bag folder, when replace is
// set): a failed make leaves dir as it was.
func stageBag(dir string, replace bool, chunks int, log node.Logger, write func(staged string) (int, []MakeRefusal, error)) (*MakeResult, error) {
	began := time.Now()
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	removeStaleStages(parent, proc.Alive, log)
	tmp, err := os.MkdirTemp(parent, stagePattern())
	if err != nil {
		return nil, fmt.Errorf("replay: make bag: %w", err)
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, base)
	n, refused, err := write(staged)
	if err != nil {
		return nil, err
	}
	if replace {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("replay: make bag: replace %s: %w", dir, err)
		}
	}
	if err := os.Rename(staged, dir); err != nil {
		return nil, fmt.Errorf("replay: make bag: %w", err)
	}
	return &MakeResult{Dir: dir, Chunks: chunks, Messages: n, Elapsed: time.Since(began), Refused: refused}, nil
}

// check validates the options and fills in the defaults.
func (o *MakeOptions) check() error {
	if o.Dir == "" {
		return errors.New("replay: make bag: no output folder")
	}
	if o.Chunks < 1 {
		return fmt.Errorf("replay: make bag: %d chunks; want at least 1", o.Chunks)
	}
	if len(o.Cases) == 0 {
		return errors.New("replay: make bag: no golden cases")
	}
	if o.Backend == nil {
		return errors.New("replay: make bag: no backend")
	}
	if err := CheckTransport(o.Params); err != nil {
		return err
	}
	d := o.Backend.Dims()
	for _, c := range o.Cases {
		if err := c.Fits(d); err != nil {
			return fmt.Errorf("replay: make bag: %w", err)
		}
	}
	if err := checkMakeDir(o.Dir, o.Replace); err != nil {
		return err
	}
	if o.Start.IsZero() {
		o.Start = time.Unix(DefaultStartUnix, 0)
	}
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultChunkTimeout
	}
	return nil
}

// checkMakeDir refuses an output folder that exists, unless replace is
// set and it is a bag folder.
func checkMakeDir(dir string, replace bool) error {
	if st, err := os.Stat(dir); err == nil {
		if !replace {
			return fmt.Errorf("replay: make bag: %s already exists (replace it with -force)", dir)
		}
		if err := isBagFolder(dir, st); err != nil {
			return fmt.Errorf("replay: make bag: will not replace %s: %w", dir, err)
		}
	}
	return nil
}

// isBagFolder checks that dir holds a bag and nothing else.
func isBagFolder(dir string, st os.FileInfo) error {
	if !st.IsDir() {
		return errors.New("it is not a folder")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	hasMeta := false
	for _, e := range entries {
		switch {
		case e.Name() == bag.MetadataFile:
			hasMeta = true
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".mcap"):
		default:
			return fmt.Errorf("it holds %s, which is not part of a bag", e.Name())
		}
	}
	if !hasMeta {
		return fmt.Errorf("it has no %s", bag.MetadataFile)
	}
	return nil
}

// write makes the bag in dir and returns its message count and the
// chunks the actions.* limits refused.
func (o *MakeOptions) write(ctx context.Context, dir string) (int, []MakeRefusal, error) {
	p := o.Params
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("replay: make bag: %w", err)
	}
	defer w.Close()
	for _, t := range []struct {
		name, typ string
		qos       params.QoS
	}{
		{p.Topics.Context, msgs.TypeTextContext, p.QoS.Context},
		{p.Topics.KVCache, msgs.TypeVideoKVCache, p.QoS.KVCache},
	} {
		if err := w.AddTopic(t.name, t.typ, bagQoS(t.qos)); err != nil {
			return 0, nil, fmt.Errorf("replay: make bag: %w", err)
		}
	}
	src := chunkSource{
		chunks: o.Chunks,
		next: func(k int) (time.Time, [2]bag.Message, error) {
			stamp := o.Start.Add(time.Duration(k) * o.Period)
			c, kv := o.inputs(k, stamp)
			var in [2]bag.Message
			for i, m := range []struct {
				topic string
				at    time.Time
				m     interface{ MarshalCDR() ([]byte, error) }
			}{
				{p.Topics.Context, stamp.Add(contextDelay), &c},
				{p.Topics.KVCache, stamp.Add(kvDelay), &kv},
			} {
				data, err := m.m.MarshalCDR()
				if err != nil {
					return stamp, in, fmt.Errorf("replay: make bag: chunk %d: encode %s: %w", k, m.topic, err)
				}
				in[i] = bag.Message{Topic: m.topic, LogTime: m.at, Data: data}
			}
			return stamp, in, nil
		},
		recordInputs: true,
	}
	count, refused, _, err := recordChunks(ctx, w, src, p, o.Backend, o.Logger, o.Start, o.Timeout, o.Progress)
	if err != nil {
		return 0, nil, err
	}
	if err := w.Close(); err != nil {
		return 0, nil, fmt.Errorf("replay: make bag: %w", err)
	}
	return count, refused, nil
}

// chunkSource gives the inputs of the chunks a made bag records.
type chunkSource struct {
	chunks int
	// next returns chunk k's stamp and its two input messages (the
	// TextContext, then the VideoKVCache), at their log times.
	next func(k int) (time.Time, [2]bag.Message, error)
	// recordInputs writes the input messages into the bag too (their
	// topics are already added); an image bag keeps its camera inputs
	// instead.
	recordInputs bool
}

// recordChunks runs the inputs of src through the node with backend b,
// one chunk at a time, and writes the ActionChunks it publishes (and the
// executable ones, with actions.* post-processing) into w, after adding
// their topics; w nil writes nothing. It returns the messages written,
// the chunks the actions.* limits refused and the chunks published.
func recordChunks(ctx context.Context, w *bag.Writer, src chunkSource, p params.Params, b expert.Backend, log node.Logger,
	start time.Time, timeout time.Duration, progressTo io.Writer) (int, []MakeRefusal, []PolicyChunk, error) {
	post := p.Actions.Post.Enabled()
	write := func(topic string, at time.Time, data []byte) error { return nil }
	if w != nil {
		if err := w.AddTopic(p.Topics.Actions, msgs.TypeActionChunk, bagQoS(p.QoS.Actions)); err != nil {
			return 0, nil, nil, fmt.Errorf("replay: make bag: %w", err)
		}
		if post {
			if err := w.AddTopic(p.Actions.Topic, msgs.TypeActionChunk, bagQoS(p.QoS.Actions)); err != nil {
				return 0, nil, nil, fmt.Errorf("replay: make bag: %w", err)
			}
		}
		write = w.Write
	}
	pl, err := startPipeline(ctx, p, b, log, start, timeout, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	defer pl.stop()

	count, made := 0, 0 // messages written, chunks published
	var (
		refused []MakeRefusal
		chunks  []PolicyChunk
	)
	prog := progress.New(progressTo, "bag make", "chunks", src.chunks, DefaultProgressEvery)
	for k := range src.chunks {
		prog.Update(k)
		stamp, in, err := src.next(k)
		if err != nil {
			return 0, nil, nil, err
		}
		var reasons []string // why the limits refused the chunk, if they did
		for _, m := range in {
			if src.recordInputs {
				if err := write(m.Topic, m.LogTime, m.Data); err != nil {
					return 0, nil, nil, fmt.Errorf("replay: make bag: %w", err)
				}
				count++
			}
			pre := pl.node.Stats()
			paired, counted, err := pl.feed(m.Topic, m.Data, m.LogTime)
			if err != nil {
				return 0, nil, nil, err
			}
			if counted != "" && !paired {
				return 0, nil, nil, fmt.Errorf("replay: make bag: chunk %d: the node refused its %s message (%s)", k, m.Topic, counted)
			}
			if paired {
				if err := pl.settle(ctx, timeout); err != nil {
					return 0, nil, nil, fmt.Errorf("replay: make bag: chunk %d: %w", k, err)
				}
				after := pl.node.Stats()
				// A chunk the limits refused is an outcome: its inputs stay
				// in the bag, with no chunk recorded, as the node on the
				// robot would have published none.
				reasons = newRefusals(pre, after)
				if len(reasons) == 0 {
					if why := newCounts(pre, after); why != "" {
						return 0, nil, nil, fmt.Errorf("replay: make bag: chunk %d: no chunk produced (%s)", k, why)
					}
				}
			}
		}
		if len(reasons) > 0 {
			refused = append(refused, MakeRefusal{Chunk: k, Stamp: stamp, Reason: strings.Join(reasons, ", ")})
			continue
		}
		out, _, _ := pl.results()
		if len(out) != made+1 || !stampTime(out[made].chunk.Header.Stamp).Equal(stamp) {
			return 0, nil, nil, fmt.Errorf("replay: make bag: chunk %d (stamp %s): the node published %d chunks, want %d", k, fmtTime(stamp), len(out), made+1)
		}
		if err := write(p.Topics.Actions, out[made].at, out[made].data); err != nil {
			return 0, nil, nil, fmt.Errorf("replay: make bag: %w", err)
		}
		count++
		chunks = append(chunks, PolicyChunk{Chunk: k, Model: out[made].chunk})
		if post {
			robot := pl.robotResults()
			if len(robot) != made+1 || robot[made].chunk.Seq != out[made].chunk.Seq {
				return 0, nil, nil, fmt.Errorf("replay: make bag: chunk %d: %d executable chunks on %s, want %d", k, len(robot), p.Actions.Topic, made+1)
			}
			if err := write(p.Actions.Topic, robot[made].at, robot[made].data); err != nil {
				return 0, nil, nil, fmt.Errorf("replay: make bag: %w", err)
			}
			count++
			chunks[len(chunks)-1].Executable = &robot[made].chunk
		}
		made++
	}
	prog.Done(src.chunks)
	if err := pl.stop(); err != nil {
		return 0, nil, nil, err
	}
	return count, refused, chunks, nil
}

// inputs builds chunk k's messages.
func (o *MakeOptions) inputs(k int, stamp time.Time) (msgs.TextContext, msgs.VideoKVCache) {
	c := o.Cases[k%len(o.Cases)]
	h := msgs.Header{Stamp: msgs.Time{Sec: int32(stamp.Unix()), Nanosec: uint32(stamp.Nanosecond())}, FrameID: "camera"}
	context := c.Chunk.Context
	if k >= len(o.Cases) {
		context = slices.Clone(context)
		for i, v := range expert.Noise(perturbSeed+uint64(k), len(context)) {
			context[i] += perturbScale * v
		}
	}
	kvShape := []uint32{uint32(c.Layers), 1, uint32(c.VideoTokens), uint32(c.AttnWidth)}
	return msgs.TextContext{
			Header:        h,
			Seq:           uint64(k),
			Instruction:   fmt.Sprintf("golden %s, chunk %d", path.Base(filepath.ToSlash(c.Name)), k),
			Context:       msgs.NewTensorF32([]uint32{1, uint32(c.ContextTokens), uint32(c.TextDim)}, context),
			AttentionMask: slices.Clone(c.Chunk.ContextMask),
		}, msgs.VideoKVCache{
			Header:             h,
			Seq:                uint64(k),
			VisibleVideoTokens: uint32(c.Chunk.VisibleVideo),
			Keys:               msgs.NewTensorF32(kvShape, c.Chunk.VideoKeys),
			Values:             msgs.NewTensorF32(kvShape, c.Chunk.VideoValues),
		}
}
