// Package paramsrv serves a node's parameters through rcl_interfaces'
// parameter services (~/list_parameters, ~/get_parameters,
// ~/get_parameter_types, ~/set_parameters, ~/set_parameters_atomically,
// ~/describe_parameters) as functions from request CDR bytes to response
// CDR bytes, and builds the /parameter_events message of every accepted
// change. It behaves as rclcpp's parameter service on a node that allows no
// undeclared parameters (ROS 2 Humble): the same listing rules, the same
// checks of names, read-only, types and ranges before the owner is asked,
// and the same reasons.
package paramsrv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/msgs"
)

// Owner is the node whose parameters are served. Its methods may be called
// from several goroutines; Set calls are serialised by the Server.
type Owner interface {
	// ParameterNames returns the name of every declared parameter.
	ParameterNames() []string
	// Parameter returns a declared parameter's current value, or false.
	Parameter(name string) (msgs.ParameterValue, bool)
	// Describe returns a declared parameter's descriptor, or false. An
	// empty Name is filled in with name, a zero Type with the value's.
	Describe(name string) (msgs.ParameterDescriptor, bool)
	// SetParameters applies every parameter or none. The Server has
	// checked that each is declared, not read-only, of its declared type
	// (unless dynamically typed) and in its range. A refusal's error text
	// is the reason the caller sees (say what is wrong and how to change
	// it, e.g. the lifecycle transition that can).
	SetParameters(ctx context.Context, params []msgs.Parameter) error
}

// Config sets up a Server.
type Config struct {
	// Node is the node's fully qualified name ("/namespace/name"), the
	// node field of ParameterEvents.
	Node string
	// Now stamps ParameterEvents (the node's clock: sim time when it uses
	// it); nil: time.Now.
	Now func() time.Time
	// Publish receives the ParameterEvent of every accepted change (for
	// /parameter_events), in order, one call at a time; nil: none.
	Publish func(msgs.ParameterEvent)
}

// Server answers the parameter services for one Owner. It is safe for
// concurrent use.
type Server struct {
	owner Owner
	cfg   Config
	setMu sync.Mutex // serialises sets, so events follow the changes' order
}

// New returns a server for owner.
func New(owner Owner, cfg Config) (*Server, error) {
	if owner == nil {
		return nil, errors.New("paramsrv: no owner (want the node's parameter table)")
	}
	if !strings.HasPrefix(cfg.Node, "/") || strings.HasSuffix(cfg.Node, "/") {
		return nil, fmt.Errorf("paramsrv: node name %q is not fully qualified (want \"/namespace/name\" or \"/name\")", cfg.Node)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{owner: owner, cfg: cfg}, nil
}

// TypeName is rclcpp's name of a ParameterType ("bool", "integer",
// "double", "string", "byte_array", "bool_array", "integer_array",
// "double_array", "string_array", "not set").
func TypeName(t uint8) string {
	switch t {
	case msgs.ParameterNotSet:
		return "not set"
	case msgs.ParameterBool:
		return "bool"
	case msgs.ParameterInteger:
		return "integer"
	case msgs.ParameterDouble:
		return "double"
	case msgs.ParameterString:
		return "string"
	case msgs.ParameterByteArray:
		return "byte_array"
	case msgs.ParameterBoolArray:
		return "bool_array"
	case msgs.ParameterIntegerArray:
		return "integer_array"
	case msgs.ParameterDoubleArray:
		return "double_array"
	case msgs.ParameterStringArray:
		return "string_array"
	}
	return fmt.Sprintf("unknown type %d", t)
}

// Values of each kind, for owners mapping their own kinds.

// Bool returns a PARAMETER_BOOL value.
func Bool(v bool) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterBool, BoolValue: v}
}

// Integer returns a PARAMETER_INTEGER value.
func Integer(v int64) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: v}
}

// Double returns a PARAMETER_DOUBLE value.
func Double(v float64) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterDouble, DoubleValue: v}
}

// String returns a PARAMETER_STRING value.
func String(v string) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterString, StringValue: v}
}

// ByteArray returns a PARAMETER_BYTE_ARRAY value (a copy of v).
func ByteArray(v []byte) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterByteArray, ByteArrayValue: slices.Clone(v)}
}

// BoolArray returns a PARAMETER_BOOL_ARRAY value (a copy of v).
func BoolArray(v []bool) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterBoolArray, BoolArrayValue: slices.Clone(v)}
}

// IntegerArray returns a PARAMETER_INTEGER_ARRAY value (a copy of v).
func IntegerArray(v []int64) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterIntegerArray, IntegerArrayValue: slices.Clone(v)}
}

