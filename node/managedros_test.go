package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/rostime"
)

type cdrCodec interface {
	MarshalCDR() ([]byte, error)
	UnmarshalCDR([]byte) error
}

// call sends req to the Bus service name and decodes the response into resp.
func call(t *testing.T, bus *Bus, name, typ string, req, resp cdrCodec) {
	t.Helper()
	b, err := req.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	out, err := bus.Call(name, typ, b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := resp.UnmarshalCDR(out); err != nil {
		t.Fatalf("%s response: %v", name, err)
	}
}

func changeState(t *testing.T, bus *Bus, label string) bool {
	t.Helper()
	var resp msgs.ChangeStateResponse
	call(t, bus, "~/change_state", msgs.SrvChangeState, &msgs.ChangeStateRequest{Transition: msgs.Transition{Label: label}}, &resp)
	return resp.Success
}

func getState(t *testing.T, bus *Bus) string {
	t.Helper()
	var resp msgs.GetStateResponse
	call(t, bus, "~/get_state", msgs.SrvGetState, &msgs.GetStateRequest{}, &resp)
	return resp.CurrentState.Label
}

func callSetParam(t *testing.T, bus *Bus, p msgs.Parameter) msgs.SetParametersResult {
	t.Helper()
	var resp msgs.SetParametersResponse
	call(t, bus, "~/set_parameters", msgs.SrvSetParameters, &msgs.SetParametersRequest{Parameters: []msgs.Parameter{p}}, &resp)
	if len(resp.Results) != 1 {
		t.Fatalf("set_parameters: %d results, want 1", len(resp.Results))
	}
	return resp.Results[0]
}

// TestManagedServices drives the managed node through its ROS services
// only, as `ros2 lifecycle set` and `ros2 param set` would.
func TestManagedServices(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	r := newManagedRig(t, p)
	events := make(chan msgs.TransitionEvent, 16)
	if err := r.bus.Subscribe(Topic{Name: params.TopicTransitionEvent, Type: msgs.TypeTransitionEvent}, func(b []byte) {
		var e msgs.TransitionEvent
		if err := e.UnmarshalCDR(b); err != nil {
			t.Errorf("transition event: %v", err)
		}
		events <- e
	}); err != nil {
		t.Fatal(err)
	}
	paramEvents := make(chan msgs.ParameterEvent, 16)
	if err := r.bus.Subscribe(Topic{Name: params.TopicParameterEvents, Type: msgs.TypeParameterEvent}, func(b []byte) {
		var e msgs.ParameterEvent
		if err := e.UnmarshalCDR(b); err != nil {
			t.Errorf("parameter event: %v", err)
		}
		paramEvents <- e
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.m.Serve(context.Background(), r.bus, "/fastwam_action_expert"); err != nil {
		t.Fatal(err)
	}
	if s := getState(t, r.bus); s != "unconfigured" {
		t.Fatalf("state %q, want unconfigured", s)
	}

	// A parameter that needs a reload changes while unconfigured.
	if res := callSetParam(t, r.bus, msgs.Parameter{Name: "cpu.threads", Value: msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 1}}); !res.Successful {
		t.Fatalf("cpu.threads while unconfigured: %q", res.Reason)
	}
	if e := <-paramEvents; len(e.ChangedParameters) != 1 || e.ChangedParameters[0].Name != "cpu.threads" {
		t.Fatalf("parameter event %+v", e)
	}
	if !changeState(t, r.bus, "configure") || getState(t, r.bus) != "inactive" {
		t.Fatalf("configure: state %q", getState(t, r.bus))
	}
	if !changeState(t, r.bus, "activate") || getState(t, r.bus) != "active" {
		t.Fatalf("activate: state %q", getState(t, r.bus))
	}
	// Events: configuring, inactive, activating, active.
	var goals []string
	for len(events) > 0 {
		goals = append(goals, (<-events).GoalState.Label)
	}
	if strings.Join(goals, ",") != "configuring,inactive,activating,active" {
		t.Fatalf("transition events' goal states %v", goals)
	}

	// While active: a live parameter changes from the next chunk; one that
	// needs a reload is refused with the transitions that can change it.
	if res := callSetParam(t, r.bus, msgs.Parameter{Name: "steps", Value: msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 2}}); !res.Successful {
		t.Fatalf("steps while active: %q", res.Reason)
	}
	select {
	case e := <-paramEvents:
		if len(e.ChangedParameters) != 1 || e.ChangedParameters[0].Name != "steps" || e.Node != "/fastwam_action_expert" {
			t.Fatalf("parameter event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no parameter event")
	}
	d := tinyDims()
	r.send(makeInputs(d, 1, time.Unix(1_700_000_000, 0)))
	if c := r.chunk(); c.Steps != 2 {
		t.Fatalf("chunk after steps:=2 has %d steps", c.Steps)
	}
	res := callSetParam(t, r.bus, msgs.Parameter{Name: "cpu.weights", Value: msgs.ParameterValue{Type: msgs.ParameterString, StringValue: "x.safetensors"}})
	if res.Successful || !strings.Contains(res.Reason, "cleanup") {
		t.Fatalf("cpu.weights while active: %+v, want a refusal naming cleanup", res)
	}
	res = callSetParam(t, r.bus, msgs.Parameter{Name: "topics.actions", Value: msgs.ParameterValue{Type: msgs.ParameterString, StringValue: "x"}})
	if res.Successful {
		t.Fatal("a topic changed on a running node")
	}
	res = callSetParam(t, r.bus, msgs.Parameter{Name: "steps", Value: msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 0}})
	if res.Successful {
		t.Fatal("steps 0 accepted")
	}
	var get msgs.GetParametersResponse
	call(t, r.bus, "~/get_parameters", msgs.SrvGetParameters, &msgs.GetParametersRequest{Names: []string{"steps", "rtc.inference_delay"}}, &get)
	if len(get.Values) != 2 || get.Values[0].IntegerValue != 2 || get.Values[1].StringValue != "auto" {
		t.Fatalf("get_parameters: %+v", get.Values)
	}
	var desc msgs.DescribeParametersResponse
	call(t, r.bus, "~/describe_parameters", msgs.SrvDescribeParameters, &msgs.DescribeParametersRequest{Names: []string{"steps"}}, &desc)
	if len(desc.Descriptors) != 1 || len(desc.Descriptors[0].IntegerRange) != 1 || desc.Descriptors[0].IntegerRange[0].ToValue != 1000 ||
		!strings.Contains(desc.Descriptors[0].AdditionalConstraints, "live") {
		t.Fatalf("describe steps: %+v", desc.Descriptors)
	}
	var list msgs.ListParametersResponse
	call(t, r.bus, "~/list_parameters", msgs.SrvListParameters, &msgs.ListParametersRequest{}, &list)
	if len(list.Result.Names) != len(params.Names()) {
		t.Fatalf("list_parameters: %d names, want %d", len(list.Result.Names), len(params.Names()))
	}

	// Deactivate, cleanup, shutdown.
	for _, step := range []struct{ label, state string }{{"deactivate", "inactive"}, {"cleanup", "unconfigured"}, {"shutdown", "finalized"}} {
		if !changeState(t, r.bus, step.label) || getState(t, r.bus) != step.state {
			t.Fatalf("%s: state %q, want %s", step.label, getState(t, r.bus), step.state)
		}
	}
	for i, b := range r.backends() {
		if !b.closed {
			t.Errorf("backend %d open after shutdown", i)
		}
	}
	if st := r.diag(); diagValue(t, st, "state") != "finalized" {
		t.Fatalf("diagnostics after shutdown: state %q", diagValue(t, st, "state"))
	}
}

// TestManagedServicesConfigureFails: a configure whose backend cannot be
// opened answers success=false and leaves the node unconfigured.
func TestManagedServicesConfigureFails(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	r := newManagedRig(t, p)
	mach, err := r.m.Serve(context.Background(), r.bus, "/fastwam_action_expert")
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.openErr = errContextBinaryMissing
	r.mu.Unlock()
	if changeState(t, r.bus, "configure") {
		t.Fatal("configure succeeded without a backend")
	}
	if s := getState(t, r.bus); s != "unconfigured" {
		t.Fatalf("state %q after a failed configure, want unconfigured", s)
	}
	if err := Autostart(context.Background(), mach); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("Autostart: %v, want the configure failure", err)
	}
	r.mu.Lock()
	r.openErr = nil
	r.mu.Unlock()
	if err := Autostart(context.Background(), mach); err != nil {
		t.Fatal(err)
	}
	if s := getState(t, r.bus); s != "active" {
		t.Fatalf("state %q after Autostart, want active", s)
	}
}

