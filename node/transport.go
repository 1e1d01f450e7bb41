package node

import (
	"fmt"
	"sync"
)

// Topic describes one topic the node subscribes or publishes to.
type Topic struct {
	Name string // as given by the parameters; the transport resolves and remaps it
	Type string // ROS type name, e.g. msgs.TypeVideoKVCache
	QoS  QoS
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

// Bus is an in-process Transport: a publish delivers the message to every
// subscriber of the topic synchronously, in the publisher's goroutine, one
// delivery at a time per topic. It lets the whole node run in tests and in
// `fastwam replay` without ROS. Topic names are used as given. A handler
// must not publish on its own topic (the delivery lock is not reentrant).
type Bus struct {
	mu     sync.Mutex
	topics map[string]*busTopic
}

type busTopic struct {
	name    string
	typ     string
	deliver sync.Mutex // serialises deliveries, as a ROS executor does
	subs    []Handler
}

// NewBus returns an empty in-process bus.
func NewBus() *Bus {
	return &Bus{topics: make(map[string]*busTopic)}
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
func (b *Bus) Subscribe(t Topic, h Handler) error {
	if h == nil {
		return fmt.Errorf("bus: subscribe %q: nil handler", t.Name)
	}
	bt, err := b.topic(t)
	if err != nil {
		return err
	}
	b.mu.Lock()
	bt.subs = append(bt.subs, h)
	b.mu.Unlock()
	return nil
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

// Publish copies data once and hands the copy to every subscriber.
func (p busPublisher) Publish(data []byte) error {
	p.b.mu.Lock()
	subs := p.t.subs[:len(p.t.subs):len(p.t.subs)]
	p.b.mu.Unlock()
	if len(subs) == 0 {
		return nil
	}
	msg := append([]byte(nil), data...)
	p.t.deliver.Lock()
	defer p.t.deliver.Unlock()
	for _, h := range subs {
		h(msg)
	}
	return nil
}
