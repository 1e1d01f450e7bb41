//go:build rclgo

// Package rosnode connects package node to ROS 2 through rclgo: a
// node.Transport that subscribes and publishes serialized messages with
// dynamically loaded type support (one copy of the CDR bytes each way, no
// generated bindings), the mapping of the node's QoS to rclgo's, and a
// node.Logger on the ROS node's logger (console and /rosout).
//
// It is built only with the build tag rclgo, and needs a ROS 2 installation,
// Jazzy or Humble (headers and libraries), to compile and to run; the message
// package fastwam_action_expert must be built and its install sourced.
package rosnode

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tiiuae/rclgo/pkg/rclgo"
	"github.com/tiiuae/rclgo/pkg/rclgo/types"

	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// Transport is a node.Transport on an rclgo node. Subscribe and Advertise
// must be called before the node spins: rclgo builds its wait set from the
// subscriptions that exist when spinning starts.
type Transport struct {
	node *rclgo.Node
	log  node.Logger

	mu       sync.Mutex
	types    map[string]types.MessageTypeSupport
	services map[string]*rawServiceTypeSupport
}

var _ node.Transport = (*Transport)(nil)

// NewTransport returns a transport creating its entities on n; take
// errors are logged to log.
func NewTransport(n *rclgo.Node, log node.Logger) *Transport {
	return &Transport{node: n, log: log, types: map[string]types.MessageTypeSupport{}, services: map[string]*rawServiceTypeSupport{}}
}

// typeSupport loads (once) the C type support of a ROS type named
// "pkg/msg/Type".
func (t *Transport) typeSupport(name string) (types.MessageTypeSupport, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts, ok := t.types[name]; ok {
		return ts, nil
	}
	pkg, rest, ok := strings.Cut(name, "/msg/")
	if !ok || pkg == "" || rest == "" || strings.Contains(rest, "/") {
		return nil, fmt.Errorf("rosnode: type %q is not of the form package/msg/Type", name)
	}
	ts, err := rclgo.LoadDynamicMessageTypeSupport(pkg, rest)
	if err != nil {
		return nil, fmt.Errorf("rosnode: type support of %s (is the package built and its install sourced?): %w", name, err)
	}
	// rclgo reports a message name missing from an existing package as
	// success with a nil type support (its loader clears dlerror first).
	if ts.TypeSupport() == nil {
		return nil, fmt.Errorf("rosnode: type support of %s: package %s has no message %s (is the installed package older than this node?)", name, pkg, rest)
	}
	t.types[name] = ts
	return ts, nil
}

// Subscribe implements node.Transport: every message is taken serialized
// and handed to h on the spinning goroutine.
func (t *Transport) Subscribe(topic node.Topic, h node.Handler) error {
	ts, err := t.typeSupport(topic.Type)
	if err != nil {
		return err
	}
	opts := &rclgo.SubscriptionOptions{Qos: QoSProfile(topic.QoS)}
	_, err = t.node.NewSubscription(topic.Name, ts, opts, func(s *rclgo.Subscription) {
		data, _, err := s.TakeSerializedMessage()
		if err != nil {
			var none *rclgo.SubscriptionTakeFailed
			if !errors.As(err, &none) { // a wake-up without a message is not an error
				t.log.Warnf("take from %s: %v", topic.Name, err)
			}
			return
		}
		h(data)
	})
	if err != nil {
		return fmt.Errorf("rosnode: subscribe %s [%s]: %w", topic.Name, topic.Type, err)
	}
	return nil
}

// Advertise implements node.Transport.
func (t *Transport) Advertise(topic node.Topic) (node.Publisher, error) {
	ts, err := t.typeSupport(topic.Type)
	if err != nil {
		return nil, err
	}
	p, err := t.node.NewPublisher(topic.Name, ts, &rclgo.PublisherOptions{Qos: QoSProfile(topic.QoS)})
	if err != nil {
		return nil, fmt.Errorf("rosnode: advertise %s [%s]: %w", topic.Name, topic.Type, err)
	}
	return publisher{p}, nil
}

// publisher publishes serialized messages; rcl copies the bytes once into
// its own serialized message, so the caller may reuse its buffer.
type publisher struct{ p *rclgo.Publisher }

func (p publisher) Publish(data []byte) error { return p.p.PublishSerialized(data) }

// QoSProfile maps the node's QoS to rclgo's profile; deadline, lifespan
// and liveliness keep the middleware's defaults.
func QoSProfile(q params.QoS) rclgo.QosProfile {
	p := rclgo.NewDefaultQosProfile()
	switch q.Reliability {
	case params.ReliabilityBestEffort:
		p.Reliability = rclgo.ReliabilityBestEffort
	case params.ReliabilityReliable:
		p.Reliability = rclgo.ReliabilityReliable
	}
	switch q.Durability {
	case params.DurabilityTransientLocal:
		p.Durability = rclgo.DurabilityTransientLocal
	case params.DurabilityVolatile:
		p.Durability = rclgo.DurabilityVolatile
	}
	switch q.History {
	case params.HistoryKeepAll:
		p.History = rclgo.HistoryKeepAll
	case params.HistoryKeepLast:
		p.History = rclgo.HistoryKeepLast
	}
	if q.Depth > 0 {
		p.Depth = q.Depth
	}
	return p
}

// Logger is a node.Logger on an rclgo logger.
type Logger struct{ L *rclgo.Logger }

var _ node.Logger = Logger{}

// Debugf logs at DEBUG.
func (l Logger) Debugf(format string, args ...any) { _ = l.L.Debugf(format, args...) }

// Infof logs at INFO.
func (l Logger) Infof(format string, args ...any) { _ = l.L.Infof(format, args...) }

// Warnf logs at WARN.
func (l Logger) Warnf(format string, args ...any) { _ = l.L.Warnf(format, args...) }

// Errorf logs at ERROR.
func (l Logger) Errorf(format string, args ...any) { _ = l.L.Errorf(format, args...) }