var errContextBinaryMissing = &missingFile{"/models/missing.bin"}

type missingFile struct{ path string }

func (e *missingFile) Error() string {
	return "htp: context binary " + e.path + ": no such file or directory"
}

func TestSubscribeClock(t *testing.T) {
	bus := NewBus()
	c := rostime.NewSim()
	log := &captureLogger{}
	if err := SubscribeClock(bus, c, log); err != nil {
		t.Fatal(err)
	}
	pub, err := bus.Advertise(Topic{Name: rostime.ClockTopic, Type: msgs.TypeClock})
	if err != nil {
		t.Fatal(err)
	}
	send := func(sec int32, nsec uint32) {
		if err := pub.Publish(mustCDR(t, &msgs.Clock{Clock: msgs.Time{Sec: sec, Nanosec: nsec}})); err != nil {
			t.Fatal(err)
		}
	}
	send(100, 5)
	if !c.Now().Equal(time.Unix(100, 5)) {
		t.Fatalf("clock %v", c.Now())
	}
	send(100, 2e9) // invalid nanoseconds: ignored
	if err := pub.Publish([]byte{0, 1, 0, 0, 1}); err != nil {
		t.Fatal(err)
	}
	if !c.Now().Equal(time.Unix(100, 5)) || log.count("WARN", "not a valid rosgraph_msgs/Clock") != 1 {
		t.Fatalf("after bad messages: clock %v, log:\n%s", c.Now(), log)
	}
	send(50, 0)
	if c.JumpsBack() != 1 || log.count("WARN", "jumped back") != 1 {
		t.Fatalf("jump backwards not seen: %d, log:\n%s", c.JumpsBack(), log)
	}
}

