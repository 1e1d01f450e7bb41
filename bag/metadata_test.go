package bag_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
)

// rosbag2QoS is an offered_qos_profiles value from a bag ROS 2 Humble's
// rosbag2 recorded (rosbag2_tests/resources/reindex_test_bags/
// target_metadata/multiple_files/metadata.yaml on the humble branch).
const rosbag2QoS = "- history: 1\n  depth: 10\n  reliability: 1\n  durability: 2\n  deadline:\n    sec: 9223372036\n    nsec: 854775807\n  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n  avoid_ros_namespace_conventions: false"

// rosbag2Metadata is that whole metadata.yaml (version 5, as Humble writes).
const rosbag2Metadata = `rosbag2_bagfile_information:
  version: 5
  storage_identifier: sqlite3
  relative_file_paths:
    - multiple_files_0.db3
    - multiple_files_1.db3
    - multiple_files_2.db3
  duration:
    nanoseconds: 9500166674
  starting_time:
    nanoseconds_since_epoch: 1630486341839168680
  message_count: 52
  topics_with_message_count:
    - topic_metadata:
        name: /topic
        type: std_msgs/msg/String
        serialization_format: cdr
        offered_qos_profiles: "- history: 1\n  depth: 10\n  reliability: 1\n  durability: 2\n  deadline:\n    sec: 9223372036\n    nsec: 854775807\n  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n  avoid_ros_namespace_conventions: false"
      message_count: 52
  compression_format: ""
  compression_mode: ""
  files:
    - path: multiple_files_0.db3
      starting_time:
        nanoseconds_since_epoch: 1630486321838886148
      duration:
        nanoseconds: 9500166674
      message_count: 20
    - path: multiple_files_1.db3
      starting_time:
        nanoseconds_since_epoch: 1630486331839194483
      duration:
        nanoseconds: 9499955003
      message_count: 20
    - path: multiple_files_2.db3
      starting_time:
        nanoseconds_since_epoch: 1630486341839168680
      duration:
        nanoseconds: 5499907705
      message_count: 12`

func TestQoSProfilesTextMatchesRosbag2(t *testing.T) {
	inf := bag.InfiniteDuration()
	q := bag.QoS{History: bag.HistoryKeepLast, Depth: 10, Reliability: bag.ReliabilityReliable,
		Durability: bag.DurabilityVolatile, Deadline: inf, Lifespan: inf, Liveliness: bag.LivelinessAutomatic,
		LivelinessLeaseDuration: inf}
	if got := bag.EncodeQoSProfiles([]bag.QoS{q}); got != rosbag2QoS {
		t.Fatalf("EncodeQoSProfiles =\n%q\nwant\n%q", got, rosbag2QoS)
	}
	back, err := bag.ParseQoSProfiles(rosbag2QoS)
	if err != nil || !reflect.DeepEqual(back, []bag.QoS{q}) {
		t.Fatalf("ParseQoSProfiles: %+v, %v", back, err)
	}
	two := []bag.QoS{bag.DefaultQoS(), bag.LatchedQoS()}
	back, err = bag.ParseQoSProfiles(bag.EncodeQoSProfiles(two))
	if err != nil || !reflect.DeepEqual(back, two) {
		t.Fatalf("two profiles: %+v, %v", back, err)
	}
	if p, err := bag.ParseQoSProfiles(""); err != nil || p != nil {
		t.Fatalf("empty text: %v %v", p, err)
	}
	if _, err := bag.ParseQoSProfiles(strings.Replace(rosbag2QoS, "  depth: 10\n", "", 1)); err == nil ||
		!strings.Contains(err.Error(), "lacks depth") {
		t.Fatalf("profile without depth: %v", err)
	}
	if _, err := bag.ParseQoSProfiles("{not: [a list"); err == nil {
		t.Fatal("invalid YAML accepted")
	}
}

func TestParseRosbag2Metadata(t *testing.T) {
	m, err := bag.ParseMetadata([]byte(rosbag2Metadata))
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != 5 || m.StorageIdentifier != "sqlite3" || m.MessageCount != 52 ||
		m.Duration != 9500166674 || m.StartingTime.UnixNano() != 1630486341839168680 ||
		len(m.RelativeFilePaths) != 3 || len(m.Files) != 3 || m.Files[2].MessageCount != 12 ||
		m.Files[1].StartingTime.UnixNano() != 1630486331839194483 || m.Files[1].Duration != 9499955003 {
		t.Fatalf("parsed %+v", m)
	}
	want := []bag.TopicMetadata{{Name: "/topic", Type: "std_msgs/msg/String", SerializationFormat: "cdr",
		OfferedQoSProfiles: []bag.QoS{rosbag2Profile()}, MessageCount: 52}}
	if !reflect.DeepEqual(m.Topics, want) {
		t.Fatalf("topics %+v", m.Topics)
	}
	// Our encoding, parsed again, gives the same metadata.
	again, err := bag.ParseMetadata(m.Encode())
	if err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("re-parsed %+v, %v", again, err)
	}
}

