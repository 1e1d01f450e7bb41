package rosparam

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// toy is a configuration with one parameter of each declared type.
type toy struct {
	Name  string
	Count int64
	Rate  float64
	On    bool
	Bound []float64
}

func setToy(p *toy, name string, v Value) error {
	types := map[string]Type{"name": String, "count": Integer, "rate": Double, "on": Bool, "group.bound": DoubleArray}
	t, ok := types[name]
	if !ok {
		return Unknown(name, "", []string{"name", "count", "rate", "on", "group.bound"})
	}
	cv, err := v.Convert(t)
	if err != nil {
		return fmt.Errorf("parameter %q: %w", name, err)
	}
	switch name {
	case "name":
		p.Name = cv.Str
	case "count":
		if cv.Int < 0 {
			return fmt.Errorf("parameter %q: must not be negative, got %d", name, cv.Int)
		}
		p.Count = cv.Int
	case "rate":
		p.Rate = cv.Double
	case "on":
		p.On = cv.Bool
	case "group.bound":
		p.Bound = cv.Doubles
	}
	return nil
}

func (p toy) entries() []Entry {
	return []Entry{
		{"name", "a string", p.Name}, {"count", "an integer", p.Count}, {"rate", "a double", p.Rate},
		{"on", "a bool", p.On}, {"group.bound", "doubles", append([]float64{}, p.Bound...)},
	}
}

