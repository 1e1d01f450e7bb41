// Package rostime is a node's ROS time when use_sim_time is set: the time
// a simulator or `ros2 bag play --clock` publishes on /clock
// (rosgraph_msgs/Clock), as rclcpp's time source keeps it.
//
// Before the first /clock message the time is ROS's zero time (the Unix
// epoch), as in rclcpp; Valid tells the two apart. Measured latencies do
// not belong on this clock: they use the monotonic clock.
package rostime

import (
	"sync"
	"time"
)

// ClockTopic is the topic simulated time is published on.
const ClockTopic = "/clock"

// Sim is a simulated clock set from /clock messages. It is safe for
// concurrent use.
type Sim struct {
	mu    sync.Mutex
	t     time.Time
	valid bool
	back  uint64 // jumps backwards seen
	subs  []*Ticker
}

// NewSim returns a simulated clock at ROS's zero time.
func NewSim() *Sim { return &Sim{t: time.Unix(0, 0)} }

// Set moves the clock to t (a /clock message). It reports whether this is
// a jump backwards (a restarted simulator, a bag played again or looped),
// which tickers follow by restarting from t.
func (c *Sim) Set(t time.Time) (backwards bool) {
	c.mu.Lock()
	backwards = c.valid && t.Before(c.t)
	if backwards {
		c.back++
	}
	c.t, c.valid = t, true
	subs := append([]*Ticker(nil), c.subs...)
	c.mu.Unlock()
	for _, s := range subs {
		s.advance(t, backwards)
	}
	return backwards
}

// Now returns the last time set, without a monotonic reading; ROS's zero
// time before the first.
func (c *Sim) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Valid reports whether a /clock message has been received.
func (c *Sim) Valid() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.valid
}

// JumpsBack counts the jumps backwards seen.
func (c *Sim) JumpsBack() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.back
}

// Ticker delivers the instants at which simulated time crosses a multiple
// of its period, like time.Ticker on the simulated clock: when the clock
// jumps by several periods at once, one tick is delivered, with the
// latest crossed instant (a slow receiver misses ticks, as with
// time.Ticker).
type Ticker struct {
	C      <-chan time.Time
	c      chan time.Time
	period time.Duration
	owner  *Sim

	mu   sync.Mutex
	next time.Time // the next instant to deliver; zero until the clock is valid
}

// NewTicker returns a ticker of the given period (> 0) on c's time.
func (c *Sim) NewTicker(period time.Duration) *Ticker {
	if period <= 0 {
		period = time.Second
	}
	ch := make(chan time.Time, 1)
	t := &Ticker{C: ch, c: ch, period: period, owner: c}
	c.mu.Lock()
	c.subs = append(c.subs, t)
	now, valid := c.t, c.valid
	c.mu.Unlock()
	if valid {
		t.advance(now, true)
	}
	return t
}

// Stop ends the ticker's deliveries.
func (t *Ticker) Stop() {
	c := t.owner
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.subs {
		if s == t {
			c.subs = append(c.subs[:i], c.subs[i+1:]...)
			break
		}
	}
}

// advance delivers the last multiple of the period at or before now that
// has not been delivered yet. restart (the first time, or after a jump
// backwards) re-anchors the ticker after now.
func (t *Ticker) advance(now time.Time, restart bool) {
	t.mu.Lock()
	if restart || t.next.IsZero() {
		// As time.Ticker: the first tick is one (partial) period on,
		// at the first multiple of the period after now.
		t.next = now.Truncate(t.period).Add(t.period)
	}
	if now.Before(t.next) {
		t.mu.Unlock()
		return
	}
	last := t.next.Add(now.Sub(t.next) / t.period * t.period)
	t.next = last.Add(t.period)
	t.mu.Unlock()
	select {
	case t.c <- last:
	default:
	}
}
