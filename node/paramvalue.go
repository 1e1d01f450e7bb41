package node

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// valueKind is the type of a parameter value as ROS's YAML rules read it.
type valueKind int

const (
	valBool valueKind = iota
	valInt
	valDouble
	valString
	valArray
)

// value is one parameter value read from YAML, typed as rcl types it: plain
// scalars are booleans, integers or doubles when they read as such, quoted
// scalars are always strings.
type value struct {
	kind valueKind
	b    bool
	i    int64
	f    float64
	s    string
	fs   []float64 // set by convert for kindDoubleArray
	elem []value   // valArray
	text string    // the source text, for messages
}

func (v value) describe() string {
	switch v.kind {
	case valBool:
		return "bool " + v.text
	case valInt:
		return "integer " + v.text
	case valDouble:
		return "double " + v.text
	case valString:
		return fmt.Sprintf("string %q", v.s)
	case valArray:
		return "array " + v.text
	}
	return v.text
}

// convert checks v against the declared kind of a parameter and returns
// it in that kind's field. Integers are accepted where doubles are
// declared, and a single number where a double array is.
func (v value) convert(k paramKind) (value, error) {
	bad := func() (value, error) {
		return value{}, fmt.Errorf("expected %s, got %s", k, v.describe())
	}
	switch k {
	case kindBool:
		if v.kind != valBool {
			return bad()
		}
	case kindInt:
		if v.kind != valInt {
			return bad()
		}
	case kindDouble:
		switch v.kind {
		case valInt:
			v.f = float64(v.i)
		case valDouble:
		default:
			return bad()
		}
	case kindString:
		if v.kind != valString {
			return bad()
		}
	case kindIntOrAuto:
		if v.kind != valInt && v.kind != valString {
			return bad()
		}
	case kindStringOff:
		if v.kind != valString && (v.kind != valBool || v.b) {
			if v.kind == valBool {
				return value{}, fmt.Errorf("expected a string, got bool %s (only an unquoted off, read as false, stands for \"off\")", v.text)
			}
			return bad()
		}
	case kindDoubleArray:
		switch v.kind {
		case valInt:
			v.fs = []float64{float64(v.i)}
		case valDouble:
			v.fs = []float64{v.f}
		case valArray:
			v.fs = make([]float64, len(v.elem))
			for i, e := range v.elem {
				switch e.kind {
				case valInt:
					v.fs[i] = float64(e.i)
				case valDouble:
					v.fs[i] = e.f
				default:
					return value{}, fmt.Errorf("expected %s, element %d is %s", k, i, e.describe())
				}
			}
		default:
			return bad()
		}
	}
	return v, nil
}

// parseYAMLValue reads the value of a `-p name:=value` rule.
func parseYAMLValue(text string) (value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return value{}, fmt.Errorf("value %q is not valid YAML: %w", text, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		// An empty value is an empty string, as in rcl.
		return value{kind: valString, text: `""`}, nil
	}
	return nodeValue(doc.Content[0])
}

// nodeValue types a YAML scalar or sequence of scalars.
func nodeValue(n *yaml.Node) (value, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return scalarValue(n), nil
	case yaml.SequenceNode:
		v := value{kind: valArray, text: flowText(n)}
		for i, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return value{}, fmt.Errorf("line %d: array element %d must be a scalar", c.Line, i)
			}
			v.elem = append(v.elem, scalarValue(c))
		}
		return v, nil
	case yaml.AliasNode:
		return nodeValue(n.Alias)
	}
	return value{}, fmt.Errorf("line %d: a parameter value must be a scalar or an array of scalars", n.Line)
}

func flowText(n *yaml.Node) string {
	parts := make([]string, len(n.Content))
	for i, c := range n.Content {
		parts[i] = c.Value
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// scalarValue applies rcl's typing of a YAML scalar: quoted scalars are
// strings; plain ones are booleans, integers or doubles when they spell
// one, strings otherwise.
func scalarValue(n *yaml.Node) value {
	s := n.Value
	v := value{text: s}
	quoted := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if quoted || n.Style&yaml.TaggedStyle != 0 && n.Tag == "!!str" {
		v.kind, v.s = valString, s
		return v
	}
	switch s {
	case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y":
		v.kind, v.b = valBool, true
		return v
	case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N":
		v.kind, v.b = valBool, false
		return v
	case ".nan", ".NaN", ".NAN":
		v.kind, v.f = valDouble, math.NaN()
		return v
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		v.kind, v.f = valDouble, math.Inf(1)
		return v
	case "-.inf", "-.Inf", "-.INF":
		v.kind, v.f = valDouble, math.Inf(-1)
		return v
	}
	// rcl reads integers with strtoll(base 0) and doubles with strtod, which
	// also spell hexadecimal, inf and nan; Go's parsers accept digit
	// underscores, which the C ones do not.
	if !strings.Contains(s, "_") {
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			v.kind, v.i = valInt, i
			return v
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			v.kind, v.f = valDouble, f
			return v
		}
	}
	v.kind, v.s = valString, s
	return v
}