func TestApplyROSArgs(t *testing.T) {
	var p toy
	args := []string{"prog", "-p", "ignored:=1", "--ros-args", "-r", "__node:=x", "-p", "name:=abc",
		"--param", "/other:count:=9", "-p", "/ns/exec:count:=4", "-p", "rate:=2", "-p", "group.bound:=[1, 2.5]",
		"--", "-p", "on:=true"}
	if err := ApplyROSArgs(&p, setToy, args, "/ns/exec"); err != nil {
		t.Fatal(err)
	}
	want := toy{Name: "abc", Count: 4, Rate: 2, Bound: []float64{1, 2.5}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	for _, c := range []struct{ args, want string }{
		{"--ros-args -p count:=x", `-p count:=x: parameter "count": expected integer, got string "x"`},
		{"--ros-args -p count", "-p count: a parameter rule has the form name:=value"},
		{"--ros-args -p :=1", "a parameter rule has the form name:=value"},
		{"--ros-args -p", "ROS argument -p needs a value"},
		{"--ros-args --params-file", "ROS argument --params-file needs a value"},
		{"--ros-args -p nope:=1", `unknown parameter "nope"`},
		{"--ros-args -p rate:=[1", `parameter "rate": value "[1" is not valid YAML`},
	} {
		var q toy
		err := ApplyROSArgs(&q, setToy, strings.Fields(c.args), "/exec")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func TestParamsFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	// name applies, then count fails: nothing must stay applied.
	if err := os.WriteFile(bad, []byte("/**:\n  ros__parameters:\n    name: x\n    count: -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := toy{Name: "keep"}
	err := ApplyROSArgs(&p, setToy, []string{"--ros-args", "--params-file", bad}, "/exec")
	if err == nil || !strings.Contains(err.Error(), "line 4: /**: parameter \"count\": must not be negative") {
		t.Fatalf("error %v", err)
	}
	if p.Name != "keep" {
		t.Fatalf("a failed file changed the configuration: %+v", p)
	}
	if err := ApplyParamsFile(&p, setToy, filepath.Join(dir, "missing.yaml"), "/exec"); err == nil ||
		!strings.HasPrefix(err.Error(), "params file: ") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestParamsFileThatIsNotAFile: a FIFO as the params file is refused at
// once (os.ReadFile would wait for a writer forever), and so is a file
// above MaxParamsFile, before it is read.
func TestParamsFileThatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "params.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var p toy
	err := ApplyROSArgs(&p, setToy, []string{"--ros-args", "--params-file", fifo}, "/exec")
	if want := "params file: " + fifo + " is a named pipe (FIFO), want a ROS 2 params file: not a regular file"; err == nil || err.Error() != want {
		t.Errorf("FIFO: got %v\nwant %s", err, want)
	}
	big := filepath.Join(dir, "big.yaml")
	text := "/**:\n  ros__parameters:\n    name: \"" + strings.Repeat("n", MaxParamsFile) + "\"\n"
	if err := os.WriteFile(big, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	err = ApplyParamsFile(&p, setToy, big, "/exec")
	if want := fmt.Sprintf("params file: %s is %d bytes, more than the %d allowed for a ROS 2 params file", big, len(text), MaxParamsFile); err == nil || err.Error() != want {
		t.Errorf("big: got %v\nwant %s", err, want)
	}
}

func TestParamsFileSections(t *testing.T) {
	text := `
other:
  ros__parameters:
    name: "not me"
    unknown_here_is_fine: 1
ns:
  exec:
    ros__parameters:
      count: 3
/**:
  ros__parameters:
    group:
      bound: 2
`
	var p toy
	if err := ApplyParamsYAML(&p, setToy, []byte(text), "/ns/exec"); err != nil {
		t.Fatal(err)
	}
	if want := (toy{Count: 3, Bound: []float64{2}}); !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v, want %+v", p, want)
	}
	for text, want := range map[string]string{
		"":                                  "empty",
		"[1, 2]":                            "expected a map of node names",
		"ros__parameters: {}":               "ros__parameters must be under a node name",
		"a: 1":                              `"a": expected a map holding ros__parameters`,
		"a:\n  ros__parameters: 1":          "/a: ros__parameters must be a map",
		"a:\n  ros__parameters: {}\n  b: 1": `unexpected key "b" beside ros__parameters`,
		"other:\n  ros__parameters:\n    x: {y: [ {z: 1} ]}": `/other: parameter "x.y": line 3: array element 0 must be a scalar`,
		"a: [": "not valid YAML",
	} {
		var q toy
		err := ApplyParamsYAML(&q, setToy, []byte(text), "/exec")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", text, err, want)
		}
	}
}

func TestParamsYAMLRoundTrip(t *testing.T) {
	for _, p := range []toy{{Name: `a "q" b`, Count: -0, Rate: 3, On: true, Bound: []float64{-1, 0.5}}, {}} {
		text := ParamsYAML("/**", p.entries())
		q := toy{Bound: []float64{7}}
		if len(p.Bound) == 0 {
			p.Bound = q.Bound // an empty array is a comment: the old value stays
		}
		if err := ApplyParamsYAML(&q, setToy, text, "/exec"); err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("round trip: %+v, want %+v\n%s", q, p, text)
		}
	}
	if got := FormatValue(3.0); got != "3.0" {
		t.Errorf("FormatValue(3.0) = %q: a double must keep its decimal point", got)
	}
}

func TestMatchNodeNameAndClosest(t *testing.T) {
	for _, c := range []struct {
		pattern, fqn string
		want         bool
	}{{"/**", "/a/b", true}, {"a", "/ns/a", false}, {"/*/a", "/ns/a", true}, {"/**/a", "/x/y/b", false}} {
		if got := MatchNodeName(c.pattern, c.fqn); got != c.want {
			t.Errorf("MatchNodeName(%q, %q) = %v", c.pattern, c.fqn, got)
		}
	}
	if got := Closest("contrl_period", []string{"control_period", "aggregation"}); got != "control_period" {
		t.Errorf("Closest = %q", got)
	}
	if got := Closest("zzzzzzzz", []string{"control_period"}); got != "" {
		t.Errorf("Closest of an unrelated name = %q", got)
	}
}

// TestParamsYAMLGroupsOnce: parameters of one group that are not next to
// each other in the list still render as one map key (a params file with
// a key twice in one map is refused as ambiguous).
func TestParamsYAMLGroupsOnce(t *testing.T) {
	got := string(ParamsYAML("/**", []Entry{
		{Name: "a", Doc: "a", Value: int64(1)},
		{Name: "topics.in", Doc: "in", Value: "x"},
		{Name: "b", Doc: "b", Value: int64(2)},
		{Name: "topics.out", Doc: "out", Value: "y"},
		{Name: "topics.deep.z", Doc: "z", Value: true},
		{Name: "c.d", Doc: "d", Value: 1.5},
	}))
	want := `/**:
  ros__parameters:
    # a
    a: 1
    topics:
      # in
      in: "x"
      # out
      out: "y"
      deep:
        # z
        z: true
    # b
    b: 2
    c:
      # d
      d: 1.5
`
	if got != want {
		t.Errorf("ParamsYAML:\n%s\nwant:\n%s", got, want)
	}
}

// A shared bringup file's wildcard section holds other nodes' parameters:
// they are skipped and reported once per section; the same names under the
// node's own name are refused with the hint, and a bad value of a declared
// name under the wildcard still fails.
func TestWildcardSectionSkipsUndeclared(t *testing.T) {
	const fqn = "/arm/toy"
	var got []string
	report := ReportIgnored(func(sec string, names []string) { got = append(got, sec+": "+strings.Join(names, ",")) })
	var p toy
	shared := "/**:\n  ros__parameters:\n    use_sim_time: true\n    robot_base_frame: base_link\n    count: 3\n/arm/*:\n  ros__parameters: {cont: 1}\n"
	if err := ApplyParamsYAML(&p, setToy, []byte(shared), fqn, report); err != nil {
		t.Fatalf("shared bringup file refused: %v", err)
	}
	if p.Count != 3 {
		t.Errorf("count = %d, want 3 (declared names under /** still apply)", p.Count)
	}
	want := []string{"/**: use_sim_time,robot_base_frame", "/arm/*: cont"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reported %q, want %q", got, want)
	}
	err := ApplyParamsYAML(&p, setToy, []byte("/arm/toy:\n  ros__parameters: {cont: 1}\n"), fqn, report)
	if err == nil || !strings.Contains(err.Error(), `unknown parameter "cont" (did you mean "count"?)`) {
		t.Errorf("own section: err = %v, want the unknown-parameter refusal with its hint", err)
	}
	err = ApplyParamsYAML(&p, setToy, []byte("/**:\n  ros__parameters: {count: -1}\n"), fqn)
	if err == nil || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("bad value under /**: err = %v, want it refused", err)
	}
}
