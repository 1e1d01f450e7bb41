package camera_test

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
)

var t0 = time.Unix(1700000000, 0)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestBagPairing writes a bag whose second cycle has a late wrist frame
// and checks the pairing policy: observations only from frames within the
// tolerance, each frame used at most once, the skipped ones counted.
func TestBagPairing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	state := func(k int) []float64 { return []float64{float64(k), 1, 2, 3, 4, 5, 6, 7} }
	frames := []camera.Frame{
		{Stamp: t0, Instruction: "pick up the bowl", State: state(0),
			Cameras: []camera.CameraFrame{{Image: pattern(8, 8, 0)}, {Image: pattern(4, 4, 0), Codec: camera.PNG}}},
		{Stamp: t0.Add(ms(100)), State: state(1),
			Cameras: []camera.CameraFrame{{Image: pattern(8, 8, 1)}, {Image: pattern(4, 4, 1), Codec: camera.PNG, Stamp: t0.Add(ms(130))}}},
		{Stamp: t0.Add(ms(200)), State: state(2), Instruction: "open the drawer",
			Cameras: []camera.CameraFrame{{Image: pattern(8, 8, 2), Encoding: "bgra8", StepPadding: 3}, {Image: pattern(4, 4, 2), Codec: camera.JPEG}}},
	}
	if err := camera.WriteBag(dir, frames, camera.BagOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	br, err := camera.OpenBag(ctx, dir, camera.ReadOptions{Tolerance: ms(20)})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var got []camera.Observation
	for o, err := range br.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		c := *o
		c.Images = append(c.Images[:0:0], o.Images...)
		for i := range c.Images {
			c.Images[i].Pix = bytes.Clone(o.Images[i].Pix)
		}
		c.State = append([]float32(nil), o.State...)
		got = append(got, c)
	}
	if len(got) != 2 {
		t.Fatalf("%d observations, want 2 (cycle 1's wrist frame is 30 ms late)", len(got))
	}
	for k, want := range []struct {
		frame       int
		instruction string
	}{{0, "pick up the bowl"}, {2, "open the drawer"}} {
		o := got[k]
		f := frames[want.frame]
		if o.Seq != k || !o.Stamp.Equal(f.Stamp) || o.Instruction != want.instruction || o.State[0] != float32(want.frame) {
			t.Fatalf("observation %d: seq %d stamp %v instruction %q state %v; want frame %d", k, o.Seq, o.Stamp, o.Instruction, o.State, want.frame)
		}
		if !bytes.Equal(o.Images[0].Pix, f.Cameras[0].Image.Pix) || !bytes.Equal(o.Images[1].Pix, f.Cameras[1].Image.Pix) && want.frame == 0 {
			t.Fatalf("observation %d: images differ from frame %d", k, want.frame)
		}
	}
	st := br.Stats()
	if st.Observations != 2 || st.UnpairedFrames != 2 || st.Messages != 3*3+2 {
		t.Fatalf("stats %+v, want 2 observations, 2 unpaired frames (cycle 1's), 11 messages", st)
	}
	if _, err := br.Next(ctx); err != io.EOF {
		t.Fatalf("after the end: %v, want io.EOF", err)
	}
	// The instruction topic is latched.
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tp := range r.Topics() {
		want := bag.DefaultQoS()
		if tp.Name == camera.DefaultInstructionTopic {
			want = bag.LatchedQoS()
		}
		if len(tp.OfferedQoSProfiles) != 1 || tp.OfferedQoSProfiles[0] != want {
			t.Errorf("topic %s offers %+v, want %+v", tp.Name, tp.OfferedQoSProfiles, want)
		}
	}
}

