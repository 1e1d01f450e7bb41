package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/internal/progress"
	"github.com/fastwam/actionexpert/msgs"
)

// CacheCheck configures the comparison of a whole-policy recording's
// world-model messages (the VideoKVCache and TextContext a world-model
// node published) with the offline world model run on the recording's own
// camera, proprio and instruction messages (see CompareCaches).
type CacheCheck struct {
	// Reader walks the recording's observations, paired as the world-model
	// node pairs them.
	Reader ObservationReader
	// World is the offline world model: the one `fastwam policy` runs,
	// with the weights the recording was made with.
	World WorldModel
	// MaxAbsErr is the tolerance of every compared value: 0 means bit for
	// bit, right when the same Go code ran on the same kind of machine
	// (another OpenBLAS core type, another BLAS or the NPU changes the
	// last bits).
	MaxAbsErr float64
}

// CacheStatus is the verdict on one recorded cache.
type CacheStatus string

// Verdicts of a recorded cache. CacheMismatch fails the replay.
const (
	CacheOK            CacheStatus = "ok"
	CacheMismatch      CacheStatus = "FAIL"
	CacheNotComparable CacheStatus = "NOT COMPARABLE" // no observation of its stamp in the recording
)

// The tensors a cache comparison names.
const (
	TensorKeys    = "K"
	TensorValues  = "V"
	TensorContext = "context"
	TensorMask    = "mask"
)

// TensorDiff compares one recorded tensor with the world model's.
type TensorDiff struct {
	Name string // TensorKeys, TensorValues, TensorContext or TensorMask
	N    int    // elements compared
	// Differ counts the elements outside the tolerance (for the mask:
	// that differ).
	Differ int
	// MaxAbsErr is the largest |recorded - world model| (+Inf where one
	// is NaN and the other not); Cosine is their cosine (NaN for the
	// mask).
	MaxAbsErr, Cosine float64
	// First is the flat index of the first element outside the
	// tolerance, -1 when none is; Recorded and Replayed are its values.
	First              int
	Recorded, Replayed float64
}

// CacheRow is the verdict on one recorded VideoKVCache.
type CacheRow struct {
	Stamp      time.Time // the header stamp: that of the observation it was computed from
	LogTime    time.Time
	KVSeq      uint64
	ContextSeq uint64 // the TextContext of the same stamp; see HasContext
	HasContext bool
	Status     CacheStatus
	Tensors    []TensorDiff // K, V, then context and mask when HasContext
	Note       string
}

// CacheReport is the outcome of CompareCaches.
type CacheReport struct {
	ImageTopics  []string // the observations' camera, proprio and instruction topics
	MaxAbsErr    float64  // the tolerance; 0 is bit for bit
	Caches       int      // VideoKVCache messages recorded
	Contexts     int      // TextContext messages recorded
	Observations int      // observations in the recording (up to one that does not decode after the last cache)
	Undecoded    int      // recorded VideoKVCache or TextContext messages that do not decode: failures
	Rows         []CacheRow
	Elapsed      time.Duration
}

// Compared counts the caches compared with the world model.
func (r *CacheReport) Compared() int {
	n := 0
	for _, row := range r.Rows {
		if row.Status != CacheNotComparable {
			n++
		}
	}
	return n
}

// NotComparable counts the caches whose observation is not in the
// recording.
func (r *CacheReport) NotComparable() int { return len(r.Rows) - r.Compared() }

// Failures lists the caches that differ from the world model's.
func (r *CacheReport) Failures() []CacheRow {
	var out []CacheRow
	for _, row := range r.Rows {
		if row.Status == CacheMismatch {
			out = append(out, row)
		}
	}
	return out
}

// Err is nil when every comparable cache matched and every recorded
// message decoded; otherwise it names each differing cache by its
// observation's stamp, the tensor and the error.
func (r *CacheReport) Err() error {
	fails := r.Failures()
	if len(fails) == 0 && r.Undecoded == 0 {
		return nil
	}
	var parts []string
	if r.Undecoded > 0 {
		parts = append(parts, fmt.Sprintf("%d recorded VideoKVCache or TextContext messages do not decode", r.Undecoded))
	}
	for i, f := range fails {
		if i == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(fails)-maxNamed))
			break
		}
		parts = append(parts, fmt.Sprintf("cache of the observation stamped %s (kv_seq %d): %s", fmtTime(f.Stamp), f.KVSeq, f.Note))
	}
	return fmt.Errorf("FAIL: %d of %d compared caches differ from the world model's (%s): %s",
		len(fails), r.Compared(), r.toleranceText(), strings.Join(parts, "; "))
}

