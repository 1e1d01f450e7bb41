package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/lifecycle"
)

// recorder collects published events and callback calls.
type recorder struct {
	mu     sync.Mutex
	events []msgs.TransitionEvent
	calls  []string
}

func (r *recorder) publish(ev msgs.TransitionEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// edges returns the events as "start->goal (id label)".
func (r *recorder) edges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, fmt.Sprintf("%s->%s (%d %s)", e.StartState.Label, e.GoalState.Label, e.Transition.ID, e.Transition.Label))
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events, r.calls = nil, nil
}

// results maps a callback name to what it returns.
type results map[string]error

func newMachine(t *testing.T, res results) (*lifecycle.Machine, *recorder) {
	t.Helper()
	r := &recorder{}
	cb := func(name string) lifecycle.Callback {
		return func(_ context.Context, prev msgs.State) error {
			r.mu.Lock()
			r.calls = append(r.calls, name+"("+prev.Label+")")
			r.mu.Unlock()
			return res[name]
		}
	}
	clock := time.Unix(1700000000, 5)
	m := lifecycle.New(lifecycle.Config{
		Callbacks: lifecycle.Callbacks{
			OnConfigure: cb("configure"), OnActivate: cb("activate"), OnDeactivate: cb("deactivate"),
			OnCleanup: cb("cleanup"), OnShutdown: cb("shutdown"), OnError: cb("error"),
		},
		Now:     func() time.Time { return clock },
		Publish: r.publish,
	})
	return m, r
}

var ctx = context.Background()

// drive runs the transitions (by label) that bring a new machine to state.
func drive(t *testing.T, m *lifecycle.Machine, labels ...string) {
	t.Helper()
	for _, l := range labels {
		out, err := m.ChangeStateByLabel(ctx, l)
		if err != nil || !out.Success() {
			t.Fatalf("setup %s: %+v, %v", l, out, err)
		}
	}
}

// TestEveryTransitionSucceeds: each public transition from each primary
// state, with succeeding callbacks: the events (from rcl_lifecycle's
// default state machine, written out here) and the state reached.
func TestEveryTransitionSucceeds(t *testing.T) {
	for _, tc := range []struct {
		setup      []string
		id         uint8
		events     []string
		state      string
		callbackOn string
	}{
		{nil, msgs.TransitionConfigure, []string{"unconfigured->configuring (1 configure)", "configuring->inactive (10 transition_success)"}, "inactive", "configure(unconfigured)"},
		{nil, msgs.TransitionUnconfiguredShutdown, []string{"unconfigured->shuttingdown (5 shutdown)", "shuttingdown->finalized (50 transition_success)"}, "finalized", "shutdown(unconfigured)"},
		{[]string{"configure"}, msgs.TransitionCleanup, []string{"inactive->cleaningup (2 cleanup)", "cleaningup->unconfigured (20 transition_success)"}, "unconfigured", "cleanup(inactive)"},
		{[]string{"configure"}, msgs.TransitionActivate, []string{"inactive->activating (3 activate)", "activating->active (30 transition_success)"}, "active", "activate(inactive)"},
		{[]string{"configure"}, msgs.TransitionInactiveShutdown, []string{"inactive->shuttingdown (6 shutdown)", "shuttingdown->finalized (50 transition_success)"}, "finalized", "shutdown(inactive)"},
		{[]string{"configure", "activate"}, msgs.TransitionDeactivate, []string{"active->deactivating (4 deactivate)", "deactivating->inactive (40 transition_success)"}, "inactive", "deactivate(active)"},
		{[]string{"configure", "activate"}, msgs.TransitionActiveShutdown, []string{"active->shuttingdown (7 shutdown)", "shuttingdown->finalized (50 transition_success)"}, "finalized", "shutdown(active)"},
	} {
		m, r := newMachine(t, nil)
		drive(t, m, tc.setup...)
		r.reset()
		out, err := m.ChangeState(ctx, tc.id)
		if err != nil || !out.Success() || out.State.Label != tc.state || out.Err != nil {
			t.Errorf("%v then %d: %+v, %v; want success in %s", tc.setup, tc.id, out, err, tc.state)
		}
		if got := r.edges(); !reflect.DeepEqual(got, tc.events) {
			t.Errorf("%v then %d: events %q, want %q", tc.setup, tc.id, got, tc.events)
		}
		if len(r.calls) != 1 || r.calls[0] != tc.callbackOn {
			t.Errorf("%v then %d: callbacks %q, want %q", tc.setup, tc.id, r.calls, tc.callbackOn)
		}
		if got := m.State().Label; got != tc.state {
			t.Errorf("State() = %s, want %s", got, tc.state)
		}
	}
}

