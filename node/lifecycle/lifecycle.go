// Package lifecycle is the ROS-free core of a ROS 2 managed (lifecycle)
// node: the default state machine of rcl_lifecycle (ROS 2 Humble), driven
// by callbacks its owner supplies, as rclcpp_lifecycle drives it, and the
// handlers of the ~/change_state, ~/get_state, ~/get_available_states,
// ~/get_available_transitions and ~/get_transition_graph services as
// functions from request CDR bytes to response CDR bytes.
//
// The states, transitions, their ids, labels and order are those
// rcl_lifecycle's default state machine registers:
//
//	unconfigured --configure(1)--> configuring --> inactive | unconfigured | errorprocessing
//	inactive     --cleanup(2)----> cleaningup  --> unconfigured | inactive | errorprocessing
//	inactive     --activate(3)---> activating  --> active | inactive | errorprocessing
//	active       --deactivate(4)-> deactivating --> inactive | active | errorprocessing
//	unconfigured, inactive, active --shutdown(5, 6, 7)--> shuttingdown --> finalized | finalized | errorprocessing
//	errorprocessing --> unconfigured (on_error succeeded) | finalized (failed or error)
//
// A callback's success takes the success branch, its failure the failure
// branch (back to the start state), its error the errorprocessing state,
// where on_error runs at once. A transition requested while another one runs
// finds the node in a transition state, which offers no public transition,
// and is refused, as in rclcpp_lifecycle. Only public transitions (ids 0-9:
// configure, cleanup, activate, deactivate, shutdown) may be requested; the
// branches are taken by the callbacks' results alone (rclcpp_lifecycle
// would also trigger "transition_success" or its id if asked while a
// callback runs).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/msgs"
)

// Transition labels of rcl_lifecycle's default state machine.
const (
	LabelConfigure  = "configure"
	LabelCleanup    = "cleanup"
	LabelActivate   = "activate"
	LabelDeactivate = "deactivate"
	LabelShutdown   = "shutdown"
	labelSuccess    = "transition_success"
	labelFailure    = "transition_failure"
	labelError      = "transition_error"
)

// ErrFailure marks a callback's error as a FAILURE (the transition is
// refused and the node returns to its start state) rather than an ERROR
// (the node goes to errorprocessing). Wrap it: fmt.Errorf("%w: ...",
// lifecycle.ErrFailure), or use Failure.
var ErrFailure = errors.New("transition callback failed")

// ErrUnavailable is returned (wrapped) when the requested transition does
// not start from the current state.
var ErrUnavailable = errors.New("transition not available")

// Failure returns an error that makes a callback report FAILURE, with
// reason as its text.
func Failure(reason string) error { return fmt.Errorf("%w: %s", ErrFailure, reason) }

// Callback runs one transition; previous is the primary state the
// transition started from. It returns nil for SUCCESS, an error wrapping
// ErrFailure for FAILURE and any other error for ERROR. A callback should
// return promptly when ctx is cancelled.
type Callback func(ctx context.Context, previous msgs.State) error

// Callbacks are the owner's transition callbacks; a nil one succeeds, as
// rclcpp_lifecycle's defaults do (on_error included).
type Callbacks struct {
	OnConfigure  Callback
	OnActivate   Callback
	OnDeactivate Callback
	OnCleanup    Callback
	OnShutdown   Callback
	OnError      Callback
}

// Config sets up a Machine.
type Config struct {
	Callbacks
	// Now stamps the TransitionEvents (nanoseconds since the epoch of its
	// time); nil: time.Now.
	Now func() time.Time
	// Publish receives every state change as a TransitionEvent (for
	// ~/transition_event), in the order the changes happen, one call at a
	// time and without the machine's state lock held (it may call State).
	// nil: events are dropped. Every field is filled in: the transition
	// taken, its start and goal states and the timestamp (Humble's
	// rcl_lifecycle fills only the two states and leaves the rest zero;
	// its consumers read goal_state).
	Publish func(msgs.TransitionEvent)
	// Logf receives what rclcpp_lifecycle logs: refused transitions and
	// callback errors. nil: nothing is logged.
	Logf func(format string, args ...any)
}

// transition is one edge of the state machine.
type transition struct {
	id          uint8
	label       string
	start, goal uint8
}

