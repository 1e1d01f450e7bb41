package params

import (
	"fmt"

	"github.com/fastwam/actionexpert/internal/rosparam"
)

// This file adapts the node's parameter table (params.go) to package
// internal/rosparam, which reads and types ROS parameter values for every
// node of the package.

// valueKind is the type of a parameter value as ROS's YAML rules read it.
type valueKind int

const (
	valBool valueKind = iota
	valInt
	valDouble
	valString
	valArray
)

// value is one parameter value read from YAML (see rosparam.Value), in the
// fields the node's parameter table reads.
type value struct {
	kind valueKind
	b    bool
	i    int64
	f    float64
	s    string
	fs   []float64 // set by convert for kindDoubleArray
	elem []value   // valArray
	text string    // the source text, for messages
	rv   rosparam.Value
}

// fromROS gives v the node's field names.
func fromROS(v rosparam.Value) value {
	out := value{b: v.Bool, i: v.Int, f: v.Double, s: v.Str, fs: v.Doubles, text: v.Text, rv: v}
	switch v.Type {
	case rosparam.Bool:
		out.kind = valBool
	case rosparam.Integer:
		out.kind = valInt
	case rosparam.Double:
		out.kind = valDouble
	case rosparam.String:
		out.kind = valString
	default:
		out.kind = valArray
	}
	for _, e := range v.Elems {
		out.elem = append(out.elem, fromROS(e))
	}
	return out
}

// rosType is the rosparam type a parameter kind is declared with.
func (k paramKind) rosType() rosparam.Type {
	switch k {
	case kindBool:
		return rosparam.Bool
	case kindInt:
		return rosparam.Integer
	case kindDouble:
		return rosparam.Double
	case kindString:
		return rosparam.String
	case kindDoubleArray:
		return rosparam.DoubleArray
	}
	return rosparam.Type(-1)
}

// convert checks v against the declared kind of a parameter and returns
// it in that kind's field (see rosparam.Value.Convert).
func (v value) convert(k paramKind) (value, error) {
	switch k {
	case kindIntOrAuto:
		if v.kind != valInt && v.kind != valString {
			return value{}, fmt.Errorf("expected %s, got %s", k, v.rv.Describe())
		}
		return v, nil
	case kindStringOff:
		switch {
		case v.kind == valString || v.kind == valBool && !v.b:
			return v, nil
		case v.kind == valBool:
			return value{}, fmt.Errorf("expected a string, got bool %s (only an unquoted off, read as false, stands for \"off\")", v.text)
		}
		return value{}, fmt.Errorf("expected %s, got %s", k, v.rv.Describe())
	}
	cv, err := v.rv.Convert(k.rosType())
	if err != nil {
		return value{}, err
	}
	return fromROS(cv), nil
}

// parseYAMLValue reads the value of a `-p name:=value` rule.
func parseYAMLValue(text string) (value, error) {
	v, err := rosparam.ParseValue(text)
	if err != nil {
		return value{}, err
	}
	return fromROS(v), nil
}