// DoubleArray returns a PARAMETER_DOUBLE_ARRAY value (a copy of v).
func DoubleArray(v []float64) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterDoubleArray, DoubleArrayValue: slices.Clone(v)}
}

// StringArray returns a PARAMETER_STRING_ARRAY value (a copy of v).
func StringArray(v []string) msgs.ParameterValue {
	return msgs.ParameterValue{Type: msgs.ParameterStringArray, StringArrayValue: slices.Clone(v)}
}

// separator separates a parameter name's prefixes, as in rclcpp.
const separator = "."

// List answers ListParameters as rclcpp does: with no prefixes, every
// name with fewer than depth separators (all of them at depth 0,
// DEPTH_RECURSIVE); otherwise the names equal to a prefix or below it by
// fewer than depth further separators. Names come sorted; prefixes are the
// distinct parts before the last separator of the names listed, in order of
// first appearance.
func (s *Server) List(prefixes []string, depth uint64) msgs.ListParametersResult {
	names := slices.Clone(s.owner.ParameterNames())
	slices.Sort(names)
	names = slices.Compact(names)
	recursive := depth == msgs.ListParametersDepthRecursive
	var res msgs.ListParametersResult
	for _, name := range names {
		all := len(prefixes) == 0 && (recursive || uint64(strings.Count(name, separator)) < depth)
		match := slices.ContainsFunc(prefixes, func(p string) bool {
			if name == p {
				return true
			}
			if rest, ok := strings.CutPrefix(name, p+separator); ok {
				// rclcpp counts the separators after the prefix,
				// the one that follows it included.
				return recursive || uint64(strings.Count(separator+rest, separator)) < depth
			}
			return false
		})
		if !all && !match {
			continue
		}
		res.Names = append(res.Names, name)
		if i := strings.LastIndex(name, separator); i >= 0 && !slices.Contains(res.Prefixes, name[:i]) {
			res.Prefixes = append(res.Prefixes, name[:i])
		}
	}
	return res
}

