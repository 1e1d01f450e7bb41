// Package rosparam reads ROS 2 parameters as rcl does, for any node's
// configuration: the parameter rules among a command line's ROS arguments
// (`--ros-args -p [node:]name:=value --params-file FILE`), ROS 2 params
// files (YAML, sections selected by node name with the * and ** wildcards)
// and rcl's typing of YAML values. A node keeps its own table of declared
// parameters and receives every value that applies to it through a SetFunc.
package rosparam

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/fastwam/actionexpert/internal/regfile"
	"gopkg.in/yaml.v3"
)

// SetFunc assigns the parameter name, as typed from its YAML text, to the
// configuration *p: it checks the value against the parameter's declared
// type (Value.Convert) and range and fails, naming the parameter, for an
// unknown name or a bad value. It must replace, never modify in place, what
// *p refers to (slices, maps): params files are applied to a shallow copy
// of *p, which is kept only when the whole file applied.
type SetFunc[P any] func(p *P, name string, v Value) error

// UnknownError is what a SetFunc returns for a name the node does not
// declare. In a params-file section that selects the node by pattern (such
// as "/**", which a shared bringup file fills with every node's
// parameters), such names are skipped, as rclcpp skips overrides it was
// not asked to declare; under the node's own name they are refused.
type UnknownError struct {
	Name string // the parameter's name
	Of   string // whose parameter, for the message ("" or " of the executor")
	Hint string // the closest declared name, or ""
}

// Error names the parameter and the likely typo.
func (e *UnknownError) Error() string {
	msg := fmt.Sprintf("unknown parameter %q%s", e.Name, e.Of)
	if e.Hint != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", e.Hint)
	}
	return msg
}

// Unknown returns the *UnknownError for name, with the closest of known as
// its hint; of qualifies whose parameter it is (for example " of the
// executor").
func Unknown(name, of string, known []string) error {
	return &UnknownError{Name: name, Of: of, Hint: Closest(name, known)}
}

// Option adjusts how parameters are applied.
type Option func(*options)

type options struct {
	ignored func(section string, names []string)
}

// ReportIgnored has f called once per params-file section that selected
// the node by pattern and held names the node does not declare, with those
// names in file order (they are skipped).
func ReportIgnored(f func(section string, names []string)) Option {
	return func(o *options) { o.ignored = f }
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// ApplyROSArgs applies the parameter rules among args to *p, in
// command-line order. Only what stands between `--ros-args` and `--` (or
// the end) is read: `-p`/`--param [node:]name:=value` and `--params-file
// FILE`. nodeName is the node's fully qualified name after remapping (for
// example "/fastwam_executor"); it selects the params-file sections and
// node-prefixed rules that apply. Other ROS arguments are skipped (rcl
// interprets them), with their values.
func ApplyROSArgs[P any](p *P, set SetFunc[P], args []string, nodeName string, opts ...Option) error {
	inROS := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !inROS {
			inROS = a == "--ros-args"
			continue
		}
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("ROS argument %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		switch a {
		case "--":
			inROS = false
		case "--ros-args":
		case "-p", "--param":
			rule, err := next()
			if err != nil {
				return err
			}
			if err := ApplyRule(p, set, rule, nodeName); err != nil {
				return fmt.Errorf("%s %s: %w", a, rule, err)
			}
		case "--params-file":
			path, err := next()
			if err != nil {
				return err
			}
			if err := ApplyParamsFile(p, set, path, nodeName, opts...); err != nil {
				return err
			}
		case "-r", "--remap", "-e", "--enclave", "--log-level", "--log-config-file":
			if _, err := next(); err != nil {
				return err
			}
		}
	}
	return nil
}

// ApplyRule applies one `[node:]name:=value` rule to *p when its node
// prefix (none: every node) selects nodeName.
func ApplyRule[P any](p *P, set SetFunc[P], rule, nodeName string) error {
	lhs, val, ok := strings.Cut(rule, ":=")
	if !ok {
		return fmt.Errorf("a parameter rule has the form name:=value")
	}
	target, name := "/**", lhs
	if n, pn, ok := strings.Cut(lhs, ":"); ok {
		target, name = n, pn
	}
	if name == "" {
		return fmt.Errorf("a parameter rule has the form name:=value")
	}
	if !MatchNodeName(target, nodeName) {
		return nil
	}
	v, err := ParseValue(val)
	if err != nil {
		return fmt.Errorf("parameter %q: %w", name, err)
	}
	return set(p, name, v)
}

