package replay

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// Status is the verdict on one stamp of a replay.
type Status string

// Verdicts. StatusMismatch, StatusMissing and StatusRefused fail the gate.
const (
	StatusOK       Status = "ok"        // produced and recorded, within the gate
	StatusMismatch Status = "FAIL"      // produced and recorded, outside the gate
	StatusMissing  Status = "MISSING"   // recorded, but the replay produced no chunk
	StatusRefused  Status = "REFUSED"   // recorded, but the actions.* limits refused the replayed chunk
	StatusNew      Status = "new"       // produced, but nothing was recorded to compare with
	StatusNoOutput Status = "no output" // an input that produced nothing, and nothing was recorded
	// StatusRefusedNew is a chunk the actions.* limits refused, with
	// nothing recorded: the recording refused it too, or had no output
	// topic for it.
	StatusRefusedNew Status = "refused"
	// StatusNotComparable is a recorded chunk whose inputs are not in the
	// bag (a recording started after they were published): nothing could
	// reproduce it, and it fails nothing.
	StatusNotComparable Status = "NOT COMPARABLE"
)

// Failed reports whether the verdict fails the gate.
func (s Status) Failed() bool { return s == StatusMismatch || s == StatusMissing || s == StatusRefused }

// notInBag is the note of a StatusNotComparable row: why its inputs are
// missing.
const notInBag = "its inputs are not in the bag"

// Row is the outcome for one stamp: a recorded chunk, a produced chunk, or
// an input that gave neither.
type Row struct {
	Stamp    time.Time
	KVSeq    uint64            // seq of the VideoKVCache with this stamp
	Recorded *Recorded         // nil when nothing was recorded
	Produced *msgs.ActionChunk // nil when the replay produced nothing
	// ProducedAt is when the chunk was published, on the bag's time line.
	ProducedAt time.Time
	// Cosine and MaxAbsErr compare the actions when both chunks are there.
	Cosine, MaxAbsErr float64
	Status            Status
	Note              string // why, when the status needs explaining
	// Refused names why the actions.* limits refused the replayed chunk
	// (actions.Reason*, comma-separated), when they did.
	Refused string
}

// Report is the outcome of a replay.
type Report struct {
	Bag         string
	BackendInfo string
	Params      params.Params // as the node ran
	Rows        []Row         // by stamp
	Stats       node.Snapshot

	Inputs      int // VideoKVCache messages fed
	TotalInputs int // in the bag
	Recorded    int // recorded chunks
	NotReached  int // recorded chunks whose inputs were not fed (interrupted)
	// NotComparable counts the recorded chunks whose inputs are not in
	// the bag (StatusNotComparable).
	NotComparable int
	Timeouts      int // pairs without an outcome within the chunk timeout
	Interrupted   bool
	Elapsed       time.Duration

	MinCosine, MaxAbsErr float64 // the gate
	Notes                []string
	Output               string // the output bag folder, when written

	// Executable compares the executable chunks (actions.*
	// post-processing) with the bag's, when the parameters set it.
	Executable *ExecutableReport

	// ImageTopics are an image bag's camera, proprio and instruction
	// topics, whose observations the world model turned into the inputs;
	// nil for a bag of the node's inputs.
	ImageTopics []string

	// Caches compares the recorded world-model messages with the offline
	// world model's (Options.Caches); nil when not checked.
	Caches *CacheReport
}

// rowInputs is what the replay knows of a row's inputs when it judges it.
type rowInputs struct {
	note  string // what the node counted for the pair, if anything
	kvFed bool   // the bag's VideoKVCache with the row's stamp was fed
	// kvUndecoded counts the bag's VideoKVCache messages that did not
	// decode: one of them may be the row's.
	kvUndecoded int
	paired      bool   // the node formed a pair with the row's stamp
	refused     string // why the actions.* limits refused the pair's chunk
	// noContext, for a recorded chunk, is set when the bag holds no
	// TextContext with the chunk's context_seq (and every TextContext
	// decoded, so none of them can be it).
	noContext bool
	policy    string // the node's sync.policy
}

