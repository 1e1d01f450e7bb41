package worldmodel

import (
	"sync"
	"sync/atomic"
)

// rangeTask is work over an index range 0..n−1 that can be split into
// contiguous parts writing disjoint data. The encoder's tasks are structs
// it owns, passed by pointer, so handing one to the workers allocates
// nothing.
type rangeTask interface {
	run(lo, hi int)
}

// workerPool runs a rangeTask on n goroutines: the caller's and n − 1
// persistent ones, started on first use and stopped by close. A pool runs
// one task at a time.
type workerPool struct {
	n     int
	once  sync.Once
	start []chan workerPart // one per persistent worker
	done  chan struct{}
	quit  sync.Once
	alive atomic.Int32   // persistent workers running
	gone  sync.WaitGroup // one count per persistent worker until it returns
}

// workerPart is one worker's share of a task.
type workerPart struct {
	t      rangeTask
	lo, hi int
}

func newWorkerPool(n int) *workerPool {
	return &workerPool{n: max(1, n)}
}

// minShared is the smallest work (values) run shares among the workers: a
// hand-over costs a few microseconds, RMSc + SiLU about 10 ns a value.
const minShared = 1 << 13

// run splits 0..n−1 into min(pool size, n) contiguous parts and runs t on
// each, returning when all are done; when the work (about size values) is
// too small to be worth the hand-over, or the pool has one worker, it runs
// t(0, n) on the calling goroutine. The parts depend only on n and the
// pool size, and the tasks compute each index alone, so the results do not
// depend on the pool size.
func (p *workerPool) run(n, size int, t rangeTask) {
	k := min(p.n, n)
	if k <= 1 || size < minShared {
		t.run(0, n)
		return
	}
	p.once.Do(p.startWorkers)
	for i := 1; i < k; i++ {
		p.start[i-1] <- workerPart{t: t, lo: i * n / k, hi: (i + 1) * n / k}
	}
	t.run(0, n/k)
	for i := 1; i < k; i++ {
		<-p.done
	}
}

func (p *workerPool) startWorkers() {
	p.start = make([]chan workerPart, p.n-1)
	p.done = make(chan struct{}, p.n-1)
	for i := range p.start {
		c := make(chan workerPart)
		p.start[i] = c
		p.alive.Add(1)
		p.gone.Add(1)
		go func() {
			defer p.gone.Done()
			defer p.alive.Add(-1)
			for w := range c {
				w.t.run(w.lo, w.hi)
				p.done <- struct{}{}
			}
		}()
	}
}

// close stops the persistent workers and returns once they have returned.
// The pool must not be running a task;
// a closed pool must not be used again.
func (p *workerPool) close() {
	p.quit.Do(func() {
		p.once.Do(func() {}) // no workers start after close
		for _, c := range p.start {
			close(c)
		}
		p.gone.Wait() // each worker returns as soon as it sees its channel closed
	})
}
