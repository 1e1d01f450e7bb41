package msgs_test

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// humbleGitBlobs pins the lifecycle_msgs, rcl_interfaces and rosgraph_msgs
// definitions to ros2/rcl_interfaces at the humble commit of deps/README.md:
// each value is the git blob id upstream's tree lists for the file, so a
// changed byte shows against an independent record.
var humbleGitBlobs = map[string]string{
	"deps/lifecycle_msgs/msg/State.msg":                   "463ebcceb459dcf5d72c7a7ab8fc045722e7c2bf",
	"deps/lifecycle_msgs/msg/Transition.msg":              "0cb47084395df45c12cd2a26d21ab416e2aa2772",
	"deps/lifecycle_msgs/msg/TransitionDescription.msg":   "b028173ba87b860401f223a9f0ed26fec659b4aa",
	"deps/lifecycle_msgs/msg/TransitionEvent.msg":         "48c84995163fb49e98ac88c4f8ed602569894c07",
	"deps/lifecycle_msgs/srv/ChangeState.srv":             "1bad3d1012bcd67269d05c893770be9b4dfa48d5",
	"deps/lifecycle_msgs/srv/GetAvailableStates.srv":      "2faa79b03d1f094781b03ced38e553fe984196e2",
	"deps/lifecycle_msgs/srv/GetAvailableTransitions.srv": "a7f4e506626903c8b90d1297415e51004ada8a17",
	"deps/lifecycle_msgs/srv/GetState.srv":                "b2569fa65ba13d3de35c482587332bd8fcb98458",
	"deps/rcl_interfaces/msg/FloatingPointRange.msg":      "a2ececaa3a5083e7ba773faee3e63e7aaaf7425e",
	"deps/rcl_interfaces/msg/IntegerRange.msg":            "b41aec12623925f61af40c1dd36ff6f6fd6a0d45",
	"deps/rcl_interfaces/msg/ListParametersResult.msg":    "85334f5160f85563cd4682e269fdecf15bdd32fe",
	"deps/rcl_interfaces/msg/Parameter.msg":               "51c09ba190334313f0cea333de61d1bad17b2ca2",
	"deps/rcl_interfaces/msg/ParameterDescriptor.msg":     "714400ab28ece0f69ba65b6900fb0f57d8bc4f7f",
	"deps/rcl_interfaces/msg/ParameterEvent.msg":          "ace2544bbf259a3899349a7fa3abfb913f959a02",
	"deps/rcl_interfaces/msg/ParameterType.msg":           "e3c4f26b9ab77440854ef767992392c72b2f315f",
	"deps/rcl_interfaces/msg/ParameterValue.msg":          "4fba1bd26b687514c4ee298c91fea269189651b4",
	"deps/rcl_interfaces/msg/SetParametersResult.msg":     "4c9e944b1f0206e82409fd5f0b2f6154fcb49ef3",
	"deps/rcl_interfaces/srv/DescribeParameters.srv":      "a8f0b9162c4bb92b0eb003ef9d8248394c53bec7",
	"deps/rcl_interfaces/srv/GetParameterTypes.srv":       "cdf0e78d8727c6304d0baab30fc3c8ee886046fe",
	"deps/rcl_interfaces/srv/GetParameters.srv":           "1822479bca1c947446fda9b4a158cfdb723b8e61",
	"deps/rcl_interfaces/srv/ListParameters.srv":          "ee1b7a6ffa6f40d27f59d369e24e4eccca9c378f",
	"deps/rcl_interfaces/srv/SetParameters.srv":           "97d11796b67e2c6deb0deafb12dbadc87546cd9e",
	"deps/rcl_interfaces/srv/SetParametersAtomically.srv": "2df928a4fddd5a2accd9363821ca1bf9abe9b956",
	"deps/rosgraph_msgs/msg/Clock.msg":                    "25af0e4de287a9c0950e5e964bfda5fbb1941de4",
}

func TestLifecycleAndParameterDefinitionsAreHumbles(t *testing.T) {
	for path, want := range humbleGitBlobs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("%s has git blob %s, want %s (the file of ros2/rcl_interfaces humble)", path, got, want)
		}
	}
}

// TestBoundedRangeSequence: a descriptor's ranges are bounded to one
// element; two are refused on both sides.
func TestBoundedRangeSequence(t *testing.T) {
	d := msgs.ParameterDescriptor{Name: "x", IntegerRange: make([]msgs.IntegerRange, 2)}
	if _, err := d.MarshalCDR(); !errors.Is(err, msgs.ErrMalformed) ||
		!strings.Contains(err.Error(), "ParameterDescriptor.integer_range: 2 elements in a sequence bounded to at most 1") {
		t.Fatalf("encoding two integer ranges: %v, want the bound named", err)
	}
	// Patch the golden descriptor (one integer range) to claim two and
	// append a second range's bytes.
	b := golden(t, "rcl_parameter_descriptor")
	var one msgs.ParameterDescriptor
	if err := one.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	at := len(b) - 24 - 4 // the length before the 24-byte range
	if binary.LittleEndian.Uint32(b[at:]) != 1 {
		t.Fatalf("layout assumption broken: % x", b)
	}
	two := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(two[at:], 2)
	two = append(two, b[len(b)-24:]...)
	err := new(msgs.ParameterDescriptor).UnmarshalCDR(two)
	if !errors.Is(err, msgs.ErrMalformed) || !strings.Contains(err.Error(), "ParameterDescriptor.integer_range: sequence of 2 IntegerRanges, bounded to at most 1") {
		t.Fatalf("decoding two integer ranges: %v", err)
	}
}