// buildReport matches produced chunks with recorded ones by stamp.
// log holds what else was fed. planErrs holds, by stamp, why a recorded
// chunk's RTC plan could not be rebuilt: those rows fail.
func buildReport(rec *Recording, o Options, out []produced, fed map[int64]*fedInput, log fedLog, planErrs map[int64]error, interrupted bool) *Report {
	rep := &Report{
		Bag: rec.Path, BackendInfo: o.BackendInfo, Params: o.Params,
		TotalInputs: rec.KVCount, Recorded: len(rec.Recorded), Interrupted: interrupted,
		MinCosine: o.MinCosine, MaxAbsErr: o.MaxAbsErr,
	}
	rows := map[int64]*Row{}
	row := func(stamp time.Time) *Row {
		k := stamp.UnixNano()
		if r, ok := rows[k]; ok {
			return r
		}
		r := &Row{Stamp: stamp}
		rows[k] = r
		return r
	}
	producedAt := map[int64]bool{}
	for _, p := range out {
		producedAt[stampTime(p.chunk.Header.Stamp).UnixNano()] = true
	}
	dupRecorded := 0
	for i := range rec.Recorded {
		rc := &rec.Recorded[i]
		stamp := stampTime(rc.Chunk.Header.Stamp)
		in := fed[stamp.UnixNano()]
		if interrupted && (in == nil || !in.isKV || (in.inFlight && !producedAt[stamp.UnixNano()])) {
			rep.NotReached++
			continue
		}
		r := row(stamp)
		if r.Recorded != nil {
			dupRecorded++
			continue
		}
		r.Recorded, r.KVSeq = rc, rc.Chunk.KVSeq
	}
	if dupRecorded > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d recorded chunks repeat the stamp of an earlier one; the first of each is compared", dupRecorded))
	}
	for i := range out {
		p := &out[i]
		r := row(stampTime(p.chunk.Header.Stamp))
		if r.Produced != nil { // the node rejects repeated stamps: cannot happen
			rep.Notes = append(rep.Notes, fmt.Sprintf("the replay produced two chunks stamped %s", fmtTime(r.Stamp)))
			continue
		}
		r.Produced, r.ProducedAt, r.KVSeq = &p.chunk, p.at, p.chunk.KVSeq
	}
	for k, in := range fed {
		if !in.isKV {
			continue
		}
		if _, ok := rows[k]; !ok {
			r := row(time.Unix(0, k))
			r.KVSeq = in.kvSeq
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		r := rows[k]
		ri := rowInputs{policy: string(o.Params.Sync.Policy), kvUndecoded: log.undecodedKV}
		if in := fed[k]; in != nil {
			ri.note, ri.kvFed, ri.paired, ri.refused = in.note, in.isKV, in.paired, in.refused
		}
		if r.Recorded != nil {
			ri.noContext = !log.contexts[r.Recorded.Chunk.ContextSeq] && log.undecodedContext == 0
		}
		r.judge(o.MinCosine, o.MaxAbsErr, ri)
		if err := planErrs[k]; err != nil && r.Recorded != nil && r.Status != StatusNotComparable {
			r.Status, r.Note = StatusMismatch, join("recorded rtc fields: "+err.Error(), r.Note)
		}
		if r.Status == StatusNotComparable {
			rep.NotComparable++
		}
		rep.Rows = append(rep.Rows, *r)
	}
	return rep
}

