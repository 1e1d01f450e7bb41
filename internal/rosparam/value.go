package rosparam

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Type is the ROS type of a parameter value: the type a parameter is
// declared with, or the type rcl's YAML rules give a value as read.
type Type int

// Parameter types. Array is the type of a YAML sequence as read, before
// Convert gives it a declared array type; no parameter is declared Array.
const (
	Bool Type = iota
	Integer
	Double
	String
	DoubleArray
	Array
)

// String names the type as error messages spell it.
func (t Type) String() string {
	switch t {
	case Bool:
		return "bool"
	case Integer:
		return "integer"
	case Double:
		return "double"
	case String:
		return "string"
	case DoubleArray:
		return "double array"
	case Array:
		return "array"
	}
	return fmt.Sprintf("kind(%d)", int(t))
}

// Value is one parameter value read from YAML, typed as rcl types it: plain
// scalars are booleans, integers or doubles when they read as such, quoted
// scalars are always strings. Convert checks it against a declared Type.
type Value struct {
	Type    Type
	Bool    bool
	Int     int64
	Double  float64
	Str     string
	Doubles []float64 // set by Convert(DoubleArray)
	Elems   []Value   // the elements of an Array
	Text    string    // the source text, for messages
}

// Describe names the value and its type for an error message.
func (v Value) Describe() string {
	switch v.Type {
	case Bool:
		return "bool " + v.Text
	case Integer:
		return "integer " + v.Text
	case Double:
		return "double " + v.Text
	case String:
		return fmt.Sprintf("string %q", v.Str)
	case Array:
		return "array " + v.Text
	}
	return v.Text
}

// Convert checks v against the declared type t of a parameter and returns
// it with that type's field set (Type itself stays the type as read).
// Integers are accepted where doubles are declared, and a single number
// where a double array is.
func (v Value) Convert(t Type) (Value, error) {
	bad := func() (Value, error) {
		return Value{}, fmt.Errorf("expected %s, got %s", t, v.Describe())
	}
	switch t {
	case Bool:
		if v.Type != Bool {
			return bad()
		}
	case Integer:
		if v.Type != Integer {
			return bad()
		}
	case Double:
		switch v.Type {
		case Integer:
			v.Double = float64(v.Int)
		case Double:
		default:
			return bad()
		}
	case String:
		if v.Type != String {
			return bad()
		}
	case DoubleArray:
		switch v.Type {
		case Integer:
			v.Doubles = []float64{float64(v.Int)}
		case Double:
			v.Doubles = []float64{v.Double}
		case Array:
			v.Doubles = make([]float64, len(v.Elems))
			for i, e := range v.Elems {
				switch e.Type {
				case Integer:
					v.Doubles[i] = float64(e.Int)
				case Double:
					v.Doubles[i] = e.Double
				default:
					return Value{}, fmt.Errorf("expected %s, element %d is %s", t, i, e.Describe())
				}
			}
		default:
			return bad()
		}
	default:
		return Value{}, fmt.Errorf("no parameter is declared %s", t)
	}
	return v, nil
}

// ParseValue reads the value of a `-p name:=value` rule.
func ParseValue(text string) (Value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return Value{}, fmt.Errorf("value %q is not valid YAML: %w", text, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		// An empty value is an empty string, as in rcl.
		return Value{Type: String, Text: `""`}, nil
	}
	return NodeValue(doc.Content[0])
}

// NodeValue types a YAML scalar or sequence of scalars as rcl does.
func NodeValue(n *yaml.Node) (Value, error) {
	return nodeValue(n, 0)
}

// maxAliasDepth bounds the alias chains NodeValue follows.
const maxAliasDepth = 16

func nodeValue(n *yaml.Node, depth int) (Value, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return scalarValue(n), nil
	case yaml.SequenceNode:
		v := Value{Type: Array, Text: flowText(n)}
		for i, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return Value{}, fmt.Errorf("line %d: array element %d must be a scalar", c.Line, i)
			}
			v.Elems = append(v.Elems, scalarValue(c))
		}
		return v, nil
	case yaml.AliasNode:
		if depth >= maxAliasDepth || n.Alias == nil {
			return Value{}, fmt.Errorf("line %d: an alias chain longer than %d", n.Line, maxAliasDepth)
		}
		return nodeValue(n.Alias, depth+1)
	}
	return Value{}, fmt.Errorf("line %d: a parameter value must be a scalar or an array of scalars", n.Line)
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
func scalarValue(n *yaml.Node) Value {
	s := n.Value
	v := Value{Text: s}
	quoted := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	if quoted || n.Style&yaml.TaggedStyle != 0 && n.Tag == "!!str" {
		v.Type, v.Str = String, s
		return v
	}
	switch s {
	case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y":
		v.Type, v.Bool = Bool, true
		return v
	case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N":
		v.Type, v.Bool = Bool, false
		return v
	case ".nan", ".NaN", ".NAN":
		v.Type, v.Double = Double, math.NaN()
		return v
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		v.Type, v.Double = Double, math.Inf(1)
		return v
	case "-.inf", "-.Inf", "-.INF":
		v.Type, v.Double = Double, math.Inf(-1)
		return v
	}
	// rcl reads integers with strtoll(base 0) and doubles with strtod, which
	// also spell hexadecimal, inf and nan; Go's parsers accept digit
	// underscores, which the C ones do not.
	if !strings.Contains(s, "_") {
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			v.Type, v.Int = Integer, i
			return v
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			v.Type, v.Double = Double, f
			return v
		}
	}
	v.Type, v.Str = String, s
	return v
}
