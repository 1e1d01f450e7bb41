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
			OnConfigure:  func(ctx context.Context, _ msgs.State) error { return failure(n.Configure(ctx)) },
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

// Configure is the configure transition: with self_test.golden set, the
// world model runs on the golden's observation and its K, V and context
// are compared with the golden's (RunSelfTest); a golden that does not
// load or a result below self_test.min_cosine fails the configure, and
// the node stays unconfigured. The golden is read again at each
// configure.
func (n *Node) Configure(ctx context.Context) error {
	if n.p.SelfTestGolden == "" {
		return nil
	}
	c, err := LoadSelfTest(ctx, n.p.SelfTestGolden)
	if err != nil {
		return fmt.Errorf("self-test: %w", err)
	}
	n.runMu.Lock()
	r := RunSelfTest(ctx, n.model, c, n.p.SelfTestMinCosine)
	n.runMu.Unlock()
	if !r.Passed() {
		return fmt.Errorf("self-test against %s %v", n.p.SelfTestGolden, r)
	}
	n.log.Infof("%s: self-test against %s %v", n.name, n.p.SelfTestGolden, r)
	return nil
}

// RunAutostarted runs n (see Run) until ctx is done, after node.Autostart
// through mach once the node has started, when autostart is set (the
// autostart parameter). If the autostart's configure or activate fails
// (a self-test that fails), the node stops and the error is returned, so
// the process exits non-zero and `ros2 launch` ends with it, as the action
// expert does. Without autostart the node waits unconfigured for a
// lifecycle manager.
func (n *Node) RunAutostarted(ctx context.Context, mach *lifecycle.Machine, autostart bool) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- n.Run(runCtx) }()
	if autostart {
		select {
		case <-n.Started():
		case err := <-ran:
			return err
		}
		if err := node.Autostart(ctx, mach); err != nil && ctx.Err() == nil {
			stop()
			return errors.Join(fmt.Errorf("%w; the node exits (autostart:=false would keep it unconfigured for `ros2 lifecycle set`)", err), <-ran)
		}
	}
	return <-ran
}