// TestFailureReturnsToStart: a callback's FAILURE takes the failure branch
// (shutdown's goes to finalized).
func TestFailureReturnsToStart(t *testing.T) {
	for _, tc := range []struct {
		setup []string
		label string
		cb    string
		event string
		state string
	}{
		{nil, "configure", "configure", "configuring->unconfigured (11 transition_failure)", "unconfigured"},
		{[]string{"configure"}, "cleanup", "cleanup", "cleaningup->inactive (21 transition_failure)", "inactive"},
		{[]string{"configure"}, "activate", "activate", "activating->inactive (31 transition_failure)", "inactive"},
		{[]string{"configure", "activate"}, "deactivate", "deactivate", "deactivating->active (41 transition_failure)", "active"},
		{[]string{"configure", "activate"}, "shutdown", "shutdown", "shuttingdown->finalized (51 transition_failure)", "finalized"},
	} {
		m, r := newMachine(t, results{tc.cb: lifecycle.Failure("context binary missing")})
		drive(t, m, tc.setup...)
		r.reset()
		out, err := m.ChangeStateByLabel(ctx, tc.label)
		if err != nil || out.Success() || out.Result != msgs.TransitionCallbackFailure || out.State.Label != tc.state {
			t.Errorf("%s failing: %+v, %v; want failure ending in %s", tc.label, out, err, tc.state)
		}
		if out.Err == nil || out.Err.Error() != "transition callback failed: context binary missing" {
			t.Errorf("%s: Err = %v, want the reason", tc.label, out.Err)
		}
		if ev := r.edges(); len(ev) != 2 || ev[1] != tc.event {
			t.Errorf("%s: events %q, want the second %q", tc.label, ev, tc.event)
		}
		if len(r.calls) != 1 {
			t.Errorf("%s: callbacks %q: on_error must not run on a failure", tc.label, r.calls)
		}
	}
}

// TestErrorProcessing: a callback's ERROR goes to errorprocessing, where
// on_error runs with the start state; its success leads to unconfigured,
// its failure or error to finalized.
func TestErrorProcessing(t *testing.T) {
	boom := errors.New("NPU lost")
	for _, onError := range []struct {
		name   string
		result error
		event  string
		state  string
	}{
		{"success", nil, "errorprocessing->unconfigured (60 transition_success)", "unconfigured"},
		{"failure", lifecycle.Failure("cannot recover"), "errorprocessing->finalized (61 transition_failure)", "finalized"},
		{"error", errors.New("worse"), "errorprocessing->finalized (62 transition_error)", "finalized"},
	} {
		for _, tc := range []struct {
			setup []string
			label string
			event string // the callback's error branch
			prev  string
		}{
			{nil, "configure", "configuring->errorprocessing (12 transition_error)", "unconfigured"},
			{[]string{"configure"}, "cleanup", "cleaningup->errorprocessing (22 transition_error)", "inactive"},
			{[]string{"configure"}, "activate", "activating->errorprocessing (32 transition_error)", "inactive"},
			{[]string{"configure", "activate"}, "deactivate", "deactivating->errorprocessing (42 transition_error)", "active"},
			{[]string{"configure", "activate"}, "shutdown", "shuttingdown->errorprocessing (52 transition_error)", "active"},
		} {
			name := tc.label + "/on_error " + onError.name
			m, r := newMachine(t, results{tc.label: boom, "error": onError.result})
			drive(t, m, tc.setup...)
			r.reset()
			out, err := m.ChangeStateByLabel(ctx, tc.label)
			if err != nil || out.Success() || out.Result != msgs.TransitionCallbackError || !errors.Is(out.Err, boom) {
				t.Errorf("%s: %+v, %v; want the callback's error", name, out, err)
			}
			if out.State.Label != onError.state || m.State().Label != onError.state {
				t.Errorf("%s: ends in %s, want %s", name, out.State.Label, onError.state)
			}
			if !errors.Is(out.ErrorHandlerErr, onError.result) {
				t.Errorf("%s: ErrorHandlerErr %v, want %v", name, out.ErrorHandlerErr, onError.result)
			}
			ev := r.edges()
			if len(ev) != 3 || ev[1] != tc.event || ev[2] != onError.event {
				t.Errorf("%s: events %q, want [.. %q %q]", name, ev, tc.event, onError.event)
			}
			want := []string{tc.label + "(" + tc.prev + ")", "error(" + tc.prev + ")"}
			if !reflect.DeepEqual(r.calls, want) {
				t.Errorf("%s: callbacks %q, want %q", name, r.calls, want)
			}
		}
	}
}