// judge compares the row's chunks and sets its verdict.
func (r *Row) judge(minCos, maxErr float64, in rowInputs) {
	note := in.note
	r.Refused = in.refused
	switch {
	case r.Recorded != nil && r.Produced != nil:
		got, want := actions(r.Produced), actions(&r.Recorded.Chunk)
		if len(got) != len(want) {
			r.Status = StatusMismatch
			r.Note = fmt.Sprintf("%d action values produced, %d recorded", len(got), len(want))
			r.Cosine, r.MaxAbsErr = math.NaN(), math.NaN()
			return
		}
		r.Cosine, r.MaxAbsErr = expert.Cosine(got, want), expert.MaxAbsDiff(got, want)
		var why []string
		if !(r.Cosine >= minCos) {
			why = append(why, fmt.Sprintf("cosine %.9f < %g", r.Cosine, minCos))
		}
		if maxErr > 0 && !(r.MaxAbsErr <= maxErr) {
			why = append(why, fmt.Sprintf("max |err| %.3g > %g", r.MaxAbsErr, maxErr))
		}
		r.Status = StatusOK
		if len(why) > 0 {
			r.Status = StatusMismatch
		}
		rc, p := r.Recorded.Chunk, r.Produced
		if rc.NoiseSeed != p.NoiseSeed || rc.Steps != p.Steps || rc.Shift != p.Shift {
			why = append(why, fmt.Sprintf("recorded with seed %d, %d steps, shift %g; replayed with seed %d, %d steps, shift %g",
				rc.NoiseSeed, rc.Steps, rc.Shift, p.NoiseSeed, p.Steps, p.Shift))
		}
		if rc.RTCMode != p.RTCMode && !(rc.RTCMode == "" && p.RTCMode == "off") {
			why = append(why, fmt.Sprintf("recorded rtc_mode %q, replayed %q", rc.RTCMode, p.RTCMode))
		}
		r.Note = strings.Join(why, "; ")
	case r.Recorded != nil && (!in.kvFed && in.kvUndecoded == 0 || in.noContext):
		// Nothing could have reproduced it: not a failure of the replay.
		var missing []string
		if !in.kvFed && in.kvUndecoded == 0 {
			missing = append(missing, "no VideoKVCache with this stamp")
		}
		if in.noContext {
			missing = append(missing, fmt.Sprintf("no TextContext with seq %d", r.Recorded.Chunk.ContextSeq))
		}
		r.Status = StatusNotComparable
		r.Note = join(fmt.Sprintf("%s (%s; as when a recording starts after they were published)", notInBag, strings.Join(missing, ", ")), note)
	case r.Recorded != nil && in.refused != "":
		r.Status, r.Note = StatusRefused, join(note, "the recorded chunk has no replayed one to compare with")
	case r.Recorded != nil:
		r.Status, r.Note = StatusMissing, note
		switch {
		case !in.kvFed:
			r.Note = join(fmt.Sprintf("the bag has no decodable VideoKVCache with this stamp (%d did not decode: the node rejected them)", in.kvUndecoded), note)
		case r.Note == "":
			r.Note = in.noOutcome()
		}
	case r.Produced != nil:
		r.Status, r.Note = StatusNew, "nothing recorded with this stamp"
	case in.refused != "":
		r.Status, r.Note = StatusRefusedNew, join(note, "nothing recorded with this stamp")
	default:
		r.Status, r.Note = StatusNoOutput, note
		if r.Note == "" && in.kvFed {
			r.Note = in.noOutcome()
		}
	}
}

// noOutcome says why a fed input gave no chunk when the node counted
// nothing against it: it never paired, or its pair left no trace.
func (in rowInputs) noOutcome() string {
	if !in.paired {
		return fmt.Sprintf("no chunk produced: the node paired no TextContext with its VideoKVCache (sync.policy %s); see the node's drop counts below", in.policy)
	}
	return "no chunk produced: the pair was formed, but the node published nothing and counted no rejection, failure or refusal"
}

// actions flattens a chunk's rows.
func actions(c *msgs.ActionChunk) []float32 {
	var x []float32
	for _, r := range c.Actions {
		x = append(x, r.Values...)
	}
	return x
}

// Failures lists the rows that fail the gate.
func (r *Report) Failures() []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Status.Failed() {
			out = append(out, row)
		}
	}
	return out
}

// Compared counts the rows with both a recorded and a produced chunk.
func (r *Report) Compared() int {
	n := 0
	for _, row := range r.Rows {
		if row.Recorded != nil && row.Produced != nil {
			n++
		}
	}
	return n
}

// Produced counts the chunks the replay produced.
func (r *Report) Produced() int {
	n := 0
	for _, row := range r.Rows {
		if row.Produced != nil {
			n++
		}
	}
	return n
}

// maxNamed bounds the chunks an error message names.
const maxNamed = 10

