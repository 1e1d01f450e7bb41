package executor

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/internal/shutdown"
	"github.com/fastwam/actionexpert/node/params"
)

// Aggregation says how the rows of overlapping chunks are combined for one
// instant: LeRobot's async-inference choices.
type Aggregation string

// Aggregations accepted by the aggregation parameter.
const (
	// AggregateLatest executes the newest covering chunk's row.
	AggregateLatest Aggregation = "latest"
	// AggregateAverage executes the mean of every covering chunk's row.
	AggregateAverage Aggregation = "average"
	// AggregateWeighted folds the covering chunks' rows in stamp order,
	// old*(1-w) + new*w with w the aggregation_weight parameter.
	AggregateWeighted Aggregation = "weighted_average"
)

// Starvation says what the executor does at an instant no chunk covers.
type Starvation string

// Starvation policies accepted by the on_starvation parameter.
const (
	// StarveHold republishes the last action, flagged held.
	StarveHold Starvation = "hold"
	// StarveStop publishes nothing.
	StarveStop Starvation = "stop"
)

// Params is the executor's configuration, as set by ROS parameters. Start
// from DefaultParams.
type Params struct {
	// ControlPeriod is the time between two executed actions; a chunk's dt
	// must equal it.
	ControlPeriod time.Duration
	Aggregation   Aggregation
	// AggregationWeight is w of AggregateWeighted, in (0, 1].
	AggregationWeight float64
	OnStarvation      Starvation

	Topics Topics
	QoS    TopicQoS

	// DiagnosticsPeriod paces the /diagnostics reports.
	DiagnosticsPeriod time.Duration
	// ActionDim is the width of every row; 0 takes it from the first
	// chunk accepted.
	ActionDim int

	// ShutdownGrace bounds the orderly shutdown after the first SIGINT or
	// SIGTERM (see internal/shutdown).
	ShutdownGrace time.Duration

	UseSimTime bool // the executor's clock is /clock: its control instants follow simulated time

	// Output selects and configures the control output; HoldMode what the
	// hold input does (output.go).
	Output   OutputParams
	HoldMode HoldMode
}

// Topics names the executor's topics. Relative names resolve in the
// node's namespace; remapping applies on top.
type Topics struct {
	Chunks      string // ActionChunk input
	Action      string // the output (StampedAction, or the output.type's message)
	Diagnostics string
	Hold        string // std_msgs/Bool hold input; empty = none
}

// TopicQoS holds the QoS of the executor's chunk and action topics
// (/diagnostics uses params.DiagnosticsQoS).
type TopicQoS struct {
	Chunks params.QoS
	Action params.QoS
}

// DefaultParams returns the defaults of every parameter, the values
// launch/executor.params.yaml lists.
func DefaultParams() Params {
	return Params{
		ControlPeriod:     50 * time.Millisecond,
		Aggregation:       AggregateLatest,
		AggregationWeight: 0.7,
		OnStarvation:      StarveHold,
		Topics:            Topics{Chunks: "action_chunk", Action: "action", Diagnostics: "/diagnostics", Hold: "hold"},
		Output:            OutputParams{Type: OutputStamped, GripperDim: -1},
		HoldMode:          HoldRepeat,
		QoS: TopicQoS{
			// As the action expert publishes its chunks.
			Chunks: params.QoS{Reliability: params.ReliabilityReliable, Durability: params.DurabilityVolatile, History: params.HistoryKeepLast, Depth: 5},
			Action: params.QoS{Reliability: params.ReliabilityReliable, Durability: params.DurabilityVolatile, History: params.HistoryKeepLast, Depth: 10},
		},
		DiagnosticsPeriod: time.Second,
		ActionDim:         7,
		ShutdownGrace:     shutdown.DefaultGrace,
	}
}

// Bounds of the duration parameters.
const (
	minPeriod        = time.Millisecond
	maxPeriod        = time.Minute
	minShutdownGrace = 10 * time.Millisecond
	maxActionDim     = 1 << 16
)

