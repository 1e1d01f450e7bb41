package wmnode

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// TestParamsYAMLRoundTrip: the params file --print-params writes reads
// back to the same parameters, the string arrays included.
func TestParamsYAMLRoundTrip(t *testing.T) {
	p := tinyParams()
	p.ProprioType, p.JointNames = ProprioJointState, []string{"a", "b \"quoted\"", "c"}
	p.Topics.Cameras = []string{"/left", "/right"}
	p.ImageTransports = []string{ImageCompressed, ImageRaw}
	p.Rate, p.KVTransport, p.KVDType = 2.5, params.KVTransportSHM, DTypeFloat16
	p.QoS.Cameras.Depth = 7
	yaml := p.ParamsYAML("/**")
	got := DefaultParams()
	if err := got.ApplyParamsYAML(yaml, DefaultNodeName); err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip:\n got %+v\nwant %+v\n%s", got, p, yaml)
	}
}

// TestLoadParamsRefusals: unknown, mistyped, out-of-range parameters and
// inconsistent sets are refused by name.
func TestLoadParamsRefusals(t *testing.T) {
	base := []string{"--ros-args", "-p", "model.dit_weights:=d", "-p", "model.vae_weights:=v", "-p", "model.dataset_stats:=s", "-p", "model.text_cache:=c"}
	if _, err := LoadParams(base, DefaultNodeName); err != nil {
		t.Fatalf("minimal parameters: %v", err)
	}
	for _, c := range []struct {
		rule, want string
	}{
		{"model.dit_weight:=x", "model.dit_weights"}, // closest name suggested
		{"rate:=-1", "rate"},
		{"rate:=fast", "rate"},
		{"image_transports:=[theora]", "image_transports"},
		{"image_transports:=[raw, raw, raw]", "image_transports"},
		{"proprio.type:=joint_state", "proprio.joint_names"},
		{"topics.cameras:=[a, b, c]", "topics.cameras"},
		{"topics.cameras:=[a, 3]", "topics.cameras"},
		{"topics.cameras:=[]", "topics.cameras"},
		{"topics.proprio:=/instruction", "instruction"},
		{"sync.tolerance:=-0.1", "sync.tolerance"},
		{"shm.slots:=1", "shm.slots"},
		{"kv_dtype:=bf16", "kv_dtype"},
		{"qos.cameras.depth:=0", "qos.cameras.depth"},
	} {
		_, err := LoadParams(append(append([]string(nil), base...), "-p", c.rule), DefaultNodeName)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error naming %s", c.rule, err, c.want)
		}
	}
	if _, err := LoadParams([]string{"--ros-args"}, DefaultNodeName); err == nil || !strings.Contains(err.Error(), "model.dit_weights") {
		t.Errorf("no model files: %v", err)
	}
}

// TestCompressedAndJointState: JPEG frames and a JointState proprio by
// joint name make a cycle; the JointState's header stamp is the state's.
func TestCompressedAndJointState(t *testing.T) {
	p := tinyParams()
	p.ImageTransports, p.ProprioType = []string{ImageCompressed}, ProprioJointState
	p.JointNames = []string{"x", "y", "z", "rx", "ry", "rz", "f1", "f2"}
	r := newRig(t, p, tinyModel(t, p), false)
	stamp := time.Unix(1_000_000, 5000)
	r.send(p.Topics.Instruction, &msgs.String{Data: tinyTask})
	js := msgs.JointState{Header: stampOf(stamp.Add(-10 * time.Millisecond)), Name: append([]string{"other"}, p.JointNames...), Position: append([]float64{99}, testState...)}
	r.send(p.Topics.Proprio, &js)
	for i, c := range p.Topics.Cameras {
		m, err := camera.EncodeCompressed(testImage(80, 60, i), camera.JPEG, 90)
		if err != nil {
			t.Fatal(err)
		}
		m.Header = stampOf(stamp)
		r.send(c, &m)
	}
	var kv msgs.VideoKVCache
	if err := kv.UnmarshalCDR(r.cap.wait(t, p.Topics.KVCache)); err != nil {
		t.Fatal(err)
	}
	if !stampTime(kv.Header.Stamp).Equal(stamp) {
		t.Errorf("stamp %v, want %v", stampTime(kv.Header.Stamp), stamp)
	}
	// A JointState without one of the joints, and a corrupt JPEG, are refused.
	js.Name[3] = "renamed"
	r.send(p.Topics.Proprio, &js)
	r.send(p.Topics.Cameras[0], &msgs.CompressedImage{Header: stampOf(stamp.Add(time.Second)), Format: "jpeg", Data: []byte{0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F'}})
	s := r.diag()
	if value(s, "refused.state") != "1" || value(s, "refused.image.corrupt") != "1" {
		t.Errorf("refused.state %s, refused.image.corrupt %s; want 1 and 1 (%s)", value(s, "refused.state"), value(s, "refused.image.corrupt"), value(s, "last_refusal"))
	}
}
