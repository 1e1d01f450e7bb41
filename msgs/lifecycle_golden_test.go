package msgs_test

import (
	"github.com/fastwam/actionexpert/msgs"
)

// lifecycleAndParameterSamples are the golden samples of the lifecycle_msgs,
// rcl_interfaces and rosgraph_msgs types, the same values as
// lifecycleAndParameterSamples in testdata/xcheck/xcheck.mjs.
func lifecycleAndParameterSamples() []sample {
	st := func(id uint8, label string) msgs.State { return msgs.State{ID: id, Label: label} }
	tr := func(id uint8, label string) msgs.Transition { return msgs.Transition{ID: id, Label: label} }
	inactive := st(2, "inactive")
	configuring := st(10, "configuring")
	desc := msgs.TransitionDescription{Transition: tr(1, "configure"), StartState: st(1, "unconfigured"), GoalState: configuring}
	allKinds := msgs.ParameterValue{
		Type: msgs.ParameterDoubleArray, BoolValue: true, IntegerValue: -(1 << 40) - 3, DoubleValue: -0.375,
		StringValue: "cpu", ByteArrayValue: []byte{0, 7, 255}, BoolArrayValue: []bool{true, false, true},
		IntegerArrayValue: []int64{1, -2, 1<<62 + 1}, DoubleArrayValue: []float64{0.5, -1e300, 3},
		StringArrayValue: []string{"a", "", "expert.steps"},
	}
	params := []msgs.Parameter{
		{Name: "steps", Value: msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 10}},
		{Name: "shift", Value: msgs.ParameterValue{Type: msgs.ParameterDouble, DoubleValue: 5}},
		{Name: "dry_run", Value: msgs.ParameterValue{Type: msgs.ParameterBool, BoolValue: true}},
		{Name: "backend", Value: msgs.ParameterValue{Type: msgs.ParameterString, StringValue: "htp"}},
		{Name: "clip.low", Value: msgs.ParameterValue{Type: msgs.ParameterDoubleArray, DoubleArrayValue: []float64{-1, -0.5}}},
	}
	values := make([]msgs.ParameterValue, len(params))
	for i, p := range params {
		values[i] = p.Value
	}
	descriptor := msgs.ParameterDescriptor{
		Name: "steps", Type: msgs.ParameterInteger, Description: "denoise steps per chunk",
		IntegerRange: []msgs.IntegerRange{{FromValue: 1, ToValue: 100, Step: 1}},
	}
	descriptorRO := msgs.ParameterDescriptor{
		Name: "htp.context_binary", Type: msgs.ParameterString, Description: "the QNN context binary",
		AdditionalConstraints: "change it with cleanup, then configure", ReadOnly: true,
	}
	descriptorF := msgs.ParameterDescriptor{
		Name: "shift", Type: msgs.ParameterDouble, DynamicTyping: true,
		FloatingPointRange: []msgs.FloatingPointRange{{FromValue: 0.5, ToValue: 20}},
	}
	s := func(name string, m cdrMessage, fresh func() cdrMessage) sample { return sample{name, m, fresh} }
	return []sample{
		s("lc_state", &inactive, func() cdrMessage { return &msgs.State{} }),
		s("lc_transition", ptr(tr(3, "activate")), func() cdrMessage { return &msgs.Transition{} }),
		s("lc_transition_description", &desc, func() cdrMessage { return &msgs.TransitionDescription{} }),
		s("lc_transition_event", &msgs.TransitionEvent{
			Timestamp: 1700000004000000123, Transition: tr(10, "transition_success"), StartState: configuring, GoalState: inactive,
		}, func() cdrMessage { return &msgs.TransitionEvent{} }),
		s("lc_change_state_request", &msgs.ChangeStateRequest{Transition: tr(0, "shutdown")},
			func() cdrMessage { return &msgs.ChangeStateRequest{} }),
		s("lc_change_state_response", &msgs.ChangeStateResponse{Success: true}, func() cdrMessage { return &msgs.ChangeStateResponse{} }),
		s("lc_get_state_request", &msgs.GetStateRequest{}, func() cdrMessage { return &msgs.GetStateRequest{} }),
		s("lc_get_state_response", &msgs.GetStateResponse{CurrentState: st(15, "errorprocessing")},
			func() cdrMessage { return &msgs.GetStateResponse{} }),
		s("lc_get_available_states_request", &msgs.GetAvailableStatesRequest{},
			func() cdrMessage { return &msgs.GetAvailableStatesRequest{} }),
		s("lc_get_available_states_response", &msgs.GetAvailableStatesResponse{
			AvailableStates: []msgs.State{st(0, "unknown"), st(1, "unconfigured"), inactive},
		}, func() cdrMessage { return &msgs.GetAvailableStatesResponse{} }),
		s("lc_get_available_transitions_request", &msgs.GetAvailableTransitionsRequest{},
			func() cdrMessage { return &msgs.GetAvailableTransitionsRequest{} }),
		s("lc_get_available_transitions_response", &msgs.GetAvailableTransitionsResponse{
			AvailableTransitions: []msgs.TransitionDescription{desc,
				{Transition: tr(5, "shutdown"), StartState: st(1, "unconfigured"), GoalState: st(12, "shuttingdown")}},
		}, func() cdrMessage { return &msgs.GetAvailableTransitionsResponse{} }),
		s("lc_get_available_transitions_response_empty", &msgs.GetAvailableTransitionsResponse{},
			func() cdrMessage { return &msgs.GetAvailableTransitionsResponse{} }),
		s("rcl_parameter_value", &allKinds, func() cdrMessage { return &msgs.ParameterValue{} }),
		s("rcl_parameter_value_empty", &msgs.ParameterValue{}, func() cdrMessage { return &msgs.ParameterValue{} }),
		s("rcl_parameter", &msgs.Parameter{Name: "expert.steps", Value: allKinds}, func() cdrMessage { return &msgs.Parameter{} }),
		s("rcl_floating_point_range", &msgs.FloatingPointRange{FromValue: -1.5, ToValue: 2.25, Step: 0.25},
			func() cdrMessage { return &msgs.FloatingPointRange{} }),
		s("rcl_integer_range", &msgs.IntegerRange{FromValue: -5, ToValue: 1 << 40, Step: 3},
			func() cdrMessage { return &msgs.IntegerRange{} }),
		s("rcl_parameter_descriptor", &descriptor, func() cdrMessage { return &msgs.ParameterDescriptor{} }),
		s("rcl_parameter_descriptor_float", &descriptorF, func() cdrMessage { return &msgs.ParameterDescriptor{} }),
		s("rcl_set_parameters_result", &msgs.SetParametersResult{
			Reason: "htp.context_binary: change it with cleanup, then configure",
		}, func() cdrMessage { return &msgs.SetParametersResult{} }),
		s("rcl_list_parameters_result", &msgs.ListParametersResult{
			Names: []string{"steps", "clip.low", "clip.high"}, Prefixes: []string{"clip"},
		}, func() cdrMessage { return &msgs.ListParametersResult{} }),
		s("rcl_parameter_event", &msgs.ParameterEvent{
			Stamp: msgs.Time{Sec: 1700000005, Nanosec: 42}, Node: "/fastwam/action_expert", ChangedParameters: params[:2],
		}, func() cdrMessage { return &msgs.ParameterEvent{} }),
		s("rcl_list_parameters_request", &msgs.ListParametersRequest{Prefixes: []string{"clip", "htp"}, Depth: 1},
			func() cdrMessage { return &msgs.ListParametersRequest{} }),
		s("rcl_list_parameters_response", &msgs.ListParametersResponse{Result: msgs.ListParametersResult{
			Names: []string{"clip.high", "clip.low"}, Prefixes: []string{"clip"},
		}}, func() cdrMessage { return &msgs.ListParametersResponse{} }),
		s("rcl_get_parameters_request", &msgs.GetParametersRequest{Names: []string{"steps", "nope"}},
			func() cdrMessage { return &msgs.GetParametersRequest{} }),
		s("rcl_get_parameters_response", &msgs.GetParametersResponse{Values: values},
			func() cdrMessage { return &msgs.GetParametersResponse{} }),
		s("rcl_get_parameter_types_request", &msgs.GetParameterTypesRequest{Names: []string{"shift"}},
			func() cdrMessage { return &msgs.GetParameterTypesRequest{} }),
		s("rcl_get_parameter_types_response", &msgs.GetParameterTypesResponse{Types: []uint8{2, 3, 1, 4, 8, 0}},
			func() cdrMessage { return &msgs.GetParameterTypesResponse{} }),
		s("rcl_set_parameters_request", &msgs.SetParametersRequest{Parameters: params},
			func() cdrMessage { return &msgs.SetParametersRequest{} }),
		s("rcl_set_parameters_response", &msgs.SetParametersResponse{Results: []msgs.SetParametersResult{
			{Successful: true}, {Reason: "read-only"},
		}}, func() cdrMessage { return &msgs.SetParametersResponse{} }),
		s("rcl_set_parameters_atomically_request", &msgs.SetParametersAtomicallyRequest{Parameters: params[3:]},
			func() cdrMessage { return &msgs.SetParametersAtomicallyRequest{} }),
		s("rcl_set_parameters_atomically_response", &msgs.SetParametersAtomicallyResponse{
			Result: msgs.SetParametersResult{Successful: true},
		}, func() cdrMessage { return &msgs.SetParametersAtomicallyResponse{} }),
		s("rcl_describe_parameters_request", &msgs.DescribeParametersRequest{Names: []string{"steps", "shift"}},
			func() cdrMessage { return &msgs.DescribeParametersRequest{} }),
		s("rcl_describe_parameters_response", &msgs.DescribeParametersResponse{
			Descriptors: []msgs.ParameterDescriptor{descriptor, descriptorRO, descriptorF},
		}, func() cdrMessage { return &msgs.DescribeParametersResponse{} }),
		s("rosgraph_clock", &msgs.Clock{Clock: msgs.Time{Sec: 12, Nanosec: 500000000}}, func() cdrMessage { return &msgs.Clock{} }),
	}
}
