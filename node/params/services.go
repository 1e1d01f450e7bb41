package params

import (
	"fmt"
	"math"
	"strings"

	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/paramsrv"
)

// What rcl's parameter services (package paramsrv) need of the table: a
// parameter's descriptor and a value in their form.

// paramRange is the range a parameter's descriptor advertises to `ros2
// param describe` and that the parameter services check before the
// node's own checks (TestParamRangesMatchTheTable keeps the two in step).
type paramRange struct {
	ilo, ihi int64   // integer parameters
	flo, fhi float64 // double parameters
}

func paramRanges() map[string]paramRange {
	r := map[string]paramRange{
		"htp.log_level":         {ilo: 1, ihi: 5},
		"cpu.threads":           {ilo: 0, ihi: 1024},
		"cpu.video_tokens":      {ilo: 0, ihi: 1 << 20},
		"cpu.context_tokens":    {ilo: 0, ihi: 1 << 20},
		"steps":                 {ilo: 1, ihi: 1000},
		"sync.buffer":           {ilo: 1, ihi: 64},
		"rtc.execution_horizon": {ilo: 1, ihi: maxRTCRows},
		"sync.timeout":          {flo: 0, fhi: 1e6},
		"max_input_age":         {flo: 0, fhi: 1e6},
		"control_period":        {flo: 1e-6, fhi: 60},
		"self_test.min_cosine":  {flo: 0, fhi: 1},
		"shift":                 {flo: 0, fhi: math.MaxFloat32},
		"rtc.max_guidance":      {flo: 0, fhi: math.MaxFloat64},
	}
	for _, t := range []string{"kv_cache", "context", "actions"} {
		r["qos."+t+".depth"] = paramRange{ilo: 1, ihi: 1000}
	}
	return r
}

// readOnly reports whether a parameter is fixed once the node has started:
// its topics and their QoS (the subscriptions exist from the start) and
// use_sim_time (the clock the node was built on).
func readOnly(name string) bool {
	return strings.HasPrefix(name, "topics.") || strings.HasPrefix(name, "qos.") || name == "use_sim_time" || name == "autostart"
}

func paramDefNamed(name string) (paramDef, bool) {
	for _, d := range paramDefs() {
		if d.name == name {
			return d, true
		}
	}
	return paramDef{}, false
}

// Describe returns the descriptor of the parameter name for rcl's
// parameter services (package paramsrv): its documentation, when it may
// change, and its range; false for a name the node does not have.
func Describe(name string) (msgs.ParameterDescriptor, bool) {
	d, ok := paramDefNamed(name)
	if !ok {
		return msgs.ParameterDescriptor{}, false
	}
	desc := msgs.ParameterDescriptor{Name: name, Description: d.doc, ReadOnly: readOnly(name)}
	switch {
	case desc.ReadOnly:
		desc.AdditionalConstraints = "fixed when the node starts: set it in the launch file or params file"
	case IsLive(name):
		desc.AdditionalConstraints = "live: takes effect from the next chunk"
	default:
		desc.AdditionalConstraints = "needs a reload: change it while unconfigured (deactivate, cleanup, set, configure)"
	}
	switch d.kind {
	case kindBool:
		desc.Type = msgs.ParameterBool
	case kindInt:
		desc.Type = msgs.ParameterInteger
	case kindDouble:
		desc.Type = msgs.ParameterDouble
	case kindString, kindStringOff:
		desc.Type = msgs.ParameterString
	case kindDoubleArray:
		desc.Type = msgs.ParameterDoubleArray
	case kindIntOrAuto:
		desc.DynamicTyping = true // an integer or the string "auto"
	}
	if r, ok := paramRanges()[name]; ok {
		switch d.kind {
		case kindInt:
			desc.IntegerRange = []msgs.IntegerRange{{FromValue: r.ilo, ToValue: r.ihi, Step: 1}}
		case kindDouble:
			desc.FloatingPointRange = []msgs.FloatingPointRange{{FromValue: r.flo, ToValue: r.fhi}}
		}
	}
	return desc, true
}

// SetParameter sets one parameter from a parameter service's request,
// checked as a parameters file's value is; the caller validates the whole
// (Validate).
func (p *Params) SetParameter(prm msgs.Parameter) error {
	v, err := valueOf(prm.Value)
	if err != nil {
		return fmt.Errorf("parameter %q: %w", prm.Name, err)
	}
	return p.set(prm.Name, v)
}

// valueOf reads a parameter service's value in the node's value form.
func valueOf(pv msgs.ParameterValue) (value, error) {
	var rv rosparam.Value
	switch pv.Type {
	case msgs.ParameterBool:
		rv = rosparam.Value{Type: rosparam.Bool, Bool: pv.BoolValue, Text: fmt.Sprint(pv.BoolValue)}
	case msgs.ParameterInteger:
		rv = rosparam.Value{Type: rosparam.Integer, Int: pv.IntegerValue, Text: fmt.Sprint(pv.IntegerValue)}
	case msgs.ParameterDouble:
		rv = rosparam.Value{Type: rosparam.Double, Double: pv.DoubleValue, Text: fmt.Sprint(pv.DoubleValue)}
	case msgs.ParameterString:
		rv = rosparam.Value{Type: rosparam.String, Str: pv.StringValue, Text: fmt.Sprintf("%q", pv.StringValue)}
	case msgs.ParameterDoubleArray:
		rv = rosparam.Value{Type: rosparam.DoubleArray, Doubles: pv.DoubleArrayValue, Text: fmt.Sprint(pv.DoubleArrayValue)}
		for _, x := range pv.DoubleArrayValue {
			rv.Elems = append(rv.Elems, rosparam.Value{Type: rosparam.Double, Double: x, Text: fmt.Sprint(x)})
		}
	case msgs.ParameterIntegerArray:
		rv = rosparam.Value{Type: rosparam.Array, Text: fmt.Sprint(pv.IntegerArrayValue)}
		for _, x := range pv.IntegerArrayValue {
			rv.Elems = append(rv.Elems, rosparam.Value{Type: rosparam.Integer, Int: x, Text: fmt.Sprint(x)})
		}
	default:
		return value{}, fmt.Errorf("the node has no parameter of type %s", paramsrv.TypeName(pv.Type))
	}
	return fromROS(rv), nil
}