// TestMetadataFileText pins the metadata.yaml of a small bag to the text
// rosbag2 writes: key order, indentation, quoting and no final newline.
func TestMetadataFileText(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pinned")
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTopic("/fastwam/action_chunk", msgs.TypeActionChunk, bag.LatchedQoS()); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []int64{1700000000500000000, 1700000000000000123} {
		if err := w.Write("/fastwam/action_chunk", time.Unix(0, ns), mustCDR(t, chunkMsg(0))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, bag.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	const want = `rosbag2_bagfile_information:
  version: 5
  storage_identifier: mcap
  duration:
    nanoseconds: 499999877
  starting_time:
    nanoseconds_since_epoch: 1700000000000000123
  message_count: 2
  topics_with_message_count:
    - topic_metadata:
        name: /fastwam/action_chunk
        type: fastwam_action_expert/msg/ActionChunk
        serialization_format: cdr
        offered_qos_profiles: "- history: 1\n  depth: 1\n  reliability: 1\n  durability: 1\n  deadline:\n    sec: 0\n    nsec: 0\n  lifespan:\n    sec: 0\n    nsec: 0\n  liveliness: 0\n  liveliness_lease_duration:\n    sec: 0\n    nsec: 0\n  avoid_ros_namespace_conventions: false"
      message_count: 2
  compression_format: ""
  compression_mode: ""
  relative_file_paths:
    - pinned_0.mcap
  files:
    - path: pinned_0.mcap
      starting_time:
        nanoseconds_since_epoch: 1700000000000000123
      duration:
        nanoseconds: 499999877
      message_count: 2`
	if string(got) != want {
		t.Fatalf("metadata.yaml:\n%s\nwant:\n%s", got, want)
	}
}

func TestMetadataErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"rosbag2_bagfile_information: [", "not valid YAML"},
		{"other: 1", "no rosbag2_bagfile_information"},
		{"rosbag2_bagfile_information:\n  storage_identifier: mcap", "no version"},
		{"rosbag2_bagfile_information:\n  version: 5", "no storage_identifier"},
		{"rosbag2_bagfile_information:\n  version: 5\n  storage_identifier: mcap\n  relative_file_paths: [../x.mcap]", "not a path inside the bag folder"},
		{"rosbag2_bagfile_information:\n  version: 5\n  storage_identifier: mcap\n  relative_file_paths: [/etc/x.mcap]", "not a path inside the bag folder"},
		{"rosbag2_bagfile_information:\n  version: 5\n  storage_identifier: mcap\n  duration: {nanoseconds: 18446744073709551615}", "out of range"},
	} {
		if _, err := bag.ParseMetadata([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
	// A bag of another storage (ROS 1 bags through rosbag2's bag_v2
	// plugin) is refused with a clear message.
	dir := t.TempDir()
	other := strings.Replace(rosbag2Metadata, "storage_identifier: sqlite3", "storage_identifier: rosbag_v2", 1)
	if err := os.WriteFile(filepath.Join(dir, bag.MetadataFile), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bag.Open(dir); err == nil || !strings.Contains(err.Error(), `uses storage "rosbag_v2"; this reader reads "mcap" and "sqlite3" bags only`) {
		t.Fatalf("rosbag_v2 bag: %v", err)
	}
}

func TestYAMLQuoting(t *testing.T) {
	for _, name := range []string{"plain_name", "", "with space", "true", "123", "-dash", `quo"te`, "back\\slash", "tab\there", "ünï"} {
		m := bag.Metadata{Version: 5, StorageIdentifier: "mcap", RelativeFilePaths: []string{"f.mcap"},
			Topics: []bag.TopicMetadata{{Name: name, Type: name, SerializationFormat: "cdr"}}}
		back, err := bag.ParseMetadata(m.Encode())
		if err != nil {
			t.Fatalf("%q: %v\n%s", name, err, m.Encode())
		}
		if back.Topics[0].Name != name || back.Topics[0].Type != name {
			t.Errorf("%q came back as %q", name, back.Topics[0].Name)
		}
	}
}

// rosbag2Profile is the profile rosbag2QoS holds.
func rosbag2Profile() bag.QoS {
	inf := bag.InfiniteDuration()
	return bag.QoS{History: bag.HistoryKeepLast, Depth: 10, Reliability: bag.ReliabilityReliable,
		Durability: bag.DurabilityVolatile, Deadline: inf, Lifespan: inf, Liveliness: bag.LivelinessAutomatic,
		LivelinessLeaseDuration: inf}
}
