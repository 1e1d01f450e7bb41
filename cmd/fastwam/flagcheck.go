package main

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Every numeric flag of every command is checked against its range with
// checkRanges before the command does any work: the flag package accepts
// NaN, ±Inf and negative numbers for any float or int flag, and a gate
// compared with NaN or -Inf never fails. One helper, so that no flag is
// left with a check of its own that forgets one of those values.

// rangeCheck is one numeric flag's value and the range it must be in.
type rangeCheck struct {
	flag string // the flag's name, without the dash
	got  string // the value as given
	ok   bool
	want string // the range, as the error states it
}

// intRange checks that the int flag's value v is in [lo, hi] (hi
// math.MaxInt32: no bound of its own, a later check may set one); note,
// when not empty, says what a special value means ("0: one per CPU").
func intRange(flag string, v, lo, hi int, note string) rangeCheck {
	want := fmt.Sprintf("an integer from %d to %d", lo, hi)
	if hi == math.MaxInt32 {
		want = fmt.Sprintf("an integer >= %d", lo)
	}
	return rangeCheck{flag: flag, got: strconv.Itoa(v), ok: v >= lo && v <= hi, want: withNote(want, note)}
}

// floatRange checks that the float flag's value v is a finite number in
// [lo, hi] (so never NaN or ±Inf, whatever the bounds; hi math.MaxFloat64:
// no upper bound).
func floatRange(flag string, v, lo, hi float64, note string) rangeCheck {
	ok := !math.IsNaN(v) && !math.IsInf(v, 0) && v >= lo && v <= hi
	want := fmt.Sprintf("a finite number from %g to %g", lo, hi)
	if hi == math.MaxFloat64 {
		want = fmt.Sprintf("a finite number >= %g", lo)
	}
	return rangeCheck{flag: flag, got: strconv.FormatFloat(v, 'g', -1, 64), ok: ok, want: withNote(want, note)}
}

// durationRange checks that the duration flag's value d is in (0, hi].
func durationRange(flag string, d, hi time.Duration) rangeCheck {
	return rangeCheck{flag: flag, got: d.String(), ok: d > 0 && d <= hi,
		want: fmt.Sprintf("a duration above 0 and at most %v", hi)}
}

func withNote(s, note string) string {
	if note == "" {
		return s
	}
	return s + " (" + note + ")"
}

// checkRanges returns a usage error naming the first flag whose value is
// out of its range, its value and the range, or nil when all are in range.
func checkRanges(checks ...rangeCheck) error {
	for _, c := range checks {
		if !c.ok {
			return usageError("-%s %s: want %s", c.flag, c.got, c.want)
		}
	}
	return nil
}

// Bounds shared by several commands' flags.
const (
	// maxCPUThreads is the CPU backend's -threads bound, the same as the
	// node's cpu.threads parameter.
	maxCPUThreads = 1024
	// maxHeadDim bounds -head-dim: no attention head is wider than this.
	maxHeadDim = 1 << 16
	// maxChunkTimeout bounds -timeout, the wait for one chunk.
	maxChunkTimeout = time.Hour
	// maxChunks bounds parity's -chunks (chunks timed for the table).
	maxChunks = 100_000
	// maxSteps bounds -steps: expert.NewSchedule's limit and the node's
	// steps parameter's.
	maxSteps = 1000
	// maxActionTokens bounds -action-tokens: the CPU backend's RoPE table
	// has 1024 positions (cpu.Config.Validate).
	maxActionTokens = 1024
)

// cpuThreadsRange is the check of the CPU backend's -threads.
func cpuThreadsRange(threads int) rangeCheck {
	return intRange("threads", threads, 0, maxCPUThreads, "0: one per CPU")
}

// ranges are the checks of the HTP backend's numeric flags, made whichever
// backend runs: a bad value is a mistake even where it has no effect.
func (f *htpFlags) ranges() []rangeCheck {
	return []rangeCheck{
		intRange("head-dim", f.headDim, 1, maxHeadDim, ""),
		intRange("qnn-log-level", f.logLevel, 0, 5, "1 error to 5 debug; 0: 2"),
	}
}

// cosineRange is the check of a cosine gate (-min-cos).
func cosineRange(minCos float64) rangeCheck {
	return floatRange("min-cos", minCos, -1, 1, "a cosine")
}
