package executor

import (
	"fmt"
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

// paramDef declares one of the executor's parameters.
type paramDef = rosparam.Def[Params]

// qosDefs declares the qos.<topic>.* parameters of the profile qos(p).
func qosDefs(prefix string, qos func(*Params) *params.QoS) []paramDef {
	return rosparam.QoSDefs(prefix, "queue depth of keep_last", func(p *Params) rosparam.QoSFields {
		q := qos(p)
		return rosparam.QoSFields{Reliability: (*string)(&q.Reliability), Durability: (*string)(&q.Durability), History: (*string)(&q.History), Depth: &q.Depth}
	})
}

// paramDefs declares every parameter the executor accepts, in
// documentation order.
func paramDefs() []paramDef {
	defs := []paramDef{
		rosparam.DurationDef("control_period", "seconds between two executed actions; every chunk's dt must equal it",
			minPeriod, maxPeriod, func(p *Params) *time.Duration { return &p.ControlPeriod }),
		rosparam.ChoiceDef("aggregation", "rows of overlapping chunks at an instant: latest (the newest chunk's), average (their mean) or weighted_average (old*(1-w) + new*w in stamp order)",
			[]Aggregation{AggregateLatest, AggregateAverage, AggregateWeighted}, func(p *Params) *Aggregation { return &p.Aggregation }),
		rosparam.FractionDef("aggregation_weight", "w of weighted_average, in (0, 1]: the newer chunk's share", func(p *Params) *float64 { return &p.AggregationWeight }),
		rosparam.ChoiceDef("on_starvation", "when no chunk covers an instant: hold (republish the last action, held=true) or stop (publish nothing)",
			[]Starvation{StarveHold, StarveStop}, func(p *Params) *Starvation { return &p.OnStarvation }),
		rosparam.DurationDef("diagnostics_period", "seconds between two diagnostics reports", minPeriod, maxPeriod,
			func(p *Params) *time.Duration { return &p.DiagnosticsPeriod }),
		rosparam.IntDef("action_dim", "values per action; 0 = take it from the first chunk", 0, maxActionDim, func(p *Params) *int { return &p.ActionDim }),
		rosparam.StringDef("topics.action_chunk", "input ActionChunk topic", func(p *Params) *string { return &p.Topics.Chunks }),
		rosparam.StringDef("topics.action", "output topic: StampedAction, or the message of output.type", func(p *Params) *string { return &p.Topics.Action }),
		rosparam.StringDef("topics.diagnostics", "diagnostics topic", func(p *Params) *string { return &p.Topics.Diagnostics }),
	}
	defs = append(defs, qosDefs("qos.action_chunk.", func(p *Params) *params.QoS { return &p.QoS.Chunks })...)
	defs = append(defs, qosDefs("qos.action.", func(p *Params) *params.QoS { return &p.QoS.Action })...)
	defs = append(defs, outputDefs()...)
	defs = append(defs,
		rosparam.DurationDef("shutdown_grace", fmt.Sprintf("seconds, in [%g, %g], the shutdown after the first SIGINT/SIGTERM may take before the node exits at once; a second signal exits at once",
			minShutdownGrace.Seconds(), shutdown.MaxGrace.Seconds()), minShutdownGrace, shutdown.MaxGrace,
			func(p *Params) *time.Duration { return &p.ShutdownGrace }),
		rosparam.BoolDef("use_sim_time", "standard ROS parameter: true puts the executor's clock, its control instants and its diagnostics period on /clock", func(p *Params) *bool { return &p.UseSimTime }),
	)
	return defs
}

// table is the executor's parameter table.
func table() rosparam.Table[Params] {
	return rosparam.Table[Params]{Defs: paramDefs(), Of: " of the executor"}
}

// ParamNames lists every parameter name the executor accepts, sorted.
func ParamNames() []string { return table().Names() }

// Set assigns one parameter from a value in ROS's YAML syntax (the right
// side of `-p name:=value`).
func (p *Params) Set(name, yamlValue string) error { return table().Set(p, name, yamlValue) }

// LoadParams returns the defaults overridden by the parameter rules among
// args (`--ros-args -p name:=value --params-file FILE`, in command-line
// order), validated. nodeName is the node's fully qualified name after
// remapping (for example "/fastwam_executor"). Undeclared names in a
// params-file section that selects the node by pattern are skipped
// (rosparam.ReportIgnored reports them).
func LoadParams(args []string, nodeName string, opts ...rosparam.Option) (Params, error) {
	return table().Load(DefaultParams(), args, nodeName, (*Params).ValidateAs, opts...)
}

// ApplyParamsYAML applies the sections of a params file's contents that
// match nodeName; a bad file leaves p unchanged.
func (p *Params) ApplyParamsYAML(data []byte, nodeName string, opts ...rosparam.Option) error {
	return table().ApplyYAML(p, data, nodeName, opts...)
}

// ParamsYAML renders p as a ROS 2 params file for the node key nodeKey,
// every parameter with its description.
func (p *Params) ParamsYAML(nodeKey string) []byte { return table().YAML(p, nodeKey) }

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