// MaxParamsFile bounds a params file: the node's own, every parameter with
// its description, is about 6 KB.
const MaxParamsFile = 1 << 20

// ApplyParamsFile applies the sections of a ROS 2 params file that match
// nodeName to *p (see ApplyParamsYAML); a file that fails leaves *p as it
// was.
func ApplyParamsFile[P any](p *P, set SetFunc[P], path, nodeName string, opts ...Option) error {
	data, err := regfile.ReadFile(path, "a ROS 2 params file", MaxParamsFile)
	if err != nil {
		return fmt.Errorf("params file: %w", err)
	}
	if err := ApplyParamsYAML(p, set, data, nodeName, opts...); err != nil {
		return fmt.Errorf("params file %s: %w", path, err)
	}
	return nil
}

// ApplyParamsYAML applies a params file's contents to *p: top-level keys
// are node names (absolute, relative to the root namespace, or with the
// wildcards * and **), optionally nested under namespace keys, each holding
// a ros__parameters map whose nested maps name parameters with dots.
// Sections for other nodes are checked for structure only. A name the node
// does not declare (set returns an *UnknownError) is refused in a section
// whose key is the node's own name, and skipped in one that selects it by
// pattern (see ReportIgnored). The file is applied to a copy of *p, so
// that a bad one leaves *p untouched.
func ApplyParamsYAML[P any](p *P, set SetFunc[P], data []byte, nodeName string, opts ...Option) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 || len(doc.Content) == 0 {
		return errors.New("empty; expected <node name>: ros__parameters: {...}")
	}
	if err := uniqueKeys(&doc, 0); err != nil {
		return err
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: expected a map of node names to ros__parameters", root.Line)
	}
	q := *p
	w := walker[P]{p: &q, set: set, nodeName: nodeName, ignored: map[string][]string{}, order: new([]string)}
	if err := w.nodeMap(root, nil, 0); err != nil {
		return err
	}
	*p = q
	if o := collect(opts); o.ignored != nil {
		for _, sec := range *w.order {
			o.ignored(sec, w.ignored[sec])
		}
	}
	return nil
}