// TestBagRefusals: a bag without the topics, with wrong types, or with a
// hostile message is refused naming what was wrong.
func TestBagRefusals(t *testing.T) {
	ctx := t.Context()
	good := []camera.Frame{{Stamp: t0, Instruction: "go", State: make([]float64, 8),
		Cameras: []camera.CameraFrame{{Image: pattern(4, 4, 0)}, {Image: pattern(4, 4, 0)}}}}
	dir := filepath.Join(t.TempDir(), "b")
	if err := camera.WriteBag(dir, good, camera.BagOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := camera.OpenBag(ctx, dir, camera.ReadOptions{Topics: camera.Topics{Cameras: []string{"/camera/agentview/image_raw", "/nope"}}})
	if err == nil || !strings.Contains(err.Error(), "no camera topic /nope") {
		t.Fatalf("missing camera topic: %v", err)
	}
	_, err = camera.OpenBag(ctx, dir, camera.ReadOptions{Topics: camera.Topics{Proprio: "/instruction", Instruction: "/robot/proprio"}})
	if err == nil || !strings.Contains(err.Error(), "proprio topic /instruction is std_msgs/msg/String") {
		t.Fatalf("swapped topics: %v", err)
	}
	// A state of 7 values in the bag.
	bad := good
	bad[0].State = make([]float64, 7)
	dir2 := filepath.Join(t.TempDir(), "b")
	if err := camera.WriteBag(dir2, bad, camera.BagOptions{}); err != nil {
		t.Fatal(err)
	}
	br, err := camera.OpenBag(ctx, dir2, camera.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	_, err = br.Next(ctx)
	if !errors.Is(err, camera.ErrState) || !strings.Contains(err.Error(), "/robot/proprio at 2023-11-14T22:13:20Z") {
		t.Fatalf("7-value state: %v, want ErrState naming the topic and time", err)
	}
	// A raw frame whose data does not match its geometry, written by hand.
	dir3 := filepath.Join(t.TempDir(), "b")
	w, err := bag.Create(dir3, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range [][2]string{{camera.DefaultAgentviewTopic, msgs.TypeImage}, {camera.DefaultWristTopic, msgs.TypeImage}, {camera.DefaultProprioTopic, msgs.TypeFloat64MultiArray}, {camera.DefaultInstructionTopic, msgs.TypeString}} {
		if err := w.AddTopic(tp[0], tp[1], bag.DefaultQoS()); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := (&msgs.Image{Height: 4, Width: 4, Encoding: "rgb8", Step: 12, Data: make([]byte, 47)}).MarshalCDR()
	if err := w.Write(camera.DefaultAgentviewTopic, t0, b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	br3, err := camera.OpenBag(ctx, dir3, camera.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer br3.Close()
	if _, err := br3.Next(ctx); !errors.Is(err, camera.ErrGeometry) || !strings.Contains(err.Error(), camera.DefaultAgentviewTopic) {
		t.Fatalf("short raw frame: %v, want ErrGeometry naming the topic", err)
	}
}

// TestBagJointState reads the proprio from a sensor_msgs/JointState topic
// through the configured names.
func TestBagJointState(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "b")
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range [][2]string{{camera.DefaultAgentviewTopic, msgs.TypeImage}, {camera.DefaultWristTopic, msgs.TypeImage}, {camera.DefaultProprioTopic, msgs.TypeJointState}, {camera.DefaultInstructionTopic, msgs.TypeString}} {
		if err := w.AddTopic(tp[0], tp[1], bag.DefaultQoS()); err != nil {
			t.Fatal(err)
		}
	}
	write := func(topic string, at time.Time, m interface{ MarshalCDR() ([]byte, error) }) {
		b, err := m.MarshalCDR()
		if err == nil {
			err = w.Write(topic, at, b)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"j0", "j1", "j2", "j3", "j4", "j5", "g0", "g1"}
	write(camera.DefaultInstructionTopic, t0, &msgs.String{Data: "stack the cups"})
	img, _ := camera.EncodeImage(pattern(4, 4, 0), "rgb8", 0)
	img.Header.Stamp = msgs.Time{Sec: int32(t0.Unix())}
	write(camera.DefaultAgentviewTopic, t0, &img)
	write(camera.DefaultWristTopic, t0, &img)
	js := &msgs.JointState{Header: msgs.Header{Stamp: msgs.Time{Sec: int32(t0.Unix()), Nanosec: 5e6}},
		Name: []string{"g1", "g0", "j5", "j4", "j3", "j2", "j1", "j0", "extra"}, Position: []float64{8, 7, 6, 5, 4, 3, 2, 1, 99}}
	write(camera.DefaultProprioTopic, t0.Add(ms(5)), js)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	br, err := camera.OpenBag(ctx, dir, camera.ReadOptions{JointNames: names})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	o, err := br.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range o.State {
		if v != float32(i+1) {
			t.Fatalf("state %v, want 1..8 in the configured order", o.State)
		}
	}
	if !o.StateStamp.Equal(t0.Add(ms(5))) || o.Instruction != "stack the cups" {
		t.Fatalf("state stamp %v, instruction %q", o.StateStamp, o.Instruction)
	}
	if _, err := camera.OpenBag(ctx, dir, camera.ReadOptions{}); err == nil || !strings.Contains(err.Error(), "no joint names") {
		t.Fatalf("JointState topic without joint names: %v", err)
	}
}