// paramDef declares one parameter: its name, ROS type, description, and
// how a value is stored in and read from Params.
type paramDef struct {
	name string
	typ  rosparam.Type
	doc  string
	set  func(p *Params, v rosparam.Value) error
	get  func(p *Params) any // string, int64, float64 or bool
}

func durationDef(name, doc string, lo, hi time.Duration, dst func(*Params) *time.Duration) paramDef {
	return paramDef{name, rosparam.Double, doc, func(p *Params, v rosparam.Value) error {
		if !(v.Double >= lo.Seconds() && v.Double <= hi.Seconds()) {
			return fmt.Errorf("must be a number of seconds in [%g, %g], got %v", lo.Seconds(), hi.Seconds(), v.Double)
		}
		*dst(p) = time.Duration(math.Round(v.Double * float64(time.Second)))
		return nil
	}, func(p *Params) any { return dst(p).Seconds() }}
}

func stringDef(name, doc string, dst func(*Params) *string) paramDef {
	return paramDef{name, rosparam.String, doc, func(p *Params, v rosparam.Value) error {
		*dst(p) = v.Str
		return nil
	}, func(p *Params) any { return *dst(p) }}
}

func choiceDef[T ~string](name, doc string, choices []T, dst func(*Params) *T) paramDef {
	return paramDef{name, rosparam.String, doc, func(p *Params, v rosparam.Value) error {
		if !slices.Contains(choices, T(v.Str)) {
			names := make([]string, len(choices))
			for i, c := range choices {
				names[i] = fmt.Sprintf("%q", string(c))
			}
			return fmt.Errorf("must be one of %s, got %q", strings.Join(names, ", "), v.Str)
		}
		*dst(p) = T(v.Str)
		return nil
	}, func(p *Params) any { return string(*dst(p)) }}
}

func qosDefs(prefix string, qos func(*Params) *params.QoS) []paramDef {
	return []paramDef{
		{prefix + "reliability", rosparam.String, "reliable or best_effort", func(p *Params, v rosparam.Value) error {
			r, err := params.ParseReliability(v.Str)
			if err == nil {
				qos(p).Reliability = r
			}
			return err
		}, func(p *Params) any { return string(qos(p).Reliability) }},
		{prefix + "durability", rosparam.String, "volatile or transient_local", func(p *Params, v rosparam.Value) error {
			d, err := params.ParseDurability(v.Str)
			if err == nil {
				qos(p).Durability = d
			}
			return err
		}, func(p *Params) any { return string(qos(p).Durability) }},
		{prefix + "history", rosparam.String, "keep_last or keep_all", func(p *Params, v rosparam.Value) error {
			h, err := params.ParseHistory(v.Str)
			if err == nil {
				qos(p).History = h
			}
			return err
		}, func(p *Params) any { return string(qos(p).History) }},
		{prefix + "depth", rosparam.Integer, "queue depth of keep_last", func(p *Params, v rosparam.Value) error {
			if v.Int < 1 || v.Int > 1000 {
				return fmt.Errorf("must be in [1, 1000], got %d", v.Int)
			}
			qos(p).Depth = int(v.Int)
			return nil
		}, func(p *Params) any { return int64(qos(p).Depth) }},
	}
}