// uniqueKeys refuses a map that holds a key twice, anywhere in the
// document: YAML requires keys to be unique, and a reader that keeps the
// first copy and one that keeps the last would configure the node
// differently.
func uniqueKeys(n *yaml.Node, depth int) error {
	if depth > 2*maxNamespaceDepth+8 {
		return fmt.Errorf("line %d: nested deeper than %d levels", n.Line, 2*maxNamespaceDepth+8)
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if line, dup := seen[k.Value]; dup {
				return fmt.Errorf("line %d: the key %s appears twice in one map (first on line %d); refusing the ambiguous file", k.Line, short(k.Value), line)
			}
			seen[k.Value] = k.Line
		}
	}
	for _, c := range n.Content {
		if err := uniqueKeys(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// maxNamespaceDepth bounds the nesting of namespace keys in a params file.
const maxNamespaceDepth = 64

type walker[P any] struct {
	p        *P
	set      SetFunc[P]
	nodeName string
	ignored  map[string][]string // per pattern section, the undeclared names skipped
	order    *[]string           // sections of ignored, in file order
}

// nodeMap walks the node-name (and namespace) keys of m.
func (w walker[P]) nodeMap(m *yaml.Node, path []string, depth int) error {
	if depth > maxNamespaceDepth {
		return fmt.Errorf("line %d: namespaces nest deeper than %d levels", m.Line, maxNamespaceDepth)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value == "ros__parameters" {
			return fmt.Errorf("line %d: ros__parameters must be under a node name", k.Line)
		}
		if v.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %q: expected a map holding ros__parameters", k.Line, k.Value)
		}
		sub := append(append([]string(nil), path...), strings.Trim(k.Value, "/"))
		params := mapValue(v, "ros__parameters")
		if params == nil {
			if err := w.nodeMap(v, sub, depth+1); err != nil {
				return err
			}
			continue
		}
		if len(v.Content) != 2 {
			for j := 0; j < len(v.Content); j += 2 {
				if v.Content[j].Value != "ros__parameters" {
					return fmt.Errorf("line %d: unexpected key %q beside ros__parameters", v.Content[j].Line, v.Content[j].Value)
				}
			}
		}
		key := "/" + strings.Join(sub, "/")
		if params.Kind != yaml.MappingNode {
			if params.Kind == yaml.ScalarNode && params.Tag == "!!null" {
				continue // an empty ros__parameters section
			}
			return fmt.Errorf("line %d: %s: ros__parameters must be a map", params.Line, key)
		}
		if err := w.paramMap(params, "", key, MatchNodeName(key, w.nodeName), 0, map[string]int{}); err != nil {
			return err
		}
	}
	return nil
}

// paramMap applies the parameters of a ros__parameters map; nested maps
// prefix their keys with "name.".
func (w walker[P]) paramMap(m *yaml.Node, prefix, section string, apply bool, depth int, seen map[string]int) error {
	if depth > maxNamespaceDepth {
		return fmt.Errorf("line %d: %s: parameter names nest deeper than %d levels", m.Line, section, maxNamespaceDepth)
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := prefix + k.Value
		if v.Kind == yaml.MappingNode {
			if err := w.paramMap(v, name+".", section, apply, depth+1, seen); err != nil {
				return err
			}
			continue
		}
		if line, dup := seen[name]; dup {
			return fmt.Errorf("line %d: %s: parameter %s is set twice in one section (first on line %d); refusing the ambiguous file", k.Line, section, short(name), line)
		}
		seen[name] = k.Line
		val, err := NodeValue(v)
		if err != nil {
			return fmt.Errorf("%s: parameter %q: %w", section, name, err)
		}
		if !apply {
			continue
		}
		if err := w.set(w.p, name, val); err != nil {
			var unk *UnknownError
			if errors.As(err, &unk) && isPattern(section) {
				if w.ignored[section] == nil {
					*w.order = append(*w.order, section)
				}
				w.ignored[section] = append(w.ignored[section], name)
				continue
			}
			return fmt.Errorf("line %d: %s: %w", k.Line, section, err)
		}
	}
	return nil
}

// mapValue returns the value of key in the YAML map m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// isPattern reports whether a params-file section key selects nodes by
// wildcard rather than naming one node.
func isPattern(key string) bool {
	for _, t := range strings.Split(strings.Trim(key, "/"), "/") {
		if t == "*" || t == "**" {
			return true
		}
	}
	return false
}

// MatchNodeName reports whether the node-name pattern pattern (a params
// file key or the prefix of a -p rule) selects the node whose fully
// qualified name is fqn. A pattern without a leading slash is relative to
// the root namespace; "*" matches one name token and "**" any number.
func MatchNodeName(pattern, fqn string) bool {
	split := func(s string) []string {
		s = strings.Trim(s, "/")
		if s == "" {
			return nil
		}
		return strings.Split(s, "/")
	}
	return matchTokens(split(pattern), split(fqn))
}

func matchTokens(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for k := 0; k <= len(name); k++ {
			if matchTokens(pat[1:], name[k:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	if pat[0] != "*" && pat[0] != name[0] {
		return false
	}
	return matchTokens(pat[1:], name[1:])
}

// Closest returns the known name nearest to name by edit distance when it
// is close enough to be a likely typo, else "".
func Closest(name string, known []string) string {
	best, bestD := "", len(name)/2+2
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// LogIgnored is ReportIgnored with one info line per section, through
// infof (a node's logger).
func LogIgnored(infof func(format string, args ...any)) Option {
	return ReportIgnored(func(section string, names []string) {
		infof("params file section %s: ignoring %d parameter(s) this node does not declare: %s", section, len(names), strings.Join(names, ", "))
	})
}