// TestUnavailableTransitions: a transition that does not start from the
// current state is refused, names what is available, and changes nothing.
func TestUnavailableTransitions(t *testing.T) {
	for _, tc := range []struct {
		setup []string
		id    uint8
		label string
		want  string
	}{
		{nil, msgs.TransitionActivate, "", "transition id 3 does not start from state unconfigured (1); available: configure (1), shutdown (5)"},
		{nil, msgs.TransitionInactiveShutdown, "", "transition id 6 does not start from state unconfigured (1)"},
		{nil, msgs.TransitionOnConfigureSuccess, "", "transition id 10 does not start from state unconfigured (1)"},
		{nil, 200, "", "transition id 200 does not start"},
		{nil, 0, "deactivate", `transition "deactivate" does not start from state unconfigured (1)`},
		{nil, 0, "transition_success", `transition "transition_success" does not start`},
		{[]string{"configure"}, msgs.TransitionConfigure, "", "available: cleanup (2), activate (3), shutdown (6)"},
		{[]string{"configure", "activate"}, msgs.TransitionCleanup, "", "available: deactivate (4), shutdown (7)"},
		{[]string{"shutdown"}, 0, "configure", "from state finalized (4); available: none"},
		{nil, 0, strings.Repeat("x", 1<<20), `transition "` + strings.Repeat("x", 64) + `... (1048576 bytes)" does not start`},
	} {
		m, r := newMachine(t, nil)
		drive(t, m, tc.setup...)
		before := m.State()
		r.reset()
		var err error
		if tc.label != "" {
			_, err = m.ChangeStateByLabel(ctx, tc.label)
		} else {
			_, err = m.ChangeState(ctx, tc.id)
		}
		if !errors.Is(err, lifecycle.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v then %d/%q: %v, want ErrUnavailable with %q", tc.setup, tc.id, tc.label, err, tc.want)
		}
		if m.State() != before || len(r.events) != 0 || len(r.calls) != 0 {
			t.Errorf("a refused transition changed something: %v, events %v, calls %v", m.State(), r.events, r.calls)
		}
	}
}

func TestNilCallbacksSucceedAndEventsAreStamped(t *testing.T) {
	var events []msgs.TransitionEvent
	now := time.Unix(12, 345)
	m := lifecycle.New(lifecycle.Config{Now: func() time.Time { return now }, Publish: func(e msgs.TransitionEvent) { events = append(events, e) }})
	if s := m.State(); s != (msgs.State{ID: 1, Label: "unconfigured"}) {
		t.Fatalf("new machine in %v", s)
	}
	for _, f := range []func(context.Context) (lifecycle.Outcome, error){m.Configure, m.Activate, m.Deactivate, m.Cleanup, m.Shutdown} {
		if out, err := f(ctx); err != nil || !out.Success() {
			t.Fatalf("%+v, %v", out, err)
		}
	}
	if m.State().ID != msgs.PrimaryStateFinalized || len(events) != 10 {
		t.Fatalf("state %v after %d events", m.State(), len(events))
	}
	if events[0].Timestamp != 12_000_000_345 {
		t.Fatalf("timestamp %d, want the injected clock's 12000000345 ns", events[0].Timestamp)
	}
}

