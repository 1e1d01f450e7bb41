package wmnode

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/msgs"
)

// StageTimes split one cycle's latency by stage: decoding the frames on
// receipt (summed over the cameras), the world model's stages
// (worldmodel.StageTimes) and the hand-off (encoding and publishing the
// context and the cache or its descriptor).
type StageTimes struct {
	Decode, Preprocess, VAE, Text, Proprio, Prefill, Handoff time.Duration
}

// Total is the sum of the stages.
func (s StageTimes) Total() time.Duration {
	return s.Decode + s.Preprocess + s.VAE + s.Text + s.Proprio + s.Prefill + s.Handoff
}

func (s StageTimes) named() []struct {
	name string
	d    time.Duration
} {
	return []struct {
		name string
		d    time.Duration
	}{{"decode", s.Decode}, {"preprocess", s.Preprocess}, {"vae", s.VAE}, {"text", s.Text}, {"proprio", s.Proprio}, {"prefill", s.Prefill}, {"handoff", s.Handoff}, {"total", s.Total()}}
}

// Snapshot is a copy of the node's counters.
type Snapshot struct {
	Received    map[string]uint64 // messages by topic
	Refused     map[string]uint64 // by reason (the Refuse* constants)
	Dropped     map[string]uint64 // by reason (the Drop* constants)
	Cycles      uint64            // cycles published
	Failed      uint64            // cycles that could not be published
	LastSeq     uint64
	Last        StageTimes // the last published cycle's
	LastRefusal string
}

func (s Snapshot) total(m map[string]uint64) uint64 {
	var t uint64
	for _, v := range m {
		t += v
	}
	return t
}

type stats struct {
	mu   sync.Mutex
	s    Snapshot
	max  StageTimes // since the last report
	seen map[string]bool
	// reportedBad is the refusal and drop count at the last report.
	reportedBad uint64
}

func newStats() stats {
	return stats{s: Snapshot{Received: map[string]uint64{}, Refused: map[string]uint64{}, Dropped: map[string]uint64{}}, seen: map[string]bool{}}
}

func (st *stats) cycle(t StageTimes, seq uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Cycles++
	st.s.LastSeq = seq
	st.s.Last = t
	m := &st.max
	m.Decode, m.Preprocess, m.VAE = max(m.Decode, t.Decode), max(m.Preprocess, t.Preprocess), max(m.VAE, t.VAE)
	m.Text, m.Proprio, m.Prefill, m.Handoff = max(m.Text, t.Text), max(m.Proprio, t.Proprio), max(m.Prefill, t.Prefill), max(m.Handoff, t.Handoff)
}

func (st *stats) failed(err error) {
	st.mu.Lock()
	st.s.Failed++
	st.s.LastRefusal = err.Error()
	st.mu.Unlock()
}

// Stats returns a copy of the node's counters.
func (n *Node) Stats() Snapshot {
	n.stats.mu.Lock()
	defer n.stats.mu.Unlock()
	s := n.stats.s
	s.Received, s.Refused, s.Dropped = maps.Clone(s.Received), maps.Clone(s.Refused), maps.Clone(s.Dropped)
	return s
}

func (n *Node) received(topic string) {
	n.stats.mu.Lock()
	n.stats.s.Received[topic]++
	n.stats.mu.Unlock()
}

// refuse counts an invalid input and logs the first of each reason.
func (n *Node) refuse(topic, reason string, err error) {
	n.stats.mu.Lock()
	n.stats.s.Refused[reason]++
	n.stats.s.LastRefusal = fmt.Sprintf("%s: %s: %v", topic, reason, err)
	first := !n.stats.seen["refused."+reason]
	n.stats.seen["refused."+reason] = true
	n.stats.mu.Unlock()
	if first {
		n.log.Warnf("%s: refused (%s): %v (logged once; counted in %s)", topic, reason, err, n.p.Topics.Diagnostics)
	}
}

// drop counts a valid input that no cycle will use.
func (n *Node) drop(topic, reason string) {
	n.stats.mu.Lock()
	n.stats.s.Dropped[reason]++
	first := !n.stats.seen["dropped."+reason]
	n.stats.seen["dropped."+reason] = true
	n.stats.mu.Unlock()
	if first {
		n.log.Infof("%s: dropping an input (%s) (logged once; counted in %s)", topic, reason, n.p.Topics.Diagnostics)
	}
}

// StatusName is the name of the node's diagnostic status.
func StatusName(fqn string) string {
	if fqn == "" {
		fqn = DefaultNodeName
	}
	return fqn + ": world model"
}

// PublishDiagnostics publishes one DiagnosticArray (see Diagnostics).
func (n *Node) PublishDiagnostics() {
	arr := n.Diagnostics()
	buf, err := arr.MarshalCDR()
	if err == nil {
		err = n.diagPub.Publish(buf)
	}
	if err != nil {
		n.log.Warnf("diagnostics: %v", err)
	}
}

