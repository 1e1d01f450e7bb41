package bag_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/msgs"
)

// The JSON that msgs/testdata/xcheck/xcheck.mjs prints for a bag: what
// @mcap/core reads from each file and what @foxglove/rosmsg2-serialization
// decodes with the definition stored in the bag.
type xFile struct {
	Name     string `json:"name"`
	Profile  string `json:"profile"`
	Metadata []struct {
		Name     string            `json:"name"`
		Metadata map[string]string `json:"metadata"`
	} `json:"metadata"`
	Channels []struct {
		Topic           string            `json:"topic"`
		MessageEncoding string            `json:"messageEncoding"`
		Metadata        map[string]string `json:"metadata"`
		SchemaName      string            `json:"schemaName"`
		SchemaEncoding  string            `json:"schemaEncoding"`
		Schema          string            `json:"schema"`
	} `json:"channels"`
	Messages []struct {
		Topic       string          `json:"topic"`
		LogTime     string          `json:"logTime"`
		PublishTime string          `json:"publishTime"`
		Value       json.RawMessage `json:"value"`
	} `json:"messages"`
}

// JSON forms of the messages: field names as in the .msg files, uint64 as
// decimal strings, uint8[] as base64, other arrays as JSON arrays.
type (
	xTime struct {
		Sec     int32  `json:"sec"`
		Nanosec uint32 `json:"nanosec"`
	}
	xHeader struct {
		Stamp   xTime  `json:"stamp"`
		FrameID string `json:"frame_id"`
	}
	xTensor struct {
		Shape []uint32 `json:"shape"`
		DType uint8    `json:"dtype"`
		Data  []byte   `json:"data"`
	}
	xVideoKVCache struct {
		Header             xHeader `json:"header"`
		Seq                uint64  `json:"seq,string"`
		VisibleVideoTokens uint32  `json:"visible_video_tokens"`
		Keys               xTensor `json:"keys"`
		Values             xTensor `json:"values"`
	}
	xTextContext struct {
		Header        xHeader `json:"header"`
		Seq           uint64  `json:"seq,string"`
		Instruction   string  `json:"instruction"`
		Context       xTensor `json:"context"`
		AttentionMask []bool  `json:"attention_mask"`
	}
	xActionChunk struct {
		Header             xHeader   `json:"header"`
		Seq                uint64    `json:"seq,string"`
		KVSeq              uint64    `json:"kv_seq,string"`
		ContextSeq         uint64    `json:"context_seq,string"`
		Actions            []xFloats `json:"actions"`
		Steps              uint32    `json:"steps"`
		Shift              float64   `json:"shift"`
		NoiseSeed          uint64    `json:"noise_seed,string"`
		Backend            string    `json:"backend"`
		DenoiseMs          float64   `json:"denoise_ms"`
		ReceiveToPublishMs float64   `json:"receive_to_publish_ms"`
		InputAgeMs         float64   `json:"input_age_ms"`
		DryRun             bool      `json:"dry_run"`
		Clipped            bool      `json:"clipped"`
		StaleInput         bool      `json:"stale_input"`
	}
	xFloats struct {
		Values []float64 `json:"values"`
	}
	xKeyValue struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	xStatus struct {
		Level      uint8       `json:"level"`
		Name       string      `json:"name"`
		Message    string      `json:"message"`
		HardwareID string      `json:"hardware_id"`
		Values     []xKeyValue `json:"values"`
	}
	xDiagnosticArray struct {
		Header xHeader   `json:"header"`
		Status []xStatus `json:"status"`
	}
)

func toXHeader(h msgs.Header) xHeader {
	return xHeader{Stamp: xTime{h.Stamp.Sec, h.Stamp.Nanosec}, FrameID: h.FrameID}
}