func TestCancelledContextStartsNothing(t *testing.T) {
	m, r := newMachine(t, nil)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Configure(c); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if m.State().ID != msgs.PrimaryStateUnconfigured || len(r.events) != 0 {
		t.Fatal("a cancelled request changed the state")
	}
}

// TestConcurrentRequests: while configure's callback runs, the node is in
// configuring, which offers no public transition: a second request is
// refused; readers see the transition state; events stay in order.
func TestConcurrentRequests(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	r := &recorder{}
	m := lifecycle.New(lifecycle.Config{
		Callbacks: lifecycle.Callbacks{OnConfigure: func(ctx context.Context, _ msgs.State) error {
			close(entered)
			<-release
			return nil
		}},
		Publish: r.publish,
	})
	done := make(chan error)
	go func() {
		_, err := m.Configure(ctx)
		done <- err
	}()
	<-entered
	if s := m.State(); s.Label != "configuring" {
		t.Fatalf("State() during configure = %v", s)
	}
	want := []msgs.TransitionDescription{
		{Transition: msgs.Transition{ID: 10, Label: "transition_success"}, StartState: msgs.State{ID: 10, Label: "configuring"}, GoalState: msgs.State{ID: 2, Label: "inactive"}},
		{Transition: msgs.Transition{ID: 11, Label: "transition_failure"}, StartState: msgs.State{ID: 10, Label: "configuring"}, GoalState: msgs.State{ID: 1, Label: "unconfigured"}},
		{Transition: msgs.Transition{ID: 12, Label: "transition_error"}, StartState: msgs.State{ID: 10, Label: "configuring"}, GoalState: msgs.State{ID: 15, Label: "errorprocessing"}},
	}
	if got := m.AvailableTransitions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("available transitions while configuring: %v", got)
	}
	var wg sync.WaitGroup
	for _, l := range []string{"configure", "shutdown", "activate"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.ChangeStateByLabel(ctx, l); !errors.Is(err, lifecycle.ErrUnavailable) ||
				!strings.Contains(err.Error(), "from state configuring (10)") {
				t.Errorf("%s during configure: %v, want refused from configuring", l, err)
			}
		}()
	}
	wg.Wait()
	// The transition state's own transitions (10-12: what the callback's
	// result selects) are private: a client may not request them, by id
	// or by label, while they are the only ones starting here.
	for _, id := range []uint8{10, 11, 12} {
		if _, err := m.ChangeState(ctx, id); !errors.Is(err, lifecycle.ErrUnavailable) {
			t.Errorf("private transition %d requested during configure: %v, want refused", id, err)
		}
	}
	for _, l := range []string{"transition_success", "transition_failure", "transition_error"} {
		if _, err := m.ChangeStateByLabel(ctx, l); !errors.Is(err, lifecycle.ErrUnavailable) {
			t.Errorf("private transition %q requested during configure: %v, want refused", l, err)
		}
	}
	if s := m.State(); s.Label != "configuring" {
		t.Fatalf("a refused request moved the machine to %v", s)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := r.edges(); len(got) != 2 || m.State().Label != "inactive" {
		t.Fatalf("events %v, state %v", got, m.State())
	}
}

// TestConcurrentHammer: many goroutines drive and read the machine; every
// published event must start where the previous one ended.
func TestConcurrentHammer(t *testing.T) {
	var mu sync.Mutex
	var events []msgs.TransitionEvent
	m := lifecycle.New(lifecycle.Config{Publish: func(e msgs.TransitionEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	labels := []string{"configure", "activate", "deactivate", "cleanup"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				_, _ = m.ChangeStateByLabel(ctx, labels[(g+i)%len(labels)])
				_ = m.State()
				_ = m.AvailableTransitions()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(events) == 0 || events[0].StartState.Label != "unconfigured" {
		t.Fatalf("no transitions ran or the first did not start unconfigured: %d", len(events))
	}
	for i := 1; i < len(events); i++ {
		if events[i].StartState != events[i-1].GoalState {
			t.Fatalf("event %d starts at %v but the previous ended at %v", i, events[i].StartState, events[i-1].GoalState)
		}
	}
	if last := events[len(events)-1].GoalState; last != m.State() {
		t.Fatalf("last event ends at %v, machine is in %v", last, m.State())
	}
}
