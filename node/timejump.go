package node

import (
	"sync/atomic"
	"time"

	"github.com/fastwam/actionexpert/node/rostime"
)

// Time jumps backwards. A bag played again (or looped), a restarted
// simulator or a restarted world model makes the input stamps start over
// from an earlier time. Without a notion of that, every later input would
// be rejected as out of order or duplicate until the stamps passed the
// last accepted one.
//
// The rule: an input of a stamp-checked topic (the cache; the context too
// under sync.policy exact) whose stamp is strictly older than the last
// accepted stamp of its topic is a jump backwards when
//
//   - it is older by more than the jump threshold, max(sync.timeout, 1 s):
//     no pairing could still use a message that far back; or
//   - its seq is at or below the first seq accepted on its topic since the
//     node started or since the last jump, and later inputs of the topic
//     were accepted with higher seqs: the producer counted up from there
//     and has started its count over (a bag played again repeats its seqs
//     from the first one; a restarted producer counts from 0 again). A
//     lower seq right after the first input is a reordering.
//
// Anything else older than the last accepted stamp (a small reordering
// within the threshold, with a seq past the first one) is still rejected
// as out_of_order, and an equal stamp as a duplicate (a bag of one message
// played twice is not told from a message delivered twice).
//
// The rule reads only the inputs' own stamps and seqs, not the node's
// clock, and it is applied before the age check (max_input_age): under
// use_sim_time the first input of a new play can arrive before the node
// has taken the play's /clock message that jumps back (seen on Cyclone
// DDS: 15 ms before it), and against the old timeline's clock that input
// is seconds old. Checked for age first, it was rejected as stale, the
// jump went unseen, and every later input of the play was rejected as out
// of order or duplicate. So, under use_sim_time, from a jump on the age
// check is suspended until the clock has followed it (it reads earlier
// than it did at the jump) or the jump threshold has passed on the clock
// (a /clock that never jumps); the worker still flags a chunk stale_input
// by its age at publication. On the wall clock the age check applies to
// the jump's input as to any other: the wall clock does not jump back.
// Since the rule ignores the clock, an input more than the threshold older
// than the last one of its topic is taken for a jump even when it is a
// straggler; one DDS writer delivers in order, so that takes a second
// writer on the topic lagging by more than the threshold.
//
// On a jump the node logs one warning, counts it (time_jumps in the
// diagnostics), forgets the last stamps and first seqs of both inputs (so
// that the partner's first message of the new timeline is accepted, not
// taken for a second jump), drops the inputs waiting for a partner whose
// stamps lie after the jump's (the old timeline; counted as
// dropped.time_jump) and accepts the input.
//
// The node's clock jumping back. Under use_sim_time the node also reads
// its own clock: a reading earlier than the previous one is /clock
// jumping back (a bag played again with --clock, a restarted simulator).
// That is a new timeline by itself, whatever the inputs show: under load
// the first pairs of a new play can be lost before they reach the node
// (seen: the first five of a `ros2 bag play --clock` of 20), and the
// first input that does arrive, from a later part of the sequence, is
// then neither more than the threshold older than the last accepted one
// nor a restarted seq, so it and every later input were rejected as out
// of order or duplicate: 0 chunks. So at a jump of the clock the node
// does what it does at a jump of the stamps (log, count, forget the
// stamps and seqs, drop the waiting inputs stamped after the clock's new
// reading), unless the clock only follows a jump the stamps have already
// shown (the age check's wait above). In either case the inputs still
// waiting restart their sync.timeout from the new reading (their arrival
// times lie in the clock's future), the timed-out stamps of the pair-skew
// measure are forgotten and so is the time of the last pair
// (diagnostics.stale_after counts from the jump). The worker's real-time
// chunking state is the jump's too: a pair made after any jump is not
// tied to a chunk made before it (rtc.resets.time_jump).

// DropTimeJump counts inputs of the old timeline dropped from the pairing
// buffers at a time jump backwards.
const DropTimeJump Drop = "time_jump"

// minJumpThreshold is the smallest jump threshold (see above).
const minJumpThreshold = time.Second

// seqStart is the first and the last seq accepted on a topic since the
// last reset.
type seqStart struct {
	first, last uint64
	seen        bool
}

// timeJumps is the node's time-jump state: the first accepted seq of each
// input (guarded by Node.mu) and the number of jumps (read by the
// diagnostics without Node.mu).
type timeJumps struct {
	kvSeq, ctxSeq seqStart
	count         atomic.Uint64 // also the timeline of a pair (pair.timeline)
	// The node's clock at its last reading under Node.mu (observeClock).
	clock     time.Time
	clockSeen bool
	// Under use_sim_time, after a jump: the clock's reading at the jump,
	// while the age check waits for the clock to follow (see above).
	clockAt  time.Time
	awaiting bool
}

