package msgs_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/msgs"
)

// cdrMessage is what every message type of package msgs implements.
type cdrMessage interface {
	MarshalCDR() ([]byte, error)
	AppendCDR(dst []byte) ([]byte, error)
	UnmarshalCDR(data []byte) error
}

// sample is one golden message: testdata/<name>.cdr holds its encoding as
// written by @foxglove/rosmsg2-serialization (testdata/xcheck/xcheck.mjs,
// which defines the same values independently).
type sample struct {
	name  string
	msg   cdrMessage
	fresh func() cdrMessage // a zero value of the same type to decode into
}

func f32Bytes(values ...float32) []byte {
	b := make([]byte, 0, 4*len(values))
	for _, v := range values {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func u16Bytes(values ...uint16) []byte {
	b := make([]byte, 0, 2*len(values))
	for _, v := range values {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

func seqF32(n int, f func(i int) float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func statusWarn() msgs.DiagnosticStatus {
	return msgs.DiagnosticStatus{
		Level:      msgs.LevelWarn,
		Name:       "fastwam_action_expert: pipeline",
		Message:    "stale input",
		HardwareID: "htp0",
		Values:     []msgs.KeyValue{{Key: "chunks_out", Value: "12"}, {Key: "dropped", Value: ""}},
	}
}

func samples() []sample {
	kvValues := make([]uint16, 24)
	for i := range kvValues {
		kvValues[i] = uint16(0x3c00 + 17*i)
	}
	actions := make([]msgs.ActionRow, 2)
	for r := range actions {
		actions[r].Values = seqF32(7, func(c int) float32 { return float32(r)*0.5 + float32(c)*0.0625 - 1 })
	}
	return append([]sample{
		{"time", &msgs.Time{Sec: -1234567, Nanosec: 999999999}, func() cdrMessage { return &msgs.Time{} }},
		{"header", &msgs.Header{Stamp: msgs.Time{Sec: 1700000000, Nanosec: 123456789}, FrameID: "camera_link"},
			func() cdrMessage { return &msgs.Header{} }},
		{"header_empty", &msgs.Header{}, func() cdrMessage { return &msgs.Header{} }},
		{"tensor_f32", &msgs.Tensor{Shape: []uint32{2, 3}, DType: msgs.DTypeFloat32,
			Data: f32Bytes(1.5, -2.25, 0, math.Float32frombits(0x80000000), math.MaxFloat32, math.SmallestNonzeroFloat32)},
			func() cdrMessage { return &msgs.Tensor{} }},
		{"tensor_f16", &msgs.Tensor{Shape: []uint32{3}, DType: msgs.DTypeFloat16, Data: u16Bytes(0x3c00, 0xc000, 0x7bff)},
			func() cdrMessage { return &msgs.Tensor{} }},
		{"tensor_empty", &msgs.Tensor{}, func() cdrMessage { return &msgs.Tensor{} }},
		{"video_kv_cache", &msgs.VideoKVCache{
			Header:             msgs.Header{Stamp: msgs.Time{Sec: 100, Nanosec: 200}, FrameID: "world_model"},
			Seq:                1<<40 + 7,
			VisibleVideoTokens: 3,
			Keys: msgs.Tensor{Shape: []uint32{2, 1, 3, 4}, DType: msgs.DTypeFloat32,
				Data: f32Bytes(seqF32(24, func(i int) float32 { return float32(i-12) * 0.25 })...)},
			Values: msgs.Tensor{Shape: []uint32{2, 1, 3, 4}, DType: msgs.DTypeFloat16, Data: u16Bytes(kvValues...)},
		}, func() cdrMessage { return &msgs.VideoKVCache{} }},
		{"kv_handoff", &msgs.KVHandoff{
			Header:             msgs.Header{Stamp: msgs.Time{Sec: 1700000003, Nanosec: 77}, FrameID: "world_model"},
			Seq:                1<<33 + 9,
			VisibleVideoTokens: 2,
			Segment:            "fastwam-kv.1234",
			Slot:               3,
			Generation:         0x100000002,
			Keys:               msgs.SharedTensor{Shape: []uint32{2, 1, 3, 4}, DType: msgs.DTypeFloat32, Offset: 0, Length: 96},
			Values:             msgs.SharedTensor{Shape: []uint32{2, 1, 3, 4}, DType: msgs.DTypeFloat16, Offset: 128, Length: 48},
		}, func() cdrMessage { return &msgs.KVHandoff{} }},
		{"text_context", &msgs.TextContext{
			Header:      msgs.Header{Stamp: msgs.Time{Sec: 1700000001, Nanosec: 5}, FrameID: "text"},
			Seq:         42,
			Instruction: "put the bowl on the plate",
			Context: msgs.Tensor{Shape: []uint32{1, 3, 5}, DType: msgs.DTypeFloat32,
				Data: f32Bytes(seqF32(15, func(i int) float32 { return float32(i)*0.125 - 1 })...)},
			AttentionMask: []bool{true, true, false},
		}, func() cdrMessage { return &msgs.TextContext{} }},
		{"action_row", &msgs.ActionRow{Values: []float32{0.5, -0.25, 0.125}}, func() cdrMessage { return &msgs.ActionRow{} }},
		{"action_row_empty", &msgs.ActionRow{}, func() cdrMessage { return &msgs.ActionRow{} }},
		{"action_chunk", &msgs.ActionChunk{
			Header:             msgs.Header{Stamp: msgs.Time{Sec: 1700000002, Nanosec: 999}, FrameID: "base_link"},
			Seq:                7,
			KVSeq:              6,
			ContextSeq:         5,
			Actions:            actions,
			Steps:              10,
			Shift:              5,
			NoiseSeed:          0xfeedfacecafebeef,
			Backend:            "cpu",
			DenoiseMs:          12.5,
			ReceiveToPublishMs: 20.25,
			InputAgeMs:         3.125,
			DryRun:             true,
			Clipped:            false,
			StaleInput:         true,
			Dt:                 0.05,
			InferenceDelay:     9,
			RTCMode:            "guided",
			RTCPrevSeq:         6,
			RTCShift:           8,
			RTCDelay:           9,
			RTCHorizon:         24,
			RTCSchedule:        "exp",
			RTCMaxGuidance:     5,
		}, func() cdrMessage { return &msgs.ActionChunk{} }},
		{"action_chunk_empty", &msgs.ActionChunk{}, func() cdrMessage { return &msgs.ActionChunk{} }},
		{"stamped_action", &msgs.StampedAction{
			Header:     msgs.Header{Stamp: msgs.Time{Sec: 1700000004, Nanosec: 50000000}, FrameID: "base_link"},
			Values:     []float32{0.5, -0.25, 0.125, 0, -1.5, 2, 0.0625},
			ChunkSeq:   1<<33 + 3,
			Row:        12,
			Aggregated: 2,
			Held:       true,
		}, func() cdrMessage { return &msgs.StampedAction{} }},
		{"stamped_action_empty", &msgs.StampedAction{}, func() cdrMessage { return &msgs.StampedAction{} }},
		{"joint_trajectory", &msgs.JointTrajectory{
			Header:     msgs.Header{Stamp: msgs.Time{Sec: 1700000005, Nanosec: 250000000}, FrameID: "base_link"},
			JointNames: []string{"joint1", "joint2", "gripper"},
			Points: []msgs.JointTrajectoryPoint{
				{Positions: []float64{0.5, -0.25, 1}},
				{Positions: []float64{0.625, -0.125, -1}, Velocities: []float64{0.1}, Effort: []float64{2.5}, TimeFromStart: msgs.Duration{Nanosec: 50000000}},
				{TimeFromStart: msgs.Duration{Sec: 1, Nanosec: 600000000}},
			},
		}, func() cdrMessage { return &msgs.JointTrajectory{} }},
		{"joint_trajectory_empty", &msgs.JointTrajectory{}, func() cdrMessage { return &msgs.JointTrajectory{} }},
		{"float64_multi_array", &msgs.Float64MultiArray{
			Layout: msgs.MultiArrayLayout{Dim: []msgs.MultiArrayDimension{{Label: "action", Size: 7, Stride: 7}}},
			Data:   []float64{0.5, -0.25, 0.125, 0, -1.5, 2, 0.0625},
		}, func() cdrMessage { return &msgs.Float64MultiArray{} }},
		{"float64_multi_array_empty", &msgs.Float64MultiArray{}, func() cdrMessage { return &msgs.Float64MultiArray{} }},
		{"twist_stamped", &msgs.TwistStamped{
			Header: msgs.Header{Stamp: msgs.Time{Sec: 1700000006, Nanosec: 1}, FrameID: "tool0"},
			Twist:  msgs.Twist{Linear: msgs.Vector3{X: 0.5, Y: -0.25, Z: 0.125}, Angular: msgs.Vector3{Y: -1.5, Z: 2}},
		}, func() cdrMessage { return &msgs.TwistStamped{} }},
		{"float64", &msgs.Float64{Data: -0.75}, func() cdrMessage { return &msgs.Float64{} }},
		{"bool_true", &msgs.Bool{Data: true}, func() cdrMessage { return &msgs.Bool{} }},
		{"key_value", &msgs.KeyValue{Key: "fps", Value: "30.0"}, func() cdrMessage { return &msgs.KeyValue{} }},
		{"diagnostic_status", ptr(statusWarn()), func() cdrMessage { return &msgs.DiagnosticStatus{} }},
		{"diagnostic_array", &msgs.DiagnosticArray{
			Header: msgs.Header{Stamp: msgs.Time{Sec: 1700000003}},
			Status: []msgs.DiagnosticStatus{statusWarn(), {Level: msgs.LevelOK, Name: "backend", Message: "ok"}},
		}, func() cdrMessage { return &msgs.DiagnosticArray{} }},
		{"diagnostic_array_empty", &msgs.DiagnosticArray{}, func() cdrMessage { return &msgs.DiagnosticArray{} }},
		{"image_rgb8", &msgs.Image{
			Header: msgs.Header{Stamp: msgs.Time{Sec: 1700000007, Nanosec: 33000000}, FrameID: "agentview_optical"},
			Height: 2, Width: 3, Encoding: "rgb8", Step: 10,
			Data: func() []byte {
				b := make([]byte, 20)
				for i := range b {
					b[i] = byte((i*37 + 5) % 256)
				}
				return b
			}(),
		}, func() cdrMessage { return &msgs.Image{} }},
		{"image_empty", &msgs.Image{}, func() cdrMessage { return &msgs.Image{} }},
		{"compressed_image", &msgs.CompressedImage{
			Header: msgs.Header{Stamp: msgs.Time{Sec: 1700000008, Nanosec: 1}, FrameID: "wrist"},
			Format: "rgb8; jpeg compressed bgr8",
			Data:   []byte{0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a},
		}, func() cdrMessage { return &msgs.CompressedImage{} }},
		{"compressed_image_empty", &msgs.CompressedImage{}, func() cdrMessage { return &msgs.CompressedImage{} }},
		{"joint_state", &msgs.JointState{
			Header:   msgs.Header{Stamp: msgs.Time{Sec: 1700000009, Nanosec: 500}},
			Name:     []string{"joint1", "joint2", "gripper_left"},
			Position: []float64{0.5, -1.25, 0.04},
			Effort:   []float64{0.25, -3.5, 1},
		}, func() cdrMessage { return &msgs.JointState{} }},
		{"joint_state_empty", &msgs.JointState{}, func() cdrMessage { return &msgs.JointState{} }},
		{"string", &msgs.String{Data: "put the bowl on the plate"}, func() cdrMessage { return &msgs.String{} }},
		{"string_empty", &msgs.String{}, func() cdrMessage { return &msgs.String{} }},
	}, lifecycleAndParameterSamples()...)
}

func ptr[T any](v T) *T { return &v }

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".cdr"))
	if err != nil {
		t.Fatalf("golden %s: %v (regenerate with: cd msgs/testdata/xcheck && npm ci && node xcheck.mjs golden ..)", name, err)
	}
	return b
}

// TestGoldenEncoding checks MarshalCDR and AppendCDR byte for byte against
// the bytes @foxglove/rosmsg2-serialization wrote for the same values.
func TestGoldenEncoding(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			want := golden(t, s.name)
			got, err := s.msg.MarshalCDR()
			if err != nil {
				t.Fatalf("MarshalCDR: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("MarshalCDR differs from the reference encoding\n got % x\nwant % x", got, want)
			}
			// Alignment is relative to the encapsulation header, not to
			// the start of dst: an odd-length prefix must change nothing.
			prefix := []byte{0xaa, 0xbb, 0xcc}
			got, err = s.msg.AppendCDR(slices.Clone(prefix))
			if err != nil {
				t.Fatalf("AppendCDR: %v", err)
			}
			if !bytes.Equal(got[:3], prefix) || !bytes.Equal(got[3:], want) {
				t.Fatalf("AppendCDR after a 3-byte prefix\n got % x\nwant % x % x", got, prefix, want)
			}
		})
	}
}