// Diagnostics builds the node's report and makes it the reference of the
// next one: STALE once stopped, when a camera or the proprio topic has
// been silent for longer than diagnostics.stale_after (or never spoke
// since the node became active that long ago), or when the node's clock
// has not advanced for that long (a stalled /clock); WARN when inputs
// were refused or dropped since the previous report, or while no cycle
// can run (no instruction); OK otherwise. Its values hold the counters,
// the refusals and drops by reason, each stage's last and maximum (since
// the previous report) latency, the inputs' ages and the instruction in
// use.
func (n *Node) Diagnostics() msgs.DiagnosticArray {
	now, mono := n.now(), n.mono()
	n.mu.Lock()
	if now.After(n.clockAt) {
		n.clockAt, n.clockAdv = now, mono
	}
	clockSilent := mono.Sub(n.clockAdv)
	active, stopped, since, instr := n.active, n.stopped, n.since, n.instr
	type input struct {
		topic      string
		stamp, rcv time.Time
		has        bool
	}
	var inputs []input
	for _, c := range n.cams {
		inputs = append(inputs, input{c.topic, c.stamp, c.recv, c.has})
	}
	inputs = append(inputs, input{n.p.Topics.Proprio, n.stStamp, n.stMono, n.hasState})
	n.mu.Unlock()

	n.stats.mu.Lock()
	s := n.stats.s
	s.Refused, s.Dropped, s.Received = maps.Clone(s.Refused), maps.Clone(s.Dropped), maps.Clone(s.Received)
	mx := n.stats.max
	n.stats.max = StageTimes{}
	bad := s.total(s.Refused) + s.total(s.Dropped)
	n.stats.mu.Unlock()

	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	var stale []string
	if active {
		for _, in := range inputs {
			switch {
			case !in.has && mono.Sub(since) > n.p.StaleAfter:
				stale = append(stale, fmt.Sprintf("%s: nothing received in %v", in.topic, mono.Sub(since).Round(time.Millisecond)))
			case in.has && mono.Sub(in.rcv) > n.p.StaleAfter:
				stale = append(stale, fmt.Sprintf("%s: silent for %v", in.topic, mono.Sub(in.rcv).Round(time.Millisecond)))
			}
		}
		if clockSilent > n.p.StaleAfter {
			stale = append(stale, fmt.Sprintf("the clock has not advanced for %v (stalled at %s)", clockSilent.Round(time.Millisecond), fmtTime(now)))
		}
	}
	level, message := msgs.LevelOK, fmt.Sprintf("%d cycles published", s.Cycles)
	newBad := bad - n.reported(bad)
	switch {
	case stopped:
		level, message = msgs.LevelStale, "stopped"
	case len(stale) > 0:
		level, message = msgs.LevelStale, strings.Join(stale, "; ")
	case newBad > 0:
		level, message = msgs.LevelWarn, fmt.Sprintf("%d inputs refused or dropped since the last report (last refusal: %s)", newBad, s.LastRefusal)
	case instr == "":
		level, message = msgs.LevelWarn, "no instruction with a text cache entry on "+n.p.Topics.Instruction+" yet"
	}
	state := "active"
	if stopped {
		state = "stopped"
	} else if !active {
		state = "starting"
	}
	in := instr
	if in == "" {
		in = "none"
	}
	last := s.LastRefusal
	if last == "" {
		last = "none"
	}
	d := n.dims
	kv := []msgs.KeyValue{
		{Key: "state", Value: state},
		{Key: "instruction", Value: in},
		{Key: "kv_transport", Value: n.p.KVTransport},
		{Key: "kv_dtype", Value: n.p.KVDType},
		{Key: "output", Value: fmt.Sprintf("K/V [%d, 1, %d, %d], context [1, %d, %d]", d.Layers, d.VideoTokens, d.Width, d.ContextRows, d.TextDim)},
		{Key: "image_transports", Value: strings.Join(n.p.ImageTransports, ", ")},
		{Key: "rate_hz", Value: strconv.FormatFloat(n.p.Rate, 'g', 6, 64)},
		{Key: "tolerance_s", Value: strconv.FormatFloat(n.p.Tolerance.Seconds(), 'g', 6, 64)},
		{Key: "cycles", Value: u(s.Cycles)},
		{Key: "last_seq", Value: u(s.LastSeq)},
		{Key: "publish_failed", Value: u(s.Failed)},
		{Key: "refused", Value: u(s.total(s.Refused))},
		{Key: "dropped", Value: u(s.total(s.Dropped))},
	}
	for _, k := range slices.Sorted(maps.Keys(s.Refused)) {
		kv = append(kv, msgs.KeyValue{Key: "refused." + k, Value: u(s.Refused[k])})
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dropped)) {
		kv = append(kv, msgs.KeyValue{Key: "dropped." + k, Value: u(s.Dropped[k])})
	}
	kv = append(kv, msgs.KeyValue{Key: "last_refusal", Value: last})
	for _, k := range slices.Sorted(maps.Keys(s.Received)) {
		kv = append(kv, msgs.KeyValue{Key: "in." + k, Value: u(s.Received[k])})
	}
	maxes := mx.named()
	for i, st := range s.Last.named() {
		kv = append(kv, msgs.KeyValue{Key: "stage." + st.name + ".last_ms", Value: ms(st.d)},
			msgs.KeyValue{Key: "stage." + st.name + ".max_ms", Value: ms(maxes[i].d)})
	}
	for _, in := range inputs {
		age := "n/a"
		if in.has {
			age = strconv.FormatFloat(now.Sub(in.stamp).Seconds(), 'f', 3, 64)
		}
		kv = append(kv, msgs.KeyValue{Key: "age_s." + in.topic, Value: age})
	}
	return msgs.DiagnosticArray{
		Header: msgs.Header{Stamp: msgs.Time{Sec: int32(now.Unix()), Nanosec: uint32(now.Nanosecond())}},
		Status: []msgs.DiagnosticStatus{{Level: level, Name: StatusName(n.name), Message: message, HardwareID: "cpu", Values: kv}},
	}
}

// reported returns the refusal and drop count at the previous report and
// records bad as the reference of the next one.
func (n *Node) reported(bad uint64) uint64 {
	n.stats.mu.Lock()
	defer n.stats.mu.Unlock()
	prev := n.stats.reportedBad
	n.stats.reportedBad = bad
	return prev
}
