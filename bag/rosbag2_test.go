package bag_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
)

// rosbag2Script reads a bag with ROS 2's rosbag2 (the reader `ros2 bag
// play` uses), prints its topics and messages as JSON and copies it, with
// rosbag2's own MCAP writer, to a second bag.
const rosbag2Script = `
import base64, json, sys, rosbag2_py
src, dst = sys.argv[1], sys.argv[2]
r = rosbag2_py.SequentialReader()
r.open(rosbag2_py.StorageOptions(uri=src, storage_id='mcap'), rosbag2_py.ConverterOptions('cdr', 'cdr'))
topics = r.get_all_topics_and_types()
w = rosbag2_py.SequentialWriter()
w.open(rosbag2_py.StorageOptions(uri=dst, storage_id='mcap'), rosbag2_py.ConverterOptions('cdr', 'cdr'))
out = {'topics': [], 'messages': []}
for t in topics:
    out['topics'].append({'name': t.name, 'type': t.type, 'format': t.serialization_format, 'qos': t.offered_qos_profiles})
    w.create_topic(rosbag2_py.TopicMetadata(name=t.name, type=t.type, serialization_format='cdr', offered_qos_profiles=t.offered_qos_profiles))
while r.has_next():
    topic, data, ts = r.read_next()
    out['messages'].append({'topic': topic, 'time': ts, 'data': base64.b64encode(data).decode()})
    w.write(topic, data, ts)
del w
print(json.dumps(out))
`

// key names a message by topic and log time.
func key(topic string, ns int64) string { return topic + "@" + strconv.FormatInt(ns, 10) }

// amentPackage returns the share folder of an installed ROS package, or "".
func amentPackage(name string) string {
	for _, prefix := range filepath.SplitList(os.Getenv("AMENT_PREFIX_PATH")) {
		if _, err := os.Stat(filepath.Join(prefix, "share", "ament_index", "resource_index", "packages", name)); err == nil {
			return filepath.Join(prefix, "share", name)
		}
	}
	return ""
}