// comparable counts the recorded rows whose inputs are in the bag: those
// the replay could reproduce.
func (r *Report) comparable() int {
	n := 0
	for _, row := range r.Rows {
		if row.Recorded != nil && row.Status != StatusNotComparable {
			n++
		}
	}
	return n
}

// refusals counts the replayed chunks the actions.* limits refused, by
// reason.
func (r *Report) refusals() map[string]int {
	out := map[string]int{}
	for _, row := range r.Rows {
		if row.Refused != "" {
			out[row.Refused]++
		}
	}
	return out
}

// refused counts the replayed chunks the actions.* limits refused.
func (r *Report) refused() int {
	n := 0
	for _, v := range r.refusals() {
		n += v
	}
	return n
}

// refusalsText is ", N refused by the action limits (bounds 2, step 1)",
// or "" when none was.
func (r *Report) refusalsText() string {
	by := r.refusals()
	if len(by) == 0 {
		return ""
	}
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		total += by[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	return fmt.Sprintf(", %d refused by the action limits (%s)", total, strings.Join(parts, ", "))
}

// notComparableText is ", N recorded chunks not comparable (...)", or ""
// when every recorded chunk's inputs are in the bag.
func (r *Report) notComparableText() string {
	if r.NotComparable == 0 {
		return ""
	}
	return fmt.Sprintf(", %d recorded chunks NOT COMPARABLE (%s)", r.NotComparable, notInBag)
}

// besidesNotComparable is " (and N NOT COMPARABLE: ...)" after the count
// of the comparable recorded chunks, or "".
func (r *Report) besidesNotComparable() string {
	if r.NotComparable == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d NOT COMPARABLE: %s)", r.NotComparable, notInBag)
}

// nothingComparable explains a replay with no recorded chunk to compare
// with, which fails: it checked nothing.
func (r *Report) nothingComparable() string {
	if r.Recorded-r.NotReached == 0 {
		return fmt.Sprintf("nothing to compare: the bag has no ActionChunks recorded on %s (record the node's output topic with its inputs)", r.Params.Topics.Actions)
	}
	return fmt.Sprintf("none of the %d recorded chunks is comparable: their inputs are not in the bag (the recording holds the chunks, not the VideoKVCache and TextContext they were computed from)",
		r.Recorded-r.NotReached)
}

// Err is nil when every recorded chunk whose inputs are in the bag was
// produced and passed the gate, and there was at least one; otherwise it
// names the failing chunks by kv_seq and stamp, or says that nothing was
// comparable. Chunks that are not comparable fail nothing.
func (r *Report) Err() error {
	chunks := r.chunksErr()
	if r.Caches == nil {
		return chunks
	}
	caches := r.Caches.Err()
	switch {
	case caches == nil:
		return chunks
	case chunks == nil:
		return caches
	}
	return fmt.Errorf("%w; and %w", caches, chunks)
}

// chunksErr is Err of the chunks alone.
func (r *Report) chunksErr() error {
	fails := r.Failures()
	if len(fails) == 0 {
		if r.comparable() == 0 && !r.Interrupted {
			return fmt.Errorf("FAIL: %s", r.nothingComparable())
		}
		return nil
	}
	var parts []string
	for i, f := range fails {
		if i == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(fails)-maxNamed))
			break
		}
		what := f.Note
		switch f.Status {
		case StatusMissing:
			what = "not produced: " + f.Note
		case StatusRefused:
			what = refusedNote(f.Refused)
		}
		parts = append(parts, fmt.Sprintf("chunk kv_seq %d stamp %s (%s)", f.KVSeq, fmtTime(f.Stamp), what))
	}
	return fmt.Errorf("FAIL: %d of %d recorded chunks%s: %s", len(fails), r.comparable(), r.besidesNotComparable(), strings.Join(parts, "; "))
}

