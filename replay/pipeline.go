package replay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// bagClock is the node's clock during a replay: the log time of the last
// message fed plus the real (monotonic) time since it was fed. Durations
// the node measures within a chunk are real; input ages and pairing
// timeouts are measured against the recording's time line.
type bagClock struct {
	mu   sync.Mutex
	base time.Time // log time of the last message fed
	at   time.Time // when it was fed, with a monotonic reading
}

func newBagClock(start time.Time) *bagClock {
	return &bagClock{base: start, at: time.Now()}
}

// Now is the node's clock.
func (c *bagClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(time.Since(c.at))
}

// set moves the clock to the log time of a message about to be fed.
func (c *bagClock) set(logTime time.Time) {
	c.mu.Lock()
	c.base, c.at = logTime, time.Now()
	c.mu.Unlock()
}

// published is one message the node published, as received on the bus.
type published struct {
	data []byte
	at   time.Time // the bag clock at publish
}

// produced is one ActionChunk the node published.
type produced struct {
	published
	chunk msgs.ActionChunk
}

// timeoutError reports a pair whose outcome did not come in time.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("no outcome within %v", e.after) }

// pipeline is a node running on an in-process bus, fed one message at a
// time.
type pipeline struct {
	node  *node.Node
	clock *bagClock
	pubs  map[string]node.Publisher

	done chan error   // Run's result
	stop func() error // stops the node and waits for Run; idempotent
	wake chan struct{}

	mu        sync.Mutex
	out       []produced
	robot     []produced // the executable chunks (actions.topic), when post-processing is on
	diags     []published
	undecoded int // published ActionChunks that did not decode
}

// startPipeline creates the node with p on a new bus (with plan as its
// node.Config.RTCPlan, nil for none), starts it on the bag clock set to
// start, and waits until it is active (after its self-test, when one is
// configured) for at most wait.
func startPipeline(ctx context.Context, p params.Params, b expert.Backend, log node.Logger, start time.Time, wait time.Duration,
	plan func(uint64, time.Time) (node.RTCPlan, bool)) (*pipeline, error) {
	bus := node.NewBus()
	pl := &pipeline{
		clock: newBagClock(start),
		pubs:  map[string]node.Publisher{},
		done:  make(chan error, 1),
		wake:  make(chan struct{}, 1),
	}
	if err := bus.Subscribe(node.Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk}, pl.onAction); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := bus.Subscribe(node.Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray}, pl.onDiagnostics); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if p.Actions.Post.Enabled() {
		if err := bus.Subscribe(node.Topic{Name: p.Actions.Topic, Type: msgs.TypeActionChunk}, pl.onRobot); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	n, err := node.New(node.Config{Params: p, Logger: log, Now: pl.clock.Now, RTCPlan: plan}, b, bus)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	pl.node = n
	for _, t := range []node.Topic{
		{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache, QoS: p.QoS.KVCache},
		{Name: p.Topics.Context, Type: msgs.TypeTextContext, QoS: p.QoS.Context},
	} {
		pub, err := bus.Advertise(t)
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		pl.pubs[t.Name] = pub
	}
	// The node runs until stop, not until ctx is done: an interrupted
	// replay stops it itself and still collects what it published.
	runCtx, cancel := context.WithCancel(context.Background())
	go func() { pl.done <- n.Run(runCtx) }()
	pl.stop = sync.OnceValue(func() error {
		cancel()
		if err := <-pl.done; err != nil {
			return fmt.Errorf("replay: node: %w", err)
		}
		return nil
	})

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		switch s := n.State(); s {
		case node.StateActive:
			return pl, nil
		case node.StateSelfTestFailed:
			pl.stop()
			return nil, fmt.Errorf("replay: the node's self-test failed: %s", n.SelfTest())
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			pl.stop()
			return nil, fmt.Errorf("replay: the node did not become active within %v (state %s)", wait, n.State())
		case <-ctx.Done():
			pl.stop()
			return nil, fmt.Errorf("replay: starting the node: %w", ctx.Err())
		}
	}
}