// paramDefs declares every parameter the executor accepts, in
// documentation order.
func paramDefs() []paramDef {
	defs := []paramDef{
		durationDef("control_period", "seconds between two executed actions; every chunk's dt must equal it",
			minPeriod, maxPeriod, func(p *Params) *time.Duration { return &p.ControlPeriod }),
		choiceDef("aggregation", "rows of overlapping chunks at an instant: latest (the newest chunk's), average (their mean) or weighted_average (old*(1-w) + new*w in stamp order)",
			[]Aggregation{AggregateLatest, AggregateAverage, AggregateWeighted}, func(p *Params) *Aggregation { return &p.Aggregation }),
		{"aggregation_weight", rosparam.Double, "w of weighted_average, in (0, 1]: the newer chunk's share", func(p *Params, v rosparam.Value) error {
			if !(v.Double > 0 && v.Double <= 1) {
				return fmt.Errorf("must be in (0, 1], got %v", v.Double)
			}
			p.AggregationWeight = v.Double
			return nil
		}, func(p *Params) any { return p.AggregationWeight }},
		choiceDef("on_starvation", "when no chunk covers an instant: hold (republish the last action, held=true) or stop (publish nothing)",
			[]Starvation{StarveHold, StarveStop}, func(p *Params) *Starvation { return &p.OnStarvation }),
		durationDef("diagnostics_period", "seconds between two diagnostics reports", minPeriod, maxPeriod,
			func(p *Params) *time.Duration { return &p.DiagnosticsPeriod }),
		{"action_dim", rosparam.Integer, "values per action; 0 = take it from the first chunk", func(p *Params, v rosparam.Value) error {
			if v.Int < 0 || v.Int > maxActionDim {
				return fmt.Errorf("must be in [0, %d], got %d", maxActionDim, v.Int)
			}
			p.ActionDim = int(v.Int)
			return nil
		}, func(p *Params) any { return int64(p.ActionDim) }},
		stringDef("topics.action_chunk", "input ActionChunk topic", func(p *Params) *string { return &p.Topics.Chunks }),
		stringDef("topics.action", "output topic: StampedAction, or the message of output.type", func(p *Params) *string { return &p.Topics.Action }),
		stringDef("topics.diagnostics", "diagnostics topic", func(p *Params) *string { return &p.Topics.Diagnostics }),
	}
	defs = append(defs, qosDefs("qos.action_chunk.", func(p *Params) *params.QoS { return &p.QoS.Chunks })...)
	defs = append(defs, qosDefs("qos.action.", func(p *Params) *params.QoS { return &p.QoS.Action })...)
	defs = append(defs, outputDefs()...)
	defs = append(defs,
		durationDef("shutdown_grace", fmt.Sprintf("seconds, in [%g, %g], the shutdown after the first SIGINT/SIGTERM may take before the node exits at once; a second signal exits at once",
			minShutdownGrace.Seconds(), shutdown.MaxGrace.Seconds()), minShutdownGrace, shutdown.MaxGrace,
			func(p *Params) *time.Duration { return &p.ShutdownGrace }),
		paramDef{"use_sim_time", rosparam.Bool, "standard ROS parameter: true puts the executor's clock, its control instants and its diagnostics period on /clock", func(p *Params, v rosparam.Value) error {
			p.UseSimTime = v.Bool
			return nil
		}, func(p *Params) any { return p.UseSimTime }},
	)
	return defs
}

// ParamNames lists every parameter name the executor accepts, sorted.
func ParamNames() []string {
	var names []string
	for _, d := range paramDefs() {
		names = append(names, d.name)
	}
	slices.Sort(names)
	return names
}

// setParam assigns one typed value; see rosparam.SetFunc.
func setParam(p *Params, name string, v rosparam.Value) error {
	for _, d := range paramDefs() {
		if d.name != name {
			continue
		}
		cv, err := v.Convert(d.typ)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		if err := d.set(p, cv); err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		return nil
	}
	return rosparam.Unknown(name, " of the executor", ParamNames())
}

// Set assigns one parameter from a value in ROS's YAML syntax (the right
// side of `-p name:=value`).
func (p *Params) Set(name, yamlValue string) error {
	v, err := rosparam.ParseValue(yamlValue)
	if err != nil {
		return fmt.Errorf("parameter %q: %w", name, err)
	}
	return setParam(p, name, v)
}

// LoadParams returns the defaults overridden by the parameter rules among
// args (`--ros-args -p name:=value --params-file FILE`, in command-line
// order), validated. nodeName is the node's fully qualified name after
// remapping (for example "/fastwam_executor"). Undeclared names in a
// params-file section that selects the node by pattern are skipped
// (rosparam.ReportIgnored reports them).
func LoadParams(args []string, nodeName string, opts ...rosparam.Option) (Params, error) {
	p := DefaultParams()
	if err := rosparam.ApplyROSArgs(&p, setParam, args, nodeName, opts...); err != nil {
		return Params{}, err
	}
	if err := p.ValidateAs(nodeName); err != nil {
		return Params{}, err
	}
	return p, nil
}

