package msgs

// lifecycle_msgs (ROS 2 Humble, deps/lifecycle_msgs): the managed-node
// state machine's messages and the request/response of its services.

// ROS type names of lifecycle_msgs' messages and services.
const (
	TypeState                  = "lifecycle_msgs/msg/State"
	TypeTransition             = "lifecycle_msgs/msg/Transition"
	TypeTransitionDescription  = "lifecycle_msgs/msg/TransitionDescription"
	TypeTransitionEvent        = "lifecycle_msgs/msg/TransitionEvent"
	SrvChangeState             = "lifecycle_msgs/srv/ChangeState"
	SrvGetState                = "lifecycle_msgs/srv/GetState"
	SrvGetAvailableStates      = "lifecycle_msgs/srv/GetAvailableStates"
	SrvGetAvailableTransitions = "lifecycle_msgs/srv/GetAvailableTransitions"
)

// State ids of lifecycle_msgs/State: the primary states and the transition
// states a node passes through while a transition's callback runs.
const (
	PrimaryStateUnknown            uint8 = 0
	PrimaryStateUnconfigured       uint8 = 1
	PrimaryStateInactive           uint8 = 2
	PrimaryStateActive             uint8 = 3
	PrimaryStateFinalized          uint8 = 4
	TransitionStateConfiguring     uint8 = 10
	TransitionStateCleaningUp      uint8 = 11
	TransitionStateShuttingDown    uint8 = 12
	TransitionStateActivating      uint8 = 13
	TransitionStateDeactivating    uint8 = 14
	TransitionStateErrorProcessing uint8 = 15
)

// Transition ids of lifecycle_msgs/Transition: the public transitions
// (0-9), the private ones a callback's result selects (10-62) and the
// callback results (97-99).
const (
	TransitionCreate               uint8 = 0
	TransitionConfigure            uint8 = 1
	TransitionCleanup              uint8 = 2
	TransitionActivate             uint8 = 3
	TransitionDeactivate           uint8 = 4
	TransitionUnconfiguredShutdown uint8 = 5
	TransitionInactiveShutdown     uint8 = 6
	TransitionActiveShutdown       uint8 = 7
	TransitionDestroy              uint8 = 8
	TransitionOnConfigureSuccess   uint8 = 10
	TransitionOnConfigureFailure   uint8 = 11
	TransitionOnConfigureError     uint8 = 12
	TransitionOnCleanupSuccess     uint8 = 20
	TransitionOnCleanupFailure     uint8 = 21
	TransitionOnCleanupError       uint8 = 22
	TransitionOnActivateSuccess    uint8 = 30
	TransitionOnActivateFailure    uint8 = 31
	TransitionOnActivateError      uint8 = 32
	TransitionOnDeactivateSuccess  uint8 = 40
	TransitionOnDeactivateFailure  uint8 = 41
	TransitionOnDeactivateError    uint8 = 42
	TransitionOnShutdownSuccess    uint8 = 50
	TransitionOnShutdownFailure    uint8 = 51
	TransitionOnShutdownError      uint8 = 52
	TransitionOnErrorSuccess       uint8 = 60
	TransitionOnErrorFailure       uint8 = 61
	TransitionOnErrorError         uint8 = 62
	TransitionCallbackSuccess      uint8 = 97
	TransitionCallbackFailure      uint8 = 98
	TransitionCallbackError        uint8 = 99
)

// State is lifecycle_msgs/State.
type State struct {
	ID    uint8
	Label string
}

// Transition is lifecycle_msgs/Transition.
type Transition struct {
	ID    uint8
	Label string
}

// TransitionDescription is lifecycle_msgs/TransitionDescription.
type TransitionDescription struct {
	Transition Transition
	StartState State
	GoalState  State
}

// TransitionEvent is lifecycle_msgs/TransitionEvent. Timestamp is in
// nanoseconds.
type TransitionEvent struct {
	Timestamp  uint64
	Transition Transition
	StartState State
	GoalState  State
}

// ChangeStateRequest is lifecycle_msgs/srv/ChangeState_Request.
type ChangeStateRequest struct {
	Transition Transition
}

// ChangeStateResponse is lifecycle_msgs/srv/ChangeState_Response.
type ChangeStateResponse struct {
	Success bool
}

// GetStateRequest is lifecycle_msgs/srv/GetState_Request. Like every
// empty ROS 2 message it is one uint8 on the wire (rosidl's
// structure_needs_at_least_one_member), written as 0 and ignored on read.
type GetStateRequest struct{}

// GetStateResponse is lifecycle_msgs/srv/GetState_Response.
type GetStateResponse struct {
	CurrentState State
}