// TestGoldenDecoding decodes the reference bytes and compares the values.
func TestGoldenDecoding(t *testing.T) {
	for _, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			got := s.fresh()
			if err := got.UnmarshalCDR(golden(t, s.name)); err != nil {
				t.Fatalf("UnmarshalCDR: %v", err)
			}
			if !reflect.DeepEqual(got, s.msg) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", got, s.msg)
			}
		})
	}
}

// TestGoldenFilesMatchSamples keeps the fixture and testdata in step: every
// sample has a golden file and every golden file a sample.
func TestGoldenFilesMatchSamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.cdr"))
	if err != nil {
		t.Fatal(err)
	}
	var names, want []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".cdr"))
	}
	for _, s := range samples() {
		want = append(want, s.name)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("golden files %v, samples %v", names, want)
	}
}

// xcheckDir returns the cross-check tool's folder, skipping the test when
// node or its installed packages are missing.
func xcheckDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "xcheck"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node is not installed; the independent cross-check needs node 20+")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@foxglove", "rosmsg2-serialization")); err != nil {
		testenv.Missing(t, "cross-check packages not installed; run `npm ci` in %s", dir)
	}
	return dir
}

// TestGoldenFilesUpToDate regenerates the golden files with the independent
// implementation and checks that the committed ones are what it writes.
func TestGoldenFilesUpToDate(t *testing.T) {
	dir := xcheckDir(t)
	out := t.TempDir()
	cmd := exec.Command("node", filepath.Join(dir, "xcheck.mjs"), "golden", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node xcheck.mjs golden: %v\n%s", err, b)
	}
	for _, s := range samples() {
		fresh, err := os.ReadFile(filepath.Join(out, s.name+".cdr"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh, golden(t, s.name)) {
			t.Errorf("testdata/%s.cdr is stale: the reference now writes % x", s.name, fresh)
		}
	}
}
