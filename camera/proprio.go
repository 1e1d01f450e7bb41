package camera

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// More kinds of refusal (see ErrUnsupported).
var (
	// ErrState: a proprio message of the wrong length, without a
	// configured joint, or with a value that is not finite.
	ErrState = errors.New("bad proprio state")
	// ErrInstruction: an instruction that is empty, not UTF-8 or too long.
	ErrInstruction = errors.New("bad instruction")
)

// MaxInstructionBytes bounds an instruction's UTF-8 bytes. LIBERO's are
// under 100; the text encoder reads at most 128 tokens of the prompt.
const MaxInstructionBytes = 1024

// putState stores v (float64) as float32 in dst[i], refusing a value that is
// not finite or becomes infinite as a float32.
func putState(dst []float32, i int, v float64, what string) error {
	f := float32(v)
	if math.IsNaN(v) || math.IsInf(float64(f), 0) {
		return fmt.Errorf("camera: %s is %v: %w: want a finite value (within float32's range)", what, v, ErrState)
	}
	dst[i] = f
	return nil
}

// StateFromArray reads the proprio state from a std_msgs/Float64MultiArray
// of exactly len(dst) values (worldmodel.ProprioDim for LIBERO), each
// finite, into dst as float32. The layout is not consulted: the data are
// the values in order. On error dst may hold some of the values.
func StateFromArray(dst []float32, m *msgs.Float64MultiArray) error {
	if len(m.Data) != len(dst) {
		return fmt.Errorf("camera: proprio Float64MultiArray of %d values: %w: want exactly %d", len(m.Data), ErrState, len(dst))
	}
	for i, v := range m.Data {
		if err := putState(dst, i, v, fmt.Sprintf("proprio value %d", i)); err != nil {
			return err
		}
	}
	return nil
}

// JointMap reads a proprio state from sensor_msgs/JointState messages: the
// position of each configured joint, in the configured order.
type JointMap struct {
	names []string
}

// NewJointMap returns the map of the joint names whose positions make the
// state, in order (worldmodel.ProprioDim of them for LIBERO's model). Names
// must be non-empty and distinct.
func NewJointMap(names []string) (*JointMap, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("camera: joint map: no joint names: want the %d names whose positions make the state", worldmodel.ProprioDim)
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if n == "" {
			return nil, fmt.Errorf("camera: joint map: name %d is empty", i)
		}
		if seen[n] {
			return nil, fmt.Errorf("camera: joint map: joint %q is named twice", n)
		}
		seen[n] = true
	}
	return &JointMap{names: append([]string(nil), names...)}, nil
}

// Names returns the configured joint names.
func (j *JointMap) Names() []string { return append([]string(nil), j.names...) }

// State reads the positions of the configured joints from m into dst
// (len(dst) must equal the number of names). The message's name and
// position arrays must have the same length; a configured joint missing
// from the message, named twice in it, or with a non-finite position is
// refused, naming the joint. Other joints of the message are ignored.
func (j *JointMap) State(dst []float32, m *msgs.JointState) error {
	if len(dst) != len(j.names) {
		return fmt.Errorf("camera: joint map of %d joints into a state of %d values: %w", len(j.names), len(dst), ErrState)
	}
	if len(m.Position) != len(m.Name) {
		return fmt.Errorf("camera: JointState with %d names and %d positions: %w: want one position per name", len(m.Name), len(m.Position), ErrState)
	}
	for i, want := range j.names {
		at := -1
		for k, n := range m.Name {
			if n != want {
				continue
			}
			if at >= 0 {
				return fmt.Errorf("camera: JointState names joint %q twice (entries %d and %d): %w", want, at, k, ErrState)
			}
			at = k
		}
		if at < 0 {
			return fmt.Errorf("camera: JointState has no joint %q: %w: it names %s", want, ErrState, quoteList(m.Name, 16))
		}
		if err := putState(dst, i, m.Position[at], fmt.Sprintf("position of joint %q", want)); err != nil {
			return err
		}
	}
	return nil
}

// quoteList formats at most max names for an error message.
func quoteList(names []string, max int) string {
	if len(names) == 0 {
		return "no joints"
	}
	var b strings.Builder
	for i, n := range names {
		if i == max {
			fmt.Fprintf(&b, ", … (%d in all)", len(names))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if len(n) > 64 {
			n = n[:64] + "…"
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}

// Instruction checks a std_msgs/String instruction and returns its text,
// unchanged (the text cache is looked up by the exact text): it must be
// valid UTF-8, not blank, without control characters other than tab, and
// at most MaxInstructionBytes bytes.
func Instruction(m *msgs.String) (string, error) {
	s := m.Data
	switch {
	case len(s) > MaxInstructionBytes:
		return "", fmt.Errorf("camera: instruction of %d bytes: %w: want at most %d", len(s), ErrInstruction, MaxInstructionBytes)
	case !utf8.ValidString(s):
		return "", fmt.Errorf("camera: instruction %q is not valid UTF-8: %w", s, ErrInstruction)
	case strings.TrimSpace(s) == "":
		return "", fmt.Errorf("camera: instruction %q is empty: %w: want the task's text", s, ErrInstruction)
	}
	for i, r := range s {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return "", fmt.Errorf("camera: instruction %q has the control character %U at byte %d: %w", s, r, i, ErrInstruction)
		}
	}
	return s, nil
}