// toleranceText is "bit for bit" or "tolerance |err| <= x".
func (r *CacheReport) toleranceText() string {
	if r.MaxAbsErr == 0 {
		return "bit for bit"
	}
	return fmt.Sprintf("tolerance |err| <= %g", r.MaxAbsErr)
}

// extremes are the largest max |err| and lowest cosine over the compared
// K, V and context tensors.
func (r *CacheReport) extremes() (maxErr, minCos float64) {
	minCos = 1
	for _, row := range r.Rows {
		for _, t := range row.Tensors {
			if t.Name == TensorMask {
				continue
			}
			if t.MaxAbsErr > maxErr || math.IsNaN(t.MaxAbsErr) {
				maxErr = t.MaxAbsErr
			}
			if !(t.Cosine >= minCos) {
				minCos = t.Cosine
			}
		}
	}
	return maxErr, minCos
}

// Summary is one line of figures: how many caches were compared, how,
// the largest error and lowest cosine, and how many were not comparable.
func (r *CacheReport) Summary() string {
	maxErr, minCos := r.extremes()
	s := fmt.Sprintf("caches %d of %d compared with the world model (K, V, context, mask; %s): %d differ, largest max|err| %.3g, lowest cosine %.12f",
		r.Compared(), r.Caches, r.toleranceText(), len(r.Failures()), maxErr, minCos)
	if n := r.NotComparable(); n > 0 {
		s += fmt.Sprintf(", %d NOT COMPARABLE (no observation with their stamp)", n)
	}
	if r.Undecoded > 0 {
		s += fmt.Sprintf(", %d recorded messages do not decode", r.Undecoded)
	}
	return s
}

// HasObservations reports whether the bag at path holds every topic r
// reads: with the node's inputs too, it is a whole-policy recording whose
// caches CompareCaches checks.
func HasObservations(ctx context.Context, path string, r ObservationReader) (bool, error) {
	b, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: r.Inputs()})
	if err != nil {
		return false, fmt.Errorf("replay: open bag: %w", err)
	}
	defer b.Close()
	has := map[string]bool{}
	for _, t := range b.Topics() {
		has[t.Name] = true
	}
	for _, name := range r.Inputs() {
		if !has[name] {
			return false, nil
		}
	}
	return len(r.Inputs()) > 0, nil
}

// stamped is a decoded recorded message of a world-model topic.
type stamped[T any] struct {
	stamp time.Time
	at    time.Time
	msg   T
}

// cursor walks a sequence with one element of look-ahead; reset starts it
// over.
type cursor[T any] struct {
	seq  func() iter.Seq2[T, error]
	next func() (T, error, bool)
	stop func()
	cur  T
	ok   bool
	err  error
}

func newCursor[T any](seq func() iter.Seq2[T, error]) *cursor[T] {
	c := &cursor[T]{seq: seq}
	c.reset()
	return c
}

func (c *cursor[T]) reset() {
	if c.stop != nil {
		c.stop()
	}
	c.next, c.stop = iter.Pull2(c.seq())
	c.advance()
}

// advance moves to the next element; ok is false at the end or after an
// error (kept in err).
func (c *cursor[T]) advance() {
	if c.err != nil {
		c.ok = false
		return
	}
	var err error
	c.cur, err, c.ok = c.next()
	if c.ok && err != nil {
		c.err, c.ok = err, false
	}
}

func (c *cursor[T]) close() {
	if c.stop != nil {
		c.stop()
	}
}

// seek advances c to the first element whose stamp is at or after s (as
// key gives it), starting over when the current one is already past s
// and an earlier one might match.
func seek[T any](c *cursor[T], s time.Time, key func(T) time.Time, last *time.Time) {
	if !last.IsZero() && s.Before(*last) {
		c.reset()
	}
	*last = s
	for c.ok && key(c.cur).Before(s) {
		c.advance()
	}
}