// TestHugeSequenceLengths: a declared length far beyond the bytes present
// is refused before anything is allocated for it.
func TestHugeSequenceLengths(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  interface{ UnmarshalCDR([]byte) error }
		want string
	}{
		{"set_parameters", &msgs.SetParametersRequest{}, "SetParameters_Request.parameters: sequence of 4294967295 Parameters"},
		{"get_parameters", &msgs.GetParametersRequest{}, "GetParameters_Request.names: sequence of 4294967295 strings"},
		{"available_states", &msgs.GetAvailableStatesResponse{}, "GetAvailableStates_Response.available_states: sequence of 4294967295 States"},
	} {
		err := tc.msg.UnmarshalCDR([]byte{0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff})
		if !errors.Is(err, msgs.ErrTruncated) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrTruncated naming %q", tc.name, err, tc.want)
		}
	}
	// Inside a parameter: its string array claims 2^32-1 strings.
	p := msgs.Parameter{Name: "a"}
	b, err := p.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], 0xffffffff)
	err = new(msgs.Parameter).UnmarshalCDR(b)
	if !errors.Is(err, msgs.ErrTruncated) || !strings.Contains(err.Error(), "Parameter.value.string_array_value: sequence of 4294967295 strings") {
		t.Fatalf("string array: %v", err)
	}
}

// TestTopicDefinitions: the topics' types (~/transition_event,
// /parameter_events, /clock) have full definitions for a bag's schema.
func TestTopicDefinitions(t *testing.T) {
	for typ, dep := range map[string]string{
		msgs.TypeTransitionEvent: "\nMSG: lifecycle_msgs/State\n",
		msgs.TypeParameterEvent:  "\nMSG: rcl_interfaces/ParameterValue\n",
		msgs.TypeClock:           "\nMSG: builtin_interfaces/Time\n",
	} {
		def, err := msgs.Definition(typ)
		if err != nil || !strings.Contains(def, dep) {
			t.Errorf("Definition(%s) = %q, %v; want it to contain %q", typ, def, err, dep)
		}
	}
}

// TestFastDDSSerializedLength: Fast DDS's rmw_serialize (Humble) reports
// its size estimate as the message's length, which counts alignment for
// every empty int64 or float64 sequence, so a request taken through it
// ends in up to 7 bytes per such sequence that were never written (zeros
// or whatever the buffer held). These are the bytes rclpy's
// serialize_message wrote on Fast DDS and on Cyclone DDS for two
// SetParameters requests; both decode, and a longer tail does not.
func TestFastDDSSerializedLength(t *testing.T) {
	for _, c := range []struct {
		name, hex string
		want      msgs.ParameterValue
	}{
		{"steps 4 on Fast DDS", "000100000100000006000000737465707300020004000000000000000000000000000000" +
			"01000000000000000000000000000000000000000000000000000000000000000000000000000000",
			msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 4}},
		{"steps 4 on Cyclone", "000100000100000006000000737465707300020004000000000000000000000000000000" +
			"0100000000000000000000000000000000000000000000000000000000000000",
			msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 4}},
		{"[1.5] on Fast DDS", "0001000001000000060000007374657073000800000000000000000000000000000000000100000000046a59" +
			"00000000000000000000000001000000000000000000f83f00000000b07a6459637f0000",
			msgs.ParameterValue{Type: msgs.ParameterDoubleArray, DoubleArrayValue: []float64{1.5}}},
		{"[1.5] on Cyclone", "000100000100000006000000737465707300080000000000000000000000000000000000" +
			"010000000000000000000000000000000000000001000000000000000000f83f00000000",
			msgs.ParameterValue{Type: msgs.ParameterDoubleArray, DoubleArrayValue: []float64{1.5}}},
	} {
		b, err := hex.DecodeString(c.hex)
		if err != nil {
			t.Fatal(err)
		}
		var got msgs.SetParametersRequest
		if err := got.UnmarshalCDR(b); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v := got.Parameters[0].Value
		if len(got.Parameters) != 1 || got.Parameters[0].Name != "steps" || v.Type != c.want.Type || v.IntegerValue != c.want.IntegerValue ||
			len(v.DoubleArrayValue) != len(c.want.DoubleArrayValue) || (len(v.DoubleArrayValue) == 1 && v.DoubleArrayValue[0] != 1.5) {
			t.Fatalf("%s: decoded %+v, want %+v", c.name, got, c.want)
		}
		if err := got.UnmarshalCDR(append(b, make([]byte, 16)...)); err == nil {
			t.Fatalf("%s: 16 more trailing bytes accepted", c.name)
		}
	}
}
