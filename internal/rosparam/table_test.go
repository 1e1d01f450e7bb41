package rosparam

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type mode string

type tableConfig struct {
	Name     string
	On       bool
	Count    int
	Rate     float64
	Weight   float64
	Mode     mode
	Period   time.Duration
	Cameras  []string
	Rel, Dur string
	Hist     string
	Depth    int
}

func testTable() Table[tableConfig] {
	return Table[tableConfig]{Of: " of the test node", Defs: append([]Def[tableConfig]{
		StringDef("name", "a name", func(c *tableConfig) *string { return &c.Name }),
		BoolDef("on", "a switch", func(c *tableConfig) *bool { return &c.On }),
		IntDef("count", "a count", 2, 9, func(c *tableConfig) *int { return &c.Count }),
		DoubleDef("rate", "a rate", 0, 100, func(c *tableConfig) *float64 { return &c.Rate }),
		FractionDef("weight", "a share", func(c *tableConfig) *float64 { return &c.Weight }),
		ChoiceDef("mode", "fast or slow", []mode{"fast", "slow"}, func(c *tableConfig) *mode { return &c.Mode }),
		DurationDef("period", "seconds", time.Millisecond, time.Minute, func(c *tableConfig) *time.Duration { return &c.Period }),
		StringsDef("cameras", "one or two", 2, func(c *tableConfig) *[]string { return &c.Cameras }),
	}, QoSDefs("qos.in.", "depth", func(c *tableConfig) QoSFields {
		return QoSFields{Reliability: &c.Rel, Durability: &c.Dur, History: &c.Hist, Depth: &c.Depth}
	})...)}
}

func defaultConfig() tableConfig {
	return tableConfig{Name: "n", Count: 3, Rate: 1, Weight: 0.5, Mode: "fast", Period: time.Second,
		Cameras: []string{"a"}, Rel: "reliable", Dur: "volatile", Hist: "keep_last", Depth: 5}
}

// TestTableSet: each kind of definition converts, checks and stores its
// value, and refuses, naming the parameter, what is out of range.
func TestTableSet(t *testing.T) {
	tb := testTable()
	c := defaultConfig()
	for name, val := range map[string]string{
		"name": "x", "on": "true", "count": "9", "rate": "100", "weight": "1", "mode": "slow",
		"period": "0.0015", "cameras": "[l, 'r']", "qos.in.reliability": "best_effort",
		"qos.in.durability": "transient_local", "qos.in.history": "keep_all", "qos.in.depth": "1000",
	} {
		if err := tb.Set(&c, name, val); err != nil {
			t.Errorf("%s:=%s: %v", name, val, err)
		}
	}
	want := tableConfig{Name: "x", On: true, Count: 9, Rate: 100, Weight: 1, Mode: "slow", Period: 1500 * time.Microsecond,
		Cameras: []string{"l", "r"}, Rel: "best_effort", Dur: "transient_local", Hist: "keep_all", Depth: 1000}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	for _, bad := range []struct{ name, val, want string }{
		{"count", "1", `parameter "count": must be in [2, 9], got 1`},
		{"count", "2.0", `parameter "count": expected integer, got double 2.0`},
		{"rate", "-1", `must be in [0, 100], got -1`},
		{"rate", ".nan", `must be in [0, 100], got NaN`},
		{"weight", "0", `parameter "weight": must be in (0, 1], got 0`},
		{"mode", "medium", `parameter "mode": must be one of "fast", "slow", got "medium"`},
		{"period", "0", `must be a number of seconds in [0.001, 60], got 0`},
		{"cameras", "[a, b, c]", `at most 2 strings, got 3`},
		{"cameras", "[a, 3]", `expected a string array, element 1 is integer 3`},
		{"cameras", "a", `expected a string array, got string "a"`},
		{"qos.in.reliability", "sure", `parameter "qos.in.reliability": must be "reliable" or "best_effort", got "sure"`},
		{"qos.in.depth", "0", `must be in [1, 1000], got 0`},
		{"nme", "x", `unknown parameter "nme" of the test node (did you mean "name"?)`},
	} {
		before := c
		err := tb.Set(&c, bad.name, bad.val)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s:=%s: %v, want %q", bad.name, bad.val, err, bad.want)
		}
		if !reflect.DeepEqual(c, before) {
			t.Errorf("%s:=%s changed the configuration although refused", bad.name, bad.val)
		}
	}
	var unk *UnknownError
	if err := tb.Set(&c, "other", "1"); !errors.As(err, &unk) {
		t.Errorf("an undeclared name: %v, want an *UnknownError", err)
	}
}

// TestTableYAMLRoundTrip: the rendered params file reads back to the same
// configuration, and Names lists every declared name, sorted.
func TestTableYAMLRoundTrip(t *testing.T) {
	tb := testTable()
	c := defaultConfig()
	c.Cameras, c.Mode, c.Period, c.Depth = []string{"x \"q\"", "y"}, "slow", 20*time.Millisecond, 7
	text := tb.YAML(&c, "/**")
	got := defaultConfig()
	if err := tb.ApplyYAML(&got, text, "/node"); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v\n%s", got, c, text)
	}
	if !strings.Contains(string(text), "    # fast or slow\n    mode: \"slow\"\n") {
		t.Errorf("no described mode in\n%s", text)
	}
	names := tb.Names()
	if len(names) != len(tb.Defs) || names[0] != "cameras" || names[len(names)-1] != "weight" {
		t.Errorf("Names() = %q", names)
	}
}

// TestTableLoad: rules apply in order to the defaults, then validate runs
// with the node's name; a refusal returns the zero configuration.
func TestTableLoad(t *testing.T) {
	tb := testTable()
	var seen string
	validate := func(c *tableConfig, fqn string) error {
		seen = fqn
		if c.Name == "bad" {
			return errors.New("bad name")
		}
		return nil
	}
	c, err := tb.Load(defaultConfig(), []string{"--ros-args", "-p", "count:=4", "-p", "other:count:=8", "-p", "/n:on:=true"}, "/n", validate)
	if err != nil || c.Count != 4 || !c.On || seen != "/n" {
		t.Errorf("Load: %+v, %v (validated as %q)", c, err, seen)
	}
	if c, err := tb.Load(defaultConfig(), []string{"--ros-args", "-p", "name:=bad"}, "/n", validate); err == nil || c.Name != "" {
		t.Errorf("Load of a refused configuration: %+v, %v", c, err)
	}
	if _, err := tb.Load(defaultConfig(), []string{"--ros-args", "-p", "count:=99"}, "/n", validate); err == nil || !strings.Contains(err.Error(), "count:=99") {
		t.Errorf("Load with an out-of-range rule: %v", err)
	}
}