// CompareCaches checks the world-model messages of a whole-policy
// recording (rec from Scan, of a bag that also holds c.Reader's topics):
// for each recorded VideoKVCache it finds the observation it was computed
// from (the one with the cache's header stamp: the newest of the frames
// the world model used) and the recorded TextContext of that stamp, runs
// c.World on the observation and compares keys, values, context and
// attention mask, and the instruction. A cache with no observation of its
// stamp (a recording started mid-stream) is CacheNotComparable, not a
// failure. A float16 cache is compared with the world model's float32
// output rounded to float16 (to nearest even), as the node converts it.
// progressTo, when not nil, receives progress lines. The walk is in the
// recording's order with one observation and one cache in memory at a
// time. A failed comparison is not an error of CompareCaches: see
// CacheReport.Err; reading the bag or an observation that does not
// decode is.
func CompareCaches(ctx context.Context, rec *Recording, c CacheCheck, progressTo io.Writer, every time.Duration) (*CacheReport, error) {
	switch {
	case rec == nil:
		return nil, errors.New("replay: compare caches: no recording (see Scan)")
	case c.Reader == nil || len(c.Reader.Inputs()) == 0:
		return nil, errors.New("replay: compare caches: no observation reader")
	case c.World == nil:
		return nil, errors.New("replay: compare caches: no world model")
	case !(c.MaxAbsErr >= 0) || math.IsInf(c.MaxAbsErr, 1):
		return nil, fmt.Errorf("replay: compare caches: tolerance %v; want 0 (bit for bit) or a finite positive |err|", c.MaxAbsErr)
	}
	d := c.World.Dims()
	if err := d.check(); err != nil {
		return nil, err
	}
	kvShape := []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth)}
	ctxShape := []uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}
	if rec.KVShape != nil && !slices.Equal(rec.KVShape, kvShape) {
		return nil, fmt.Errorf("replay: the recording's VideoKVCache keys have shape %v, the world model emits %v: give the world model the recording was made with (-world)", rec.KVShape, kvShape)
	}
	if rec.ContextShape != nil && !slices.Equal(rec.ContextShape, ctxShape) {
		return nil, fmt.Errorf("replay: the recording's TextContext context has shape %v, the world model emits %v: give the world model the recording was made with (-world)", rec.ContextShape, ctxShape)
	}
	began := time.Now()
	rep := &CacheReport{ImageTopics: c.Reader.Inputs(), MaxAbsErr: c.MaxAbsErr}

	openTopic := func(topic string) (*bag.Reader, error) {
		r, err := bag.OpenWith(ctx, rec.Path, bag.ReaderOptions{Topics: []string{topic}})
		if err != nil {
			return nil, fmt.Errorf("replay: compare caches: open bag: %w", err)
		}
		return r, nil
	}
	kvReader, err := openTopic(rec.Topics.KVCache)
	if err != nil {
		return nil, err
	}
	defer kvReader.Close()
	ctxSeq := func() iter.Seq2[stamped[msgs.TextContext], error] {
		return func(yield func(stamped[msgs.TextContext], error) bool) {
			r, err := openTopic(rec.Topics.Context)
			if err != nil {
				yield(stamped[msgs.TextContext]{}, err)
				return
			}
			defer r.Close()
			for m, err := range r.Messages(ctx) {
				if err != nil {
					yield(stamped[msgs.TextContext]{}, fmt.Errorf("replay: compare caches: read bag %s: %w", rec.Path, err))
					return
				}
				if m.Topic != rec.Topics.Context {
					continue
				}
				var tc msgs.TextContext
				if tc.UnmarshalCDR(m.Data) != nil {
					continue // counted once, by the first pass below
				}
				if !yield(stamped[msgs.TextContext]{stampTime(tc.Header.Stamp), m.LogTime, tc}, nil) {
					return
				}
			}
		}
	}
	// A first pass over the contexts counts them and those that do not
	// decode.
	{
		r, err := openTopic(rec.Topics.Context)
		if err != nil {
			return nil, err
		}
		for m, err := range r.Messages(ctx) {
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("replay: compare caches: read bag %s: %w", rec.Path, err)
			}
			if m.Topic != rec.Topics.Context {
				continue
			}
			rep.Contexts++
			var tc msgs.TextContext
			if tc.UnmarshalCDR(m.Data) != nil {
				rep.Undecoded++
			}
		}
		r.Close()
	}
	contexts := newCursor(ctxSeq)
	defer contexts.close()
	walked := 0
	observations := newCursor(func() iter.Seq2[Observation, error] {
		walked = 0
		return func(yield func(Observation, error) bool) {
			for o, err := range c.Reader.Observations(ctx, rec.Path) {
				if err == nil {
					walked++
				}
				if !yield(o, err) {
					return
				}
			}
		}
	})
	defer observations.close()

	out := NewWorldOutput(d)
	var (
		lastObs, lastCtx time.Time
		ranFor           time.Time // the stamp out holds the world model's output for
		ran              bool
		runErr           error
	)
	prog := progress.New(progressTo, "caches", "caches", rec.KVCount, every)
	for m, err := range kvReader.Messages(ctx) {
		if err != nil {
			return rep, fmt.Errorf("replay: compare caches: read bag %s: %w", rec.Path, err)
		}
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("replay: compare caches: %w", err)
		}
		if m.Topic != rec.Topics.KVCache {
			continue
		}
		rep.Caches++
		prog.Update(rep.Caches)
		var kv msgs.VideoKVCache
		if kv.UnmarshalCDR(m.Data) != nil {
			rep.Undecoded++
			continue
		}
		s := stampTime(kv.Header.Stamp)
		row := CacheRow{Stamp: s, LogTime: m.LogTime, KVSeq: kv.Seq}

		seek(observations, s, func(o Observation) time.Time { return o.Stamp }, &lastObs)
		if observations.err != nil {
			return rep, fmt.Errorf("replay: compare caches: the recording's observations (%s): %w", strings.Join(c.Reader.Inputs(), ", "), observations.err)
		}
		seek(contexts, s, func(x stamped[msgs.TextContext]) time.Time { return x.stamp }, &lastCtx)
		if contexts.err != nil {
			return rep, contexts.err
		}
		var tc *msgs.TextContext
		if contexts.ok && contexts.cur.stamp.Equal(s) {
			tc = &contexts.cur.msg
			row.ContextSeq, row.HasContext = tc.Seq, true
		}
		if !observations.ok || !observations.cur.Stamp.Equal(s) {
			row.Status = CacheNotComparable
			row.Note = fmt.Sprintf("no observation stamped %s on %s in the recording (as when it starts after the frames were published)", fmtTime(s), strings.Join(c.Reader.Inputs(), ", "))
			rep.Rows = append(rep.Rows, row)
			continue
		}
		obs := &observations.cur
		if !ran || !ranFor.Equal(s) {
			out.Stages = out.Stages[:0]
			runErr = c.World.Run(ctx, obs, out)
			ran, ranFor = true, s
			if runErr != nil && ctx.Err() != nil {
				return rep, fmt.Errorf("replay: compare caches: %w", ctx.Err())
			}
		}
		if runErr != nil {
			row.Status, row.Note = CacheMismatch, "the world model refused the observation: "+runErr.Error()
			rep.Rows = append(rep.Rows, row)
			continue
		}
		var why []string
		for _, t := range []struct {
			name string
			rec  msgs.Tensor
			want []uint32
			got  []float32
		}{{TensorKeys, kv.Keys, kvShape, out.Keys}, {TensorValues, kv.Values, kvShape, out.Values}} {
			td, err := compareTensor(t.name, t.rec, t.want, t.got, c.MaxAbsErr)
			if err != nil {
				why = append(why, err.Error())
				continue
			}
			row.Tensors = append(row.Tensors, td)
		}
		if tc != nil {
			td, err := compareTensor(TensorContext, tc.Context, ctxShape, out.Context, c.MaxAbsErr)
			if err != nil {
				why = append(why, err.Error())
			} else {
				row.Tensors = append(row.Tensors, td)
			}
			row.Tensors = append(row.Tensors, compareMask(tc.AttentionMask, out.Mask))
			if tc.Instruction != obs.Instruction {
				why = append(why, fmt.Sprintf("instruction: recorded %q, the observation's %q", tc.Instruction, obs.Instruction))
			}
		}
		for _, td := range row.Tensors {
			if td.Differ > 0 {
				why = append(why, td.describe(c.MaxAbsErr))
			}
		}
		row.Status = CacheOK
		if len(why) > 0 {
			row.Status = CacheMismatch
		}
		if tc == nil {
			why = append(why, "no TextContext with this stamp recorded: K and V compared only")
		}
		row.Note = strings.Join(why, "; ")
		rep.Rows = append(rep.Rows, row)
	}
	prog.Done(rep.Caches)
	// The observations after the last cache are counted too (one that
	// does not decode there ends the count: no cache depends on it).
	for observations.ok {
		observations.advance()
	}
	rep.Observations = walked
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// describe is the failure text of a differing tensor: which, how many
// elements, the first one and the error.
func (t TensorDiff) describe(tol float64) string {
	if t.Name == TensorMask {
		return fmt.Sprintf("%s differs at %d of %d entries (first index %d: recorded %v, world model %v)",
			t.Name, t.Differ, t.N, t.First, t.Recorded != 0, t.Replayed != 0)
	}
	how := "not bit for bit"
	if tol > 0 {
		how = fmt.Sprintf("|err| > %g", tol)
	}
	return fmt.Sprintf("%s differs at %d of %d elements (%s; first index %d: recorded %v, world model %v), max |err| %.3g, cosine %.12f",
		t.Name, t.Differ, t.N, how, t.First, t.Recorded, t.Replayed, t.MaxAbsErr, t.Cosine)
}

