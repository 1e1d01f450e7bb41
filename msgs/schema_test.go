package msgs_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// humbleSHA256 pins the standard definitions to the bytes ROS 2 Humble
// ships (see deps/README.md): reformatting one would change the schema text
// that rosbag2 compares and stores.
var humbleSHA256 = map[string]string{
	"deps/builtin_interfaces/msg/Time.msg":          "de44df4db63cb7ed6871c4603bfed97c9edc1a8b714ffcbe1363a1f38cb7f2d3",
	"deps/std_msgs/msg/Header.msg":                  "d2cea14630e39ed0fa5b432ba9160a7c38855b9427d3344f99e83e83facb53c2",
	"deps/diagnostic_msgs/msg/DiagnosticArray.msg":  "019690e73d166237243a14998c4a9183c829dcc052ce7d190120d3892bf12c59",
	"deps/diagnostic_msgs/msg/DiagnosticStatus.msg": "04b13e5ea9dd8559ef3f691bab371ec05ed227f1045f4fcd3b0b30338f9a15bd",
	"deps/diagnostic_msgs/msg/KeyValue.msg":         "89f6d92c75fbf2d5381e8c3e3b5bf92bbf6dbdb9683a5a5a4433a79f59fe0d74",
	"deps/sensor_msgs/msg/Image.msg":                "f057f9a5ed07bfc1726f6bf89632c21bb99831842b30dee28b3598173676fd45",
	"deps/sensor_msgs/msg/CompressedImage.msg":      "e7b7ab745dab5aae702745be23c0a7cf66f327e9712e83c873bdd7460151fa5b",
	"deps/sensor_msgs/msg/JointState.msg":           "711d1771a002c7190e5bbe746a163a67477c1e2a45482a64f1fe339815ca6f5d",
	"deps/std_msgs/msg/String.msg":                  "2022b3f1c32b578ff8d54a9948a51a10778761e0ad4ba60e50ae51292ca16884",
}

func TestStandardDefinitionsAreHumbles(t *testing.T) {
	for path, want := range humbleSHA256 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != want {
			t.Errorf("%s changed: it must stay byte for byte as ROS 2 Humble ships it", path)
		}
	}
}

func readMsg(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the rosbag2 separator before a dependency's text.
func section(name string) string {
	return "\n" + strings.Repeat("=", 80) + "\nMSG: " + name + "\n"
}

// TestDefinitionText spells out, for each top-level type, the full text
// rosbag2 (Humble, rosbag2_storage_mcap's message definition cache) builds:
// the type's text, then each dependency once, depth first, in sorted order,
// named as the field spells it ("std_msgs/Header", local types qualified
// with their package).
func TestDefinitionText(t *testing.T) {
	tensor := readMsg(t, "msg/Tensor.msg")
	header := readMsg(t, "deps/std_msgs/msg/Header.msg")
	time := readMsg(t, "deps/builtin_interfaces/msg/Time.msg")
	headerAndTime := section("std_msgs/Header") + header + section("builtin_interfaces/Time") + time
	want := map[string]string{
		msgs.TypeTensor: tensor,
		msgs.TypeVideoKVCache: readMsg(t, "msg/VideoKVCache.msg") +
			section("fastwam_action_expert/Tensor") + tensor + headerAndTime,
		msgs.TypeTextContext: readMsg(t, "msg/TextContext.msg") +
			section("fastwam_action_expert/Tensor") + tensor + headerAndTime,
		msgs.TypeActionRow: readMsg(t, "msg/ActionRow.msg"),
		msgs.TypeActionChunk: readMsg(t, "msg/ActionChunk.msg") +
			section("fastwam_action_expert/ActionRow") + readMsg(t, "msg/ActionRow.msg") + headerAndTime,
		msgs.TypeStampedAction: readMsg(t, "msg/StampedAction.msg") + headerAndTime,
		msgs.TypeSharedTensor:  readMsg(t, "msg/SharedTensor.msg"),
		msgs.TypeKVHandoff: readMsg(t, "msg/KVHandoff.msg") +
			section("fastwam_action_expert/SharedTensor") + readMsg(t, "msg/SharedTensor.msg") + headerAndTime,
		msgs.TypeDiagnosticArray: readMsg(t, "deps/diagnostic_msgs/msg/DiagnosticArray.msg") +
			section("diagnostic_msgs/DiagnosticStatus") + readMsg(t, "deps/diagnostic_msgs/msg/DiagnosticStatus.msg") +
			section("diagnostic_msgs/KeyValue") + readMsg(t, "deps/diagnostic_msgs/msg/KeyValue.msg") + headerAndTime,
		"std_msgs/msg/Header": header + section("builtin_interfaces/Time") + time,
	}
	// The observation messages (not in Types(): the node does not publish
	// them, but the image bag records them).
	for typ, file := range map[string]string{
		msgs.TypeImage:           "deps/sensor_msgs/msg/Image.msg",
		msgs.TypeCompressedImage: "deps/sensor_msgs/msg/CompressedImage.msg",
		msgs.TypeJointState:      "deps/sensor_msgs/msg/JointState.msg",
	} {
		want[typ] = readMsg(t, file) + headerAndTime
	}
	want[msgs.TypeString] = readMsg(t, "deps/std_msgs/msg/String.msg")
	if len(msgs.Types()) != 9 {
		t.Fatalf("Types() = %v", msgs.Types())
	}
	for _, typ := range msgs.Types() {
		if _, ok := want[typ]; !ok {
			t.Fatalf("no expected text for %s", typ)
		}
	}
	for typ, text := range want {
		got, err := msgs.Definition(typ)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if got != text {
			t.Errorf("Definition(%s) =\n%s\nwant\n%s", typ, got, text)
		}
		short := strings.Replace(typ, "/msg/", "/", 1)
		if got2, err := msgs.Definition(short); err != nil || got2 != got {
			t.Errorf("Definition(%s) differs from Definition(%s): %v", short, typ, err)
		}
	}
}

func TestDefinitionErrors(t *testing.T) {
	for typ, want := range map[string]string{
		"std_msgs/msg/Int8":              "no definition of std_msgs/Int8",
		"fastwam_action_expert/msg/Nope": "no definition of fastwam_action_expert/Nope",
		"Tensor":                         `message type "Tensor" is not of the form package/msg/Type`,
		"a/srv/B":                        "is not of the form package/msg/Type",
		"/msg/B":                         "is not of the form package/msg/Type",
	} {
		_, err := msgs.Definition(typ)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "msgs: ") {
			t.Errorf("Definition(%q): %v, want an error containing %q", typ, err, want)
		}
	}
}