// WriteTable prints the replay's setting, a row per stamp (stamp, kv_seq,
// seq, cosine, max |err|, denoise ms of the replay and of the recording,
// verdict) and a summary.
func (r *Report) WriteTable(w io.Writer) error {
	p := r.Params
	ew := &errWriter{w: w}
	ew.printf("bag      %s\n", r.Bag)
	if r.ImageTopics != nil {
		ew.printf("images   %s -> world model -> %s + %s (%d observations)\n", strings.Join(r.ImageTopics, ", "), p.Topics.KVCache, p.Topics.Context, r.TotalInputs)
	}
	ew.printf("topics   %s + %s -> %s (%d inputs, %d recorded chunks)\n", p.Topics.KVCache, p.Topics.Context, p.Topics.Actions, r.TotalInputs, r.Recorded)
	ew.printf("backend  %s\n", r.BackendInfo)
	ew.printf("node     %d steps, shift %g, noise seed %d + kv_seq, sync %s, control period %v\n", p.Steps, p.Shift, p.NoiseSeed, p.Sync.Policy, p.ControlPeriod)
	if tied := r.recordedTied(); tied > 0 {
		ew.printf("rtc      %d recorded chunks tied to their predecessor, rebuilt from their rtc_ fields and the recorded previous chunk\n", tied)
	}
	if a := p.Actions.Post; a.Enabled() {
		ew.printf("actions  -> %s: norm %s (%s, key %q, stepwise %v), gripper dim %d affine %v invert %v binarize %v, limits %s min %v max %v max_step %v\n",
			p.Actions.Topic, a.Norm, a.Stats, a.Key, a.Stepwise, a.Gripper.Dim, a.Gripper.Affine, a.Gripper.Invert, a.Gripper.Binarize,
			a.Limits.Mode, a.Limits.Min, a.Limits.Max, a.Limits.MaxStep)
	}
	gate := fmt.Sprintf("cosine >= %g", r.MinCosine)
	if r.MaxAbsErr > 0 {
		gate += fmt.Sprintf(" and max |err| <= %g", r.MaxAbsErr)
	}
	ew.printf("gate     %s\n\n", gate)
	if r.Caches != nil {
		if err := r.Caches.writeTable(ew); err != nil {
			return err
		}
	}

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stamp\tkv_seq\tseq\tcosine\tmax|err|\tdenoise ms\trecorded ms\tverdict")
	for _, row := range r.Rows {
		seq, cos, maxErr, ms, recMs := "-", "-", "-", "-", "-"
		if row.Produced != nil {
			seq, ms = fmt.Sprint(row.Produced.Seq), fmt.Sprintf("%.2f", row.Produced.DenoiseMs)
		}
		if row.Recorded != nil {
			recMs = fmt.Sprintf("%.2f", row.Recorded.Chunk.DenoiseMs)
		}
		if row.Recorded != nil && row.Produced != nil {
			cos, maxErr = fmt.Sprintf("%.12f", row.Cosine), fmt.Sprintf("%.3g", row.MaxAbsErr)
		}
		verdict := string(row.Status)
		if row.Note != "" {
			verdict += ": " + row.Note
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtTime(row.Stamp), row.KVSeq, seq, cos, maxErr, ms, recMs, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	s := r.Stats
	ew.printf("\nnode     %d inputs fed of %d, %d paired, %d chunks published, %d rejected, %d dropped, %d backend errors",
		r.Inputs, r.TotalInputs, s.Paired, s.Out, s.TotalRejected(), s.TotalDropped(), s.Failed)
	if n := s.TotalRefused(); n > 0 {
		ew.printf(", %d refused by the action limits", n)
	}
	if r.Timeouts > 0 {
		ew.printf(", %d timed out", r.Timeouts)
	}
	ew.printf(" (%.1f s)\n", r.Elapsed.Seconds())
	if reasons := countsText(s); reasons != "" {
		ew.printf("         %s\n", reasons)
	}
	if s.Denoise.N > 0 {
		ew.printf("latency  denoise p50 %.2f ms, p95 %.2f ms, max %.2f ms", msOf(s.Denoise.P50), msOf(s.Denoise.P95), msOf(s.Denoise.Max))
		if rec := r.recordedDenoise(); len(rec) > 0 {
			ew.printf("; recorded p50 %.2f ms, max %.2f ms", rec[len(rec)/2], rec[len(rec)-1])
		}
		ew.printf("\n")
	}
	if ex := r.Executable; ex != nil {
		ew.printf("robot    %d executable chunks on %s, %d refused by the action limits", ex.Produced, ex.Topic, s.TotalRefused())
		if ex.Recorded > 0 {
			ew.printf("; of %d recorded: %d compared, %d bit for bit, largest max|err| %.3g (not gated: the model rows are)", ex.Recorded, ex.Compared, ex.Identical, ex.MaxAbsErr)
		}
		ew.printf("\n")
	}
	for _, n := range r.Notes {
		ew.printf("note     %s\n", n)
	}
	if r.Output != "" {
		ew.printf("output   %s\n", r.Output)
	}
	ew.printf("%s\n", r.summary())
	return ew.err
}

// recordedTied counts the compared recorded chunks with an rtc_mode other
// than off.
func (r *Report) recordedTied() int {
	n := 0
	for _, row := range r.Rows {
		if row.Recorded != nil && row.Recorded.Chunk.RTCMode != "" && row.Recorded.Chunk.RTCMode != "off" {
			n++
		}
	}
	return n
}

// summary is the last line of the table: the gate's verdict, with the
// cache comparison's figures when there was one.
func (r *Report) summary() string {
	s := r.chunksSummary()
	if r.Caches == nil {
		return s
	}
	if r.Caches.Err() != nil {
		if rest, ok := strings.CutPrefix(s, "PASS: "); ok {
			s = "chunks: " + rest
		} else if rest, ok := strings.CutPrefix(s, "FAIL: "); ok {
			s = "chunks: FAIL: " + rest
		}
		return "FAIL: " + r.Caches.Summary() + "; " + s
	}
	return s + "; " + r.Caches.Summary()
}

// chunksSummary is the chunks' verdict.
func (r *Report) chunksSummary() string {
	fails, compared := len(r.Failures()), r.Compared()
	lowest, largest := 1.0, 0.0
	for _, row := range r.Rows {
		if row.Recorded != nil && row.Produced != nil {
			lowest, largest = math.Min(lowest, row.Cosine), math.Max(largest, row.MaxAbsErr)
		}
	}
	extra := ""
	if n := r.Produced() - compared; n > 0 {
		extra = fmt.Sprintf(", %d produced chunks without a recorded one", n)
	}
	extra += r.refusalsText() + r.notComparableText()
	if r.Interrupted {
		extra += fmt.Sprintf(", interrupted (%d recorded chunks not reached)", r.NotReached)
	}
	switch {
	case fails > 0:
		return fmt.Sprintf("FAIL: %d of %d recorded chunks fail (%d compared, lowest cosine %.12f, largest max|err| %.3g)%s",
			fails, r.comparable(), compared, lowest, largest, extra)
	case r.comparable() == 0 && !r.Interrupted:
		return "FAIL: " + r.nothingComparable() + extra
	}
	verdict := "PASS"
	if r.Interrupted {
		verdict = "INTERRUPTED, no failure so far"
	}
	return fmt.Sprintf("%s: %d chunks compared, lowest cosine %.12f >= %g, largest max|err| %.3g%s",
		verdict, compared, lowest, r.MinCosine, largest, extra)
}

// recordedDenoise returns the recorded chunks' denoise times, sorted.
func (r *Report) recordedDenoise() []float64 {
	var ms []float64
	for _, row := range r.Rows {
		if row.Recorded != nil {
			ms = append(ms, float64(row.Recorded.Chunk.DenoiseMs))
		}
	}
	slices.Sort(ms)
	return ms
}

// countsText lists the node's rejections, drops and refusals by reason.
func countsText(s node.Snapshot) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Rejected)) {
		parts = append(parts, fmt.Sprintf("rejected %s %d", k, s.Rejected[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dropped)) {
		parts = append(parts, fmt.Sprintf("dropped %s %d", k, s.Dropped[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Refused)) {
		parts = append(parts, fmt.Sprintf("refused %s %d", k, s.Refused[k]))
	}
	return strings.Join(parts, ", ")
}

func msOf(d time.Duration) float64 { return d.Seconds() * 1000 }

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	fmt.Fprintf(e, format, args...)
}
