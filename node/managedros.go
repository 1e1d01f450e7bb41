package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/lifecycle"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/paramsrv"
	"github.com/fastwam/actionexpert/node/rostime"
)

// ParameterEventsQoS is rclcpp's QoS of /parameter_events.
func ParameterEventsQoS() params.QoS {
	return params.QoS{Reliability: params.ReliabilityReliable, Durability: params.DurabilityVolatile, History: params.HistoryKeepLast, Depth: 1000}
}

// ClockQoS is rclcpp's QoS of a /clock subscription: the newest time only,
// best effort (which also matches a reliable publisher).
func ClockQoS() params.QoS {
	return params.QoS{Reliability: params.ReliabilityBestEffort, Durability: params.DurabilityVolatile, History: params.HistoryKeepLast, Depth: 1}
}

// Serve makes m a managed ROS 2 node on t, which must be a ServiceServer:
// it serves the lifecycle services (~/change_state, ~/get_state,
// ~/get_available_states, ~/get_available_transitions,
// ~/get_transition_graph) and the parameter services (~/list_parameters,
// ~/get_parameters, ~/get_parameter_types, ~/set_parameters,
// ~/set_parameters_atomically, ~/describe_parameters) and publishes
// ~/transition_event and /parameter_events. fqn is the node's fully
// qualified name. Transitions run under ctx (the process's: a signal
// stops a configure's loading). The returned machine drives the
// transitions; with Params.Autostart the caller runs configure and
// activate through it (see Autostart).
func (m *Managed) Serve(ctx context.Context, t Transport, fqn string) (*lifecycle.Machine, error) {
	srv, ok := t.(ServiceServer)
	if !ok {
		return nil, errors.New("node: the transport serves no services; a managed node needs them")
	}
	events, err := t.Advertise(Topic{Name: params.TopicTransitionEvent, Type: msgs.TypeTransitionEvent, QoS: params.DiagnosticsQoS()})
	if err != nil {
		return nil, fmt.Errorf("node: advertise %s: %w", params.TopicTransitionEvent, err)
	}
	paramEvents, err := t.Advertise(Topic{Name: params.TopicParameterEvents, Type: msgs.TypeParameterEvent, QoS: ParameterEventsQoS()})
	if err != nil {
		return nil, fmt.Errorf("node: advertise %s: %w", params.TopicParameterEvents, err)
	}
	publish := func(what string, p Publisher, msg interface{ MarshalCDR() ([]byte, error) }) {
		b, err := msg.MarshalCDR()
		if err == nil {
			err = p.Publish(b)
		}
		if err != nil {
			m.log.Warnf("%s: %v", what, err)
		}
	}
	mach := lifecycle.New(lifecycle.Config{
		Callbacks: lifecycle.Callbacks{
			OnConfigure: func(ctx context.Context, _ msgs.State) error {
				if err := m.Configure(ctx); err != nil {
					return lifecycle.Failure(err.Error())
				}
				return nil
			},
			OnActivate:   func(context.Context, msgs.State) error { return failure(m.Activate()) },
			OnDeactivate: func(context.Context, msgs.State) error { return failure(m.Deactivate()) },
			OnCleanup:    func(context.Context, msgs.State) error { return failure(m.Cleanup()) },
			OnShutdown:   func(context.Context, msgs.State) error { return m.Shutdown() },
			// Error processing releases everything; the node is then
			// unconfigured and may be configured again.
			OnError: func(context.Context, msgs.State) error { return m.Cleanup() },
		},
		Now:     m.now,
		Publish: func(e msgs.TransitionEvent) { publish("transition event", events, &e) },
		Logf:    m.log.Warnf,
	})
	ps, err := paramsrv.New(m, paramsrv.Config{Node: fqn, Now: m.now, Publish: func(e msgs.ParameterEvent) {
		publish("parameter event", paramEvents, &e)
	}})
	if err != nil {
		return nil, err
	}
	serve := func(name, typ string, h func(context.Context, []byte) ([]byte, error)) error {
		if err := srv.Serve("~/"+name, typ, func(req []byte) ([]byte, error) { return h(ctx, req) }); err != nil {
			return fmt.Errorf("node: serve ~/%s: %w", name, err)
		}
		return nil
	}
	for _, s := range mach.Services() {
		if err := serve(s.Name, s.Type, s.Handler); err != nil {
			return nil, err
		}
	}
	for _, s := range ps.Services() {
		if err := serve(s.Name, s.Type, s.Handler); err != nil {
			return nil, err
		}
	}
	m.pmu.Lock()
	m.machine = mach
	m.pmu.Unlock()
	return mach, nil
}

// failure turns a transition's error into the lifecycle's FAILURE: the
// node stays in the state it was in.
func failure(err error) error {
	if err != nil {
		return lifecycle.Failure(err.Error())
	}
	return nil
}

// Autostart runs configure and activate through mach, as `ros2 lifecycle
// set` would, and reports the first that did not succeed.
func Autostart(ctx context.Context, mach *lifecycle.Machine) error {
	for _, step := range []struct {
		name string
		run  func(context.Context) (lifecycle.Outcome, error)
	}{{"configure", mach.Configure}, {"activate", mach.Activate}} {
		out, err := step.run(ctx)
		if err != nil {
			return fmt.Errorf("autostart: %s: %w", step.name, err)
		}
		if !out.Success() {
			why := "failed"
			if out.Err != nil {
				why = out.Err.Error()
			}
			return fmt.Errorf("autostart: %s: %s (the node is %s)", step.name, why, out.State.Label)
		}
	}
	return nil
}

// RunAutostarted runs m (see Run) until ctx is done, after Autostart
// through mach when autostart is set (the autostart parameter). If the
// autostart's configure or activate fails, m shuts down and the error is
// returned, so the process exits non-zero and `ros2 launch` ends with it: a
// node started to run must not sit unconfigured unseen (a missing
// cpu.weights or self_test.golden, a failed self-test). Without autostart
// the node waits unconfigured for a lifecycle manager, which sees a
// failed configure itself.
func (m *Managed) RunAutostarted(ctx context.Context, mach *lifecycle.Machine, autostart bool) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- m.Run(runCtx) }()
	if autostart {
		if err := Autostart(ctx, mach); err != nil && ctx.Err() == nil {
			stop()
			return errors.Join(fmt.Errorf("%w; the node exits (autostart:=false would keep it unconfigured for `ros2 lifecycle set`)", err), <-ran)
		}
	}
	return <-ran
}

// SubscribeClock keeps c on the time published on /clock, for a node with
// use_sim_time. A message that does not decode is logged once and
// ignored; a jump backwards is logged (once per jump).
func SubscribeClock(t Transport, c *rostime.Sim, log Logger) error {
	if log == nil {
		log = nopLogger{}
	}
	var bad bool
	return t.Subscribe(Topic{Name: rostime.ClockTopic, Type: msgs.TypeClock, QoS: ClockQoS()}, func(data []byte) {
		var m msgs.Clock
		if err := m.UnmarshalCDR(data); err != nil || m.Clock.Nanosec >= 1e9 {
			if !bad {
				log.Warnf("%s: a message that is not a valid rosgraph_msgs/Clock (%v); ignored (logged once)", rostime.ClockTopic, err)
				bad = true
			}
			return
		}
		now := time.Unix(int64(m.Clock.Sec), int64(m.Clock.Nanosec))
		if c.Set(now) {
			log.Warnf("%s jumped back to %s (a simulator restart or a bag played again)", rostime.ClockTopic, now.UTC().Format(time.RFC3339Nano))
		}
	})
}
