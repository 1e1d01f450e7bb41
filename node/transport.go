package node

import (
	"fmt"
	"sync"

	"github.com/fastwam/actionexpert/node/params"
)

// Topic describes one topic the node subscribes or publishes to.
type Topic struct {
	Name string // as given by the parameters; the transport resolves and remaps it
	Type string // ROS type name, e.g. msgs.TypeVideoKVCache
	QoS  params.QoS
}

// Handler receives one serialized message: CDR bytes with their 4-byte
// encapsulation header. The handler owns data from then on and may keep
// it, but must not modify it (an in-process transport gives every
// subscriber the same bytes). A handler must return quickly.
type Handler func(data []byte)

// Publisher sends serialized messages on one topic.
type Publisher interface {
	// Publish sends one CDR message. It must not keep data after it
	// returns: the caller reuses the buffer.
	Publish(data []byte) error
}

// Transport connects the node to a message bus: ROS 2 through the rclgo
// adapter (package node/rosnode, build tag rclgo), or the in-process Bus.
// Every Subscribe and Advertise happens before messages flow.
type Transport interface {
	// Subscribe calls h for every message received on t. Calls for one
	// subscription never overlap; calls for different ones may.
	Subscribe(t Topic, h Handler) error
	// Advertise creates a publisher for t.
	Advertise(t Topic) (Publisher, error)
}

// Recycler is an optional interface of a Transport whose messages'
// buffers may be handed back for reuse, so that a stream of large
// messages leaves no garbage behind. A subscriber that uses
// SubscribeRecycled promises to call Recycle exactly once for every
// message its handler received, when it no longer refers to any of its
// bytes; the transport may then write the next message into them.
type Recycler interface {
	SubscribeRecycled(t Topic, h Handler) error
	Recycle(data []byte)
}

// ServiceHandler answers one service request: the request's CDR bytes
// (encapsulation header included) in, the response's CDR bytes out. An
// error sends no response (the client times out) and is logged by the
// transport. A handler runs on the transport's callback goroutine and
// must not keep req after it returns.
type ServiceHandler func(req []byte) ([]byte, error)

// ServiceServer is an optional interface of a Transport that serves ROS 2
// services (the rclgo adapter, and the Bus for tests).
type ServiceServer interface {
	// Serve answers requests to the service name, of type srvType
	// ("pkg/srv/Type"), with h. Like Subscribe, it is called before
	// messages flow.
	Serve(name, srvType string, h ServiceHandler) error
}

// Bus is an in-process Transport: a publish delivers the message to every
// subscriber of the topic synchronously, in the publisher's goroutine, one
// delivery at a time per topic. It lets the whole node run in tests and in
// `fastwam replay` without ROS. Topic names are used as given. A handler
// must not publish on its own topic (the delivery lock is not reentrant).
type Bus struct {
	mu       sync.Mutex
	topics   map[string]*busTopic
	services map[string]busService

	// Recycling (see Recycler): the deliveries not yet handed back, by
	// their first byte, and the buffers handed back, for reuse.
	poolMu  sync.Mutex
	pending map[*byte]int // recycles still due
	free    [][]byte
	made    int // buffers allocated for recycling subscribers
}

type busService struct {
	typ string
	h   ServiceHandler
}

type busTopic struct {
	name     string
	typ      string
	deliver  sync.Mutex // serialises deliveries, as a ROS executor does
	subs     []Handler
	recycled int // subscribers that recycle
}

// maxBusFree bounds the buffers a Bus keeps for reuse.
const maxBusFree = 8

// NewBus returns an empty in-process bus.
func NewBus() *Bus {
	return &Bus{topics: make(map[string]*busTopic), services: make(map[string]busService), pending: make(map[*byte]int), free: make([][]byte, 0, maxBusFree)}
}

func (b *Bus) topic(t Topic) (*busTopic, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bt, ok := b.topics[t.Name]
	if !ok {
		bt = &busTopic{name: t.Name, typ: t.Type}
		b.topics[t.Name] = bt
	}
	if bt.typ != t.Type {
		return nil, fmt.Errorf("bus: topic %q has type %s, not %s", t.Name, bt.typ, t.Type)
	}
	return bt, nil
}

