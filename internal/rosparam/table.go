package rosparam

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Def declares one parameter of a configuration P: its name, declared ROS
// type, description, and how a value is stored in and read from *P.
type Def[P any] struct {
	Name string
	// Type is the declared type: Table converts a value to it before Set
	// sees it. Array hands Set the value as read (Set checks its elements).
	Type Type
	Doc  string
	// Set stores a value already converted to Type, checking its range.
	Set func(p *P, v Value) error
	// Get reads the value back: string, int64, float64, bool, []float64 or
	// StringList, as ParamsYAML renders it.
	Get func(p *P) any
}

// Table is a node's declared parameters, in documentation order. It
// provides what every node's parameter surface needs over them: the
// typed SetFunc, the -p and params-file rules, the params-file rendering
// and the sorted names.
type Table[P any] struct {
	Defs []Def[P]
	// Of qualifies whose parameters they are in the unknown-name error
	// (for example " of the executor"; see Unknown).
	Of string
}

// Names lists every declared name, sorted.
func (t Table[P]) Names() []string {
	names := make([]string, len(t.Defs))
	for i, d := range t.Defs {
		names[i] = d.Name
	}
	slices.Sort(names)
	return names
}

// Lookup returns the definition of name.
func (t Table[P]) Lookup(name string) (Def[P], bool) {
	for _, d := range t.Defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def[P]{}, false
}

// SetValue assigns one value as read from YAML to *p: converted to the
// declared type, then checked and stored by the definition; it is the
// table's SetFunc. An undeclared name is an *UnknownError.
func (t Table[P]) SetValue(p *P, name string, v Value) error {
	d, ok := t.Lookup(name)
	if !ok {
		return Unknown(name, t.Of, t.Names())
	}
	if d.Type != Array {
		cv, err := v.Convert(d.Type)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		v = cv
	}
	if err := d.Set(p, v); err != nil {
		return fmt.Errorf("parameter %q: %w", name, err)
	}
	return nil
}

// Set assigns one parameter from a value in ROS's YAML syntax (the right
// side of `-p name:=value`).
func (t Table[P]) Set(p *P, name, yamlValue string) error {
	v, err := ParseValue(yamlValue)
	if err != nil {
		return fmt.Errorf("parameter %q: %w", name, err)
	}
	return t.SetValue(p, name, v)
}

// Load returns defaults overridden by the parameter rules among args
// (`--ros-args -p name:=value --params-file FILE`, in command-line order;
// see ApplyROSArgs), then checked by validate for the node whose fully
// qualified name is nodeName.
func (t Table[P]) Load(defaults P, args []string, nodeName string, validate func(p *P, nodeName string) error, opts ...Option) (P, error) {
	var zero P
	p := defaults
	if err := ApplyROSArgs(&p, t.SetValue, args, nodeName, opts...); err != nil {
		return zero, err
	}
	if err := validate(&p, nodeName); err != nil {
		return zero, err
	}
	return p, nil
}

// ApplyYAML applies the sections of a params file's contents that match
// nodeName to *p (see ApplyParamsYAML); a bad file leaves *p unchanged.
func (t Table[P]) ApplyYAML(p *P, data []byte, nodeName string, opts ...Option) error {
	return ApplyParamsYAML(p, t.SetValue, data, nodeName, opts...)
}

// YAML renders *p as a ROS 2 params file for the node key nodeKey, every
// parameter with its description (see ParamsYAML).
func (t Table[P]) YAML(p *P, nodeKey string) []byte {
	entries := make([]Entry, len(t.Defs))
	for i, d := range t.Defs {
		entries[i] = Entry{Name: d.Name, Doc: d.Doc, Value: d.Get(p)}
	}
	return ParamsYAML(nodeKey, entries)
}

// StringDef declares a string parameter stored in *dst(p).
func StringDef[P any](name, doc string, dst func(*P) *string) Def[P] {
	return Def[P]{name, String, doc, func(p *P, v Value) error {
		*dst(p) = v.Str
		return nil
	}, func(p *P) any { return *dst(p) }}
}

// BoolDef declares a bool parameter stored in *dst(p).
func BoolDef[P any](name, doc string, dst func(*P) *bool) Def[P] {
	return Def[P]{name, Bool, doc, func(p *P, v Value) error {
		*dst(p) = v.Bool
		return nil
	}, func(p *P) any { return *dst(p) }}
}

// IntDef declares an integer parameter in [lo, hi] stored in *dst(p).
func IntDef[P any](name, doc string, lo, hi int64, dst func(*P) *int) Def[P] {
	return Def[P]{name, Integer, doc, func(p *P, v Value) error {
		if v.Int < lo || v.Int > hi {
			return fmt.Errorf("must be in [%d, %d], got %d", lo, hi, v.Int)
		}
		*dst(p) = int(v.Int)
		return nil
	}, func(p *P) any { return int64(*dst(p)) }}
}

