package replay

import (
	"fmt"
	"io"
	"time"
)

// progress prints "replay: 40/100 chunks (40%), 12.1 s elapsed, ETA 18.2 s"
// lines at most once per interval, and a last one at the end.
type progress struct {
	w        io.Writer
	total    int
	interval time.Duration
	start    time.Time
	last     time.Time
	printed  int // chunks done at the last line
}

func newProgress(w io.Writer, total int, interval time.Duration) *progress {
	now := time.Now()
	return &progress{w: w, total: total, interval: interval, start: now, last: now}
}

// update reports done chunks; it prints when the interval has passed.
func (p *progress) update(done int) {
	if p.w == nil || time.Since(p.last) < p.interval {
		return
	}
	p.print(done)
}

// done prints the final line, unless the last one already said as much.
func (p *progress) done(done int) {
	if p.w == nil || (p.printed == done && done > 0) {
		return
	}
	p.print(done)
}

func (p *progress) print(done int) {
	p.last, p.printed = time.Now(), done
	elapsed := time.Since(p.start)
	eta := "-"
	if done > 0 && done < p.total {
		eta = fmt.Sprintf("%.1f s", (elapsed.Seconds()/float64(done))*float64(p.total-done))
	} else if done >= p.total {
		eta = "0 s"
	}
	pct := 100.0
	if p.total > 0 {
		pct = 100 * float64(done) / float64(p.total)
	}
	fmt.Fprintf(p.w, "replay: %d/%d chunks (%.0f%%), %.1f s elapsed, ETA %s\n", done, p.total, pct, elapsed.Seconds(), eta)
}
