package executor

import (
	"slices"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/node/rostime"
)

// Clock is the executor's time source: the wall clock in the ROS node,
// a VirtualClock in tests and simulations.
type Clock interface {
	Now() time.Time
	// NewTicker returns a ticker delivering the instant of every tick,
	// one period apart from now on.
	NewTicker(period time.Duration) Ticker
}

// Ticker delivers ticks on C until Stop.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// WallClock is the system clock.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// NewTicker returns a time.Ticker.
func (WallClock) NewTicker(period time.Duration) Ticker { return wallTicker{time.NewTicker(period)} }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }

// VirtualClock is a Clock that moves only when Advance is called. Its
// tickers' channels are unbuffered: Advance hands each due tick to the
// receiver, in time order, with the clock reading the tick's instant, and
// returns once every tick up to the new time was taken. A receiver that
// takes a tick has finished the previous one, so a test that advances the
// clock past a tick and then past the next knows the first was handled.
type VirtualClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*virtualTicker
}

// NewVirtualClock returns a virtual clock reading start.
func NewVirtualClock(start time.Time) *VirtualClock { return &VirtualClock{now: start} }

// Now returns the clock's reading.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTicker returns a ticker whose first tick is one period from now.
func (c *VirtualClock) NewTicker(period time.Duration) Ticker {
	if period <= 0 {
		period = time.Nanosecond
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &virtualTicker{c: make(chan time.Time), stop: make(chan struct{}), period: period, next: c.now.Add(period)}
	c.tickers = append(c.tickers, t)
	return t
}

// Advance moves the clock forward by d, delivering every tick due on the
// way (a stopped ticker's are skipped). It must not be called concurrently
// with itself.
func (c *VirtualClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		c.tickers = slices.DeleteFunc(c.tickers, func(t *virtualTicker) bool { return t.stopped() })
		var due *virtualTicker
		for _, t := range c.tickers {
			if !t.next.After(end) && (due == nil || t.next.Before(due.next)) {
				due = t
			}
		}
		if due == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		at := due.next
		due.next = at.Add(due.period)
		c.now = at
		c.mu.Unlock()
		select {
		case due.c <- at:
		case <-due.stop:
		}
	}
}

type virtualTicker struct {
	c      chan time.Time
	stop   chan struct{}
	once   sync.Once
	period time.Duration
	next   time.Time // guarded by the clock's mu
}

func (t *virtualTicker) C() <-chan time.Time { return t.c }

// Stop stops the ticker; an Advance blocked on its tick goes on.
func (t *virtualTicker) Stop() { t.once.Do(func() { close(t.stop) }) }

func (t *virtualTicker) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// SimClock is a Clock on simulated time (use_sim_time): it reads c, and
// its tickers tick as c crosses multiples of their period (one tick, the
// latest instant crossed, when /clock jumps over several).
func SimClock(c *rostime.Sim) Clock { return simClock{c} }

type simClock struct{ c *rostime.Sim }

func (s simClock) Now() time.Time { return s.c.Now() }

func (s simClock) NewTicker(period time.Duration) Ticker { return simTicker{s.c.NewTicker(period)} }

type simTicker struct{ t *rostime.Ticker }

func (t simTicker) C() <-chan time.Time { return t.t.C }
func (t simTicker) Stop()               { t.t.Stop() }
