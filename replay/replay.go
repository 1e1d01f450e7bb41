package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/progress"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// Defaults of Options.
const (
	DefaultMinCosine     = 0.9999
	DefaultChunkTimeout  = 2 * time.Minute
	DefaultProgressEvery = time.Second
)

// Options configure Run.
type Options struct {
	// Params are the node's parameters (see BaseParams, ResolveTopics and
	// Recording.ApplySchedule). Their topics must be the Recording's.
	Params params.Params
	// Backend denoises. The caller closes it after Run returns.
	Backend expert.Backend
	// BackendInfo describes the backend in the report, e.g. "cpu, openblas".
	BackendInfo string

	// MinCosine is the gate: every compared chunk's cosine to its recorded
	// chunk must reach it. 0 means DefaultMinCosine.
	MinCosine float64
	// MaxAbsErr, when positive, also gates every compared chunk's largest
	// absolute difference.
	MaxAbsErr float64
	// ChunkTimeout bounds the wait for each pair's outcome (and for the
	// node to start); 0 means DefaultChunkTimeout.
	ChunkTimeout time.Duration

	// Output, when not empty, is a bag folder to create (it must not
	// exist) holding the produced ActionChunks, at the log times of the
	// recorded chunks with the same stamps (else when they were
	// published, on the bag's time line), and the node's diagnostics.
	Output string

	// Progress receives a progress line every ProgressEvery (0 means
	// DefaultProgressEvery) and at the end; nil for none.
	Progress      io.Writer
	ProgressEvery time.Duration

	// Logger receives the node's log; nil discards it.
	Logger node.Logger

	// World runs the world model on the observations of an image bag
	// (a Recording from ScanImages); not used otherwise.
	World WorldModel

	// Caches, for a whole-policy recording (a Recording from Scan of a
	// bag that also holds the camera, proprio and instruction topics),
	// compares the recorded VideoKVCache and TextContext messages with
	// the offline world model's before the chunks are checked (see
	// CompareCaches); Report.Caches holds the outcome. nil checks none.
	Caches *CacheCheck
}

// fedInput is an input the replay fed to the node, by stamp.
type fedInput struct {
	kvSeq    uint64
	isKV     bool
	paired   bool   // a pair with this stamp was formed
	inFlight bool   // its pair was being denoised when the replay was interrupted
	refused  string // why the actions.* limits refused its chunk, if they did
	note     string // what the node counted for it, if anything
}

// fedLog is what the replay fed besides the inputs by stamp: enough to
// tell whether a recorded chunk's inputs are in the bag at all.
type fedLog struct {
	contexts         map[uint64]bool // the seqs of the TextContexts fed
	undecodedKV      int             // VideoKVCache messages that did not decode
	undecodedContext int             // TextContext messages that did not decode
}

