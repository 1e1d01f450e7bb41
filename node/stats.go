package node

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/expert"
)

// windowSize is how many recent samples the latency percentiles cover.
const windowSize = 256

// window keeps the last windowSize samples of a duration.
type window struct {
	buf  [windowSize]time.Duration
	n    int // samples written, saturating at windowSize
	next int
	max  time.Duration // over the node's lifetime
}

func (w *window) add(d time.Duration) {
	w.buf[w.next] = d
	w.next = (w.next + 1) % windowSize
	if w.n < windowSize {
		w.n++
	}
	if d > w.max {
		w.max = d
	}
}

// Quantiles summarises a latency: the median and 95th percentile of the
// last samples and the maximum since start.
type Quantiles struct {
	N             int // samples in the window
	P50, P95, Max time.Duration
}

func (w *window) quantiles() Quantiles {
	if w.n == 0 {
		return Quantiles{}
	}
	s := slices.Clone(w.buf[:w.n])
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1)+0.5)] }
	return Quantiles{N: w.n, P50: at(0.5), P95: at(0.95), Max: w.max}
}

// stats counts what the node did; safe for concurrent use.
type stats struct {
	// pub makes a publish and its count one step as snapshots see it: it is
	// held across the transport's Publish and the count that follows, and
	// snapshot takes it first, so whoever has received a chunk reads it
	// counted. The receive path takes only mu and never waits for a publish.
	pub sync.Mutex
	mu  sync.Mutex

	in       map[string]uint64 // by topic
	rejected map[Reason]uint64
	dropped  map[Drop]uint64
	paired   uint64
	pairRej  uint64 // paired inputs the worker rejected (also in rejected)
	out      uint64
	failed   uint64 // backend errors
	stale    uint64 // published flagged stale_input
	clipped  uint64 // published with a clipped value

	refused      map[string]uint64 // chunks refused by the actions.* limits, by reason
	robotClamped uint64            // executable chunks published with a value clamped by the limits

	denoise   window
	r2p       window // receive to publish
	age       window // input age at publish
	pairedAge window // input age when the pair's later input arrived
	held      window // input age when the worker held the inputs (after its copy)
	lastAge   time.Duration
	hasAge    bool

	rtcChunks    uint64 // published tied to the previous chunk
	rtcResets    map[RTCReset]uint64
	rtcLastShift int // of the last tied chunk
	rtcLastDelay int
	rtcHasLast   bool
}

func newStats() *stats {
	return &stats{in: map[string]uint64{}, rejected: map[Reason]uint64{}, dropped: map[Drop]uint64{},
		rtcResets: map[RTCReset]uint64{}, refused: map[string]uint64{}}
}

// refuse counts a chunk refused by the limits and returns the count of its
// reason so far.
func (s *stats) refuse(reason string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[reason]++
	return s.refused[reason]
}

// clampedRobot counts an executable chunk published clamped.
func (s *stats) clampedRobot() {
	s.mu.Lock()
	s.robotClamped++
	s.mu.Unlock()
}

func (s *stats) received(topic string) {
	s.mu.Lock()
	s.in[topic]++
	s.mu.Unlock()
}

// reject counts r and returns its count so far.
func (s *stats) reject(r Reason) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected[r]++
	return s.rejected[r]
}

// rejectPair counts r for a pair the worker rejected and returns the
// count of r so far.
func (s *stats) rejectPair(r Reason) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected[r]++
	s.pairRej++
	return s.rejected[r]
}

// drop counts d and returns its count so far.
func (s *stats) drop(d Drop) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped[d]++
	return s.dropped[d]
}

func (s *stats) pair() {
	s.mu.Lock()
	s.paired++
	s.mu.Unlock()
}

// fail counts a backend error and returns the count so far.
func (s *stats) fail() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed++
	return s.failed
}

// publish sends the encoded chunk msg through p and, if it went out,
// counts it with the RTC plan it was made with; see pub.
// latencies are a published chunk's measured times (see Snapshot).
type latencies struct {
	denoise, r2p, age, paired, held time.Duration
}

func (s *stats) publish(p Publisher, msg []byte, lt latencies, stale, clipped bool, rtc *RTCPlan) error {
	s.pub.Lock()
	defer s.pub.Unlock()
	if err := p.Publish(msg); err != nil {
		return err
	}
	s.published(lt, stale, clipped, rtc)
	return nil
}