// ApplyParamsYAML applies the sections of a params file's contents that
// match nodeName; a bad file leaves p unchanged.
func (p *Params) ApplyParamsYAML(data []byte, nodeName string, opts ...rosparam.Option) error {
	return rosparam.ApplyParamsYAML(p, setParam, data, nodeName, opts...)
}

// ParamsYAML renders p as a ROS 2 params file for the node key nodeKey,
// every parameter with its description.
func (p *Params) ParamsYAML(nodeKey string) []byte {
	defs := paramDefs()
	entries := make([]rosparam.Entry, len(defs))
	for i, d := range defs {
		entries[i] = rosparam.Entry{Name: d.name, Doc: d.doc, Value: d.get(p)}
	}
	return rosparam.ParamsYAML(nodeKey, entries)
}

// DefaultNodeName is the executor's fully qualified name when Config.Name
// is empty.
const DefaultNodeName = "/fastwam_executor"

// Validate checks what no single parameter can, and the ranges of a Params
// built in Go rather than from parameters; topic names are compared as
// written (ValidateAs resolves them for the node).
func (p *Params) Validate() error { return p.ValidateAs("") }

// topicUses lists the topics the executor creates with these parameters:
// those its parameters name (the hold input and the gripper output when
// set), then the fixed ones.
func (p *Params) topicUses() []rosparam.TopicUse {
	t := []rosparam.TopicUse{
		{Param: "topics.action_chunk", Name: p.Topics.Chunks},
		{Param: "topics.action", Name: p.Topics.Action},
		{Param: "topics.diagnostics", Name: p.Topics.Diagnostics},
	}
	if p.Topics.Hold != "" {
		t = append(t, rosparam.TopicUse{Param: "topics.hold", Name: p.Topics.Hold})
	}
	if p.Output.GripperTopic != "" {
		t = append(t, rosparam.TopicUse{Param: "output.gripper_topic", Name: p.Output.GripperTopic})
	}
	return append(t, params.FixedTopics(p.UseSimTime)...)
}

// ValidateAs is Validate for the executor whose fully qualified name is
// fqn: every topic name must be valid, and no two of its topics (its fixed
// ones too) may resolve alike in it; "" compares the names as written.
func (p *Params) ValidateAs(fqn string) error {
	if p.ControlPeriod < minPeriod || p.ControlPeriod > maxPeriod {
		return fmt.Errorf("parameter \"control_period\" must be in [%v, %v], got %v", minPeriod, maxPeriod, p.ControlPeriod)
	}
	if p.DiagnosticsPeriod < minPeriod || p.DiagnosticsPeriod > maxPeriod {
		return fmt.Errorf("parameter \"diagnostics_period\" must be in [%v, %v], got %v", minPeriod, maxPeriod, p.DiagnosticsPeriod)
	}
	switch p.Aggregation {
	case AggregateLatest, AggregateAverage, AggregateWeighted:
	default:
		return fmt.Errorf("parameter \"aggregation\" must be %q, %q or %q, got %q", AggregateLatest, AggregateAverage, AggregateWeighted, p.Aggregation)
	}
	if !(p.AggregationWeight > 0 && p.AggregationWeight <= 1) {
		return fmt.Errorf("parameter \"aggregation_weight\" must be in (0, 1], got %v", p.AggregationWeight)
	}
	if p.OnStarvation != StarveHold && p.OnStarvation != StarveStop {
		return fmt.Errorf("parameter \"on_starvation\" must be %q or %q, got %q", StarveHold, StarveStop, p.OnStarvation)
	}
	if p.ActionDim < 0 || p.ActionDim > maxActionDim {
		return fmt.Errorf("parameter \"action_dim\" must be in [0, %d], got %d", maxActionDim, p.ActionDim)
	}
	uses := p.topicUses()
	for _, t := range uses {
		if t.Param == "" {
			continue
		}
		if err := rosparam.ValidateTopicName(t.Name); err != nil {
			return fmt.Errorf("parameter %q: %w", t.Param, err)
		}
	}
	if err := rosparam.CheckTopicCollisions(fqn, uses); err != nil {
		return err
	}
	return p.validateOutput()
}
