package wmnode

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/paramsrv"
)

// TestParameterServices: the parameter services list every parameter,
// give its value as the node runs with it, a type matching its
// descriptor, and refuse every set as read-only, leaving the values as
// they were.
func TestParameterServices(t *testing.T) {
	p := tinyParams()
	p.Rate, p.SHM.Slots = 12.5, 4
	p.Topics.Cameras = []string{"cam/a", "cam/b"}
	s, err := ParameterServer(p, "/arm2/fastwam_world_model")
	if err != nil {
		t.Fatal(err)
	}
	names := ParamNames()
	listed := s.List(nil, 0)
	if got := slices.Sorted(slices.Values(listed.Names)); !slices.Equal(got, names) {
		t.Fatalf("list_parameters: %q, want %q", got, names)
	}
	if l := s.List([]string{"qos.cameras"}, 0); len(l.Names) != 4 {
		t.Errorf("list_parameters qos.cameras: %q, want its 4 parameters", l.Names)
	}
	vals := s.Get([]string{"rate", "shm.slots", "topics.cameras", "flip_cameras", "model.dit_weights", "sync.tolerance"})
	want := []msgs.ParameterValue{paramsrv.Double(12.5), paramsrv.Integer(4), paramsrv.StringArray([]string{"cam/a", "cam/b"}),
		paramsrv.Bool(true), paramsrv.String(p.DiTWeights), paramsrv.Double(1)}
	if fmt.Sprint(vals) != fmt.Sprint(want) {
		t.Errorf("get_parameters: %v, want %v", vals, want)
	}
	if v := s.Get([]string{"rate", "no.such"}); len(v) != 0 {
		t.Errorf("get_parameters with an undeclared name: %v, want none", v)
	}
	types := s.Types(names)
	descs := s.Descriptors(names)
	if len(types) != len(names) || len(descs) != len(names) {
		t.Fatalf("%d types, %d descriptors for %d parameters", len(types), len(descs), len(names))
	}
	for i, name := range names {
		d := descs[i]
		if types[i] == msgs.ParameterNotSet || d.Type != types[i] || d.Name != name || !d.ReadOnly || d.Description == "" {
			t.Errorf("%s: type %d, descriptor %+v", name, types[i], d)
		}
	}
	for _, set := range [][]msgs.Parameter{
		{{Name: "rate", Value: paramsrv.Double(10)}},
		{{Name: "topics.cameras", Value: paramsrv.StringArray([]string{"x"})}},
		{{Name: "use_sim_time", Value: paramsrv.Bool(true)}},
	} {
		for _, r := range s.SetEach(t.Context(), set) {
			if r.Successful || !strings.Contains(r.Reason, "read-only") {
				t.Errorf("set_parameters %s: %+v, want refused as read-only", set[0].Name, r)
			}
		}
		if r := s.SetAtomically(t.Context(), set); r.Successful {
			t.Errorf("set_parameters_atomically %s: %+v, want refused", set[0].Name, r)
		}
	}
	if v := s.Get([]string{"rate", "use_sim_time"}); fmt.Sprint(v) != fmt.Sprint([]msgs.ParameterValue{paramsrv.Double(12.5), paramsrv.Bool(false)}) {
		t.Errorf("after refused sets: %v", v)
	}
}

// TestParameterRanges: each range a descriptor states is the one the
// parameter's checks enforce: both ends accepted, just outside refused.
func TestParameterRanges(t *testing.T) {
	s, err := ParameterServer(DefaultParams(), DefaultNodeName)
	if err != nil {
		t.Fatal(err)
	}
	ranged := 0
	for _, d := range s.Descriptors(ParamNames()) {
		var lo, hi, eps float64
		switch {
		case len(d.IntegerRange) == 1:
			lo, hi, eps = float64(d.IntegerRange[0].FromValue), float64(d.IntegerRange[0].ToValue), 1
		case len(d.FloatingPointRange) == 1:
			lo, hi = d.FloatingPointRange[0].FromValue, d.FloatingPointRange[0].ToValue
			eps = math.Max(1e-3, hi*1e-3)
		default:
			continue
		}
		ranged++
		val := func(x float64) rosparam.Value {
			if d.Type == msgs.ParameterInteger {
				return rosparam.Value{Type: rosparam.Integer, Int: int64(x)}
			}
			return rosparam.Value{Type: rosparam.Double, Double: x}
		}
		for _, c := range []struct {
			x  float64
			ok bool
		}{{lo, true}, {hi, true}, {lo - eps, false}, {hi + eps, false}} {
			q := DefaultParams()
			if err := setParam(&q, d.Name, val(c.x)); (err == nil) != c.ok {
				t.Errorf("%s = %v (range [%v, %v]): %v", d.Name, c.x, lo, hi, err)
			}
		}
	}
	if ranged < 10 {
		t.Errorf("%d parameters with a range, want the 10 numeric ones", ranged)
	}
}

// TestServeParameters: the services are served on the node's transport
// and answer CDR requests.
func TestServeParameters(t *testing.T) {
	p := tinyParams()
	r := newRig(t, p, tinyModel(t, p), false, func(c *Config) { c.StartInactive = true })
	if err := r.wm.ServeParameters(t.Context(), r.bus); err != nil {
		t.Fatal(err)
	}
	req, err := (&msgs.GetParametersRequest{Names: []string{"kv_transport", "rate"}}).MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.bus.Call("~/get_parameters", msgs.SrvGetParameters, req)
	if err != nil {
		t.Fatal(err)
	}
	var resp msgs.GetParametersResponse
	if err := resp.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(resp.Values) != fmt.Sprint([]msgs.ParameterValue{paramsrv.String("dds"), paramsrv.Double(0)}) {
		t.Errorf("~/get_parameters: %v", resp.Values)
	}
	// Every service is there with its type: an empty request reaches the
	// server, which refuses it as not a message of the request type.
	for _, svc := range []struct{ name, typ string }{
		{"~/list_parameters", msgs.SrvListParameters}, {"~/describe_parameters", msgs.SrvDescribeParameters},
		{"~/get_parameter_types", msgs.SrvGetParameterTypes}, {"~/set_parameters", msgs.SrvSetParameters},
		{"~/set_parameters_atomically", msgs.SrvSetParametersAtomically},
	} {
		if _, err := r.bus.Call(svc.name, svc.typ, nil); err == nil || !strings.Contains(err.Error(), "paramsrv:") {
			t.Errorf("%s with an empty request: %v, want the server's refusal", svc.name, err)
		}
	}
}