// The default state machine of rcl_lifecycle, in its registration order
// (which is the order of the services' answers). Never modified.
var (
	stateTable = []msgs.State{
		{ID: msgs.PrimaryStateUnknown, Label: "unknown"},
		{ID: msgs.PrimaryStateUnconfigured, Label: "unconfigured"},
		{ID: msgs.PrimaryStateInactive, Label: "inactive"},
		{ID: msgs.PrimaryStateActive, Label: "active"},
		{ID: msgs.PrimaryStateFinalized, Label: "finalized"},
		{ID: msgs.TransitionStateConfiguring, Label: "configuring"},
		{ID: msgs.TransitionStateCleaningUp, Label: "cleaningup"},
		{ID: msgs.TransitionStateShuttingDown, Label: "shuttingdown"},
		{ID: msgs.TransitionStateActivating, Label: "activating"},
		{ID: msgs.TransitionStateDeactivating, Label: "deactivating"},
		{ID: msgs.TransitionStateErrorProcessing, Label: "errorprocessing"},
	}
	transitionTable = []transition{
		{msgs.TransitionConfigure, LabelConfigure, msgs.PrimaryStateUnconfigured, msgs.TransitionStateConfiguring},
		{msgs.TransitionOnConfigureSuccess, labelSuccess, msgs.TransitionStateConfiguring, msgs.PrimaryStateInactive},
		{msgs.TransitionOnConfigureFailure, labelFailure, msgs.TransitionStateConfiguring, msgs.PrimaryStateUnconfigured},
		{msgs.TransitionOnConfigureError, labelError, msgs.TransitionStateConfiguring, msgs.TransitionStateErrorProcessing},
		{msgs.TransitionCleanup, LabelCleanup, msgs.PrimaryStateInactive, msgs.TransitionStateCleaningUp},
		{msgs.TransitionOnCleanupSuccess, labelSuccess, msgs.TransitionStateCleaningUp, msgs.PrimaryStateUnconfigured},
		{msgs.TransitionOnCleanupFailure, labelFailure, msgs.TransitionStateCleaningUp, msgs.PrimaryStateInactive},
		{msgs.TransitionOnCleanupError, labelError, msgs.TransitionStateCleaningUp, msgs.TransitionStateErrorProcessing},
		{msgs.TransitionActivate, LabelActivate, msgs.PrimaryStateInactive, msgs.TransitionStateActivating},
		{msgs.TransitionOnActivateSuccess, labelSuccess, msgs.TransitionStateActivating, msgs.PrimaryStateActive},
		{msgs.TransitionOnActivateFailure, labelFailure, msgs.TransitionStateActivating, msgs.PrimaryStateInactive},
		{msgs.TransitionOnActivateError, labelError, msgs.TransitionStateActivating, msgs.TransitionStateErrorProcessing},
		{msgs.TransitionDeactivate, LabelDeactivate, msgs.PrimaryStateActive, msgs.TransitionStateDeactivating},
		{msgs.TransitionOnDeactivateSuccess, labelSuccess, msgs.TransitionStateDeactivating, msgs.PrimaryStateInactive},
		{msgs.TransitionOnDeactivateFailure, labelFailure, msgs.TransitionStateDeactivating, msgs.PrimaryStateActive},
		{msgs.TransitionOnDeactivateError, labelError, msgs.TransitionStateDeactivating, msgs.TransitionStateErrorProcessing},
		{msgs.TransitionUnconfiguredShutdown, LabelShutdown, msgs.PrimaryStateUnconfigured, msgs.TransitionStateShuttingDown},
		{msgs.TransitionInactiveShutdown, LabelShutdown, msgs.PrimaryStateInactive, msgs.TransitionStateShuttingDown},
		{msgs.TransitionActiveShutdown, LabelShutdown, msgs.PrimaryStateActive, msgs.TransitionStateShuttingDown},
		{msgs.TransitionOnShutdownSuccess, labelSuccess, msgs.TransitionStateShuttingDown, msgs.PrimaryStateFinalized},
		{msgs.TransitionOnShutdownFailure, labelFailure, msgs.TransitionStateShuttingDown, msgs.PrimaryStateFinalized},
		{msgs.TransitionOnShutdownError, labelError, msgs.TransitionStateShuttingDown, msgs.TransitionStateErrorProcessing},
		{msgs.TransitionOnErrorSuccess, labelSuccess, msgs.TransitionStateErrorProcessing, msgs.PrimaryStateUnconfigured},
		{msgs.TransitionOnErrorFailure, labelFailure, msgs.TransitionStateErrorProcessing, msgs.PrimaryStateFinalized},
		{msgs.TransitionOnErrorError, labelError, msgs.TransitionStateErrorProcessing, msgs.PrimaryStateFinalized},
	}
)

// stateOf returns the State of an id of stateTable.
func stateOf(id uint8) msgs.State {
	for _, s := range stateTable {
		if s.ID == id {
			return s
		}
	}
	return msgs.State{ID: id, Label: "unknown"}
}

func (t transition) description() msgs.TransitionDescription {
	return msgs.TransitionDescription{
		Transition: msgs.Transition{ID: t.id, Label: t.label},
		StartState: stateOf(t.start),
		GoalState:  stateOf(t.goal),
	}
}

