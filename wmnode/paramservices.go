package wmnode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/internal/shutdown"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/paramsrv"
)

// The world-model node answers rcl_interfaces' parameter services (package
// paramsrv) from its parameter table. Its world model, topics and
// hand-off are set up when the process starts, before the node is managed,
// so no parameter is live: every descriptor says read_only, and a set is
// refused (rclcpp's "cannot be set because it is read-only") whatever the
// lifecycle state. Change them in the launch or params file and restart
// the node.

// ReadOnlyConstraint is the additional_constraints of every parameter's
// descriptor.
const ReadOnlyConstraint = "fixed when the node starts (the world model, topics and hand-off are set up before the node is managed): set it in the launch or params file and restart the node; the world-model node has no live parameters"

// paramTable is the node's parameters as paramsrv.Owner.
type paramTable struct {
	p    Params
	defs []paramDef
}

var _ paramsrv.Owner = (*paramTable)(nil)

// ParameterNames implements paramsrv.Owner.
func (t *paramTable) ParameterNames() []string { return ParamNames() }

func (t *paramTable) def(name string) (paramDef, bool) {
	for _, d := range t.defs {
		if d.Name == name {
			return d, true
		}
	}
	return paramDef{}, false
}

// Parameter implements paramsrv.Owner: the value the node runs with.
func (t *paramTable) Parameter(name string) (msgs.ParameterValue, bool) {
	d, ok := t.def(name)
	if !ok {
		return msgs.ParameterValue{}, false
	}
	switch x := d.Get(&t.p).(type) {
	case bool:
		return paramsrv.Bool(x), true
	case int64:
		return paramsrv.Integer(x), true
	case float64:
		return paramsrv.Double(x), true
	case string:
		return paramsrv.String(x), true
	case rosparam.StringList:
		return paramsrv.StringArray(x), true
	}
	return msgs.ParameterValue{}, false
}

// Describe implements paramsrv.Owner: the parameter's documentation, type
// and range, read-only.
func (t *paramTable) Describe(name string) (msgs.ParameterDescriptor, bool) {
	d, ok := t.def(name)
	if !ok {
		return msgs.ParameterDescriptor{}, false
	}
	desc := msgs.ParameterDescriptor{Name: name, Description: d.Doc, ReadOnly: true, AdditionalConstraints: ReadOnlyConstraint}
	switch d.Type {
	case rosparam.Bool:
		desc.Type = msgs.ParameterBool
	case rosparam.Integer:
		desc.Type = msgs.ParameterInteger
	case rosparam.Double:
		desc.Type = msgs.ParameterDouble
	case rosparam.String:
		desc.Type = msgs.ParameterString
	case rosparam.Array:
		desc.Type = msgs.ParameterStringArray
	}
	if r, ok := paramRanges()[name]; ok {
		if d.Type == rosparam.Integer {
			desc.IntegerRange = []msgs.IntegerRange{{FromValue: int64(r[0]), ToValue: int64(r[1]), Step: 1}}
		} else {
			desc.FloatingPointRange = []msgs.FloatingPointRange{{FromValue: r[0], ToValue: r[1]}}
		}
	}
	return desc, true
}

// SetParameters implements paramsrv.Owner. The server refuses read-only
// parameters before asking, so this is reached only by a parameter the
// table does not mark read-only: there is none, and it refuses too.
func (t *paramTable) SetParameters(_ context.Context, ps []msgs.Parameter) error {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return fmt.Errorf("%s cannot change while the node runs: %s", strings.Join(names, ", "), ReadOnlyConstraint)
}

// paramRanges are the numeric parameters' ranges, as in paramDefs.
func paramRanges() map[string][2]float64 {
	r := map[string][2]float64{
		"sync.tolerance":          {0, maxTolerance.Seconds()},
		"rate":                    {0, maxRate},
		"shm.slots":               {2, kvshm.MaxSlots},
		"diagnostics.stale_after": {minPeriod.Seconds(), maxPeriod.Seconds()},
		"diagnostics.period":      {minPeriod.Seconds(), maxPeriod.Seconds()},
		"shutdown_grace":          {(10 * time.Millisecond).Seconds(), shutdown.MaxGrace.Seconds()},
	}
	for _, q := range []string{"cameras", "proprio", "instruction", "out"} {
		r["qos."+q+".depth"] = [2]float64{1, 1000}
	}
	return r
}

// ParameterServer returns the server of the node's parameter services
// over p, for the node whose fully qualified name is fqn.
func ParameterServer(p Params, fqn string) (*paramsrv.Server, error) {
	return paramsrv.New(&paramTable{p: p, defs: paramDefs()}, paramsrv.Config{Node: fqn})
}

// ServeParameters serves the parameter services (~/list_parameters,
// ~/get_parameters, ~/get_parameter_types, ~/set_parameters,
// ~/set_parameters_atomically, ~/describe_parameters) of the node on t,
// which must serve services (node.ServiceServer). Requests are answered
// under ctx.
func (n *Node) ServeParameters(ctx context.Context, t node.Transport) error {
	srv, ok := t.(node.ServiceServer)
	if !ok {
		return errors.New("wmnode: the transport serves no services; the parameter services need them")
	}
	ps, err := ParameterServer(n.p, n.name)
	if err != nil {
		return fmt.Errorf("wmnode: parameter services: %w", err)
	}
	for _, s := range ps.Services() {
		h := s.Handler
		if err := srv.Serve("~/"+s.Name, s.Type, func(req []byte) ([]byte, error) { return h(ctx, req) }); err != nil {
			return fmt.Errorf("wmnode: serve ~/%s: %w", s.Name, err)
		}
	}
	return nil
}
