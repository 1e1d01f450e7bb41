package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/fastwam/actionexpert/msgs"
)

// Service names, relative to the node (the adapter prefixes "~/").
const (
	ServiceChangeState             = "change_state"
	ServiceGetState                = "get_state"
	ServiceGetAvailableStates      = "get_available_states"
	ServiceGetAvailableTransitions = "get_available_transitions"
	ServiceGetTransitionGraph      = "get_transition_graph"
	TopicTransitionEvent           = "transition_event"
)

// Handler answers one service: request CDR bytes in, response CDR bytes
// out. An error means the request was not a valid message of the service's
// request type (nothing was done); the adapter logs it and sends no
// response, as rcl does for a request it cannot deserialize.
type Handler func(ctx context.Context, request []byte) ([]byte, error)

// Service is one service the machine serves.
type Service struct {
	Name    string // relative name, e.g. "change_state"
	Type    string // e.g. msgs.SrvChangeState
	Handler Handler
}

// Services returns the five lifecycle services with their types and
// handlers.
func (m *Machine) Services() []Service {
	return []Service{
		{ServiceChangeState, msgs.SrvChangeState, m.HandleChangeState},
		{ServiceGetState, msgs.SrvGetState, m.HandleGetState},
		{ServiceGetAvailableStates, msgs.SrvGetAvailableStates, m.HandleGetAvailableStates},
		{ServiceGetAvailableTransitions, msgs.SrvGetAvailableTransitions, m.HandleGetAvailableTransitions},
		{ServiceGetTransitionGraph, msgs.SrvGetAvailableTransitions, m.HandleGetTransitionGraph},
	}
}

// HandleChangeState serves ~/change_state as rclcpp_lifecycle does: a
// non-empty label selects the transition (it takes precedence over the id,
// since `ros2 service call` leaves the id 0), otherwise the id does; the
// response's success is whether the transition's callback succeeded, and
// false when the transition is not available from the current state.
func (m *Machine) HandleChangeState(ctx context.Context, request []byte) ([]byte, error) {
	var req msgs.ChangeStateRequest
	if err := req.UnmarshalCDR(request); err != nil {
		return nil, fmt.Errorf("lifecycle: %s request is not a %s_Request: %w", ServiceChangeState, msgs.SrvChangeState, err)
	}
	var out Outcome
	var err error
	if req.Transition.Label != "" {
		out, err = m.ChangeStateByLabel(ctx, req.Transition.Label)
	} else {
		out, err = m.ChangeState(ctx, req.Transition.ID)
	}
	if err != nil && !errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		return nil, err
	}
	resp := msgs.ChangeStateResponse{Success: err == nil && out.Success()}
	return resp.MarshalCDR()
}

// checkEmpty decodes an empty request of service name.
func checkEmpty(name, typ string, request []byte, m interface{ UnmarshalCDR([]byte) error }) error {
	if err := m.UnmarshalCDR(request); err != nil {
		return fmt.Errorf("lifecycle: %s request is not a %s_Request: %w", name, typ, err)
	}
	return nil
}

// HandleGetState serves ~/get_state: the current state.
func (m *Machine) HandleGetState(_ context.Context, request []byte) ([]byte, error) {
	if err := checkEmpty(ServiceGetState, msgs.SrvGetState, request, &msgs.GetStateRequest{}); err != nil {
		return nil, err
	}
	resp := msgs.GetStateResponse{CurrentState: m.State()}
	return resp.MarshalCDR()
}

// HandleGetAvailableStates serves ~/get_available_states: every state.
func (m *Machine) HandleGetAvailableStates(_ context.Context, request []byte) ([]byte, error) {
	if err := checkEmpty(ServiceGetAvailableStates, msgs.SrvGetAvailableStates, request, &msgs.GetAvailableStatesRequest{}); err != nil {
		return nil, err
	}
	resp := msgs.GetAvailableStatesResponse{AvailableStates: m.AvailableStates()}
	return resp.MarshalCDR()
}

// HandleGetAvailableTransitions serves ~/get_available_transitions: the
// transitions from the current state.
func (m *Machine) HandleGetAvailableTransitions(_ context.Context, request []byte) ([]byte, error) {
	if err := checkEmpty(ServiceGetAvailableTransitions, msgs.SrvGetAvailableTransitions, request, &msgs.GetAvailableTransitionsRequest{}); err != nil {
		return nil, err
	}
	resp := msgs.GetAvailableTransitionsResponse{AvailableTransitions: m.AvailableTransitions()}
	return resp.MarshalCDR()
}

// HandleGetTransitionGraph serves ~/get_transition_graph (type
// GetAvailableTransitions): every transition of the machine.
func (m *Machine) HandleGetTransitionGraph(_ context.Context, request []byte) ([]byte, error) {
	if err := checkEmpty(ServiceGetTransitionGraph, msgs.SrvGetAvailableTransitions, request, &msgs.GetAvailableTransitionsRequest{}); err != nil {
		return nil, err
	}
	resp := msgs.GetAvailableTransitionsResponse{AvailableTransitions: m.TransitionGraph()}
	return resp.MarshalCDR()
}