// from returns the transitions starting at state id, in registration order.
func from(id uint8) []transition {
	var out []transition
	for _, t := range transitionTable {
		if t.start == id {
			out = append(out, t)
		}
	}
	return out
}

// Outcome is what a requested transition did.
type Outcome struct {
	// Transition is the public transition that ran.
	Transition msgs.Transition
	// Result is the callback's result: msgs.TransitionCallbackSuccess,
	// TransitionCallbackFailure or TransitionCallbackError.
	Result uint8
	// Err is what the callback returned (nil on success); when Result is
	// an error, ErrorHandlerErr is what on_error returned.
	Err             error
	ErrorHandlerErr error
	// State is the primary state the node is in afterwards.
	State msgs.State
}

// Success reports whether the callback succeeded (the answer of
// ~/change_state).
func (o Outcome) Success() bool { return o.Result == msgs.TransitionCallbackSuccess }

// Machine is a managed node's state machine. It is safe for concurrent use;
// one transition runs at a time and others requested meanwhile are refused.
type Machine struct {
	cfg Config

	// evMu orders each state change with the publication of its event:
	// it is held from the change until Publish returns.
	evMu sync.Mutex
	mu   sync.Mutex // guards current
	// current is the id of the current state.
	current uint8
}

// New returns a machine in the unconfigured state.
func New(cfg Config) *Machine {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Machine{cfg: cfg, current: msgs.PrimaryStateUnconfigured}
}

// State returns the current state (a transition state while a callback
// runs).
func (m *Machine) State() msgs.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return stateOf(m.current)
}

// AvailableStates returns every state of the machine, as
// ~/get_available_states answers.
func (m *Machine) AvailableStates() []msgs.State {
	return append([]msgs.State(nil), stateTable...)
}

// AvailableTransitions returns the transitions from the current state, as
// ~/get_available_transitions answers (in a transition state: the
// transitions its callback's result selects).
func (m *Machine) AvailableTransitions() []msgs.TransitionDescription {
	m.mu.Lock()
	id := m.current
	m.mu.Unlock()
	var out []msgs.TransitionDescription
	for _, t := range from(id) {
		out = append(out, t.description())
	}
	return out
}

// TransitionGraph returns every transition of the machine, as
// ~/get_transition_graph answers.
func (m *Machine) TransitionGraph() []msgs.TransitionDescription {
	out := make([]msgs.TransitionDescription, len(transitionTable))
	for i, t := range transitionTable {
		out[i] = t.description()
	}
	return out
}

func (m *Machine) logf(format string, args ...any) {
	if m.cfg.Logf != nil {
		m.cfg.Logf(format, args...)
	}
}

