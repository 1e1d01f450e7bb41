// Package progress prints the progress lines of the command-line tool's
// long commands on stderr: "bag make: 40/100 chunks (40%), 12.1 s elapsed,
// ETA 18.2 s", at most once per interval and once at the end, so that a
// run of minutes is never silent. A Meter with a nil writer prints
// nothing, so callers need no "if enabled" around their updates.
package progress

import (
	"fmt"
	"io"
	"time"
)

// DefaultInterval is the shortest time between two lines.
const DefaultInterval = 2 * time.Second

// Meter counts units of work done out of a total.
type Meter struct {
	w          io.Writer
	what, unit string
	total      int
	interval   time.Duration
	start      time.Time
	last       time.Time
	printed    int // units done at the last line
	any        bool
	now        func() time.Time
}

// New returns a meter for total units (what names the job, unit the
// units: "bag make", "chunks"), printing to w (nil: nothing) at most once
// per interval.
func New(w io.Writer, what, unit string, total int, interval time.Duration) *Meter {
	return newAt(w, what, unit, total, interval, time.Now)
}

func newAt(w io.Writer, what, unit string, total int, interval time.Duration, now func() time.Time) *Meter {
	t := now()
	return &Meter{w: w, what: what, unit: unit, total: total, interval: interval, start: t, last: t, now: now}
}

// Update reports done units; it prints when the interval has passed since
// the last line (or the start).
func (m *Meter) Update(done int) {
	if m == nil || m.w == nil || m.now().Sub(m.last) < m.interval {
		return
	}
	m.print(done)
}

// Done prints the final line, unless the last one already said as much.
func (m *Meter) Done(done int) {
	if m == nil || m.w == nil || (m.any && m.printed == done) {
		return
	}
	m.print(done)
}

func (m *Meter) print(done int) {
	t := m.now()
	m.last, m.printed, m.any = t, done, true
	elapsed := t.Sub(m.start)
	eta := "-"
	switch {
	case done >= m.total:
		eta = "0 s"
	case done > 0:
		eta = fmt.Sprintf("%.1f s", elapsed.Seconds()/float64(done)*float64(m.total-done))
	}
	pct := 100.0
	if m.total > 0 {
		pct = 100 * float64(done) / float64(m.total)
	}
	fmt.Fprintf(m.w, "%s: %d/%d %s (%.0f%%), %.1f s elapsed, ETA %s\n", m.what, done, m.total, m.unit, pct, elapsed.Seconds(), eta)
}

// Mode is the -progress flag's value: auto, on or off.
type Mode string

// The values of a -progress flag.
const (
	Auto Mode = "auto" // lines when the job is long (the command says what long is)
	On   Mode = "on"
	Off  Mode = "off"
)

// ParseMode checks a -progress value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Auto, On, Off:
		return Mode(s), nil
	}
	return "", fmt.Errorf("-progress must be auto, on or off, got %q", s)
}

// Writer returns w when lines are wanted (on, or auto for a long job),
// else nil.
func (m Mode) Writer(w io.Writer, long bool) io.Writer {
	if m == On || (m == Auto && long) {
		return w
	}
	return nil
}