// DoubleDef declares a double parameter in [lo, hi] stored in *dst(p).
func DoubleDef[P any](name, doc string, lo, hi float64, dst func(*P) *float64) Def[P] {
	return Def[P]{name, Double, doc, func(p *P, v Value) error {
		if !(v.Double >= lo && v.Double <= hi) {
			return fmt.Errorf("must be in [%g, %g], got %v", lo, hi, v.Double)
		}
		*dst(p) = v.Double
		return nil
	}, func(p *P) any { return *dst(p) }}
}

// FractionDef declares a double parameter in (0, 1] stored in *dst(p).
func FractionDef[P any](name, doc string, dst func(*P) *float64) Def[P] {
	return Def[P]{name, Double, doc, func(p *P, v Value) error {
		if !(v.Double > 0 && v.Double <= 1) {
			return fmt.Errorf("must be in (0, 1], got %v", v.Double)
		}
		*dst(p) = v.Double
		return nil
	}, func(p *P) any { return *dst(p) }}
}

// ChoiceDef declares a string parameter that must be one of choices,
// stored in *dst(p).
func ChoiceDef[P any, T ~string](name, doc string, choices []T, dst func(*P) *T) Def[P] {
	return Def[P]{name, String, doc, func(p *P, v Value) error {
		if !slices.Contains(choices, T(v.Str)) {
			names := make([]string, len(choices))
			for i, c := range choices {
				names[i] = strconv.Quote(string(c))
			}
			return fmt.Errorf("must be one of %s, got %q", strings.Join(names, ", "), v.Str)
		}
		*dst(p) = T(v.Str)
		return nil
	}, func(p *P) any { return string(*dst(p)) }}
}

// DurationDef declares a double parameter, a number of seconds in
// [lo, hi], stored in *dst(p) rounded to the nanosecond.
func DurationDef[P any](name, doc string, lo, hi time.Duration, dst func(*P) *time.Duration) Def[P] {
	return Def[P]{name, Double, doc, func(p *P, v Value) error {
		if !(v.Double >= lo.Seconds() && v.Double <= hi.Seconds()) {
			return fmt.Errorf("must be a number of seconds in [%g, %g], got %v", lo.Seconds(), hi.Seconds(), v.Double)
		}
		*dst(p) = time.Duration(math.Round(v.Double * float64(time.Second)))
		return nil
	}, func(p *P) any { return dst(p).Seconds() }}
}

// StringsDef declares a string array parameter of at most max elements,
// each a non-empty string, stored in *dst(p). ROS cannot type an empty
// YAML sequence, so it is declared Array and checks the elements itself.
func StringsDef[P any](name, doc string, max int, dst func(*P) *[]string) Def[P] {
	return Def[P]{name, Array, doc, func(p *P, v Value) error {
		if v.Type != Array {
			return fmt.Errorf("expected a string array, got %s", v.Describe())
		}
		if len(v.Elems) > max {
			return fmt.Errorf("at most %d strings, got %d", max, len(v.Elems))
		}
		out := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			if e.Type != String || e.Str == "" {
				return fmt.Errorf("expected a string array, element %d is %s", i, e.Describe())
			}
			out[i] = e.Str
		}
		*dst(p) = out
		return nil
	}, func(p *P) any { return StringList(*dst(p)) }}
}

// StringList is the value of a string array parameter; it renders as a
// YAML flow sequence of quoted strings.
type StringList []string

// String renders l as a YAML flow sequence.
func (l StringList) String() string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// QoSFields points at the fields of one topic's QoS profile (the
// reliability, durability and history policies as ROS spells them, and the
// keep_last depth).
type QoSFields struct {
	Reliability, Durability, History *string
	Depth                            *int
}

// The bounds of a qos.<topic>.depth parameter.
const (
	MinQoSDepth = 1
	MaxQoSDepth = 1000
)

// QoSDefs declares the four parameters of one topic's QoS profile,
// prefix+"reliability", "durability", "history" and "depth" (in
// [MinQoSDepth, MaxQoSDepth], described by depthDoc), stored in the fields
// qos(p) points at.
func QoSDefs[P any](prefix, depthDoc string, qos func(*P) QoSFields) []Def[P] {
	policy := func(leaf string, a, b string, field func(QoSFields) *string) Def[P] {
		return Def[P]{prefix + leaf, String, a + " or " + b, func(p *P, v Value) error {
			if v.Str != a && v.Str != b {
				return fmt.Errorf("must be %q or %q, got %q", a, b, v.Str)
			}
			*field(qos(p)) = v.Str
			return nil
		}, func(p *P) any { return *field(qos(p)) }}
	}
	return []Def[P]{
		policy("reliability", "reliable", "best_effort", func(q QoSFields) *string { return q.Reliability }),
		policy("durability", "volatile", "transient_local", func(q QoSFields) *string { return q.Durability }),
		policy("history", "keep_last", "keep_all", func(q QoSFields) *string { return q.History }),
		IntDef(prefix+"depth", depthDoc, MinQoSDepth, MaxQoSDepth, func(p *P) *int { return qos(p).Depth }),
	}
}
