package rosparam

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Entry is one parameter as a params file lists it: its dotted name, its
// description and its value (string, int64, float64, bool or []float64).
type Entry struct {
	Name  string
	Doc   string
	Value any
}

// ParamsYAML renders entries as a ROS 2 params file for the node key
// nodeKey (for example "/**" or "fastwam_executor"): every parameter,
// grouped by its dotted prefix (each group once, where its first parameter
// comes in the order given, so that no key appears twice in one map), with
// its description as a comment. Reading it back with ApplyParamsYAML gives the same values. An
// empty array is written as a comment, since ROS cannot type an empty YAML
// sequence; so is a group holding only empty arrays.
func ParamsYAML(nodeKey string, entries []Entry) []byte {
	entries = grouped(entries)
	live := map[string]bool{}
	for _, e := range entries {
		if FormatValue(e.Value) == "[]" {
			continue
		}
		for i := 0; i < len(e.Name); i++ {
			if e.Name[i] == '.' {
				live[e.Name[:i]] = true
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  ros__parameters:\n", nodeKey)
	var open []string // the nested keys currently open
	for _, e := range entries {
		parts := strings.Split(e.Name, ".")
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
		fmt.Fprintf(&b, "%s# %s\n", in, e.Doc)
		text := FormatValue(e.Value)
		if text == "[]" {
			fmt.Fprintf(&b, "%s# %s: [...]\n", in, leaf)
			continue
		}
		fmt.Fprintf(&b, "%s%s: %s\n", in, leaf, text)
	}
	return []byte(b.String())
}

// grouped orders entries so that those sharing a dotted prefix are
// contiguous, each group (and each entry within it) where it first
// appears: a stable sort on the first index of every prefix of the name.
func grouped(entries []Entry) []Entry {
	first := map[string]int{}
	for i, e := range entries {
		for j := 0; j < len(e.Name); j++ {
			if e.Name[j] == '.' {
				if _, ok := first[e.Name[:j]]; !ok {
					first[e.Name[:j]] = i
				}
			}
		}
	}
	keys := make([][]int, len(entries))
	for i, e := range entries {
		for j := 0; j < len(e.Name); j++ {
			if e.Name[j] == '.' {
				keys[i] = append(keys[i], first[e.Name[:j]])
			}
		}
		keys[i] = append(keys[i], i)
	}
	idx := make([]int, len(entries))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return slices.Compare(keys[a], keys[b]) })
	out := make([]Entry, len(entries))
	for i, k := range idx {
		out[i] = entries[k]
	}
	return out
}

func indent(depth int) string { return strings.Repeat("  ", depth+2) }

// FormatValue formats a parameter value so that ROS types it as declared:
// doubles always carry a decimal point, strings are quoted.
func FormatValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return formatDouble(v)
	case bool:
		return strconv.FormatBool(v)
	case []float64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = formatDouble(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

func formatDouble(x float64) string {
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}