// compareTensor compares a recorded tensor with the world model's output
// got, of shape want. A shape or dtype the world model does not emit is
// an error naming the tensor.
func compareTensor(name string, rec msgs.Tensor, want []uint32, got []float32, tol float64) (TensorDiff, error) {
	if !slices.Equal(rec.Shape, want) {
		return TensorDiff{}, fmt.Errorf("%s: recorded shape %v, the world model emits %v", name, rec.Shape, want)
	}
	if err := rec.Validate(); err != nil {
		return TensorDiff{}, fmt.Errorf("%s: recorded tensor: %w", name, err)
	}
	recorded := make([]float32, len(got))
	if err := rec.DecodeF32Into(recorded); err != nil {
		return TensorDiff{}, fmt.Errorf("%s: recorded tensor: %w", name, err)
	}
	replayed := got
	if rec.DType == msgs.DTypeFloat16 {
		replayed = make([]float32, len(got))
		for i, v := range got {
			replayed[i] = float16.Fromfloat32(v).Float32()
		}
	}
	td := TensorDiff{Name: name, N: len(got), First: -1}
	var ab, aa, bb float64
	for i, r := range recorded {
		g := replayed[i]
		x, y := float64(r), float64(g)
		ab, aa, bb = ab+x*y, aa+x*x, bb+y*y
		rb, gb := math.Float32bits(r), math.Float32bits(g)
		var e float64
		switch rn, gn := r != r, g != g; {
		case rn && gn:
			e = 0
		case rn || gn:
			e = math.Inf(1)
		default:
			e = math.Abs(x - y)
		}
		if e > td.MaxAbsErr {
			td.MaxAbsErr = e
		}
		differs := rb != gb
		if tol > 0 {
			differs = e > tol
		}
		if differs {
			if td.First < 0 {
				td.First, td.Recorded, td.Replayed = i, x, y
			}
			td.Differ++
		}
	}
	switch {
	case aa == 0 && bb == 0:
		td.Cosine = 1
	case aa == 0 || bb == 0:
		td.Cosine = 0
	default:
		td.Cosine = ab / math.Sqrt(aa*bb)
	}
	return td, nil
}

