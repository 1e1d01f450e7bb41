package camera_test

import (
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// TestRecordedByRosbag2 reads testdata/recorded_humble and
// testdata/recorded_jazzy, recorded by the real tools (ROS 2 Humble and
// Jazzy from ../shared/ros, Cyclone DDS):
//
//	ros2 bag record -s mcap -o cam-rec /a /b /c /d   # Jazzy: -o cam-recj
//	ros2 topic pub -r 2 /a sensor_msgs/msg/Image '{height: 1, width: 2, encoding: rgb8, step: 6, data: [1,2,3,4,5,6]}'
//	ros2 topic pub -r 2 /b sensor_msgs/msg/CompressedImage '{format: jpeg, data: [255, 216]}'
//	ros2 topic pub -r 2 /c sensor_msgs/msg/JointState '{name: [j1], position: [0.5]}'
//	ros2 topic pub -r 2 /d std_msgs/msg/String '{data: hello}'
//
// Each topic's schema, as Humble's rosbag2 stored it, must be
// msgs.Definition's text (what our bags store; Jazzy's differs in comments
// only), and every message must decode with our codec to the values
// published and re-encode to the recorded bytes.
func TestRecordedByRosbag2(t *testing.T) {
	for _, distro := range []string{"humble", "jazzy"} {
		t.Run(distro, func(t *testing.T) { readRecorded(t, "testdata/recorded_"+distro, distro == "humble") })
	}
}

// withoutComments drops comments and blank lines of a definition text.
func withoutComments(def string) string {
	var out []string
	for _, line := range strings.Split(def, "\n") {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, "\n")
}

func readRecorded(t *testing.T, dir string, exact bool) {
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	types := map[string]string{"/a": msgs.TypeImage, "/b": msgs.TypeCompressedImage, "/c": msgs.TypeJointState, "/d": msgs.TypeString}
	for _, tp := range r.Topics() {
		if types[tp.Name] != tp.Type {
			t.Fatalf("topic %s is %s, want %s", tp.Name, tp.Type, types[tp.Name])
		}
		want, err := msgs.Definition(tp.Type)
		if err != nil {
			t.Fatal(err)
		}
		if !exact {
			tp.Definition, want = withoutComments(tp.Definition), withoutComments(want)
		}
		if tp.Definition != want {
			t.Errorf("%s: rosbag2 stored the schema\n%s\nmsgs.Definition gives\n%s", tp.Type, tp.Definition, want)
		}
	}
	counts := map[string]int{}
	var fd camera.FrameDecoder
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		counts[m.Topic]++
		var enc []byte
		switch m.Topic {
		case "/a":
			var img worldmodel.Image
			if _, err := fd.Decode(&img, msgs.TypeImage, m.Data); err != nil {
				t.Fatal(err)
			}
			if img.Width != 2 || img.Height != 1 || string(img.Pix) != "\x01\x02\x03\x04\x05\x06" {
				t.Fatalf("/a decoded to %+v", img)
			}
			var v msgs.Image
			_ = v.UnmarshalCDR(m.Data)
			enc, err = v.MarshalCDR()
		case "/b":
			var v msgs.CompressedImage
			if err := v.UnmarshalCDR(m.Data); err != nil || v.Format != "jpeg" || string(v.Data) != "\xff\xd8" {
				t.Fatalf("/b: %+v, %v", v, err)
			}
			enc, err = v.MarshalCDR()
		case "/c":
			var v msgs.JointState
			if err := v.UnmarshalCDR(m.Data); err != nil || len(v.Name) != 1 || v.Name[0] != "j1" || len(v.Position) != 1 || v.Position[0] != 0.5 {
				t.Fatalf("/c: %+v, %v", v, err)
			}
			jm, _ := camera.NewJointMap([]string{"j1"})
			st := make([]float32, 1)
			if err := jm.State(st, &v); err != nil || st[0] != 0.5 {
				t.Fatalf("/c state %v, %v", st, err)
			}
			enc, err = v.MarshalCDR()
		case "/d":
			var v msgs.String
			if err := v.UnmarshalCDR(m.Data); err != nil || v.Data != "hello" {
				t.Fatalf("/d: %+v, %v", v, err)
			}
			enc, err = v.MarshalCDR()
		}
		if err != nil {
			t.Fatal(err)
		}
		// The recorded bytes may carry up to 3 bytes of RTPS padding.
		if len(m.Data) < len(enc) || len(m.Data) > len(enc)+3 || string(m.Data[:len(enc)]) != string(enc) {
			t.Errorf("%s: we encode % x, rosbag2 recorded % x", m.Topic, enc, m.Data)
		}
	}
	for topic := range types {
		if counts[topic] == 0 {
			t.Errorf("no message on %s", topic)
		}
	}
	t.Logf("messages per topic: %v", counts)
}
