package msgs

// MarshalCDR, AppendCDR and UnmarshalCDR of the lifecycle_msgs,
// rcl_interfaces and rosgraph_msgs types: the same three methods for each,
// on the helpers of svccodec.go.

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *State) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *State) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *State) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "State") }

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Transition) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Transition) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *Transition) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "Transition") }

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *TransitionDescription) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *TransitionDescription) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *TransitionDescription) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "TransitionDescription")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *TransitionEvent) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *TransitionEvent) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *TransitionEvent) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "TransitionEvent")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ChangeStateRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ChangeStateRequest) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ChangeStateRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ChangeState_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ChangeStateResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ChangeStateResponse) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ChangeStateResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ChangeState_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetStateRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetStateRequest) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetStateRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetState_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetStateResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetStateResponse) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetStateResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetState_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetAvailableStatesRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetAvailableStatesRequest) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetAvailableStatesRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetAvailableStates_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetAvailableStatesResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetAvailableStatesResponse) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetAvailableStatesResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetAvailableStates_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetAvailableTransitionsRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetAvailableTransitionsRequest) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetAvailableTransitionsRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetAvailableTransitions_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetAvailableTransitionsResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetAvailableTransitionsResponse) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetAvailableTransitionsResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetAvailableTransitions_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ParameterValue) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ParameterValue) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ParameterValue) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ParameterValue")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Parameter) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Parameter) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *Parameter) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "Parameter") }

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *FloatingPointRange) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *FloatingPointRange) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *FloatingPointRange) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "FloatingPointRange")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *IntegerRange) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *IntegerRange) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *IntegerRange) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "IntegerRange")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ParameterDescriptor) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ParameterDescriptor) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ParameterDescriptor) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ParameterDescriptor")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *SetParametersResult) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *SetParametersResult) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *SetParametersResult) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "SetParametersResult")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ListParametersResult) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ListParametersResult) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ListParametersResult) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ListParametersResult")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ParameterEvent) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ParameterEvent) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ParameterEvent) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ParameterEvent")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ListParametersRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ListParametersRequest) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ListParametersRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ListParameters_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ListParametersResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ListParametersResponse) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *ListParametersResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "ListParameters_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetParametersRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetParametersRequest) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetParametersRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetParameters_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetParametersResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetParametersResponse) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetParametersResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetParameters_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetParameterTypesRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetParameterTypesRequest) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetParameterTypesRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetParameterTypes_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *GetParameterTypesResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *GetParameterTypesResponse) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *GetParameterTypesResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "GetParameterTypes_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *SetParametersRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *SetParametersRequest) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *SetParametersRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "SetParameters_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *SetParametersResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *SetParametersResponse) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *SetParametersResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "SetParameters_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *SetParametersAtomicallyRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *SetParametersAtomicallyRequest) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *SetParametersAtomicallyRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "SetParametersAtomically_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *SetParametersAtomicallyResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *SetParametersAtomicallyResponse) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *SetParametersAtomicallyResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "SetParametersAtomically_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *DescribeParametersRequest) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *DescribeParametersRequest) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *DescribeParametersRequest) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "DescribeParameters_Request")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *DescribeParametersResponse) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *DescribeParametersResponse) AppendCDR(dst []byte) ([]byte, error) {
	return appendMessage(m, dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *DescribeParametersResponse) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "DescribeParameters_Response")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Clock) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Clock) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *Clock) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "Clock") }