// compareMask compares the recorded attention mask with the world
// model's; a length that differs counts every missing entry.
func compareMask(rec, got []bool) TensorDiff {
	td := TensorDiff{Name: TensorMask, N: len(got), First: -1, Cosine: math.NaN()}
	for i := range max(len(rec), len(got)) {
		var r, g bool
		inR, inG := i < len(rec), i < len(got)
		if inR {
			r = rec[i]
		}
		if inG {
			g = got[i]
		}
		if inR && inG && r == g {
			continue
		}
		if td.First < 0 {
			td.First = i
			if r {
				td.Recorded = 1
			}
			if g {
				td.Replayed = 1
			}
		}
		td.Differ++
		td.MaxAbsErr = 1
	}
	return td
}

// writeTable prints the cache comparison: a header line, a row per
// recorded cache (stamp, kv_seq, context seq, max |err| of K, V and
// context, differing mask entries, verdict) and the summary.
func (r *CacheReport) writeTable(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("caches   %d VideoKVCache and %d TextContext recorded, against the world model on the %d observations of %s (%s, %.1f s)\n",
		r.Caches, r.Contexts, r.Observations, strings.Join(r.ImageTopics, ", "), r.toleranceText(), r.Elapsed.Seconds())
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stamp\tkv_seq\tcontext seq\tK max|err|\tV max|err|\tcontext max|err|\tmask diff\tverdict")
	for _, row := range r.Rows {
		cols := map[string]string{TensorKeys: "-", TensorValues: "-", TensorContext: "-", TensorMask: "-"}
		for _, t := range row.Tensors {
			if t.Name == TensorMask {
				cols[t.Name] = fmt.Sprint(t.Differ)
			} else {
				cols[t.Name] = fmt.Sprintf("%.3g", t.MaxAbsErr)
			}
		}
		cseq := "-"
		if row.HasContext {
			cseq = fmt.Sprint(row.ContextSeq)
		}
		verdict := string(row.Status)
		if row.Note != "" {
			verdict += ": " + row.Note
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtTime(row.Stamp), row.KVSeq, cseq,
			cols[TensorKeys], cols[TensorValues], cols[TensorContext], cols[TensorMask], verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("%s\n\n", r.Summary())
	return ew.err
}