// Run replays the inputs of rec through a node with o.Backend and
// compares the chunks it publishes with the recorded ones. It returns the
// report whenever the node ran, also with an error: when reading the bag
// failed midway, when ctx was cancelled (the report and the output bag
// then hold what was produced until then) or when the node did not stop
// cleanly. A failed gate is not an error of Run: see Report.Err.
func Run(ctx context.Context, rec *Recording, o Options) (*Report, error) {
	if rec == nil {
		return nil, errors.New("replay: no recording (see Scan)")
	}
	if o.Backend == nil {
		return nil, errors.New("replay: no backend")
	}
	if o.MinCosine == 0 {
		o.MinCosine = DefaultMinCosine
	}
	if !(o.MinCosine > -1 && o.MinCosine <= 1) {
		return nil, fmt.Errorf("replay: minimum cosine %v is not in (-1, 1]", o.MinCosine)
	}
	if o.MaxAbsErr < 0 {
		return nil, fmt.Errorf("replay: maximum |error| %v is negative", o.MaxAbsErr)
	}
	if o.ChunkTimeout <= 0 {
		o.ChunkTimeout = DefaultChunkTimeout
	}
	if err := CheckTransport(o.Params); err != nil {
		return nil, err
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	topics := o.Params.Topics
	if topics.KVCache != rec.Topics.KVCache || topics.Context != rec.Topics.Context || topics.Actions != rec.Topics.Actions {
		return nil, fmt.Errorf("replay: the node's topics %s, %s -> %s are not those the bag was scanned for (%s, %s -> %s)",
			topics.KVCache, topics.Context, topics.Actions, rec.Topics.KVCache, rec.Topics.Context, rec.Topics.Actions)
	}
	if err := checkShapes(rec, o.Backend.Dims()); err != nil {
		return nil, err
	}
	if o.Output != "" {
		if _, err := os.Stat(o.Output); err == nil {
			return nil, fmt.Errorf("replay: output bag folder %s already exists", o.Output)
		}
	}
	var caches *CacheReport
	if o.Caches != nil {
		if rec.World != nil {
			return nil, errors.New("replay: an image bag records no world-model messages: its caches cannot be compared (Options.Caches is for a recording of the whole policy)")
		}
		c, err := CompareCaches(ctx, rec, *o.Caches, o.Progress, o.ProgressEvery)
		if err != nil {
			return nil, err
		}
		caches = c
	}
	inputs, closeInputs, err := rec.inputs(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer closeInputs()

	began := time.Now()
	// Tied chunks are rebuilt from the recorded previous chunks.
	plans := newRTCPlans(rec, o.Backend.Dims())
	pl, err := startPipeline(ctx, o.Params, o.Backend, o.Logger, rec.Start, o.ChunkTimeout, plans.plan)
	if err != nil {
		return nil, err
	}
	defer pl.stop()

	prog := progress.New(o.Progress, "replay", "chunks", rec.KVCount, o.ProgressEvery)
	fed := map[int64]*fedInput{} // by stamp (ns)
	log := fedLog{contexts: map[uint64]bool{}}
	var (
		readErr     error
		interrupted bool
		timeouts    int
		kvDone      int
		lastKV      int64
	)
	for m, err := range inputs {
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			interrupted = true // the reader stopped for ctx
			break
		}
		if err != nil {
			readErr = fmt.Errorf("replay: read bag %s: %w", rec.Path, err)
			if rec.World != nil { // the world model's inputs: its errors name themselves
				readErr = fmt.Errorf("replay: image bag %s: %w", rec.Path, err)
			}
			break
		}
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		isKV := m.Topic == topics.KVCache
		stamp, seq, decoded := inputStamp(m.Data, isKV)
		key := stamp.UnixNano()
		if decoded {
			in := fed[key]
			if in == nil {
				in = &fedInput{}
				fed[key] = in
			}
			if isKV {
				in.isKV, in.kvSeq, lastKV = true, seq, key
			} else {
				log.contexts[seq] = true
			}
		} else if isKV {
			log.undecodedKV++
		} else {
			log.undecodedContext++
		}
		pre := pl.node.Stats()
		paired, counted, err := pl.feed(m.Topic, m.Data, m.LogTime)
		if err != nil {
			readErr = err
			break
		}
		// The pair's stamp: that of the message completing it, or with the
		// latest-context policy the cache's, which came before.
		pairKey := key
		if !isKV && o.Params.Sync.Policy == params.SyncLatest {
			pairKey = lastKV
		}
		if paired {
			err := pl.settle(ctx, o.ChunkTimeout)
			// What the node counted from before the feed to the pair's
			// outcome (the worker may be done before feed returns).
			post := pl.node.Stats()
			counted = newCounts(pre, post)
			var te *timeoutError
			switch {
			case errors.As(err, &te):
				timeouts++
				counted = join(counted, err.Error())
			case err != nil:
				interrupted = true
				if in := fed[pairKey]; in != nil {
					in.inFlight, in.note = true, join(in.note, "interrupted while denoising")
				}
			}
			if in := fed[pairKey]; in != nil {
				in.paired = true
				in.refused = strings.Join(newRefusals(pre, post), ", ")
			}
		}
		if in := fed[pairKey]; in != nil && counted != "" && decoded {
			in.note = join(in.note, counted)
		}
		if interrupted {
			break
		}
		if isKV {
			kvDone++
			prog.Update(kvDone)
		}
	}
	stopErr := pl.stop()
	out, diags, undecoded := pl.results()

	rep := buildReport(rec, o, out, fed, log, plans.errs, interrupted)
	rep.Stats = pl.node.Stats()
	rep.Caches = caches
	if rec.World != nil {
		rep.ImageTopics = rec.World.Reader.Inputs()
	}
	rep.Inputs, rep.Timeouts, rep.Elapsed = kvDone, timeouts, time.Since(began)
	if undecoded > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d published ActionChunks did not decode", undecoded))
	}
	prog.Done(kvDone)

	robot := pl.robotResults()
	var errs []error
	if o.Params.Actions.Post.Enabled() {
		ex, err := compareExecutable(ctx, rec.Path, o.Params.Actions.Topic, robot)
		if err != nil {
			errs = append(errs, err)
		}
		rep.Executable = ex
	}
	if o.Output != "" {
		if err := writeOutput(o.Output, o.Params, rep, out, robot, diags); err != nil {
			errs = append(errs, err)
		} else {
			rep.Output = o.Output
		}
	}
	if readErr != nil {
		errs = append(errs, readErr)
	}
	if interrupted {
		errs = append(errs, fmt.Errorf("replay: interrupted after %d of %d inputs: %w", kvDone, rec.KVCount, context.Cause(ctx)))
	}
	if stopErr != nil {
		errs = append(errs, stopErr)
	}
	return rep, errors.Join(errs...)
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ", " + b
}

// inputStamp decodes an input's header stamp and seq. Inputs that do not
// decode are fed all the same: the node rejects them.
func inputStamp(data []byte, isKV bool) (stamp time.Time, seq uint64, ok bool) {
	if isKV {
		var kv msgs.VideoKVCache
		if kv.UnmarshalCDR(data) != nil {
			return time.Time{}, 0, false
		}
		return stampTime(kv.Header.Stamp), kv.Seq, true
	}
	var c msgs.TextContext
	if c.UnmarshalCDR(data) != nil {
		return time.Time{}, 0, false
	}
	return stampTime(c.Header.Stamp), c.Seq, true
}