// describeAvailable lists the public transitions of a state for messages.
func describeAvailable(id uint8) string {
	var parts []string
	for _, t := range from(id) {
		parts = append(parts, fmt.Sprintf("%s (%d)", t.label, t.id))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// step moves the machine along the transition from the current state that
// match selects, publishing its event; it returns that transition, or false
// when none matches (the state is then unchanged).
func (m *Machine) step(match func(transition) bool) (transition, msgs.State, bool) {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	m.mu.Lock()
	cur := m.current
	var found transition
	ok := false
	for _, t := range from(cur) {
		if match(t) {
			found, ok = t, true
			break
		}
	}
	if !ok {
		m.mu.Unlock()
		return transition{}, stateOf(cur), false
	}
	m.current = found.goal
	m.mu.Unlock()
	if m.cfg.Publish != nil {
		m.cfg.Publish(msgs.TransitionEvent{
			Timestamp:  uint64(m.cfg.Now().UnixNano()),
			Transition: msgs.Transition{ID: found.id, Label: found.label},
			StartState: stateOf(found.start),
			GoalState:  stateOf(found.goal),
		})
	}
	return found, stateOf(cur), true
}

// callbackFor returns the owner's callback for a transition state.
func (m *Machine) callbackFor(state uint8) Callback {
	switch state {
	case msgs.TransitionStateConfiguring:
		return m.cfg.OnConfigure
	case msgs.TransitionStateCleaningUp:
		return m.cfg.OnCleanup
	case msgs.TransitionStateShuttingDown:
		return m.cfg.OnShutdown
	case msgs.TransitionStateActivating:
		return m.cfg.OnActivate
	case msgs.TransitionStateDeactivating:
		return m.cfg.OnDeactivate
	case msgs.TransitionStateErrorProcessing:
		return m.cfg.OnError
	}
	return nil
}

// run calls the callback of a transition state and classifies its result.
func (m *Machine) run(ctx context.Context, state uint8, previous msgs.State) (uint8, string, error) {
	cb := m.callbackFor(state)
	if cb == nil {
		return msgs.TransitionCallbackSuccess, labelSuccess, nil
	}
	err := cb(ctx, previous)
	switch {
	case err == nil:
		return msgs.TransitionCallbackSuccess, labelSuccess, nil
	case errors.Is(err, ErrFailure):
		return msgs.TransitionCallbackFailure, labelFailure, err
	default:
		return msgs.TransitionCallbackError, labelError, err
	}
}

// ChangeState runs the public transition id (msgs.TransitionConfigure, ...)
// from the current state: the transition state, the owner's callback, then
// the branch its result selects (and on an error, on_error and its branch).
// It returns an error wrapping ErrUnavailable, with the state unchanged,
// when id does not start from the current state, and ctx's error when ctx
// is already done. A callback's failure or error is not an error of
// ChangeState: it is in the Outcome.
func (m *Machine) ChangeState(ctx context.Context, id uint8) (Outcome, error) {
	return m.change(ctx, func(t transition) bool { return t.id == id && isPublic(t.id) },
		func() string { return fmt.Sprintf("transition id %d", id) })
}

// ChangeStateByLabel runs the public transition labelled label ("configure",
// "cleanup", "activate", "deactivate", "shutdown") from the current state,
// like ChangeState.
func (m *Machine) ChangeStateByLabel(ctx context.Context, label string) (Outcome, error) {
	return m.change(ctx, func(t transition) bool { return t.label == label && isPublic(t.id) },
		func() string { return fmt.Sprintf("transition %q", clip(label)) })
}

// maxLabelInMessage bounds how much of a requested label an error repeats
// (a request's label is the client's text, of any length).
const maxLabelInMessage = 64

func clip(s string) string {
	if len(s) <= maxLabelInMessage {
		return s
	}
	return s[:maxLabelInMessage] + fmt.Sprintf("... (%d bytes)", len(s))
}

// isPublic reports whether a transition id may be requested (0-9); the
// others are selected by a callback's result.
func isPublic(id uint8) bool { return id < 10 }

func (m *Machine) change(ctx context.Context, match func(transition) bool, what func() string) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, fmt.Errorf("lifecycle: %s not started: %w", what(), err)
	}
	t, start, ok := m.step(match)
	if !ok {
		err := fmt.Errorf("lifecycle: %w: %s does not start from state %s (%d); available: %s",
			ErrUnavailable, what(), start.Label, start.ID, describeAvailable(start.ID))
		m.logf("%v", err)
		return Outcome{State: start}, err
	}
	out := Outcome{Transition: msgs.Transition{ID: t.id, Label: t.label}}
	result, label, err := m.run(ctx, t.goal, start)
	out.Result, out.Err = result, err
	if err != nil {
		m.logf("lifecycle: %s from %s: callback %s: %v", t.label, start.Label, label, err)
	}
	next, _, ok := m.step(func(c transition) bool { return c.label == label })
	if !ok {
		// Every transition state has all three branches in the table.
		return out, fmt.Errorf("lifecycle: internal: no %s branch from %s", label, stateOf(t.goal).Label)
	}
	if next.goal == msgs.TransitionStateErrorProcessing {
		_, elabel, eerr := m.run(ctx, msgs.TransitionStateErrorProcessing, start)
		out.ErrorHandlerErr = eerr
		if eerr != nil {
			m.logf("lifecycle: on_error after %s: %v", t.label, eerr)
		}
		if _, _, ok := m.step(func(c transition) bool { return c.label == elabel }); !ok {
			return out, fmt.Errorf("lifecycle: internal: no %s branch from errorprocessing", elabel)
		}
	}
	out.State = m.State()
	return out, nil
}

// Configure runs the configure transition.
func (m *Machine) Configure(ctx context.Context) (Outcome, error) {
	return m.ChangeState(ctx, msgs.TransitionConfigure)
}

// Activate runs the activate transition.
func (m *Machine) Activate(ctx context.Context) (Outcome, error) {
	return m.ChangeState(ctx, msgs.TransitionActivate)
}

// Deactivate runs the deactivate transition.
func (m *Machine) Deactivate(ctx context.Context) (Outcome, error) {
	return m.ChangeState(ctx, msgs.TransitionDeactivate)
}

// Cleanup runs the cleanup transition.
func (m *Machine) Cleanup(ctx context.Context) (Outcome, error) {
	return m.ChangeState(ctx, msgs.TransitionCleanup)
}

// Shutdown runs the shutdown transition of the current primary state
// (unconfigured, inactive or active).
func (m *Machine) Shutdown(ctx context.Context) (Outcome, error) {
	return m.ChangeStateByLabel(ctx, LabelShutdown)
}