// GetAvailableStatesRequest is lifecycle_msgs/srv/GetAvailableStates_Request
// (empty: one uint8 on the wire).
type GetAvailableStatesRequest struct{}

// GetAvailableStatesResponse is
// lifecycle_msgs/srv/GetAvailableStates_Response.
type GetAvailableStatesResponse struct {
	AvailableStates []State
}

// GetAvailableTransitionsRequest is
// lifecycle_msgs/srv/GetAvailableTransitions_Request (empty: one uint8 on
// the wire). ~/get_transition_graph uses the same service type.
type GetAvailableTransitionsRequest struct{}

// GetAvailableTransitionsResponse is
// lifecycle_msgs/srv/GetAvailableTransitions_Response.
type GetAvailableTransitionsResponse struct {
	AvailableTransitions []TransitionDescription
}

func (m *State) encode(e *encoder) {
	e.u8(m.ID)
	e.str("State.label", m.Label)
}

func (m *State) decode(d *decoder) {
	m.ID = d.u8("id")
	m.Label = d.str("label")
}

func (m *Transition) encode(e *encoder) {
	e.u8(m.ID)
	e.str("Transition.label", m.Label)
}

func (m *Transition) decode(d *decoder) {
	m.ID = d.u8("id")
	m.Label = d.str("label")
}

func (m *TransitionDescription) encode(e *encoder) {
	m.Transition.encode(e)
	m.StartState.encode(e)
	m.GoalState.encode(e)
}

func (m *TransitionDescription) decode(d *decoder) {
	d.enter("transition")
	m.Transition.decode(d)
	d.leave()
	d.enter("start_state")
	m.StartState.decode(d)
	d.leave()
	d.enter("goal_state")
	m.GoalState.decode(d)
	d.leave()
}

func (m *TransitionEvent) encode(e *encoder) {
	e.u64(m.Timestamp)
	m.Transition.encode(e)
	m.StartState.encode(e)
	m.GoalState.encode(e)
}

func (m *TransitionEvent) decode(d *decoder) {
	m.Timestamp = d.u64("timestamp")
	d.enter("transition")
	m.Transition.decode(d)
	d.leave()
	d.enter("start_state")
	m.StartState.decode(d)
	d.leave()
	d.enter("goal_state")
	m.GoalState.decode(d)
	d.leave()
}

func (m *ChangeStateRequest) encode(e *encoder) { m.Transition.encode(e) }

func (m *ChangeStateRequest) decode(d *decoder) {
	d.enter("transition")
	m.Transition.decode(d)
	d.leave()
}

func (m *ChangeStateResponse) encode(e *encoder) { e.boolean(m.Success) }

func (m *ChangeStateResponse) decode(d *decoder) { m.Success = d.boolean("success") }

// encodeEmpty writes the one uint8 member rosidl gives an empty message.
func encodeEmpty(e *encoder) { e.u8(0) }

// decodeEmpty reads the one uint8 member rosidl gives an empty message; its
// value carries nothing and is not checked.
func decodeEmpty(d *decoder) { d.u8("structure_needs_at_least_one_member") }

func (m *GetStateRequest) encode(e *encoder) { encodeEmpty(e) }

func (m *GetStateRequest) decode(d *decoder) { decodeEmpty(d) }

func (m *GetStateResponse) encode(e *encoder) { m.CurrentState.encode(e) }

func (m *GetStateResponse) decode(d *decoder) {
	d.enter("current_state")
	m.CurrentState.decode(d)
	d.leave()
}

func (m *GetAvailableStatesRequest) encode(e *encoder) { encodeEmpty(e) }

func (m *GetAvailableStatesRequest) decode(d *decoder) { decodeEmpty(d) }

func (m *GetAvailableStatesResponse) encode(e *encoder) {
	encodeSeq(e, "GetAvailableStates_Response.available_states", m.AvailableStates)
}

func (m *GetAvailableStatesResponse) decode(d *decoder) {
	m.AvailableStates = decodeSeq[State](d, "available_states", d.seqLen("available_states", minState, "States"))
}

func (m *GetAvailableTransitionsRequest) encode(e *encoder) { encodeEmpty(e) }

func (m *GetAvailableTransitionsRequest) decode(d *decoder) { decodeEmpty(d) }

func (m *GetAvailableTransitionsResponse) encode(e *encoder) {
	encodeSeq(e, "GetAvailableTransitions_Response.available_transitions", m.AvailableTransitions)
}

func (m *GetAvailableTransitionsResponse) decode(d *decoder) {
	m.AvailableTransitions = decodeSeq[TransitionDescription](d, "available_transitions", d.seqLen("available_transitions", minTransitionDescription, "TransitionDescriptions"))
}
