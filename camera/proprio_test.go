package camera_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
)

func TestStateFromArray(t *testing.T) {
	dst := make([]float32, 8)
	m := &msgs.Float64MultiArray{Data: []float64{0.5, -0.25, 1, 2, 3, 4, 0.04, -0.04}}
	if err := camera.StateFromArray(dst, m); err != nil {
		t.Fatal(err)
	}
	for i, v := range m.Data {
		if dst[i] != float32(v) {
			t.Fatalf("value %d: %v, want %v", i, dst[i], float32(v))
		}
	}
	for _, c := range []struct {
		name string
		data []float64
		msg  string
	}{
		{"7 values", make([]float64, 7), "of 7 values: bad proprio state: want exactly 8"},
		{"9 values", make([]float64, 9), "of 9 values"},
		{"empty", nil, "of 0 values"},
		{"NaN", []float64{0, 0, 0, math.NaN(), 0, 0, 0, 0}, "proprio value 3 is NaN"},
		{"+Inf", []float64{0, 0, 0, 0, 0, 0, 0, math.Inf(1)}, "proprio value 7 is +Inf"},
		{"beyond float32", []float64{0, 1e300, 0, 0, 0, 0, 0, 0}, "proprio value 1 is 1e+300"},
	} {
		err := camera.StateFromArray(dst, &msgs.Float64MultiArray{Data: c.data})
		if !errors.Is(err, camera.ErrState) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want ErrState containing %q", c.name, err, c.msg)
		}
	}
}

func TestJointMap(t *testing.T) {
	jm, err := camera.NewJointMap([]string{"b", "a", "g"})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 3)
	m := &msgs.JointState{Name: []string{"a", "x", "b", "g"}, Position: []float64{1, 99, 2, 3}}
	if err := jm.State(dst, m); err != nil {
		t.Fatal(err)
	}
	if dst[0] != 2 || dst[1] != 1 || dst[2] != 3 {
		t.Fatalf("state %v, want [2 1 3] (configured order)", dst)
	}
	for _, c := range []struct {
		name string
		m    *msgs.JointState
		msg  string
	}{
		{"missing joint", &msgs.JointState{Name: []string{"a", "b"}, Position: []float64{1, 2}}, `has no joint "g": bad proprio state: it names "a", "b"`},
		{"names and positions differ", &msgs.JointState{Name: []string{"a", "b", "g"}, Position: []float64{1, 2}}, "3 names and 2 positions"},
		{"no positions", &msgs.JointState{Name: []string{"a", "b", "g"}}, "3 names and 0 positions"},
		{"joint twice", &msgs.JointState{Name: []string{"a", "b", "a", "g"}, Position: []float64{1, 2, 3, 4}}, `names joint "a" twice`},
		{"NaN position", &msgs.JointState{Name: []string{"a", "b", "g"}, Position: []float64{1, math.NaN(), 3}}, `position of joint "b" is NaN`},
		{"-Inf position", &msgs.JointState{Name: []string{"a", "b", "g"}, Position: []float64{1, 2, math.Inf(-1)}}, `position of joint "g" is -Inf`},
	} {
		err := jm.State(dst, c.m)
		if !errors.Is(err, camera.ErrState) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want ErrState containing %q", c.name, err, c.msg)
		}
	}
	if err := jm.State(make([]float32, 2), m); !errors.Is(err, camera.ErrState) {
		t.Errorf("wrong destination length: %v", err)
	}
	for _, names := range [][]string{nil, {"a", ""}, {"a", "a"}} {
		if _, err := camera.NewJointMap(names); err == nil {
			t.Errorf("NewJointMap(%q) accepted", names)
		}
	}
}

func TestInstruction(t *testing.T) {
	for _, ok := range []string{"put the bowl on the plate", "日本語の指示", "a\tb"} {
		if got, err := camera.Instruction(&msgs.String{Data: ok}); err != nil || got != ok {
			t.Errorf("Instruction(%q) = %q, %v", ok, got, err)
		}
	}
	for _, c := range []struct{ data, msg string }{
		{"", "is empty"},
		{"  \t ", "is empty"},
		{"bad \xff utf8", "not valid UTF-8"},
		{strings.Repeat("x", camera.MaxInstructionBytes+1), "of 1025 bytes"},
		{"line\nbreak", "control character U+000A"},
		{"del\x7f", "control character U+007F"},
	} {
		_, err := camera.Instruction(&msgs.String{Data: c.data})
		if !errors.Is(err, camera.ErrInstruction) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Instruction(%.20q): %v, want ErrInstruction containing %q", c.data, err, c.msg)
		}
	}
}
