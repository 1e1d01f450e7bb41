package paramsrv_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/paramsrv"
)

// fakeNode is a small parameter table: values, descriptors, and reasons it
// refuses changes with (as the node refuses what needs a transition).
type fakeNode struct {
	mu     sync.Mutex
	values map[string]msgs.ParameterValue
	descs  map[string]msgs.ParameterDescriptor
	refuse map[string]string
	calls  [][]string // names of each SetParameters call
}

func newFake() *fakeNode {
	return &fakeNode{
		values: map[string]msgs.ParameterValue{
			"steps":              paramsrv.Integer(10),
			"shift":              paramsrv.Double(5),
			"dry_run":            paramsrv.Bool(false),
			"clip.low":           paramsrv.DoubleArray([]float64{-1, -1}),
			"clip.high":          paramsrv.DoubleArray([]float64{1, 1}),
			"htp.context_binary": paramsrv.String("/models/action_step.bin"),
			"htp.perf.mode":      paramsrv.String("burst"),
			"a.b.c.d":            paramsrv.Integer(0),
			"node_name":          paramsrv.String("action_expert"),
			"free":               paramsrv.Integer(1),
			"stride":             paramsrv.Integer(1),
		},
		descs: map[string]msgs.ParameterDescriptor{
			"steps": {Description: "denoise steps per chunk",
				IntegerRange: []msgs.IntegerRange{{FromValue: 1, ToValue: 100, Step: 1}}},
			"shift": {Description: "schedule shift",
				FloatingPointRange: []msgs.FloatingPointRange{{FromValue: 0.5, ToValue: 20, Step: 0.25}}},
			"node_name": {ReadOnly: true, Description: "the node's name"},
			"free":      {DynamicTyping: true},
			"stride":    {IntegerRange: []msgs.IntegerRange{{FromValue: 1, ToValue: 10, Step: 3}}},
		},
		refuse: map[string]string{
			"htp.context_binary": "htp.context_binary can only change while unconfigured: run cleanup, then configure",
		},
	}
}

func (f *fakeNode) ParameterNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.values {
		names = append(names, n)
	}
	return names
}

func (f *fakeNode) Parameter(name string) (msgs.ParameterValue, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.values[name]
	return v, ok
}

func (f *fakeNode) Describe(name string) (msgs.ParameterDescriptor, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.values[name]; !ok {
		return msgs.ParameterDescriptor{}, false
	}
	return f.descs[name], true
}

func (f *fakeNode) SetParameters(_ context.Context, ps []msgs.Parameter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	f.calls = append(f.calls, names)
	for _, p := range ps {
		if r, ok := f.refuse[p.Name]; ok {
			return errors.New(r)
		}
	}
	for _, p := range ps {
		f.values[p.Name] = p.Value
	}
	return nil
}

type events struct {
	mu  sync.Mutex
	got []msgs.ParameterEvent
}

