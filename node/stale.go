package node

import (
	"fmt"
	"time"
)

// Staleness. A monitor must see a dead world model: while the node is
// active and no input pair has arrived for diagnostics.stale_after, its
// status is STALE (level 3) with a message starting "stale:" that says how
// long it has been, and OK again once a pair arrives (before its chunk is
// published).
//
// The time is counted on the node's clock: /clock under use_sim_time, so
// that a bag played at half rate is judged in the bag's time. A /clock
// that stops (the player ended, or a paused simulator) stops that clock
// too, and with it any count on it: so the time the node's clock has
// stood still since the last pair, as the diagnostics see it at their
// ticks (on the wall clock), is added. On the wall clock it never stands
// still.

// staleWatch is the node's view of how long it has gone without an input
// pair while active. It is guarded by Node.mu.
type staleWatch struct {
	active bool      // counting: the node is active
	since  time.Time // the node's clock at the last pair, the activation or a clock jump back
	// sinceMono is the monotonic reading at since.
	sinceMono time.Time
	what      string // what happened at since, for the message
	// The node's clock as the diagnostics last read it, and the
	// monotonic reading when they first read that value.
	clock, clockMoved time.Time
}

// mark restarts the count at now (node's clock) and mono: a pair arrived,
// the node became active or the clock jumped back.
func (w *staleWatch) mark(now, mono time.Time, what string) {
	w.since, w.sinceMono, w.what = now, mono, what
}

// staleness is what the diagnostics report about the inputs' flow: for
// how long no pair has arrived and, of that, how long the node's clock
// has stood still.
type staleness struct {
	stale          bool
	elapsed, still time.Duration
	what           string
}

// check returns the staleness at now (node's clock) and mono against
// after (0: never stale). It is called at every diagnostics tick.
func (w *staleWatch) check(now, mono time.Time, after time.Duration) staleness {
	if !now.Equal(w.clock) {
		w.clock, w.clockMoved = now, mono
	}
	if !w.active {
		return staleness{}
	}
	if now.Before(w.since) {
		// The clock went back without a reset (cannot happen under the
		// node's own detection; kept safe): count from now.
		w.mark(now, mono, w.what)
	}
	st := staleness{what: w.what, elapsed: now.Sub(w.since)}
	// The clock has stood still since clockMoved; only the part after the
	// count started is added.
	if from := later(w.clockMoved, w.sinceMono); mono.After(from) {
		st.still = mono.Sub(from)
		st.elapsed += st.still
	}
	st.stale = after > 0 && st.elapsed > after
	return st
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// message is the status message of a stale node.
func (s staleness) message(after time.Duration) string {
	m := fmt.Sprintf("stale: no input pair for %.1fs (%s; diagnostics.stale_after %v)", s.elapsed.Seconds(), s.what, after)
	if s.still > 0 {
		m += fmt.Sprintf("; the node's clock has not moved for %.1fs (is /clock still published?)", s.still.Seconds())
	}
	return m
}
