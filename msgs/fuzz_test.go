package msgs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// fuzzDecode checks, for any input, that decoding either fails with a
// *msgs.Error of a known kind or yields a message that encodes, decodes
// again and re-encodes to the same bytes. Seeds are the golden files named.
func fuzzDecode[T any, PT interface {
	*T
	cdrMessage
}](f *testing.F, seeds ...string) {
	for _, name := range seeds {
		b, err := os.ReadFile(filepath.Join("testdata", name+".cdr"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := PT(new(T))
		err := m.UnmarshalCDR(data)
		if err != nil {
			var e *msgs.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not a *msgs.Error", err, err)
			}
			if !errors.Is(err, msgs.ErrTruncated) && !errors.Is(err, msgs.ErrEncapsulation) &&
				!errors.Is(err, msgs.ErrTensorShape) && !errors.Is(err, msgs.ErrMalformed) {
				t.Fatalf("error %v has an unknown kind", err)
			}
			return
		}
		enc, err := m.MarshalCDR()
		if err != nil {
			t.Fatalf("a decoded message does not encode: %v", err)
		}
		m2 := PT(new(T))
		if err := m2.UnmarshalCDR(enc); err != nil {
			t.Fatalf("re-encoded message does not decode: %v\n% x", err, enc)
		}
		enc2, err := m2.MarshalCDR()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %v\n% x\n% x", err, enc, enc2)
		}
	})
}

func FuzzDecodeVideoKVCache(f *testing.F) {
	fuzzDecode[msgs.VideoKVCache](f, "video_kv_cache")
}

func FuzzDecodeTextContext(f *testing.F) {
	fuzzDecode[msgs.TextContext](f, "text_context")
}

func FuzzDecodeActionChunk(f *testing.F) {
	fuzzDecode[msgs.ActionChunk](f, "action_chunk", "action_chunk_empty")
}

func FuzzDecodeStampedAction(f *testing.F) {
	fuzzDecode[msgs.StampedAction](f, "stamped_action", "stamped_action_empty")
}

func FuzzDecodeDiagnosticArray(f *testing.F) {
	fuzzDecode[msgs.DiagnosticArray](f, "diagnostic_array", "diagnostic_array_empty")
}

func FuzzDecodeTensor(f *testing.F) {
	fuzzDecode[msgs.Tensor](f, "tensor_f32", "tensor_f16", "tensor_empty")
}

// --- lifecycle_msgs and rcl_interfaces (the service requests the node decodes)

func FuzzDecodeChangeStateRequest(f *testing.F) {
	fuzzDecode[msgs.ChangeStateRequest](f, "lc_change_state_request")
}

func FuzzDecodeListParametersRequest(f *testing.F) {
	fuzzDecode[msgs.ListParametersRequest](f, "rcl_list_parameters_request")
}

func FuzzDecodeSetParametersRequest(f *testing.F) {
	fuzzDecode[msgs.SetParametersRequest](f, "rcl_set_parameters_request")
}

func FuzzDecodeParameterDescriptor(f *testing.F) {
	fuzzDecode[msgs.DescribeParametersResponse](f, "rcl_describe_parameters_response")
}

func FuzzDecodeParameterEvent(f *testing.F) {
	fuzzDecode[msgs.ParameterEvent](f, "rcl_parameter_event")
}

func FuzzDecodeKVHandoff(f *testing.F) {
	fuzzDecode[msgs.KVHandoff](f, "kv_handoff")
}

func FuzzDecodeImage(f *testing.F) {
	fuzzDecode[msgs.Image](f, "image_rgb8", "image_empty")
}

func FuzzDecodeCompressedImage(f *testing.F) {
	fuzzDecode[msgs.CompressedImage](f, "compressed_image", "compressed_image_empty")
}

func FuzzDecodeJointState(f *testing.F) {
	fuzzDecode[msgs.JointState](f, "joint_state", "joint_state_empty")
}

func FuzzDecodeString(f *testing.F) {
	fuzzDecode[msgs.String](f, "string", "string_empty")
}
