package params

import (
	"github.com/fastwam/actionexpert/internal/rosparam"
)

// Load returns the defaults overridden by the parameter rules among
// args, in command-line order, then validated as a whole. Only what stands
// between `--ros-args` and `--` (or the end) is read: `-p`/`--param
// [node:]name:=value` and `--params-file FILE`. nodeName is the node's
// fully qualified name after remapping (for example
// "/fastwam_action_expert"); it selects the params-file sections and
// node-prefixed rules that apply. Undeclared names in a params-file
// section that selects the node by pattern are skipped
// (rosparam.ReportIgnored reports them).
func Load(args []string, nodeName string, opts ...rosparam.Option) (Params, error) {
	p := Default()
	if err := p.ApplyROSArgs(args, nodeName, opts...); err != nil {
		return Params{}, err
	}
	if err := p.ValidateAs(nodeName); err != nil {
		return Params{}, err
	}
	return p, nil
}

// setParam hands a value read by package rosparam to the node's parameter
// table.
func setParam(p *Params, name string, v rosparam.Value) error { return p.set(name, fromROS(v)) }

// ApplyROSArgs applies the parameter rules among args to p (see
// Load). Other ROS arguments are skipped; rcl interprets them.
func (p *Params) ApplyROSArgs(args []string, nodeName string, opts ...rosparam.Option) error {
	return rosparam.ApplyROSArgs(p, setParam, args, nodeName, opts...)
}

// ApplyParamsFile applies the sections of a ROS 2 params file that match
// nodeName: top-level keys are node names (absolute, relative to the root
// namespace, or with the wildcards * and **), optionally nested under
// namespace keys, each holding a ros__parameters map whose nested maps
// name parameters with dots. Sections for other nodes are checked for
// structure only.
func (p *Params) ApplyParamsFile(path, nodeName string, opts ...rosparam.Option) error {
	return rosparam.ApplyParamsFile(p, setParam, path, nodeName, opts...)
}

// ApplyParamsYAML is ApplyParamsFile on the file's contents.
func (p *Params) ApplyParamsYAML(data []byte, nodeName string, opts ...rosparam.Option) error {
	return rosparam.ApplyParamsYAML(p, setParam, data, nodeName, opts...)
}

// matchNodeName reports whether the node-name pattern pattern (a params
// file key or the prefix of a -p rule) selects the node whose fully
// qualified name is fqn (see rosparam.MatchNodeName).
func matchNodeName(pattern, fqn string) bool { return rosparam.MatchNodeName(pattern, fqn) }
