package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// LoadParams returns the defaults overridden by the parameter rules among
// args, in command-line order, then validated as a whole. Only what stands
// between `--ros-args` and `--` (or the end) is read: `-p`/`--param
// [node:]name:=value` and `--params-file FILE`. nodeName is the node's
// fully qualified name after remapping (for example
// "/fastwam_action_expert"); it selects the params-file sections and
// node-prefixed rules that apply.
func LoadParams(args []string, nodeName string) (Params, error) {
	p := DefaultParams()
	if err := p.ApplyROSArgs(args, nodeName); err != nil {
		return Params{}, err
	}
	if err := p.Validate(); err != nil {
		return Params{}, err
	}
	return p, nil
}

// ApplyROSArgs applies the parameter rules among args to p (see
// LoadParams). Other ROS arguments are skipped; rcl interprets them.
func (p *Params) ApplyROSArgs(args []string, nodeName string) error {
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
			if err := p.applyRule(rule, nodeName); err != nil {
				return fmt.Errorf("%s %s: %w", a, rule, err)
			}
		case "--params-file":
			path, err := next()
			if err != nil {
				return err
			}
			if err := p.ApplyParamsFile(path, nodeName); err != nil {
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

// applyRule applies one `[node:]name:=value` rule.
func (p *Params) applyRule(rule, nodeName string) error {
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
	if !matchNodeName(target, nodeName) {
		return nil
	}
	return p.Set(name, val)
}

// ApplyParamsFile applies the sections of a ROS 2 params file that match
// nodeName: top-level keys are node names (absolute, relative to the root
// namespace, or with the wildcards * and **), optionally nested under
// namespace keys, each holding a ros__parameters map whose nested maps
// name parameters with dots. Sections for other nodes are checked for
// structure only.
func (p *Params) ApplyParamsFile(path, nodeName string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("params file: %w", err)
	}
	if err := p.ApplyParamsYAML(data, nodeName); err != nil {
		return fmt.Errorf("params file %s: %w", path, err)
	}
	return nil
}

// ApplyParamsYAML is ApplyParamsFile on the file's contents.
func (p *Params) ApplyParamsYAML(data []byte, nodeName string) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("not valid YAML: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 || len(doc.Content) == 0 {
		return errors.New("empty; expected <node name>: ros__parameters: {...}")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: expected a map of node names to ros__parameters", root.Line)
	}
	// Apply to a copy so that a bad file leaves p untouched.
	q := *p
	if err := q.applyNodeMap(root, nil, nodeName); err != nil {
		return err
	}
	*p = q
	return nil
}

// applyNodeMap walks the node-name (and namespace) keys of m.
func (p *Params) applyNodeMap(m *yaml.Node, path []string, nodeName string) error {
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
			if err := p.applyNodeMap(v, sub, nodeName); err != nil {
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
		if err := p.applyParamMap(params, "", key, matchNodeName(key, nodeName)); err != nil {
			return err
		}
	}
	return nil
}

// applyParamMap applies the parameters of a ros__parameters map; nested
// maps prefix their keys with "name.".
func (p *Params) applyParamMap(m *yaml.Node, prefix, section string, apply bool) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := prefix + k.Value
		if v.Kind == yaml.MappingNode {
			if err := p.applyParamMap(v, name+".", section, apply); err != nil {
				return err
			}
			continue
		}
		val, err := nodeValue(v)
		if err != nil {
			return fmt.Errorf("%s: parameter %q: %w", section, name, err)
		}
		if !apply {
			continue
		}
		if err := p.set(name, val); err != nil {
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

// matchNodeName reports whether the node-name pattern pattern (a params
// file key or the prefix of a -p rule) selects the node whose fully
// qualified name is fqn. A pattern without a leading slash is relative to
// the root namespace; "*" matches one name token and "**" any number.
func matchNodeName(pattern, fqn string) bool {
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