// checkShapes compares the first inputs' shapes with the backend's
// contract, so that a bag recorded for another model fails with one clear
// error rather than a rejection per message.
func checkShapes(rec *Recording, d expert.Dims) error {
	kv := []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth())}
	if rec.KVShape != nil && !slices.Equal(rec.KVShape, kv) {
		return fmt.Errorf("replay: the bag's VideoKVCache keys have shape %v, the backend takes %v: give the weights or context binary of the model the bag was recorded for",
			rec.KVShape, kv)
	}
	ctx := []uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}
	if rec.ContextShape != nil && !slices.Equal(rec.ContextShape, ctx) {
		return fmt.Errorf("replay: the bag's TextContext context has shape %v, the backend takes %v: give the weights or context binary of the model the bag was recorded for",
			rec.ContextShape, ctx)
	}
	return nil
}

// writeOutput writes the produced chunks and the diagnostics to a new bag.
func writeOutput(dir string, p params.Params, rep *Report, out, robot []produced, diags []published) (err error) {
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		return fmt.Errorf("replay: output bag: %w", err)
	}
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("replay: output bag: %w", cerr)
		}
	}()
	if err := w.AddTopic(p.Topics.Actions, msgs.TypeActionChunk, bagQoS(p.QoS.Actions)); err != nil {
		return fmt.Errorf("replay: output bag: %w", err)
	}
	if err := w.AddTopic(p.Topics.Diagnostics, msgs.TypeDiagnosticArray, bagQoS(params.DiagnosticsQoS())); err != nil {
		return fmt.Errorf("replay: output bag: %w", err)
	}
	if p.Actions.Post.Enabled() {
		if err := w.AddTopic(p.Actions.Topic, msgs.TypeActionChunk, bagQoS(p.QoS.Actions)); err != nil {
			return fmt.Errorf("replay: output bag: %w", err)
		}
	}
	recordedAt := map[int64]time.Time{}
	for _, row := range rep.Rows {
		if row.Recorded != nil {
			recordedAt[row.Stamp.UnixNano()] = row.Recorded.LogTime
		}
	}
	for _, c := range out {
		at := c.at
		if t, ok := recordedAt[stampTime(c.chunk.Header.Stamp).UnixNano()]; ok {
			at = t
		}
		if err := w.Write(p.Topics.Actions, at, c.data); err != nil {
			return fmt.Errorf("replay: output bag: %w", err)
		}
	}
	for _, c := range robot {
		at := c.at
		if t, ok := recordedAt[stampTime(c.chunk.Header.Stamp).UnixNano()]; ok {
			at = t
		}
		if err := w.Write(p.Actions.Topic, at, c.data); err != nil {
			return fmt.Errorf("replay: output bag: %w", err)
		}
	}
	for _, d := range diags {
		if err := w.Write(p.Topics.Diagnostics, d.at, d.data); err != nil {
			return fmt.Errorf("replay: output bag: %w", err)
		}
	}
	return nil
}

// ExecutableReport compares the executable chunks (actions.topic) the
// replay produced with those the bag recorded, by stamp.
type ExecutableReport struct {
	Topic     string
	Produced  int     // executable chunks the node published
	Recorded  int     // in the bag
	Compared  int     // produced chunks with a recorded one of the same stamp
	Identical int     // of which bit for bit equal rows
	MaxAbsErr float64 // largest |produced - recorded| over the compared rows
}

// compareExecutable reads the bag's executable chunks on topic and
// compares the produced ones with them.
func compareExecutable(ctx context.Context, path, topic string, produced []produced) (*ExecutableReport, error) {
	ex := &ExecutableReport{Topic: topic, Produced: len(produced)}
	r, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: []string{topic}})
	if err != nil {
		return ex, fmt.Errorf("replay: open bag for %s: %w", topic, err)
	}
	defer r.Close()
	recorded := map[int64][]float32{}
	for m, err := range r.Messages(ctx) {
		if err != nil {
			return ex, fmt.Errorf("replay: read bag %s: %w", path, err)
		}
		if m.Topic != topic {
			continue
		}
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(m.Data); err != nil {
			return ex, fmt.Errorf("replay: bag %s: a recorded %s message: %w", path, topic, err)
		}
		recorded[stampTime(c.Header.Stamp).UnixNano()] = flatRows(c)
		ex.Recorded++
	}
	for _, p := range produced {
		want, ok := recorded[stampTime(p.chunk.Header.Stamp).UnixNano()]
		if !ok {
			continue
		}
		got := flatRows(p.chunk)
		ex.Compared++
		same := len(got) == len(want)
		for i := range min(len(got), len(want)) {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				same = false
			}
			ex.MaxAbsErr = math.Max(ex.MaxAbsErr, math.Abs(float64(got[i])-float64(want[i])))
		}
		if same {
			ex.Identical++
		}
	}
	return ex, nil
}

func flatRows(c msgs.ActionChunk) []float32 {
	var out []float32
	for _, r := range c.Actions {
		out = append(out, r.Values...)
	}
	return out
}