func toXTensor(t msgs.Tensor) xTensor { return xTensor{Shape: t.Shape, DType: t.DType, Data: t.Data} }

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// expected converts a message the test wrote to its JSON form, the
// reference the independent decoding must match.
func expected(t *testing.T, msg any) any {
	t.Helper()
	switch m := msg.(type) {
	case *msgs.VideoKVCache:
		return &xVideoKVCache{toXHeader(m.Header), m.Seq, m.VisibleVideoTokens, toXTensor(m.Keys), toXTensor(m.Values)}
	case *msgs.TextContext:
		return &xTextContext{toXHeader(m.Header), m.Seq, m.Instruction, toXTensor(m.Context), m.AttentionMask}
	case *msgs.ActionChunk:
		x := &xActionChunk{Header: toXHeader(m.Header), Seq: m.Seq, KVSeq: m.KVSeq, ContextSeq: m.ContextSeq,
			Steps: m.Steps, Shift: float64(m.Shift), NoiseSeed: m.NoiseSeed, Backend: m.Backend,
			DenoiseMs: float64(m.DenoiseMs), ReceiveToPublishMs: float64(m.ReceiveToPublishMs),
			InputAgeMs: float64(m.InputAgeMs), DryRun: m.DryRun, Clipped: m.Clipped, StaleInput: m.StaleInput}
		for _, r := range m.Actions {
			x.Actions = append(x.Actions, xFloats{f64s(r.Values)})
		}
		return x
	case *msgs.DiagnosticArray:
		x := &xDiagnosticArray{Header: toXHeader(m.Header), Status: []xStatus{}}
		for _, s := range m.Status {
			xs := xStatus{s.Level, s.Name, s.Message, s.HardwareID, []xKeyValue{}}
			for _, kv := range s.Values {
				xs.Values = append(xs.Values, xKeyValue(kv))
			}
			x.Status = append(x.Status, xs)
		}
		return x
	}
	t.Fatalf("no JSON form for %T", msg)
	return nil
}

// TestIndependentReaderReadsOurBags writes a bag and has @mcap/core and
// @foxglove/rosmsg2-serialization read it back: same files, profile,
// schemas, channel metadata, messages and decoded values.
func TestIndependentReaderReadsOurBags(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "msgs", "testdata", "xcheck", "xcheck.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node is not installed; the independent bag reader needs node 20+")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "@mcap", "core")); err != nil {
		testenv.Missing(t, "cross-check packages not installed; run `npm ci` in %s", filepath.Dir(script))
	}
	dir := filepath.Join(t.TempDir(), "xcheck")
	// Small chunks so that several chunks, and messages written out of
	// order across chunks, are read. Node has no zstd/lz4 here: uncompressed.
	want := writeBag(t, dir, bag.WriterOptions{ChunkSize: 400}, 6)

	out, err := exec.Command("node", script, "readbag", dir).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("node xcheck.mjs readbag: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var got struct{ Files []xFile }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("parse the cross-check's JSON: %v", err)
	}
	if len(got.Files) != 1 || got.Files[0].Name != "xcheck_0.mcap" {
		t.Fatalf("files %+v", got.Files)
	}
	f := got.Files[0]
	if f.Profile != "ros2" {
		t.Errorf("profile %q, want ros2", f.Profile)
	}
	if len(f.Metadata) != 1 || f.Metadata[0].Name != "rosbag2" || f.Metadata[0].Metadata["ROS_DISTRO"] != "humble" {
		t.Errorf("metadata records %+v", f.Metadata)
	}
	types := map[string]string{topicKV: msgs.TypeVideoKVCache, topicText: msgs.TypeTextContext,
		topicActions: msgs.TypeActionChunk, topicDiag: msgs.TypeDiagnosticArray}
	if len(f.Channels) != len(types) {
		t.Fatalf("%d channels, want %d", len(f.Channels), len(types))
	}
	for _, ch := range f.Channels {
		def, err := msgs.Definition(types[ch.Topic])
		if err != nil {
			t.Fatal(err)
		}
		qos := bag.DefaultQoS()
		if ch.Topic == topicActions {
			qos = bag.LatchedQoS()
		}
		if ch.SchemaName != types[ch.Topic] || ch.SchemaEncoding != "ros2msg" || ch.MessageEncoding != "cdr" ||
			ch.Schema != def || ch.Metadata["offered_qos_profiles"] != bag.EncodeQoSProfiles([]bag.QoS{qos}) {
			t.Errorf("channel %s: schema %s (%s), messages %s, metadata %v", ch.Topic, ch.SchemaName,
				ch.SchemaEncoding, ch.MessageEncoding, ch.Metadata)
		}
	}
	if len(f.Messages) != len(want) {
		t.Fatalf("independent reader read %d messages, want %d", len(f.Messages), len(want))
	}
	for i, m := range f.Messages {
		w := want[i]
		ns := strconv.FormatInt(w.at.UnixNano(), 10)
		if m.Topic != w.topic || m.LogTime != ns || m.PublishTime != ns {
			t.Fatalf("message %d: %s at %s/%s, want %s at %s", i, m.Topic, m.LogTime, m.PublishTime, w.topic, ns)
		}
		ref := expected(t, w.msg)
		dec := reflect.New(reflect.TypeOf(ref).Elem()).Interface()
		if err := json.Unmarshal(m.Value, dec); err != nil {
			t.Fatalf("message %d (%s): %v\n%s", i, w.topic, err, m.Value)
		}
		if !reflect.DeepEqual(dec, ref) {
			t.Fatalf("message %d (%s) decoded independently as\n%+v\nwe wrote\n%+v", i, w.topic, dec, ref)
		}
	}
}