// Get returns the values of names, or nil when one is not declared (rclcpp
// answers nothing then).
func (s *Server) Get(names []string) []msgs.ParameterValue {
	out := make([]msgs.ParameterValue, 0, len(names))
	for _, n := range names {
		v, ok := s.owner.Parameter(n)
		if !ok {
			return nil
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Types returns the types of names, or nil when one is not declared.
func (s *Server) Types(names []string) []uint8 {
	out := make([]uint8, 0, len(names))
	for _, v := range s.Get(names) {
		out = append(out, v.Type)
	}
	if len(out) != len(names) || len(out) == 0 {
		return nil
	}
	return out
}

// Descriptors returns the descriptors of names, or nil when one is not
// declared.
func (s *Server) Descriptors(names []string) []msgs.ParameterDescriptor {
	out := make([]msgs.ParameterDescriptor, 0, len(names))
	for _, n := range names {
		d, ok := s.descriptor(n)
		if !ok {
			return nil
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (s *Server) descriptor(name string) (msgs.ParameterDescriptor, bool) {
	d, ok := s.owner.Describe(name)
	if !ok {
		return d, false
	}
	if d.Name == "" {
		d.Name = name
	}
	if d.Type == msgs.ParameterNotSet {
		if v, ok := s.owner.Parameter(name); ok {
			d.Type = v.Type
		}
	}
	return d, true
}

// errNotDeclared is the refusal of a parameter that is not declared; the
// atomic set reports it with rclcpp's own sentence.
var errNotDeclared = errors.New("not declared")

// check runs rclcpp's checks of a set before the owner sees it: names,
// declared, read-only, not undeclaring, known type, declared type, range.
func (s *Server) check(params []msgs.Parameter) (string, error) {
	descs := make([]msgs.ParameterDescriptor, len(params))
	for i, p := range params {
		if p.Name == "" {
			return "parameter name must not be empty", nil
		}
		d, ok := s.descriptor(p.Name)
		if !ok {
			return "parameter '" + p.Name + "' cannot be set because it was not declared", errNotDeclared
		}
		if d.ReadOnly {
			return "parameter '" + p.Name + "' cannot be set because it is read-only", nil
		}
		descs[i] = d
	}
	for i, p := range params {
		if p.Value.Type == msgs.ParameterNotSet && !descs[i].DynamicTyping {
			return "cannot undeclare an statically typed parameter", nil
		}
		if p.Value.Type > msgs.ParameterStringArray {
			return fmt.Sprintf("parameter '%s' has type %d, which is not an rcl_interfaces/ParameterType (0 to 9)", p.Name, p.Value.Type), nil
		}
	}
	for i, p := range params {
		d := descs[i]
		if !d.DynamicTyping && d.Type != p.Value.Type {
			return fmt.Sprintf("Wrong parameter type, parameter {%s} is of type {%s}, setting it to {%s} is not allowed.",
				p.Name, TypeName(d.Type), TypeName(p.Value.Type)), nil
		}
		if reason := checkRange(d, p.Value); reason != "" {
			return reason, nil
		}
	}
	return "", nil
}

// checkRange applies a descriptor's range as rclcpp does: the bounds are
// always valid, a zero step means continuous, otherwise the value must sit
// on a step from from_value (doubles within 100 ulp). A NaN or an infinity
// is outside any floating point range unless it is a bound: rclcpp lets a
// NaN through a continuous range and takes an infinity as "equal" to any
// bound.
func checkRange(d msgs.ParameterDescriptor, v msgs.ParameterValue) string {
	if len(d.IntegerRange) > 0 && v.Type == msgs.ParameterInteger {
		r, x := d.IntegerRange[0], v.IntegerValue
		switch {
		case x == r.FromValue || x == r.ToValue:
		case x < r.FromValue || x > r.ToValue:
			return "Parameter {" + d.Name + "} doesn't comply with integer range."
		case r.Step == 0:
		case (uint64(x)-uint64(r.FromValue))%r.Step != 0:
			return "Parameter {" + d.Name + "} doesn't comply with integer range."
		}
	}
	if len(d.FloatingPointRange) > 0 && v.Type == msgs.ParameterDouble {
		r, x := d.FloatingPointRange[0], v.DoubleValue
		bad := "Parameter {" + d.Name + "} doesn't comply with floating point range."
		switch {
		case x == r.FromValue || x == r.ToValue:
		case math.IsNaN(x) || math.IsInf(x, 0):
			return bad
		case doublesEqual(x, r.FromValue) || doublesEqual(x, r.ToValue):
		case x < r.FromValue || x > r.ToValue:
			return bad
		case r.Step == 0:
		case !doublesEqual(x, r.FromValue+math.Round((x-r.FromValue)/r.Step)*r.Step):
			return bad
		}
	}
	return ""
}

// doublesEqual is rclcpp's comparison: within 100 ulp of the magnitude.
func doublesEqual(x, y float64) bool {
	const epsilon = 0x1p-52
	return math.Abs(x-y) <= epsilon*math.Abs(x+y)*100
}

// apply checks params and hands them to the owner as one change, then
// publishes the event; it returns the result.
func (s *Server) apply(ctx context.Context, params []msgs.Parameter) (msgs.SetParametersResult, error) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	if reason, err := s.check(params); reason != "" {
		return msgs.SetParametersResult{Reason: reason}, err
	}
	if len(params) == 0 {
		return msgs.SetParametersResult{Successful: true}, nil
	}
	if err := s.owner.SetParameters(ctx, params); err != nil {
		return msgs.SetParametersResult{Reason: err.Error()}, nil
	}
	if s.cfg.Publish != nil {
		ev := s.Event(nil, params, nil)
		s.cfg.Publish(ev)
	}
	return msgs.SetParametersResult{Successful: true}, nil
}

// SetEach sets each parameter on its own, as ~/set_parameters does: one
// result per parameter, in order, and one event per accepted parameter.
func (s *Server) SetEach(ctx context.Context, params []msgs.Parameter) []msgs.SetParametersResult {
	var out []msgs.SetParametersResult
	for _, p := range params {
		r, _ := s.apply(ctx, []msgs.Parameter{p})
		out = append(out, r)
	}
	return out
}

// SetAtomically sets all parameters or none, as ~/set_parameters_atomically
// does: one result and, when accepted, one event.
func (s *Server) SetAtomically(ctx context.Context, params []msgs.Parameter) msgs.SetParametersResult {
	r, err := s.apply(ctx, params)
	if errors.Is(err, errNotDeclared) {
		r.Reason = "One or more parameters were not declared before setting"
	}
	return r
}

// Event builds the /parameter_events message of a change: the node's
// name, a stamp from the injected clock and the parameters (copied).
func (s *Server) Event(added, changed, deleted []msgs.Parameter) msgs.ParameterEvent {
	t := s.cfg.Now()
	sec := t.Unix()
	stamp := msgs.Time{Sec: int32(max(min(sec, math.MaxInt32), math.MinInt32)), Nanosec: uint32(t.Nanosecond())}
	return msgs.ParameterEvent{
		Stamp:             stamp,
		Node:              s.cfg.Node,
		NewParameters:     slices.Clone(added),
		ChangedParameters: slices.Clone(changed),
		DeletedParameters: slices.Clone(deleted),
	}
}