func (pl *pipeline) onAction(data []byte) {
	pl.collect(data, &pl.out)
	select {
	case pl.wake <- struct{}{}:
	default:
	}
}

// onRobot keeps an executable chunk; the node publishes it before the
// model's chunk, so it is here when onAction wakes the feeder.
func (pl *pipeline) onRobot(data []byte) { pl.collect(data, &pl.robot) }

// collect decodes a published chunk and appends it to *into (guarded by
// pl.mu), or counts it as undecoded.
func (pl *pipeline) collect(data []byte, into *[]produced) {
	p := produced{published: published{data: data, at: pl.clock.Now()}}
	err := p.chunk.UnmarshalCDR(data)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if err != nil {
		pl.undecoded++
		return
	}
	*into = append(*into, p)
}

// robotResults returns the executable chunks published so far.
func (pl *pipeline) robotResults() []produced {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return slices.Clone(pl.robot)
}

func (pl *pipeline) onDiagnostics(data []byte) {
	pl.mu.Lock()
	pl.diags = append(pl.diags, published{data: data, at: pl.clock.Now()})
	pl.mu.Unlock()
}

// feed delivers one recorded message to the node at its log time. It
// reports whether the message completed a pair, and what the receive path
// newly counted against it (a rejection) while taking it.
func (pl *pipeline) feed(topic string, data []byte, logTime time.Time) (paired bool, counted string, err error) {
	pub, ok := pl.pubs[topic]
	if !ok {
		return false, "", fmt.Errorf("replay: no publisher for topic %s", topic)
	}
	pl.clock.set(logTime)
	before := pl.node.Stats()
	if err := pub.Publish(data); err != nil {
		return false, "", fmt.Errorf("replay: publish on %s: %w", topic, err)
	}
	after := pl.node.Stats()
	return after.Paired > before.Paired, newCounts(before, after), nil
}

// settled reports whether the worker is done with every pair formed so
// far: published, failed, rejected, superseded or refused by the actions.*
// limits (a refused chunk is published on neither topic: its outcome is
// the count).
func (pl *pipeline) settled(s node.Snapshot) bool {
	done := s.Out + s.Failed + s.RejectedPairs + s.Dropped[node.DropSuperseded] + s.TotalRefused()
	return done >= s.Paired
}

// settle waits until every pair formed so far has an outcome, for at most
// timeout (a *timeoutError) or until ctx is done.
func (pl *pipeline) settle(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(2 * time.Millisecond) // failures and rejections publish nothing
	defer poll.Stop()
	for {
		if pl.settled(pl.node.Stats()) {
			return nil
		}
		select {
		case <-pl.wake:
		case <-poll.C:
		case <-deadline.C:
			return &timeoutError{after: timeout}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// results returns what the node published so far.
func (pl *pipeline) results() (out []produced, diags []published, undecoded int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return slices.Clone(pl.out), slices.Clone(pl.diags), pl.undecoded
}

// newCounts describes the rejections and backend failures counted between
// two snapshots, e.g. "rejected: shape" or "backend error". Drops are left
// out: they concern other messages than the one just fed (the node's
// summary counts them).
func newCounts(before, after node.Snapshot) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(after.Rejected)) {
		if after.Rejected[r] > before.Rejected[r] {
			parts = append(parts, "rejected: "+string(r))
		}
	}
	if after.Failed > before.Failed {
		parts = append(parts, "backend error")
	}
	for _, r := range newRefusals(before, after) {
		parts = append(parts, refusedNote(r))
	}
	return strings.Join(parts, ", ")
}

// newRefusals lists the reasons (actions.Reason*) of the chunks the
// actions.* limits refused between two snapshots, sorted.
func newRefusals(before, after node.Snapshot) []string {
	var reasons []string
	for _, r := range slices.Sorted(maps.Keys(after.Refused)) {
		if after.Refused[r] > before.Refused[r] {
			reasons = append(reasons, r)
		}
	}
	return reasons
}

// refusedNote is how a row and an error name a chunk refused for reason.
func refusedNote(reason string) string { return "refused by the action limits: " + reason }