// jumpThreshold is max(sync.timeout, 1 s).
func (n *Node) jumpThreshold() time.Duration { return max(n.pairer.timeout, minJumpThreshold) }

// TimeJumps is the number of time jumps backwards the node has detected.
func (n *Node) TimeJumps() uint64 { return n.jumps.count.Load() }

// checkStamp checks the stamp of an input of topic like stampCheck.check,
// detecting a time jump backwards first (see above). c and s are the
// topic's stamp and seq state. n.mu is held.
func (n *Node) checkStamp(topic string, c *stampCheck, s *seqStart, stamp time.Time, seq uint64, now time.Time) *inputError {
	var probe stampCheck // no previous stamp and no age limit: only the zero-stamp check
	if rej := probe.check(topic, stamp, now, 0); rej != nil {
		return rej
	}
	if c.seen && stamp.Before(c.last) {
		back := c.last.Sub(stamp)
		restarted := s.seen && s.last > s.first && seq <= s.first
		if back > n.jumpThreshold() || restarted {
			n.timeJump(topic, stamp, seq, c.last, back, restarted, s.first)
			if n.p.UseSimTime {
				n.jumps.clockAt, n.jumps.awaiting = now, true
			}
		}
	}
	maxAge := n.recvMaxAge
	if n.jumps.awaiting {
		if now.Before(n.jumps.clockAt) || now.Sub(n.jumps.clockAt) > n.jumpThreshold() {
			n.jumps.awaiting = false // the clock has followed the jump, or never will
		} else {
			maxAge = 0
		}
	}
	if rej := c.check(topic, stamp, now, maxAge); rej != nil {
		return rej
	}
	if !s.seen {
		s.first, s.seen = seq, true
	}
	s.last = seq
	return nil
}

// timeJump handles a jump backwards detected on topic: it logs it, counts
// it, resets the stamp and seq state of both inputs and drops the waiting
// inputs of the old timeline. n.mu is held.
func (n *Node) timeJump(topic string, stamp time.Time, seq uint64, last time.Time, back time.Duration, restarted bool, first uint64) {
	k := n.jumps.count.Add(1)
	why := "more than the jump threshold " + n.jumpThreshold().String()
	if restarted {
		why = "its seq " + u(seq) + " restarts at or below the first accepted " + u(first)
	}
	n.log.Warnf("time jump backwards on %s: stamp %s is %v before the last accepted %s, %s (a bag played again, a loop or a restarted producer); "+
		"clearing the pairing and stamp state and carrying on (jump %d, counted as time_jumps in %s)",
		topic, fmtStamp(stamp), back, fmtStamp(last), why, k, n.p.Topics.Diagnostics)
	n.newTimeline(stamp)
}

// newTimeline forgets the stamp and seq state of both inputs and drops the
// waiting inputs stamped after at: they belong to the old timeline. n.mu
// is held and the jump counted.
func (n *Node) newTimeline(at time.Time) {
	n.kvStamp, n.ctxStamp = stampCheck{}, stampCheck{}
	n.jumps.kvSeq, n.jumps.ctxSeq = seqStart{}, seqStart{}
	n.pairer.dropAfter(at, n.dropped)
}

// observeClock takes a reading now of the node's clock, made under n.mu,
// and handles the clock jumping back under use_sim_time (see above).
func (n *Node) observeClock(now time.Time) {
	last, seen := n.jumps.clock, n.jumps.clockSeen
	n.jumps.clock, n.jumps.clockSeen = now, true
	if !n.p.UseSimTime || !seen || !now.Before(last) {
		return
	}
	n.pairer.rebase(now)
	if n.stale.since.After(now) {
		n.stale.mark(now, n.mono(), "none since the node's clock jumped back")
	}
	if n.jumps.awaiting && now.Before(n.jumps.clockAt) {
		n.jumps.awaiting = false // the clock follows a jump of the stamps: handled
		return
	}
	n.jumps.awaiting = false
	k := n.jumps.count.Add(1)
	n.log.Warnf("time jump backwards of the node's clock (%s): %s is %v before its previous reading %s (a bag played again or a restarted simulator); "+
		"clearing the pairing and stamp state and carrying on (jump %d, counted as time_jumps in %s)",
		rostime.ClockTopic, fmtStamp(now), last.Sub(now), fmtStamp(last), k, n.p.Topics.Diagnostics)
	n.newTimeline(now)
}
