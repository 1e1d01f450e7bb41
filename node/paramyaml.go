package node

import (
	"fmt"
	"strconv"
	"strings"
)

// Value returns the value of the parameter name as the parameters files
// spell it: a string, int64, float64, bool or []float64.
func (p *Params) Value(name string) (any, bool) {
	for _, d := range paramDefs() {
		if d.name == name {
			return d.get(p), true
		}
	}
	return nil, false
}

// ParamsYAML renders p as a ROS 2 params file for the node key nodeKey
// (for example "/**" or "fastwam_action_expert"): every parameter, grouped
// by its dotted prefix, with its description as a comment. Reading it back
// gives p. An empty array is written as a comment, since ROS cannot type
// an empty YAML sequence.
func (p *Params) ParamsYAML(nodeKey string) []byte {
	// A group with only empty arrays is written as comments too: an empty
	// YAML map would read as a parameter without a value.
	live := map[string]bool{}
	for _, d := range paramDefs() {
		if yamlText(d.get(p)) == "[]" {
			continue
		}
		for i := 0; i < len(d.name); i++ {
			if d.name[i] == '.' {
				live[d.name[:i]] = true
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  ros__parameters:\n", nodeKey)
	var open []string // the nested keys currently open
	for _, d := range paramDefs() {
		parts := strings.Split(d.name, ".")
		groups, leaf := parts[:len(parts)-1], parts[len(parts)-1]
		common := 0
		for common < len(open) && common < len(groups) && open[common] == groups[common] {
			common++
		}
		open = open[:common]
		for i, g := range groups[common:] {
			prefix := strings.Join(groups[:common+i+1], ".")
			if live[prefix] {
				fmt.Fprintf(&b, "%s%s:\n", indent(len(open)), g)
			} else {
				fmt.Fprintf(&b, "%s# %s:\n", indent(len(open)), g)
			}
			open = append(open, g)
		}
		in := indent(len(open))
		fmt.Fprintf(&b, "%s# %s\n", in, d.doc)
		text := yamlText(d.get(p))
		if text == "[]" {
			fmt.Fprintf(&b, "%s# %s: [...]\n", in, leaf)
			continue
		}
		fmt.Fprintf(&b, "%s%s: %s\n", in, leaf, text)
	}
	return []byte(b.String())
}

func indent(depth int) string { return strings.Repeat("  ", depth+2) }

// yamlText formats a parameter value so that ROS types it as declared:
// doubles always carry a decimal point, strings are quoted.
func yamlText(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return yamlDouble(v)
	case bool:
		return strconv.FormatBool(v)
	case []float64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = yamlDouble(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

func yamlDouble(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}