func (e *events) publish(ev msgs.ParameterEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func newServer(t testing.TB) (*paramsrv.Server, *fakeNode, *events) {
	t.Helper()
	f, ev := newFake(), &events{}
	s, err := paramsrv.New(f, paramsrv.Config{
		Node:    "/fastwam/action_expert",
		Now:     func() time.Time { return time.Unix(1700000005, 42) },
		Publish: ev.publish,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, f, ev
}

var ctx = context.Background()

// TestList: the listing rules of rclcpp's NodeParameters::list_parameters,
// the expected answers worked out by hand from them.
func TestList(t *testing.T) {
	s, _, _ := newServer(t)
	for _, tc := range []struct {
		prefixes []string
		depth    uint64
		names    []string
		pre      []string
	}{
		{nil, 0, []string{"a.b.c.d", "clip.high", "clip.low", "dry_run", "free", "htp.context_binary", "htp.perf.mode", "node_name", "shift", "steps", "stride"},
			[]string{"a.b.c", "clip", "htp", "htp.perf"}},
		{nil, 1, []string{"dry_run", "free", "node_name", "shift", "steps", "stride"}, nil},
		{nil, 2, []string{"clip.high", "clip.low", "dry_run", "free", "htp.context_binary", "node_name", "shift", "steps", "stride"},
			[]string{"clip", "htp"}},
		{[]string{"htp"}, 0, []string{"htp.context_binary", "htp.perf.mode"}, []string{"htp", "htp.perf"}},
		{[]string{"htp"}, 1, nil, nil}, // rclcpp counts the separator after the prefix
		{[]string{"htp"}, 2, []string{"htp.context_binary"}, []string{"htp"}},
		{[]string{"steps"}, 0, []string{"steps"}, nil},
		{[]string{"ht", "cli"}, 0, nil, nil},
		{[]string{"clip", "htp.perf"}, 0, []string{"clip.high", "clip.low", "htp.perf.mode"}, []string{"clip", "htp.perf"}},
	} {
		got := s.List(tc.prefixes, tc.depth)
		if !reflect.DeepEqual(got.Names, tc.names) || !reflect.DeepEqual(got.Prefixes, tc.pre) {
			t.Errorf("List(%q, %d) = %q %q, want %q %q", tc.prefixes, tc.depth, got.Names, got.Prefixes, tc.names, tc.pre)
		}
	}
}

func TestGetTypesDescribe(t *testing.T) {
	s, _, _ := newServer(t)
	if got := s.Get([]string{"steps", "clip.low"}); !reflect.DeepEqual(got, []msgs.ParameterValue{
		{Type: msgs.ParameterInteger, IntegerValue: 10}, {Type: msgs.ParameterDoubleArray, DoubleArrayValue: []float64{-1, -1}}}) {
		t.Errorf("Get = %v", got)
	}
	if got := s.Types([]string{"dry_run", "htp.perf.mode", "clip.high"}); !reflect.DeepEqual(got, []uint8{1, 4, 8}) {
		t.Errorf("Types = %v", got)
	}
	d := s.Descriptors([]string{"steps", "node_name"})
	if len(d) != 2 || d[0].Name != "steps" || d[0].Type != msgs.ParameterInteger || d[0].Description != "denoise steps per chunk" ||
		len(d[0].IntegerRange) != 1 || d[1].Name != "node_name" || !d[1].ReadOnly || d[1].Type != msgs.ParameterString {
		t.Errorf("Descriptors = %+v", d)
	}
	// One undeclared name: rclcpp answers nothing at all.
	if s.Get([]string{"steps", "nope"}) != nil || s.Types([]string{"nope"}) != nil || s.Descriptors([]string{"steps", "nope"}) != nil {
		t.Error("an undeclared name got an answer")
	}
}

func param(name string, v msgs.ParameterValue) msgs.Parameter {
	return msgs.Parameter{Name: name, Value: v}
}

// TestSetEach: every refusal rclcpp makes, with its reason, and the owner's.
func TestSetEach(t *testing.T) {
	s, f, ev := newServer(t)
	res := s.SetEach(ctx, []msgs.Parameter{
		param("steps", paramsrv.Integer(20)),
		param("steps", paramsrv.String("x")),
		param("steps", paramsrv.Integer(0)),
		param("nope", paramsrv.Integer(1)),
		param("node_name", paramsrv.String("other")),
		param("htp.context_binary", paramsrv.String("/tmp/x.bin")),
		param("shift", paramsrv.Double(math.NaN())),
		param("", paramsrv.Integer(1)),
		param("steps", msgs.ParameterValue{Type: 42}),
		param("steps", msgs.ParameterValue{}),
		param("free", paramsrv.String("now a string")),
		param("shift", paramsrv.Integer(5)),
	})
	want := []msgs.SetParametersResult{
		{Successful: true},
		{Reason: "Wrong parameter type, parameter {steps} is of type {integer}, setting it to {string} is not allowed."},
		{Reason: "Parameter {steps} doesn't comply with integer range."},
		{Reason: "parameter 'nope' cannot be set because it was not declared"},
		{Reason: "parameter 'node_name' cannot be set because it is read-only"},
		{Reason: "htp.context_binary can only change while unconfigured: run cleanup, then configure"},
		{Reason: "Parameter {shift} doesn't comply with floating point range."},
		{Reason: "parameter name must not be empty"},
		{Reason: "parameter 'steps' has type 42, which is not an rcl_interfaces/ParameterType (0 to 9)"},
		{Reason: "cannot undeclare an statically typed parameter"},
		{Successful: true},
		{Reason: "Wrong parameter type, parameter {shift} is of type {double}, setting it to {integer} is not allowed."},
	}
	if !reflect.DeepEqual(res, want) {
		for i := range max(len(res), len(want)) {
			if i >= len(res) || i >= len(want) || res[i] != want[i] {
				t.Errorf("result %d: %+v", i, res[min(i, len(res)-1)])
			}
		}
		t.Fatal("SetEach results differ")
	}
	if v, _ := f.Parameter("steps"); v.IntegerValue != 20 {
		t.Errorf("steps = %v after an accepted set", v)
	}
	// The owner saw only what passed the checks.
	if want := [][]string{{"steps"}, {"htp.context_binary"}, {"free"}}; !reflect.DeepEqual(f.calls, want) {
		t.Errorf("owner calls %q, want %q", f.calls, want)
	}
	// One event per accepted set.
	if len(ev.got) != 2 || ev.got[0].ChangedParameters[0].Name != "steps" || ev.got[1].ChangedParameters[0].Name != "free" {
		t.Fatalf("events %+v", ev.got)
	}
	e := ev.got[0]
	if e.Node != "/fastwam/action_expert" || e.Stamp != (msgs.Time{Sec: 1700000005, Nanosec: 42}) || e.NewParameters != nil || e.DeletedParameters != nil {
		t.Errorf("event %+v", e)
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		p  msgs.Parameter
		ok bool
	}{
		{param("steps", paramsrv.Integer(1)), true},
		{param("steps", paramsrv.Integer(100)), true},
		{param("steps", paramsrv.Integer(101)), false},
		{param("steps", paramsrv.Integer(math.MinInt64)), false},
		{param("stride", paramsrv.Integer(4)), true},
		{param("stride", paramsrv.Integer(5)), false},
		{param("stride", paramsrv.Integer(10)), true}, // the to bound, off the step
		{param("shift", paramsrv.Double(0.75)), true},
		{param("shift", paramsrv.Double(0.8)), false},
		{param("shift", paramsrv.Double(20)), true},
		{param("shift", paramsrv.Double(0.5+1e-14)), true}, // within 100 ulp of the bound
		{param("shift", paramsrv.Double(math.Inf(1))), false},
		{param("shift", paramsrv.Double(0.25)), false},
	} {
		s, _, _ := newServer(t)
		r := s.SetEach(ctx, []msgs.Parameter{tc.p})[0]
		if r.Successful != tc.ok {
			t.Errorf("%s = %v: %+v, want ok=%v", tc.p.Name, tc.p.Value, r, tc.ok)
		}
	}
}

func TestSetAtomically(t *testing.T) {
	s, f, ev := newServer(t)
	r := s.SetAtomically(ctx, []msgs.Parameter{param("steps", paramsrv.Integer(7)), param("dry_run", paramsrv.Bool(true))})
	if !r.Successful || len(ev.got) != 1 || len(ev.got[0].ChangedParameters) != 2 {
		t.Fatalf("%+v, events %+v", r, ev.got)
	}
	// One bad parameter: nothing changes, the owner is not asked.
	calls := len(f.calls)
	r = s.SetAtomically(ctx, []msgs.Parameter{param("steps", paramsrv.Integer(8)), param("shift", paramsrv.Double(99))})
	if r.Successful || r.Reason != "Parameter {shift} doesn't comply with floating point range." || len(f.calls) != calls {
		t.Fatalf("%+v", r)
	}
	if v, _ := f.Parameter("steps"); v.IntegerValue != 7 {
		t.Fatalf("steps changed to %v by a refused atomic set", v)
	}
	r = s.SetAtomically(ctx, []msgs.Parameter{param("steps", paramsrv.Integer(8)), param("nope", paramsrv.Bool(true))})
	if r.Successful || r.Reason != "One or more parameters were not declared before setting" {
		t.Fatalf("%+v", r)
	}
	// The owner's refusal of one refuses all.
	r = s.SetAtomically(ctx, []msgs.Parameter{param("steps", paramsrv.Integer(9)), param("htp.context_binary", paramsrv.String("b"))})
	if r.Successful || !strings.Contains(r.Reason, "run cleanup, then configure") {
		t.Fatalf("%+v", r)
	}
	if v, _ := f.Parameter("steps"); v.IntegerValue != 7 || len(ev.got) != 1 {
		t.Fatalf("a refused set changed steps to %v or published (%d events)", v, len(ev.got))
	}
}

func TestNew(t *testing.T) {
	if _, err := paramsrv.New(nil, paramsrv.Config{Node: "/n"}); err == nil || !strings.Contains(err.Error(), "no owner") {
		t.Errorf("nil owner: %v", err)
	}
	for _, n := range []string{"", "node", "/ns/"} {
		if _, err := paramsrv.New(newFake(), paramsrv.Config{Node: n}); err == nil || !strings.Contains(err.Error(), "not fully qualified") {
			t.Errorf("node %q: %v", n, err)
		}
	}
}

func TestTypeNames(t *testing.T) {
	var got []string
	for i := range uint8(11) {
		got = append(got, paramsrv.TypeName(i))
	}
	want := []string{"not set", "bool", "integer", "double", "string", "byte_array", "bool_array", "integer_array", "double_array", "string_array", "unknown type 10"}
	if !slices.Equal(got, want) {
		t.Fatalf("%q", got)
	}
}

func TestConcurrentSets(t *testing.T) {
	s, f, ev := newServer(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s.SetEach(ctx, []msgs.Parameter{param("steps", paramsrv.Integer(int64(1+(g*50+i)%100)))})
				_ = s.List(nil, 0)
				_ = s.Get([]string{"steps"})
			}
		}()
	}
	wg.Wait()
	if len(ev.got) != 400 {
		t.Fatalf("%d events, want 400", len(ev.got))
	}
	last := ev.got[len(ev.got)-1].ChangedParameters[0].Value
	if v, _ := f.Parameter("steps"); !reflect.DeepEqual(v, last) {
		t.Fatalf("last event %v, value %v: events out of order", last, v)
	}
}

// --- the service handlers ---

func goldenCDR(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "msgs", "testdata", name+".cdr"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandlersOnGoldenRequests(t *testing.T) {
	s, _, ev := newServer(t)
	// names ["steps", "nope"]: nothing, as rclcpp.
	b, err := s.HandleGetParameters(ctx, goldenCDR(t, "rcl_get_parameters_request"))
	if err != nil {
		t.Fatal(err)
	}
	var gp msgs.GetParametersResponse
	if err := gp.UnmarshalCDR(b); err != nil || gp.Values != nil {
		t.Fatalf("%+v, %v", gp, err)
	}
	// steps=10, shift=5, dry_run=true, backend="htp" (undeclared), clip.low=[-1,-0.5].
	b, err = s.HandleSetParameters(ctx, goldenCDR(t, "rcl_set_parameters_request"))
	if err != nil {
		t.Fatal(err)
	}
	var sp msgs.SetParametersResponse
	if err := sp.UnmarshalCDR(b); err != nil {
		t.Fatal(err)
	}
	want := []msgs.SetParametersResult{{Successful: true}, {Successful: true}, {Successful: true},
		{Reason: "parameter 'backend' cannot be set because it was not declared"}, {Successful: true}}
	if !reflect.DeepEqual(sp.Results, want) || len(ev.got) != 4 {
		t.Fatalf("%+v, %d events", sp.Results, len(ev.got))
	}
	// prefixes [clip, htp], depth 1: nothing (see TestList).
	b, err = s.HandleListParameters(ctx, goldenCDR(t, "rcl_list_parameters_request"))
	if err != nil {
		t.Fatal(err)
	}
	var lp msgs.ListParametersResponse
	if err := lp.UnmarshalCDR(b); err != nil || lp.Result.Names != nil {
		t.Fatalf("%+v, %v", lp, err)
	}
	b, err = s.HandleGetParameterTypes(ctx, goldenCDR(t, "rcl_get_parameter_types_request"))
	if err != nil {
		t.Fatal(err)
	}
	var gt msgs.GetParameterTypesResponse
	if err := gt.UnmarshalCDR(b); err != nil || !slices.Equal(gt.Types, []uint8{msgs.ParameterDouble}) {
		t.Fatalf("%+v, %v", gt, err)
	}
	b, err = s.HandleDescribeParameters(ctx, goldenCDR(t, "rcl_describe_parameters_request"))
	if err != nil {
		t.Fatal(err)
	}
	var dp msgs.DescribeParametersResponse
	if err := dp.UnmarshalCDR(b); err != nil || len(dp.Descriptors) != 2 || dp.Descriptors[1].FloatingPointRange[0].Step != 0.25 {
		t.Fatalf("%+v, %v", dp, err)
	}
	// backend is undeclared: the atomic set names no parameter.
	b, err = s.HandleSetParametersAtomically(ctx, goldenCDR(t, "rcl_set_parameters_atomically_request"))
	if err != nil {
		t.Fatal(err)
	}
	var sa msgs.SetParametersAtomicallyResponse
	if err := sa.UnmarshalCDR(b); err != nil || sa.Result.Successful || sa.Result.Reason != "One or more parameters were not declared before setting" {
		t.Fatalf("%+v, %v", sa, err)
	}
}

func TestEventEncodesAsGolden(t *testing.T) {
	s, _, _ := newServer(t)
	ev := s.Event(nil, []msgs.Parameter{param("steps", paramsrv.Integer(10)), param("shift", paramsrv.Double(5))}, nil)
	b, err := ev.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenCDR(t, "rcl_parameter_event"); string(b) != string(want) {
		t.Fatalf("event\n got % x\nwant % x", b, want)
	}
}

func TestMalformedRequests(t *testing.T) {
	s, f, ev := newServer(t)
	huge := []byte{0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f}
	for _, svc := range s.Services() {
		for _, req := range [][]byte{nil, {0, 1}, {1, 0, 0, 0}, huge, append(goldenCDR(t, "rcl_parameter_event"), 1, 2, 3, 4, 5)} {
			_, err := svc.Handler(ctx, req)
			var me *msgs.Error
			if err == nil || !errors.As(err, &me) || !strings.HasPrefix(err.Error(), "paramsrv: "+svc.Name+" request is not a "+svc.Type+"_Request: msgs: ") {
				t.Errorf("%s(% x): %v", svc.Name, req, err)
			}
		}
	}
	if len(f.calls) != 0 || len(ev.got) != 0 {
		t.Fatal("a malformed request reached the owner")
	}
}

func goldenSeed(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "..", "msgs", "testdata", name+".cdr"))
	if err != nil {
		f.Fatal(err)
	}
	return b
}
