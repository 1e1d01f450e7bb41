package msgs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// TestStampedActionHostile checks the StampedAction fields a hostile
// message can get wrong: the held flag, a values length beyond the bytes
// there and a message cut inside the values.
func TestStampedActionHostile(t *testing.T) {
	good := golden(t, "stamped_action")
	badHeld := bytes.Clone(good)
	badHeld[len(badHeld)-1] = 7
	err := new(msgs.StampedAction).UnmarshalCDR(badHeld)
	if !errors.Is(err, msgs.ErrMalformed) || !strings.HasPrefix(err.Error(), "msgs: StampedAction.held: bool is 7") {
		t.Fatalf("held 7: %v", err)
	}
	// values claims 8 elements where 7 are: the decoder runs out of bytes
	// at the last field, not inside an over-sized allocation.
	long := bytes.Clone(good)
	long[28] = 8 // the values length after the 24-byte header ("base_link")
	err = new(msgs.StampedAction).UnmarshalCDR(long)
	if !errors.Is(err, msgs.ErrTruncated) {
		t.Fatalf("values length 8 of 7: %v", err)
	}
	cut := good[:40]
	err = new(msgs.StampedAction).UnmarshalCDR(cut)
	if !errors.Is(err, msgs.ErrTruncated) || !strings.Contains(err.Error(), "StampedAction.values") {
		t.Fatalf("cut inside the values: %v", err)
	}
	var m msgs.StampedAction
	if err := m.UnmarshalCDR(good); err != nil || len(m.Values) != 7 || !m.Held || m.Row != 12 {
		t.Fatalf("golden: %v %+v", err, m)
	}
}

// TestCMakeListsGeneratesEveryMessage: colcon generates the type support of
// exactly the messages in msg/, which the ROS nodes load by name.
func TestCMakeListsGeneratesEveryMessage(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "CMakeLists.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`foreach\(_name ([A-Za-z ]+)\)`).FindSubmatch(text)
	if m == nil {
		t.Fatal("CMakeLists.txt has no foreach(_name ...) message list")
	}
	listed := strings.Fields(string(m[1]))
	files, err := filepath.Glob(filepath.Join("msg", "*.msg"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".msg"))
	}
	slices.Sort(listed)
	slices.Sort(names)
	if !slices.Equal(listed, names) {
		t.Fatalf("CMakeLists.txt generates %v, msg/ holds %v", listed, names)
	}
}