func (s *stats) published(lt latencies, stale, clipped bool, rtc *RTCPlan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rtc.Mode != expert.RTCOff {
		s.rtcChunks++
		s.rtcLastShift, s.rtcLastDelay, s.rtcHasLast = rtc.Shift, rtc.Delay, true
	}
	s.out++
	s.denoise.add(lt.denoise)
	s.r2p.add(lt.r2p)
	s.age.add(lt.age)
	s.pairedAge.add(lt.paired)
	s.held.add(lt.held)
	s.lastAge, s.hasAge = lt.age, true
	if stale {
		s.stale++
	}
	if clipped {
		s.clipped++
	}
}

// Snapshot is a copy of the node's counters and latency summaries.
type Snapshot struct {
	In       map[string]uint64 // messages received, by topic
	Rejected map[Reason]uint64
	Dropped  map[Drop]uint64
	Paired   uint64
	// RejectedPairs counts the paired inputs the worker rejected (also
	// counted in Rejected): with Out, Failed and the superseded drops it
	// accounts for every pair.
	RejectedPairs uint64
	Out           uint64 // chunks published
	Failed        uint64 // chunks lost to backend errors
	Stale         uint64 // chunks published with stale_input
	Clipped       uint64 // chunks published with a clipped value

	// Refused counts the chunks the actions.* limits refused (published
	// on neither topic), by reason; RobotClamped the executable chunks
	// published with a value clamped by them.
	Refused      map[string]uint64
	RobotClamped uint64

	Denoise          Quantiles
	ReceiveToPublish Quantiles
	InputAge         Quantiles
	// InputPaired is the input age when the node had both inputs of the
	// pair (the later one's arrival; the cache's with sync.policy latest).
	InputPaired Quantiles
	// InputHeld is the input age when the worker held the pair's tensors
	// in the backend's input buffers (the copy done, before bind and the
	// steps): the transport's share of InputAge.
	InputHeld    Quantiles
	LastInputAge time.Duration
	HasInputAge  bool

	// RTCChunks counts the chunks published tied to the previous one
	// (rtc_mode replace or guided); RTCResets the previous-chunk states
	// dropped, by reason.
	RTCChunks uint64
	RTCResets map[RTCReset]uint64
	// RTCLastShift and RTCLastDelay are s and d of the last tied chunk,
	// when RTCHasLast.
	RTCLastShift, RTCLastDelay int
	RTCHasLast                 bool
}

// TotalRejected sums the rejections over reasons.
func (s Snapshot) TotalRejected() uint64 {
	var n uint64
	for _, v := range s.Rejected {
		n += v
	}
	return n
}

// TotalRefused sums the refused chunks over reasons.
func (s Snapshot) TotalRefused() uint64 {
	var n uint64
	for _, v := range s.Refused {
		n += v
	}
	return n
}

// TotalRTCResets sums the RTC resets over reasons.
func (s Snapshot) TotalRTCResets() uint64 {
	var n uint64
	for _, v := range s.RTCResets {
		n += v
	}
	return n
}

// TotalDropped sums the drops over reasons.
func (s Snapshot) TotalDropped() uint64 {
	var n uint64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

func (s *stats) snapshot() Snapshot {
	s.pub.Lock()
	defer s.pub.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Snapshot{
		In: maps.Clone(s.in), Rejected: maps.Clone(s.rejected), Dropped: maps.Clone(s.dropped),
		Paired: s.paired, RejectedPairs: s.pairRej, Out: s.out, Failed: s.failed, Stale: s.stale, Clipped: s.clipped,
		Denoise: s.denoise.quantiles(), ReceiveToPublish: s.r2p.quantiles(), InputAge: s.age.quantiles(), InputPaired: s.pairedAge.quantiles(), InputHeld: s.held.quantiles(),
		LastInputAge: s.lastAge, HasInputAge: s.hasAge,
		RTCChunks: s.rtcChunks, RTCResets: maps.Clone(s.rtcResets),
		RTCLastShift: s.rtcLastShift, RTCLastDelay: s.rtcLastDelay, RTCHasLast: s.rtcHasLast,
		Refused: maps.Clone(s.refused), RobotClamped: s.robotClamped,
	}
}