// TestSimTime: with the node's clock on a simulated /clock, inputs stamped
// in simulated time are fresh (max_input_age at its default), ages and
// inference delays follow /clock, and latencies the monotonic clock.
func TestSimTime(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	p.MaxInputAge = params.Default().MaxInputAge
	p.UseSimTime = true
	bus := NewBus()
	sim := rostime.NewSim()
	if err := SubscribeClock(bus, sim, nil); err != nil {
		t.Fatal(err)
	}
	clockPub, err := bus.Advertise(Topic{Name: rostime.ClockTopic, Type: msgs.TypeClock})
	if err != nil {
		t.Fatal(err)
	}
	setClock := func(tm time.Time) {
		t.Helper()
		if err := clockPub.Publish(mustCDR(t, &msgs.Clock{Clock: toMsgTime(tm)})); err != nil {
			t.Fatal(err)
		}
	}
	chunks := make(chan msgs.ActionChunk, 8)
	if err := bus.Subscribe(Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk}, func(b []byte) {
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(b); err != nil {
			t.Error(err)
		}
		chunks <- c
	}); err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Params: p, Now: sim.Now, Mono: time.Now, Tick: make(chan time.Time)}, newTestBackend(tinyDims()), bus)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-n.Started()
	kvPub, _ := bus.Advertise(Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache})
	ctxPub, _ := bus.Advertise(Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext})
	stamp := time.Unix(1_700_000_000, 0) // years before the wall clock
	setClock(stamp.Add(120 * time.Millisecond))
	in := makeInputs(tinyDims(), 1, stamp)
	if err := kvPub.Publish(mustCDR(t, &in.kv)); err != nil {
		t.Fatal(err)
	}
	if err := ctxPub.Publish(mustCDR(t, &in.ctx)); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-chunks:
		// The sim clock stood still at stamp+120 ms: age 120 ms, 3 actions of 50 ms past.
		if c.StaleInput || c.InputAgeMs < 119.9 || c.InputAgeMs > 120.1 || c.InferenceDelay != 3 {
			t.Fatalf("chunk: stale %v, age %v ms, inference delay %d; want fresh, 120 ms, 3", c.StaleInput, c.InputAgeMs, c.InferenceDelay)
		}
		if c.ReceiveToPublishMs <= 0 {
			t.Fatalf("receive to publish %v ms: latencies must follow the monotonic clock", c.ReceiveToPublishMs)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no chunk: %s", n.summary())
	}
	// Nothing was rejected: on the wall clock the input would be years old.
	if s := n.Stats(); s.TotalRejected() != 0 {
		t.Fatalf("rejected under sim time: %v", s.Rejected)
	}
}
