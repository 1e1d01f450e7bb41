package params

import "github.com/fastwam/actionexpert/internal/rosparam"

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
	defs := paramDefs()
	entries := make([]rosparam.Entry, len(defs))
	for i, d := range defs {
		entries[i] = rosparam.Entry{Name: d.name, Doc: d.doc, Value: d.get(p)}
	}
	return rosparam.ParamsYAML(nodeKey, entries)
}
