package wmnode

import (
	"context"
	"errors"
	"fmt"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/lifecycle"
	"github.com/fastwam/actionexpert/node/params"
)

// ServeLifecycle makes the node a managed (lifecycle) node on t, which
// must serve services (node.ServiceServer): it serves ~/change_state,
// ~/get_state, ~/get_available_states, ~/get_available_transitions and
// ~/get_transition_graph and publishes ~/transition_event. The world model
// is loaded before the node exists, so configure and cleanup only move the
// state; activate and deactivate call Activate and Deactivate. Create the
// node with Config.StartInactive, start Run, wait for Started, then drive
// the returned machine (node.Autostart runs configure and activate).
// Transitions requested through the services run under ctx.
func (n *Node) ServeLifecycle(ctx context.Context, t node.Transport) (*lifecycle.Machine, error) {
	srv, ok := t.(node.ServiceServer)
	if !ok {
		return nil, errors.New("wmnode: the transport serves no services; a managed node needs them")
	}
	events, err := t.Advertise(node.Topic{Name: params.TopicTransitionEvent, Type: msgs.TypeTransitionEvent, QoS: params.DiagnosticsQoS()})
	if err != nil {
		return nil, fmt.Errorf("wmnode: advertise %s: %w", params.TopicTransitionEvent, err)
	}
	failure := func(err error) error {
		if err != nil {
			return lifecycle.Failure(err.Error())
		}
		return nil
	}
	mach := lifecycle.New(lifecycle.Config{
		Callbacks: lifecycle.Callbacks{
			OnActivate:   func(context.Context, msgs.State) error { return failure(n.Activate()) },
			OnDeactivate: func(context.Context, msgs.State) error { return failure(n.Deactivate()) },
			OnShutdown:   func(context.Context, msgs.State) error { _ = n.Deactivate(); return nil },
			OnError:      func(context.Context, msgs.State) error { _ = n.Deactivate(); return nil },
		},
		Now: n.now,
		Publish: func(e msgs.TransitionEvent) {
			b, err := e.MarshalCDR()
			if err == nil {
				err = events.Publish(b)
			}
			if err != nil {
				n.log.Warnf("transition event: %v", err)
			}
		},
		Logf: n.log.Warnf,
	})
	for _, s := range mach.Services() {
		h := s.Handler
		if err := srv.Serve("~/"+s.Name, s.Type, func(req []byte) ([]byte, error) { return h(ctx, req) }); err != nil {
			return nil, fmt.Errorf("wmnode: serve ~/%s: %w", s.Name, err)
		}
	}
	return mach, nil
}