// TestRosbag2Interop checks our bags against ROS 2 Humble's rosbag2 itself:
// rosbag2 reads every message we wrote, and a copy written by rosbag2 has
// the same metadata.yaml (up to topic order and names), the same schema
// text and the same messages when read here. It runs only in a shell where
// a ROS 2 install with rosbag2_py is sourced.
func TestRosbag2Interop(t *testing.T) {
	if os.Getenv("AMENT_PREFIX_PATH") == "" {
		t.Skip("no ROS 2 sourced (AMENT_PREFIX_PATH is unset); rosbag2 interop not checked")
	}
	if err := exec.Command("python3", "-c", "import rosbag2_py").Run(); err != nil {
		t.Skipf("rosbag2_py is not importable (%v); rosbag2 interop not checked", err)
	}
	tmp := t.TempDir()
	ours, theirs := filepath.Join(tmp, "ours"), filepath.Join(tmp, "theirs")
	w, err := bag.Create(ours, bag.WriterOptions{ChunkSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	type topic struct {
		name, typ string
		msg       func(seq uint64) interface{ MarshalCDR() ([]byte, error) }
	}
	topics := []topic{{topicDiag, msgs.TypeDiagnosticArray, func(s uint64) interface{ MarshalCDR() ([]byte, error) } { return diagMsg(s) }}}
	// Our own types need the ROS package built and sourced; its installed
	// definitions must be the ones in this tree for the schema comparison.
	share := amentPackage(msgs.Package)
	sameDefs := share != ""
	if share == "" {
		t.Logf("%s is not installed: only %s is checked", msgs.Package, msgs.TypeDiagnosticArray)
	} else {
		topics = append(topics,
			topic{topicKV, msgs.TypeVideoKVCache, func(s uint64) interface{ MarshalCDR() ([]byte, error) } { return kvMsg(s, 3) }},
			topic{topicText, msgs.TypeTextContext, func(s uint64) interface{ MarshalCDR() ([]byte, error) } { return textMsg(s) }},
			topic{topicActions, msgs.TypeActionChunk, func(s uint64) interface{ MarshalCDR() ([]byte, error) } { return chunkMsg(s) }})
		files, _ := filepath.Glob(filepath.Join("..", "msgs", "msg", "*.msg"))
		for _, f := range files {
			a, _ := os.ReadFile(f)
			b, _ := os.ReadFile(filepath.Join(share, "msg", filepath.Base(f)))
			if !bytes.Equal(a, b) {
				sameDefs = false
				t.Logf("installed %s differs from this tree's: schema text of %s not compared", filepath.Base(f), msgs.Package)
			}
		}
	}
	for _, tp := range topics {
		if err := w.AddTopic(tp.name, tp.typ, bag.DefaultQoS()); err != nil {
			t.Fatal(err)
		}
	}
	wrote := map[string][]byte{}
	for _, seq := range []uint64{2, 0, 1} {
		for i, tp := range topics {
			at := time.Unix(1700000000, int64(seq)*1e8+int64(i))
			data := mustCDR(t, tp.msg(seq))
			if err := w.Write(tp.name, at, data); err != nil {
				t.Fatal(err)
			}
			wrote[key(tp.name, at.UnixNano())] = data
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("python3", "-c", rosbag2Script, ours, theirs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rosbag2: %v\n%s", err, stderr.String())
	}
	var got struct {
		Topics   []struct{ Name, Type, Format, QoS string }
		Messages []struct {
			Topic string
			Time  int64
			Data  []byte
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("rosbag2 output: %v\n%s", err, out)
	}
	if len(got.Topics) != len(topics) || len(got.Messages) != len(wrote) {
		t.Fatalf("rosbag2 read %d topics and %d messages, we wrote %d and %d", len(got.Topics), len(got.Messages), len(topics), len(wrote))
	}
	for _, m := range got.Messages {
		if data, ok := wrote[key(m.Topic, m.Time)]; !ok || !bytes.Equal(data, m.Data) {
			t.Fatalf("rosbag2 read a message on %s at %d that we did not write", m.Topic, m.Time)
		}
	}

	// rosbag2's own metadata.yaml for the copy equals ours, topics sorted.
	mOurs, err := bag.ReadMetadata(ours)
	if err != nil {
		t.Fatal(err)
	}
	mTheirs, err := bag.ReadMetadata(theirs)
	if err != nil {
		t.Fatal(err)
	}
	byName := func(a, b bag.TopicMetadata) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(mOurs.Topics, byName)
	slices.SortFunc(mTheirs.Topics, byName)
	mTheirs.RelativeFilePaths, mTheirs.Files[0].Path = mOurs.RelativeFilePaths, mOurs.Files[0].Path
	if a, b := mOurs.Encode(), mTheirs.Encode(); !bytes.Equal(a, b) {
		t.Errorf("metadata.yaml differs from rosbag2's:\n%s\nrosbag2:\n%s", a, b)
	}

	// The schemas rosbag2 stored are our definitions; its messages are ours.
	r, err := bag.Open(theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tp := range r.Topics() {
		def, err := msgs.Definition(tp.Type)
		if err != nil {
			t.Fatal(err)
		}
		if tp.SchemaEncoding != "ros2msg" || (tp.Definition != def && (sameDefs || tp.Type == msgs.TypeDiagnosticArray)) {
			t.Errorf("rosbag2 stored the %s schema %q as\n%s\nmsgs.Definition gives\n%s", tp.SchemaEncoding, tp.Type, tp.Definition, def)
		}
	}
	n := 0
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(wrote[key(m.Topic, m.LogTime.UnixNano())], m.Data) {
			t.Fatalf("rosbag2's copy holds a message on %s at %v that we did not write", m.Topic, m.LogTime)
		}
		n++
	}
	if n != len(wrote) {
		t.Fatalf("read %d messages from rosbag2's copy, want %d", n, len(wrote))
	}
}
