package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/lifecycle"
)

// goldenCDR reads a golden message written by the independent encoder
// (msgs/testdata, see msgs/testdata/xcheck).
func goldenCDR(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "msgs", "testdata", name+".cdr"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func changeState(t *testing.T, m *lifecycle.Machine, id uint8, label string) bool {
	t.Helper()
	req, err := (&msgs.ChangeStateRequest{Transition: msgs.Transition{ID: id, Label: label}}).MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.HandleChangeState(context.Background(), req)
	if err != nil {
		t.Fatalf("HandleChangeState(%d, %q): %v", id, label, err)
	}
	var resp msgs.ChangeStateResponse
	if err := resp.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	return resp.Success
}

// TestGoldenServiceBytes: the requests the independent encoder wrote are
// understood and the responses are byte for byte what it writes.
func TestGoldenServiceBytes(t *testing.T) {
	m, _ := newMachine(t, nil)
	got, err := m.HandleGetAvailableTransitions(context.Background(), goldenCDR(t, "lc_get_available_transitions_request"))
	if err != nil {
		t.Fatal(err)
	}
	// The golden response holds exactly an unconfigured node's transitions.
	if want := goldenCDR(t, "lc_get_available_transitions_response"); !bytes.Equal(got, want) {
		t.Fatalf("available transitions of unconfigured\n got % x\nwant % x", got, want)
	}
	// {transition: {id: 0, label: shutdown}}: the label wins over id 0.
	got, err = m.HandleChangeState(context.Background(), goldenCDR(t, "lc_change_state_request"))
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenCDR(t, "lc_change_state_response"); !bytes.Equal(got, want) {
		t.Fatalf("change_state response % x, want % x", got, want)
	}
	if m.State().ID != msgs.PrimaryStateFinalized {
		t.Fatalf("state %v after shutdown by label", m.State())
	}
	got, err = m.HandleGetAvailableTransitions(context.Background(), goldenCDR(t, "lc_get_available_transitions_request"))
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenCDR(t, "lc_get_available_transitions_response_empty"); !bytes.Equal(got, want) {
		t.Fatalf("finalized offers transitions: % x", got)
	}
}

func TestChangeStateService(t *testing.T) {
	m, _ := newMachine(t, results{"activate": lifecycle.Failure("no inputs yet")})
	if !changeState(t, m, msgs.TransitionConfigure, "") {
		t.Fatal("configure by id failed")
	}
	if changeState(t, m, msgs.TransitionConfigure, "") {
		t.Fatal("configure from inactive succeeded")
	}
	if changeState(t, m, 0, "no_such_transition") {
		t.Fatal("an unknown label succeeded")
	}
	// The label takes precedence over a contradicting id.
	if changeState(t, m, msgs.TransitionCleanup, "activate") || m.State().Label != "inactive" {
		t.Fatalf("a failing activate answered success or moved the node: %v", m.State())
	}
	if !changeState(t, m, msgs.TransitionActivate, "cleanup") || m.State().Label != "unconfigured" {
		t.Fatalf("label cleanup with id 3: state %v", m.State())
	}
}

func getState(t *testing.T, m *lifecycle.Machine) msgs.State {
	t.Helper()
	b, err := m.HandleGetState(context.Background(), goldenCDR(t, "lc_get_state_request"))
	if err != nil {
		t.Fatal(err)
	}
	var resp msgs.GetStateResponse
	if err := resp.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	return resp.CurrentState
}

func TestGetStateService(t *testing.T) {
	m, _ := newMachine(t, nil)
	for _, step := range []struct {
		label string
		want  msgs.State
	}{
		{"", msgs.State{ID: 1, Label: "unconfigured"}},
		{"configure", msgs.State{ID: 2, Label: "inactive"}},
		{"activate", msgs.State{ID: 3, Label: "active"}},
		{"shutdown", msgs.State{ID: 4, Label: "finalized"}},
	} {
		if step.label != "" {
			changeState(t, m, 0, step.label)
		}
		if got := getState(t, m); got != step.want {
			t.Fatalf("after %q: %v, want %v", step.label, got, step.want)
		}
	}
}

// rclStates and rclGraph are rcl_lifecycle's default state machine
// (rcl_lifecycle/src/default_state_machine.c, Humble), in its registration
// order, written out as "id label" and "id label: start -> goal".
const rclStates = "0 unknown, 1 unconfigured, 2 inactive, 3 active, 4 finalized, 10 configuring, " +
	"11 cleaningup, 12 shuttingdown, 13 activating, 14 deactivating, 15 errorprocessing"

var rclGraph = []string{
	"1 configure: unconfigured -> configuring",
	"10 transition_success: configuring -> inactive",
	"11 transition_failure: configuring -> unconfigured",
	"12 transition_error: configuring -> errorprocessing",
	"2 cleanup: inactive -> cleaningup",
	"20 transition_success: cleaningup -> unconfigured",
	"21 transition_failure: cleaningup -> inactive",
	"22 transition_error: cleaningup -> errorprocessing",
	"3 activate: inactive -> activating",
	"30 transition_success: activating -> active",
	"31 transition_failure: activating -> inactive",
	"32 transition_error: activating -> errorprocessing",
	"4 deactivate: active -> deactivating",
	"40 transition_success: deactivating -> inactive",
	"41 transition_failure: deactivating -> active",
	"42 transition_error: deactivating -> errorprocessing",
	"5 shutdown: unconfigured -> shuttingdown",
	"6 shutdown: inactive -> shuttingdown",
	"7 shutdown: active -> shuttingdown",
	"50 transition_success: shuttingdown -> finalized",
	"51 transition_failure: shuttingdown -> finalized",
	"52 transition_error: shuttingdown -> errorprocessing",
	"60 transition_success: errorprocessing -> unconfigured",
	"61 transition_failure: errorprocessing -> finalized",
	"62 transition_error: errorprocessing -> finalized",
}

func describe(ts []msgs.TransitionDescription) []string {
	var out []string
	for _, d := range ts {
		out = append(out, fmt.Sprintf("%d %s: %s -> %s", d.Transition.ID, d.Transition.Label, d.StartState.Label, d.GoalState.Label))
	}
	return out
}

func TestGraphAndStatesServices(t *testing.T) {
	m, _ := newMachine(t, nil)
	empty := goldenCDR(t, "lc_get_available_states_request")
	b, err := m.HandleGetAvailableStates(context.Background(), empty)
	if err != nil {
		t.Fatal(err)
	}
	var states msgs.GetAvailableStatesResponse
	if err := states.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, s := range states.AvailableStates {
		parts = append(parts, fmt.Sprintf("%d %s", s.ID, s.Label))
	}
	if got := strings.Join(parts, ", "); got != rclStates {
		t.Fatalf("states %s\nwant %s", got, rclStates)
	}
	b, err = m.HandleGetTransitionGraph(context.Background(), empty)
	if err != nil {
		t.Fatal(err)
	}
	var graph msgs.GetAvailableTransitionsResponse
	if err := graph.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	if got := describe(graph.AvailableTransitions); strings.Join(got, "\n") != strings.Join(rclGraph, "\n") {
		t.Fatalf("graph\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(rclGraph, "\n"))
	}
	// Available transitions of each primary state: the graph's edges from it.
	for _, setup := range [][]string{nil, {"configure"}, {"configure", "activate"}, {"shutdown"}} {
		m, _ := newMachine(t, nil)
		drive(t, m, setup...)
		b, err := m.HandleGetAvailableTransitions(context.Background(), empty)
		if err != nil {
			t.Fatal(err)
		}
		var resp msgs.GetAvailableTransitionsResponse
		if err := resp.UnmarshalCDR(b); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, e := range rclGraph {
			if strings.Contains(e, ": "+m.State().Label+" -> ") {
				want = append(want, e)
			}
		}
		if got := describe(resp.AvailableTransitions); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("from %s: %q, want %q", m.State().Label, got, want)
		}
	}
}

// TestMalformedRequests: bytes that are not the service's request are
// refused with an error naming the service, and change nothing.
func TestMalformedRequests(t *testing.T) {
	m, r := newMachine(t, nil)
	for _, tc := range []struct {
		name string
		h    lifecycle.Handler
		req  []byte
		want string
	}{
		{"empty", m.HandleChangeState, nil, "change_state request is not a lifecycle_msgs/srv/ChangeState_Request: msgs: ChangeState_Request: message is 0 bytes"},
		{"big endian", m.HandleChangeState, []byte{0, 0, 0, 0, 1, 0, 0, 0}, "encapsulation 00 00 is not CDR little-endian"},
		{"truncated label", m.HandleChangeState, []byte{0, 1, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 'c'}, "ChangeState_Request.transition.label: string length 9 runs past the end"},
		{"label without NUL", m.HandleChangeState, []byte{0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'c'}, "does not end with NUL"},
		{"trailing bytes", m.HandleGetState, []byte{0, 1, 0, 0, 0, 1, 2, 3, 4}, "get_state request is not a lifecycle_msgs/srv/GetState_Request: msgs: GetState_Request: 4 unexpected bytes"},
		{"header only", m.HandleGetAvailableStates, []byte{0, 1, 0, 0}, "GetAvailableStates_Request.structure_needs_at_least_one_member: uint8 needs 1 bytes"},
		{"graph garbage", m.HandleGetTransitionGraph, []byte{1, 2}, "get_transition_graph request is not a lifecycle_msgs/srv/GetAvailableTransitions_Request"},
		{"transitions garbage", m.HandleGetAvailableTransitions, []byte{0, 1}, "shorter than the 4-byte CDR encapsulation header"},
	} {
		_, err := tc.h(context.Background(), tc.req)
		var me *msgs.Error
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &me) {
			t.Errorf("%s: %v, want a *msgs.Error containing %q", tc.name, err, tc.want)
		}
	}
	if m.State().ID != msgs.PrimaryStateUnconfigured || len(r.events) != 0 {
		t.Fatal("a malformed request changed the machine")
	}
}

func TestServicesTable(t *testing.T) {
	m, _ := newMachine(t, nil)
	var got []string
	for _, s := range m.Services() {
		got = append(got, s.Name+" "+s.Type)
	}
	want := "change_state lifecycle_msgs/srv/ChangeState, get_state lifecycle_msgs/srv/GetState, " +
		"get_available_states lifecycle_msgs/srv/GetAvailableStates, " +
		"get_available_transitions lifecycle_msgs/srv/GetAvailableTransitions, " +
		"get_transition_graph lifecycle_msgs/srv/GetAvailableTransitions"
	if strings.Join(got, ", ") != want {
		t.Fatalf("services %q", got)
	}
}