// Subscribe implements Transport.
func (b *Bus) Subscribe(t Topic, h Handler) error { return b.subscribe(t, h, false) }

// SubscribeRecycled implements Recycler: the messages of a topic whose
// subscribers all recycle are copied into buffers handed back by Recycle.
func (b *Bus) SubscribeRecycled(t Topic, h Handler) error { return b.subscribe(t, h, true) }

func (b *Bus) subscribe(t Topic, h Handler, recycled bool) error {
	if h == nil {
		return fmt.Errorf("bus: subscribe %q: nil handler", t.Name)
	}
	bt, err := b.topic(t)
	if err != nil {
		return err
	}
	b.mu.Lock()
	bt.subs = append(bt.subs, h)
	if recycled {
		bt.recycled++
	}
	b.mu.Unlock()
	return nil
}

// Recycle implements Recycler. A buffer the Bus does not track (a topic
// with a subscriber that does not recycle, or a second call) is left to
// the garbage collector.
func (b *Bus) Recycle(data []byte) {
	if cap(data) == 0 {
		return
	}
	key := &data[:1][0]
	b.poolMu.Lock()
	defer b.poolMu.Unlock()
	left, ok := b.pending[key]
	if !ok {
		return
	}
	if left > 1 {
		b.pending[key] = left - 1
		return
	}
	delete(b.pending, key)
	if len(b.free) < cap(b.free) {
		b.free = append(b.free, data[:0])
	}
}

// buffer returns a buffer of n bytes for a delivery to subs recycling
// subscribers: the smallest handed-back one that is large enough, so that
// a 2 MB context never takes the buffer a 72 MB cache needs next.
func (b *Bus) buffer(n, subs int) []byte {
	b.poolMu.Lock()
	defer b.poolMu.Unlock()
	var buf []byte
	best := -1
	for i, f := range b.free {
		if cap(f) >= n && (best < 0 || cap(f) < cap(b.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		buf = b.free[best][:n]
		last := len(b.free) - 1
		b.free[best], b.free[last] = b.free[last], nil
		b.free = b.free[:last]
	}
	if buf == nil {
		buf = make([]byte, n)
		b.made++
	}
	b.pending[&buf[:1][0]] = subs
	return buf
}

// Advertise implements Transport.
func (b *Bus) Advertise(t Topic) (Publisher, error) {
	bt, err := b.topic(t)
	if err != nil {
		return nil, err
	}
	return busPublisher{b: b, t: bt}, nil
}

type busPublisher struct {
	b *Bus
	t *busTopic
}

// Publish copies data once and hands the copy to every subscriber; on a
// topic whose subscribers all recycle, into a handed-back buffer.
func (p busPublisher) Publish(data []byte) error {
	p.b.mu.Lock()
	subs := p.t.subs[:len(p.t.subs):len(p.t.subs)]
	recycled := p.t.recycled == len(subs)
	p.b.mu.Unlock()
	if len(subs) == 0 {
		return nil
	}
	var msg []byte
	if recycled && len(data) > 0 {
		msg = p.b.buffer(len(data), len(subs))
		copy(msg, data)
	} else {
		msg = append([]byte(nil), data...)
	}
	p.t.deliver.Lock()
	defer p.t.deliver.Unlock()
	for _, h := range subs {
		h(msg)
	}
	return nil
}

// Serve implements ServiceServer. A name is served once.
func (b *Bus) Serve(name, srvType string, h ServiceHandler) error {
	if h == nil {
		return fmt.Errorf("bus: serve %q: nil handler", name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.services[name]; ok {
		return fmt.Errorf("bus: service %q [%s] is already served (as %s)", name, srvType, s.typ)
	}
	b.services[name] = busService{typ: srvType, h: h}
	return nil
}

// Call sends one request to the service name of type srvType, in the
// caller's goroutine, and returns the response's bytes.
func (b *Bus) Call(name, srvType string, req []byte) ([]byte, error) {
	b.mu.Lock()
	s, ok := b.services[name]
	b.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("bus: no service %q", name)
	case s.typ != srvType:
		return nil, fmt.Errorf("bus: service %q has type %s, not %s", name, s.typ, srvType)
	}
	return s.h(append([]byte(nil), req...))
}
