// Package params is the action expert node's parameter surface, in one
// place: the parameters' declarations and defaults (Default), their
// parsing from the command line's --ros-args and from params files with
// their /** and namespace sections (Load, the one entry point; ApplyROSArgs,
// ApplyParamsFile), the qos.* profiles and the standard qos_overrides.*
// (ApplyQoSOverrides), the checks across parameters in the node's name
// (Resolve, Validate), the live set (LiveParams) and what rcl's parameter
// services read (Value, Describe, SetParameter). Package node runs the
// pipeline these configure.
package params

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/internal/shutdown"
	"github.com/fastwam/actionexpert/node/lifecycle"
	"github.com/fastwam/actionexpert/node/rostime"
)

// DefaultNodeName is the node's fully qualified name when Config.Name is
// empty: the package's launch files start it under this name in the root
// namespace.
const DefaultNodeName = "/fastwam_action_expert"

// Topic names of the managed node's ROS interfaces besides its data
// topics: the lifecycle's events (private to the node) and the parameter
// events every ROS 2 node publishes.
const (
	TopicTransitionEvent = "~/" + lifecycle.TopicTransitionEvent
	TopicParameterEvents = "/parameter_events"
)

// DefaultStaleAfter is the default of diagnostics.stale_after. Not a few
// control periods (0.15 s at 20 Hz): observations come at 1 to 2 Hz, so
// every gap between two of them would read as STALE. 2 s is more than one
// chunk's duration at the default control_period (32 × 0.05 s = 1.6 s),
// so STALE means the executor has played the last chunk out and the robot
// is no longer driven, and twice the 1 Hz period of the full-size world
// model, so that one observation delivered up to a second late does not
// trip it.
const DefaultStaleAfter = 2 * time.Second

// Backend names accepted by the backend parameter.
const (
	BackendHTP = "htp"
	BackendCPU = "cpu"
)

// SyncPolicy says how a VideoKVCache is paired with a TextContext.
type SyncPolicy string

const (
	// SyncExact pairs messages with the same header stamp, holding each in a
	// bounded buffer until its partner arrives or a timeout expires.
	SyncExact SyncPolicy = "exact"
	// SyncLatest pairs every VideoKVCache with the newest TextContext.
	SyncLatest SyncPolicy = "latest"
)

// perfModes lists the HTP performance modes the htp.performance_mode
// parameter accepts.
func perfModes() []string {
	return []string{"burst", "high_performance", "balanced", "power_saver", "default"}
}

// Params is the node's configuration, as set by ROS parameters. The zero
// value is not useful: start from Default.
type Params struct {
	Backend string // BackendHTP or BackendCPU

	HTP HTPParams
	CPU CPUParams

	Steps     int     // Euler steps of the flow-matching loop
	Shift     float64 // schedule shift
	NoiseSeed uint64  // base seed; a chunk uses NoiseSeed + the VideoKVCache's seq

	// ControlPeriod is the robot's control period: action i of a chunk is
	// for the instant header.stamp + i*ControlPeriod (the chunk's dt).
	ControlPeriod time.Duration

	RTC RTCParams

	Topics Topics
	QoS    TopicQoS
	// QoSOverrides are the standard qos_overrides.<topic>.<entity>.<policy>
	// parameters given (ApplyQoSOverrides sets QoS from them).
	QoSOverrides []QoSOverride

	Sync SyncParams

	// MaxInputAge rejects a VideoKVCache older than this when it arrives
	// and flags a chunk stale_input when its inputs are older than this at
	// publish time. Zero disables both.
	MaxInputAge time.Duration

	// StaleAfter is how long the node may go without an input pair while
	// active before its diagnostics report STALE (diagnostics.stale_after;
	// zero never does; see docs/node.md).
	StaleAfter time.Duration

	// KV hand-off (issue 19, docs/shm.md): how the keys and values arrive.
	KVTransport string // KVTransportDDS or KVTransportSHM
	SHM         SHMParams

	// ShutdownGrace is how long the orderly shutdown after the first
	// SIGINT or SIGTERM may take before the process exits at once (a
	// second signal exits at once too); see internal/shutdown.
	ShutdownGrace time.Duration

	// ClipMin and ClipMax bound every published action value: empty (no
	// clipping), one value for every dimension, or one value per action
	// dimension.
	ClipMin, ClipMax []float64

	DryRun bool // publish chunks flagged dry_run

	// Actions is the post-processing of the actions for the robot
	// (parameters actions.*; see docs/robot.md).
	Actions ActionParams

	SelfTest SelfTestParams

	// UseSimTime puts the node's clock on /clock (rosgraph_msgs/Clock):
	// input ages, stale checks, pairing timeouts and the stamps it
	// publishes follow the simulator or `ros2 bag play --clock`; measured
	// latencies stay on the monotonic clock.
	UseSimTime bool

	// Autostart configures and activates the node at start-up (its
	// managed lifecycle then runs through both transitions at once, as an
	// unmanaged node would); false leaves it unconfigured until `ros2
	// lifecycle set <node> configure` or a lifecycle manager.
	Autostart bool
}

// --- actions.*: post-processing for the robot (issue 18) ---

// ActionParams configures the post-processing stage (package actions):
// un-normalisation, gripper, safety limits. When it is enabled the node
// publishes the executable chunk on Topic besides the model's rows on
// topics.actions, and refuses (publishes neither) a chunk over a limit in
// refuse mode.
type ActionParams struct {
	Post  actions.Config
	Topic string // output ActionChunk topic of the executable actions
}

// actionParamDefs declares the actions.* parameters.
func actionParamDefs(str func(name, doc string, dst func(*Params) *string) paramDef,
	boolean func(name, doc string, dst func(*Params) *bool) paramDef) []paramDef {
	array := func(name, doc string, dst func(*Params) *[]float64) paramDef {
		return paramDef{name, kindDoubleArray, doc, func(p *Params, v value) error {
			for i, f := range v.fs {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return fmt.Errorf("value %d is %v; want finite numbers", i, f)
				}
			}
			*dst(p) = append([]float64(nil), v.fs...)
			return nil
		}, func(p *Params) any { return append([]float64{}, *dst(p)...) }}
	}
	return []paramDef{
		{"actions.norm_mode", kindStringOff, `un-normalisation of the model's rows for the robot, as upstream's normaliser: off, min/max, q01/q99, z-score, or constant bounds "a/b" (e.g. "-1/1")`, func(p *Params, v value) error {
			if v.kind == valBool {
				if v.b {
					return fmt.Errorf("must be off, min/max, q01/q99, z-score or \"a/b\", got %s (YAML's true)", v.text)
				}
				v.s = "off"
			}
			m, err := actions.ParseMode(v.s)
			if err != nil {
				return err
			}
			p.Actions.Post.Norm = m
			return nil
		}, func(p *Params) any { return p.Actions.Post.Norm.String() }},
		str("actions.stats_file", "the checkpoint's dataset_stats.json (required by min/max, q01/q99 and z-score)", func(p *Params) *string { return &p.Actions.Post.Stats }),
		str("actions.stats_key", `the action key of dataset_stats.json ("default" for LIBERO)`, func(p *Params) *string { return &p.Actions.Post.Key }),
		boolean("actions.stepwise", "use the stepwise_ statistics (one row per chunk row) instead of global_", func(p *Params) *bool { return &p.Actions.Post.Stepwise }),
		{"actions.gripper.dim", kindInt, "the gripper's action dimension (-1 = the last)", func(p *Params, v value) error {
			if v.i < -1 || v.i > 1<<16 {
				return fmt.Errorf("must be -1 or in [0, %d], got %d", 1<<16, v.i)
			}
			p.Actions.Post.Gripper.Dim = int(v.i)
			return nil
		}, func(p *Params) any { return int64(p.Actions.Post.Gripper.Dim) }},
		boolean("actions.gripper.affine", "after un-normalising, map the gripper g to 2g - 1 (upstream's 0 = close, 1 = open to [-1, 1])", func(p *Params) *bool { return &p.Actions.Post.Gripper.Affine }),
		boolean("actions.gripper.invert", "then map the gripper g to -g (LIBERO's controller: -1 = open)", func(p *Params) *bool { return &p.Actions.Post.Gripper.Invert }),
		boolean("actions.gripper.binarize", "then map the gripper g to sign(g)", func(p *Params) *bool { return &p.Actions.Post.Gripper.Binarize }),
		array("actions.limits.min", "lower bound of the executable actions: one value or one per action dimension (empty = none)", func(p *Params) *[]float64 { return &p.Actions.Post.Limits.Min }),
		array("actions.limits.max", "upper bound of the executable actions: one value or one per action dimension (empty = none)", func(p *Params) *[]float64 { return &p.Actions.Post.Limits.Max }),
		array("actions.limits.max_step", "largest change of a dimension between consecutive actions, across chunk seams too: one value or one per action dimension (empty = none)", func(p *Params) *[]float64 { return &p.Actions.Post.Limits.MaxStep }),
		{"actions.limits.mode", kindString, "a value over a limit: clamp (into the bounds, the step to max_step) or refuse (the chunk is not published)", func(p *Params, v value) error {
			m, err := actions.ParseLimitMode(v.s)
			if err != nil {
				return err
			}
			p.Actions.Post.Limits.Mode = m
			return nil
		}, func(p *Params) any { return p.Actions.Post.Limits.Mode.String() }},
		str("actions.topic", "output ActionChunk topic of the executable actions (published when any actions.* post-processing is set)", func(p *Params) *string { return &p.Actions.Topic }),
	}
}

// validateActions checks the actions.* parameters against each other.
func (p *Params) validateActions() error {
	a := p.Actions
	if a.Post.Norm.NeedsStats() && a.Post.Stats == "" {
		return fmt.Errorf("parameter \"actions.stats_file\" must name the checkpoint's dataset_stats.json when actions.norm_mode is %s", a.Post.Norm)
	}
	if err := a.Post.Limits.Check(0); err != nil {
		return fmt.Errorf("parameters \"actions.limits.*\": %w", err)
	}
	return nil
}

// defaultActionParams is the post-processing's default: off.
func defaultActionParams() ActionParams {
	return ActionParams{
		Post:  actions.Config{Norm: actions.Mode{Kind: actions.KindOff}, Key: "default", Gripper: actions.Gripper{Dim: -1}},
		Topic: "robot_action_chunk",
	}
}

// --- end of actions.* ---

// HTPParams configures the QNN HTP backend.
type HTPParams struct {
	ContextBinary   string // the action_step context binary
	BackendLibrary  string // libQnnHtp.so
	SystemLibrary   string // libQnnSystem.so
	RPCMemLibrary   string // libcdsprpc.so
	GraphName       string // graph inside the context binary
	PerformanceMode string // burst, high_performance, balanced, power_saver or default
	SharedBuffers   bool   // zero-copy rpcmem inputs when available
	LogLevel        int    // QNN library log level, 1 (error) to 5 (debug); its lines go to the node's logger
	RPCVote         bool   // send the RPC options of the performance vote (control latency, polling time)
	// ContextPaths are further binaries of the bundle, loaded in the same
	// session (one spill-fill group): the split bundle's action_context
	// and action_step_ctx and, with WorldModel WorldModelSameProcess, the
	// world model's vae_encoder and prefill_0 .. prefill_{k-1}.
	ContextPaths []string
	// WorldModel says where the world model's graphs run:
	// WorldModelOtherProcess (its own node, K/V through the hand-off) or
	// WorldModelSameProcess (in this process's session). The device's
	// per-process ceiling (about 6.5 GB of contexts mapped) decides it.
	WorldModel string
}

// The process layouts of htp.world_model.
const (
	WorldModelOtherProcess = "other_process"
	WorldModelSameProcess  = "same_process"
)

// ParsePaths splits htp.context_paths' comma-separated list of paths,
// refusing empty entries and duplicates.
func ParsePaths(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("must be comma-separated paths, got an empty one in %q", s)
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("names %q twice", f)
		}
		out = append(out, f)
	}
	return out, nil
}

// CPUParams configures the pure-Go CPU backend.
type CPUParams struct {
	Weights string // safetensors file of the action expert
	Threads int    // BLAS threads; 0 = the BLAS default

	// VideoTokens and ContextTokens size the inputs the CPU backend
	// accepts (they are not fixed by the weights); 0 takes them from the
	// weights' configuration, else the production 98 and 129.
	VideoTokens, ContextTokens int
}

// AutoDelay is RTCParams.InferenceDelay's value for "auto": the delay is
// measured (see RTCParams).
const AutoDelay = -1

// RTCParams configures real-time chunking: tying the first actions of a
// chunk to the remaining actions of the previous published chunk.
type RTCParams struct {
	Mode expert.RTCMode
	// InferenceDelay is d, the leading rows weighted 1: an action count,
	// or AutoDelay for ceil(p95 of the input age at publication /
	// ControlPeriod).
	InferenceDelay int
	// ExecutionHorizon is the first row no longer tied to the previous
	// chunk (the ramp ends earlier where the previous chunk's leftover does).
	ExecutionHorizon int
	MaxGuidance      float64 // beta, the guidance weight's clip (guided mode)
	Schedule         expert.MaskSchedule
}

// Topics names the node's topics. Relative names resolve in the node's
// namespace; remapping applies on top.
type Topics struct {
	KVCache     string
	Context     string
	Actions     string
	Diagnostics string
}

// TopicQoS holds the QoS of each topic the node creates.
type TopicQoS struct {
	KVCache QoS
	Context QoS
	Actions QoS
}

// SyncParams configures the pairing of the two inputs.
type SyncParams struct {
	Policy  SyncPolicy
	Buffer  int           // messages held per topic while waiting for a partner
	Timeout time.Duration // how long a message waits for its partner
}

// SelfTestParams configures the start-up self-test.
type SelfTestParams struct {
	Golden    string  // .npz with one step's inputs and expected prediction; empty = none
	Skip      bool    // go active without running the golden
	MinCosine float64 // the prediction's cosine to the golden must reach this
}

// The KV hand-offs of the kv_transport parameter.
const (
	KVTransportDDS = "dds" // VideoKVCache messages on topics.kv_cache
	KVTransportSHM = "shm" // KVHandoff descriptors on shm.topic, tensors in shared memory
)

// SHMParams configures the shared-memory hand-off (kv_transport shm).
type SHMParams struct {
	Topic string // the KVHandoff descriptor topic
	Dir   string // the folder the segments are in
	// AllowedUIDs are the owners a segment may have; empty: the node's own.
	AllowedUIDs []int
}

// Default returns the defaults of every parameter, the values the
// launch files' params YAML also lists.
func Default() Params {
	in := QoS{Reliability: ReliabilityReliable, Durability: DurabilityVolatile, History: HistoryKeepLast, Depth: 2}
	return Params{
		Backend: BackendHTP,
		HTP: HTPParams{
			BackendLibrary:  "libQnnHtp.so",
			SystemLibrary:   "libQnnSystem.so",
			RPCMemLibrary:   "libcdsprpc.so",
			GraphName:       "action_step",
			PerformanceMode: "burst",
			SharedBuffers:   true,
			LogLevel:        2,
			RPCVote:         false,
			WorldModel:      WorldModelOtherProcess,
		},
		Steps:         10,
		Shift:         5,
		ControlPeriod: 50 * time.Millisecond,
		RTC: RTCParams{Mode: expert.RTCOff, InferenceDelay: AutoDelay, ExecutionHorizon: 24, MaxGuidance: 5,
			Schedule: expert.MaskExp},
		Topics: Topics{
			KVCache:     "video_kv_cache",
			Context:     "text_context",
			Actions:     "action_chunk",
			Diagnostics: "/diagnostics",
		},
		QoS: TopicQoS{
			KVCache: in,
			Context: in,
			Actions: QoS{Reliability: ReliabilityReliable, Durability: DurabilityVolatile, History: HistoryKeepLast, Depth: 5},
		},
		Sync:          SyncParams{Policy: SyncExact, Buffer: 4, Timeout: time.Second},
		MaxInputAge:   time.Second,
		StaleAfter:    DefaultStaleAfter,
		ShutdownGrace: shutdown.DefaultGrace,
		KVTransport:   KVTransportDDS,
		SHM:           SHMParams{Topic: "video_kv_handoff", Dir: "/dev/shm"},
		SelfTest:      SelfTestParams{MinCosine: 0.9999},
		Actions:       defaultActionParams(),
		Autostart:     true,
	}
}

// maxRTCRows bounds the row counts of the rtc parameters before the
// backend's action_tokens is known (Node.New checks against it).
const maxRTCRows = 1 << 16

// minShutdownGrace is the shortest shutdown_grace accepted: less leaves no
// time for any shutdown at all.
const minShutdownGrace = 10 * time.Millisecond

// paramKind is the ROS type a parameter is declared with.
type paramKind int

const (
	kindBool paramKind = iota
	kindInt
	kindDouble
	kindString
	kindDoubleArray
	kindIntOrAuto // an integer or the string "auto"
	kindStringOff // a string, or false: YAML reads an unquoted off as false
)

func (k paramKind) String() string {
	switch k {
	case kindBool:
		return "bool"
	case kindInt:
		return "integer"
	case kindDouble:
		return "double"
	case kindString:
		return "string"
	case kindDoubleArray:
		return "double array"
	case kindIntOrAuto:
		return `integer or "auto"`
	case kindStringOff:
		return "string"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// paramDef declares one parameter: its name, type, and how a value of that
// type is stored in Params.
type paramDef struct {
	name string
	kind paramKind
	doc  string
	set  func(p *Params, v value) error
	get  func(p *Params) any // string, int64, float64, bool or []float64
}

// paramDefs declares every parameter the node accepts, in documentation
// order.
func paramDefs() []paramDef {
	str := func(name, doc string, dst func(*Params) *string) paramDef {
		return paramDef{name, kindString, doc,
			func(p *Params, v value) error { *dst(p) = v.s; return nil },
			func(p *Params) any { return *dst(p) }}
	}
	boolean := func(name, doc string, dst func(*Params) *bool) paramDef {
		return paramDef{name, kindBool, doc,
			func(p *Params, v value) error { *dst(p) = v.b; return nil },
			func(p *Params) any { return *dst(p) }}
	}
	seconds := func(name, doc string, dst func(*Params) *time.Duration) paramDef {
		return paramDef{name, kindDouble, doc, func(p *Params, v value) error {
			if v.f < 0 || v.f > 1e6 || math.IsNaN(v.f) {
				return fmt.Errorf("must be a number of seconds in [0, 1e6], got %v", v.f)
			}
			*dst(p) = time.Duration(v.f * float64(time.Second))
			return nil
		}, func(p *Params) any { return dst(p).Seconds() }}
	}
	integer := func(name, doc string, lo, hi int64, dst func(*Params) *int) paramDef {
		return paramDef{name, kindInt, doc, func(p *Params, v value) error {
			if v.i < lo || v.i > hi {
				return fmt.Errorf("must be in [%d, %d], got %d", lo, hi, v.i)
			}
			*dst(p) = int(v.i)
			return nil
		}, func(p *Params) any { return int64(*dst(p)) }}
	}
	defs := []paramDef{
		{"backend", kindString, "step backend: htp or cpu", func(p *Params, v value) error {
			if v.s != BackendHTP && v.s != BackendCPU {
				return fmt.Errorf("must be %q or %q, got %q", BackendHTP, BackendCPU, v.s)
			}
			p.Backend = v.s
			return nil
		}, func(p *Params) any { return p.Backend }},
		str("htp.context_binary", "path of the action_step QNN context binary", func(p *Params) *string { return &p.HTP.ContextBinary }),
		str("htp.backend_library", "QNN HTP backend library", func(p *Params) *string { return &p.HTP.BackendLibrary }),
		str("htp.system_library", "QNN system library", func(p *Params) *string { return &p.HTP.SystemLibrary }),
		str("htp.rpcmem_library", "library providing rpcmem_alloc (libcdsprpc.so)", func(p *Params) *string { return &p.HTP.RPCMemLibrary }),
		str("htp.graph_name", "graph name inside the context binary", func(p *Params) *string { return &p.HTP.GraphName }),
		{"htp.performance_mode", kindString, "HTP performance mode: " + strings.Join(perfModes(), ", "), func(p *Params, v value) error {
			for _, m := range perfModes() {
				if v.s == m {
					p.HTP.PerformanceMode = v.s
					return nil
				}
			}
			return fmt.Errorf("must be one of %s, got %q", strings.Join(perfModes(), ", "), v.s)
		}, func(p *Params) any { return p.HTP.PerformanceMode }},
		boolean("htp.shared_buffers", "use zero-copy rpcmem buffers for the inputs", func(p *Params) *bool { return &p.HTP.SharedBuffers }),
		integer("htp.log_level", "QNN library log level: 1 error, 2 warn, 3 info, 4 verbose, 5 debug (its lines go to the node's log)", 1, 5, func(p *Params) *int { return &p.HTP.LogLevel }),
		boolean("htp.rpc_vote", "also send the RPC control-latency and polling-time options of the performance vote (their own setPowerConfig call; off until verified on the device)", func(p *Params) *bool { return &p.HTP.RPCVote }),
		{"htp.context_paths", kindString, "comma-separated further context binaries loaded in the same session (one spill-fill group): the split bundle's action_context and action_step_ctx, and with htp.world_model same_process the world model's vae_encoder and prefill_i", func(p *Params, v value) error {
			ps, err := ParsePaths(v.s)
			if err != nil {
				return err
			}
			p.HTP.ContextPaths = ps
			return nil
		}, func(p *Params) any { return strings.Join(p.HTP.ContextPaths, ",") }},
		{"htp.world_model", kindString, "where the world model's graphs run: other_process (its own node, K/V through the hand-off) or same_process (in this node's QNN session, its binaries in htp.context_paths); a process maps about 6.5 GB of contexts at most", func(p *Params, v value) error {
			if v.s != WorldModelOtherProcess && v.s != WorldModelSameProcess {
				return fmt.Errorf("must be %q or %q, got %q", WorldModelOtherProcess, WorldModelSameProcess, v.s)
			}
			p.HTP.WorldModel = v.s
			return nil
		}, func(p *Params) any { return p.HTP.WorldModel }},
		str("cpu.weights", "path of the action expert's safetensors weights", func(p *Params) *string { return &p.CPU.Weights }),
		integer("cpu.threads", "worker goroutines of the CPU step over a single-threaded OpenBLAS (0 = one per CPU)", 0, 1024, func(p *Params) *int { return &p.CPU.Threads }),
		integer("cpu.video_tokens", "cached video tokens per layer the CPU backend accepts (0 = from the weights' config, else 98)", 0, 1<<20, func(p *Params) *int { return &p.CPU.VideoTokens }),
		integer("cpu.context_tokens", "context tokens the CPU backend accepts (0 = from the weights' config, else 129)", 0, 1<<20, func(p *Params) *int { return &p.CPU.ContextTokens }),
		integer("steps", "Euler steps per chunk", 1, 1000, func(p *Params) *int { return &p.Steps }),
		{"shift", kindDouble, "schedule shift", func(p *Params, v value) error {
			if !(v.f > 0) || math.IsInf(v.f, 0) || v.f > math.MaxFloat32 {
				return fmt.Errorf("must be a positive finite number, got %v", v.f)
			}
			p.Shift = v.f
			return nil
		}, func(p *Params) any { return p.Shift }},
		{"noise_seed", kindInt, "base seed of the initial noise; a chunk uses noise_seed + the seq of its VideoKVCache", func(p *Params, v value) error {
			if v.i < 0 {
				return fmt.Errorf("must not be negative, got %d", v.i)
			}
			p.NoiseSeed = uint64(v.i)
			return nil
		}, func(p *Params) any { return int64(p.NoiseSeed) }},
		{"control_period", kindDouble, "seconds, in [1e-6, 60] (LIBERO: 0.05, 20 Hz): the robot's control period; action i of a chunk is for header.stamp + i*control_period, published as the chunk's dt", func(p *Params, v value) error {
			if !(v.f >= 1e-6 && v.f <= 60) {
				return fmt.Errorf("must be a number of seconds in [1e-6, 60], got %v", v.f)
			}
			p.ControlPeriod = time.Duration(math.Round(v.f * float64(time.Second)))
			return nil
		}, func(p *Params) any { return p.ControlPeriod.Seconds() }},
		{"rtc.mode", kindStringOff, "real-time chunking: off (independent chunks), replace (inpaint the previous chunk's remaining actions into the first rows) or guided (forward-only RTC guidance toward them)", func(p *Params, v value) error {
			if v.kind == valBool {
				if v.b {
					return fmt.Errorf("must be off, replace or guided, got %s (YAML's true)", v.text)
				}
				v.s = "off" // an unquoted off is YAML's false
			}
			m, err := expert.ParseRTCMode(v.s)
			if err != nil {
				return fmt.Errorf("must be off, replace or guided, got %q", v.s)
			}
			p.RTC.Mode = m
			return nil
		}, func(p *Params) any { return p.RTC.Mode.String() }},
		{"rtc.inference_delay", kindIntOrAuto, `d, in actions: the leading rows weighted 1 (executed before the chunk arrives); an integer in [0, rtc.execution_horizon], or "auto" = ceil(p95 of the input age at publication / control_period), 0 until measured`, func(p *Params, v value) error {
			if v.kind == valString {
				if v.s != "auto" {
					return fmt.Errorf(`must be an integer >= 0 or "auto", got %q`, v.s)
				}
				p.RTC.InferenceDelay = AutoDelay
				return nil
			}
			if v.i < 0 || v.i > maxRTCRows {
				return fmt.Errorf(`must be an integer in [0, %d] or "auto", got %d`, maxRTCRows, v.i)
			}
			p.RTC.InferenceDelay = int(v.i)
			return nil
		}, func(p *Params) any {
			if p.RTC.InferenceDelay == AutoDelay {
				return "auto"
			}
			return int64(p.RTC.InferenceDelay)
		}},
		integer("rtc.execution_horizon", "actions, in [1, action_tokens]: rows from here on are not tied to the previous chunk (nor from where its leftover ends, if sooner)", 1, maxRTCRows, func(p *Params) *int { return &p.RTC.ExecutionHorizon }),
		{"rtc.max_guidance", kindDouble, "beta, > 0: the clip of RTC's guidance weight (guided mode)", func(p *Params, v value) error {
			if !(v.f > 0) || v.f > math.MaxFloat32 {
				return fmt.Errorf("must be a finite number > 0 (0 would turn the guidance off; use rtc.mode off), got %v", v.f)
			}
			p.RTC.MaxGuidance = v.f
			return nil
		}, func(p *Params) any { return p.RTC.MaxGuidance }},
		{"rtc.schedule", kindString, "soft mask of the rows between d and the horizon: exp, linear, ones or zeros", func(p *Params, v value) error {
			m, err := expert.ParseMaskSchedule(v.s)
			if err != nil {
				return fmt.Errorf("must be exp, linear, ones or zeros, got %q", v.s)
			}
			p.RTC.Schedule = m
			return nil
		}, func(p *Params) any { return p.RTC.Schedule.String() }},
		str("topics.kv_cache", "input VideoKVCache topic", func(p *Params) *string { return &p.Topics.KVCache }),
		str("topics.context", "input TextContext topic", func(p *Params) *string { return &p.Topics.Context }),
		str("topics.actions", "output ActionChunk topic", func(p *Params) *string { return &p.Topics.Actions }),
		str("topics.diagnostics", "diagnostics topic", func(p *Params) *string { return &p.Topics.Diagnostics }),
	}
	for _, t := range []struct {
		name string
		qos  func(*Params) *QoS
	}{
		{"kv_cache", func(p *Params) *QoS { return &p.QoS.KVCache }},
		{"context", func(p *Params) *QoS { return &p.QoS.Context }},
		{"actions", func(p *Params) *QoS { return &p.QoS.Actions }},
	} {
		qos := t.qos
		prefix := "qos." + t.name + "."
		defs = append(defs,
			paramDef{prefix + "reliability", kindString, "reliable or best_effort", func(p *Params, v value) error {
				r, err := ParseReliability(v.s)
				qos(p).Reliability = r
				return err
			}, func(p *Params) any { return string(qos(p).Reliability) }},
			paramDef{prefix + "durability", kindString, "volatile or transient_local", func(p *Params, v value) error {
				d, err := ParseDurability(v.s)
				qos(p).Durability = d
				return err
			}, func(p *Params) any { return string(qos(p).Durability) }},
			paramDef{prefix + "history", kindString, "keep_last or keep_all", func(p *Params, v value) error {
				h, err := ParseHistory(v.s)
				qos(p).History = h
				return err
			}, func(p *Params) any { return string(qos(p).History) }},
			integer(prefix+"depth", "queue depth of keep_last", 1, 1000, func(p *Params) *int { return &qos(p).Depth }),
		)
	}
	defs = append(defs,
		paramDef{"sync.policy", kindString, "pairing of the inputs: exact (same stamp) or latest (newest context)", func(p *Params, v value) error {
			switch SyncPolicy(v.s) {
			case SyncExact, SyncLatest:
				p.Sync.Policy = SyncPolicy(v.s)
				return nil
			}
			return fmt.Errorf("must be %q or %q, got %q", SyncExact, SyncLatest, v.s)
		}, func(p *Params) any { return string(p.Sync.Policy) }},
		integer("sync.buffer", "messages held per input while waiting for a partner", 1, 64, func(p *Params) *int { return &p.Sync.Buffer }),
		seconds("sync.timeout", "seconds an input waits for its partner", func(p *Params) *time.Duration { return &p.Sync.Timeout }),
		seconds("max_input_age", "seconds; older inputs are rejected (0 = no limit)", func(p *Params) *time.Duration { return &p.MaxInputAge }),
		seconds("diagnostics.stale_after", "seconds without an input pair, while active, after which /diagnostics reports STALE (level 3, a message starting \"stale:\"); on the node's clock, /clock under use_sim_time (0 = never)", func(p *Params) *time.Duration { return &p.StaleAfter }),
		// --- KV hand-off (issue 19, docs/shm.md) ---
		paramDef{"kv_transport", kindString, "how the keys and values arrive: dds (VideoKVCache on topics.kv_cache) or shm (KVHandoff on shm.topic, tensors in shared memory)", func(p *Params, v value) error {
			if v.s != KVTransportDDS && v.s != KVTransportSHM {
				return fmt.Errorf("must be %q or %q, got %q", KVTransportDDS, KVTransportSHM, v.s)
			}
			p.KVTransport = v.s
			return nil
		}, func(p *Params) any { return p.KVTransport }},
		str("shm.topic", "input KVHandoff topic (kv_transport shm)", func(p *Params) *string { return &p.SHM.Topic }),
		str("shm.dir", "folder of the shared-memory segments (kv_transport shm)", func(p *Params) *string { return &p.SHM.Dir }),
		paramDef{"shm.allowed_uids", kindString, "comma-separated uids a segment's owner may have (empty = the node's own uid)", func(p *Params, v value) error {
			uids, err := parseUIDs(v.s)
			p.SHM.AllowedUIDs = uids
			return err
		}, func(p *Params) any { return formatUIDs(p.SHM.AllowedUIDs) }},
		// --- end of the KV hand-off block ---
		paramDef{"shutdown_grace", kindDouble, fmt.Sprintf("seconds, in [%g, %g], the shutdown after the first SIGINT/SIGTERM may take before the node exits at once (status 130/143); a second signal exits at once", minShutdownGrace.Seconds(), shutdown.MaxGrace.Seconds()), func(p *Params, v value) error {
			if !(v.f >= minShutdownGrace.Seconds() && v.f <= shutdown.MaxGrace.Seconds()) {
				return fmt.Errorf("must be a number of seconds in [%g, %g], got %v", minShutdownGrace.Seconds(), shutdown.MaxGrace.Seconds(), v.f)
			}
			p.ShutdownGrace = time.Duration(v.f * float64(time.Second))
			return nil
		}, func(p *Params) any { return p.ShutdownGrace.Seconds() }},
		paramDef{"clip.min", kindDoubleArray, "lower action bound: one value or one per action dimension (empty = none)", func(p *Params, v value) error {
			p.ClipMin = append([]float64(nil), v.fs...)
			return nil
		}, func(p *Params) any { return append([]float64{}, p.ClipMin...) }},
		paramDef{"clip.max", kindDoubleArray, "upper action bound: one value or one per action dimension (empty = none)", func(p *Params, v value) error {
			p.ClipMax = append([]float64(nil), v.fs...)
			return nil
		}, func(p *Params) any { return append([]float64{}, p.ClipMax...) }},
		boolean("dry_run", "publish chunks flagged dry_run (not for the robot)", func(p *Params) *bool { return &p.DryRun }),
		str("self_test.golden", "golden .npz checked through the backend at start-up (empty = none)", func(p *Params) *string { return &p.SelfTest.Golden }),
		boolean("self_test.skip", "go active without the golden self-test", func(p *Params) *bool { return &p.SelfTest.Skip }),
		paramDef{"self_test.min_cosine", kindDouble, "cosine the self-test must reach", func(p *Params, v value) error {
			if !(v.f > 0 && v.f <= 1) {
				return fmt.Errorf("must be in (0, 1], got %v", v.f)
			}
			p.SelfTest.MinCosine = v.f
			return nil
		}, func(p *Params) any { return p.SelfTest.MinCosine }},
	)
	defs = append(defs, actionParamDefs(str, boolean)...)
	defs = append(defs,
		boolean("use_sim_time", "standard ROS parameter: true puts the node's clock on /clock (stamps, input ages, stale checks, pairing timeouts); latencies stay on the monotonic clock", func(p *Params) *bool { return &p.UseSimTime }),
		boolean("autostart", "configure and activate at start-up; false waits unconfigured for `ros2 lifecycle set` or a lifecycle manager", func(p *Params) *bool { return &p.Autostart }),
	)
	return defs
}

// parseUIDs reads a comma-separated uid list (empty: none).
func parseUIDs(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		u, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("must be comma-separated uids, got %q", s)
		}
		out = append(out, int(u))
	}
	return out, nil
}

func formatUIDs(uids []int) string {
	parts := make([]string, len(uids))
	for i, u := range uids {
		parts[i] = strconv.Itoa(u)
	}
	return strings.Join(parts, ",")
}

// Names lists every parameter name the node accepts, sorted.
func Names() []string {
	defs := paramDefs()
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.name
	}
	sort.Strings(names)
	return names
}

// Set assigns one parameter from a value given in ROS's YAML syntax (the
// right-hand side of `-p name:=value`). An unknown name, a value of the
// wrong type or out of range is an error naming the parameter.
func (p *Params) Set(name, yamlValue string) error {
	v, err := parseYAMLValue(yamlValue)
	if err != nil {
		return fmt.Errorf("parameter %q: %w", name, err)
	}
	return p.set(name, v)
}

func (p *Params) set(name string, v value) error {
	if strings.HasPrefix(name, qosOverridePrefix) {
		return p.setQoSOverride(name, v)
	}
	for _, d := range paramDefs() {
		if d.name != name {
			continue
		}
		cv, err := v.convert(d.kind)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		if err := d.set(p, cv); err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		return nil
	}
	return rosparam.Unknown(name, "", Names())
}

// KVInputTopic is the topic the keys and values arrive on: shm.topic's
// descriptors with kv_transport shm, else topics.kv_cache.
func (p *Params) KVInputTopic() string {
	if p.KVTransport == KVTransportSHM {
		return p.SHM.Topic
	}
	return p.Topics.KVCache
}

// Validate checks what no single parameter can: the inputs the chosen
// backend needs and the consistency of related parameters; topic names
// are compared as written (ValidateAs resolves them for the node).
func (p *Params) Validate() error { return p.ValidateAs("") }

// FixedTopics are the topics every ROS 2 node of this package has besides
// those its parameters name: the log, the parameter events, and /clock
// with use_sim_time.
func FixedTopics(useSimTime bool) []rosparam.TopicUse {
	t := []rosparam.TopicUse{
		{Name: "/rosout", Fixed: "the log topic every ROS node publishes"},
		{Name: TopicParameterEvents, Fixed: "the parameter events topic every ROS node publishes"},
	}
	if useSimTime {
		t = append(t, rosparam.TopicUse{Name: rostime.ClockTopic, Fixed: "the clock topic the node subscribes to with use_sim_time"})
	}
	return t
}

// topicUses lists the topics the node creates with these parameters:
// those its parameters name (the ones in use), then the fixed ones.
func (p *Params) topicUses() []rosparam.TopicUse {
	t := []rosparam.TopicUse{{Param: "topics.kv_cache", Name: p.Topics.KVCache}}
	if p.KVTransport == KVTransportSHM {
		t[0] = rosparam.TopicUse{Param: "shm.topic", Name: p.SHM.Topic}
	}
	t = append(t,
		rosparam.TopicUse{Param: "topics.context", Name: p.Topics.Context},
		rosparam.TopicUse{Param: "topics.actions", Name: p.Topics.Actions},
		rosparam.TopicUse{Param: "topics.diagnostics", Name: p.Topics.Diagnostics})
	if p.Actions.Post.Enabled() {
		t = append(t, rosparam.TopicUse{Param: "actions.topic", Name: p.Actions.Topic})
	}
	t = append(t, rosparam.TopicUse{Name: TopicTransitionEvent, Fixed: "the lifecycle's transition events"})
	return append(t, FixedTopics(p.UseSimTime)...)
}

// Resolve makes p the parameters of the node whose fully qualified name is
// fqn ("": DefaultNodeName): it applies the qos_overrides.* given for the
// node's namespace (ApplyQoSOverrides) and validates the whole in the
// node's name (ValidateAs). It returns the overrides that name no topic of
// the node, for a warning.
func (p *Params) Resolve(fqn string) (ignored []string, err error) {
	ignored, err = p.ApplyQoSOverrides(namespaceOf(fqn))
	if err != nil {
		return nil, err
	}
	if err := p.ValidateAs(nodeNameOr(fqn)); err != nil {
		return nil, err
	}
	return ignored, nil
}

// nodeNameOr is fqn, or DefaultNodeName when it is empty (Config.Name).
func nodeNameOr(fqn string) string {
	if fqn == "" {
		return DefaultNodeName
	}
	return fqn
}

// ValidateAs is Validate for the node whose fully qualified name is fqn:
// every topic name in use must be valid, and no two of the node's topics
// (its fixed ones too) may resolve alike in it; "" compares the names as
// written.
func (p *Params) ValidateAs(fqn string) error {
	switch p.Backend {
	case BackendHTP:
		if p.HTP.ContextBinary == "" && len(p.HTP.ContextPaths) == 0 {
			return fmt.Errorf("parameter \"htp.context_binary\" (or \"htp.context_paths\") must name the context binary when backend is %q", BackendHTP)
		}
		if slices.Contains(p.HTP.ContextPaths, p.HTP.ContextBinary) {
			return fmt.Errorf("parameter \"htp.context_paths\" names %q, which is already \"htp.context_binary\"", p.HTP.ContextBinary)
		}
	case BackendCPU:
		if p.CPU.Weights == "" {
			return fmt.Errorf("parameter \"cpu.weights\" must name the weights file when backend is %q", BackendCPU)
		}
	default:
		return fmt.Errorf("parameter \"backend\" must be %q or %q, got %q", BackendHTP, BackendCPU, p.Backend)
	}
	if p.KVTransport == KVTransportSHM && (strings.TrimSpace(p.SHM.Topic) == "" || p.SHM.Dir == "") {
		return fmt.Errorf("parameters \"shm.topic\" and \"shm.dir\" must not be empty when kv_transport is %q", KVTransportSHM)
	}
	if p.Actions.Post.Enabled() && strings.TrimSpace(p.Actions.Topic) == "" {
		return errors.New("parameter \"actions.topic\" must not be empty")
	}
	// Every topic parameter: those in use, and the others when set.
	for _, t := range []struct {
		name, v string
		inUse   bool
	}{
		{"topics.kv_cache", p.Topics.KVCache, true}, {"topics.context", p.Topics.Context, true},
		{"topics.actions", p.Topics.Actions, true}, {"topics.diagnostics", p.Topics.Diagnostics, true},
		{"shm.topic", p.SHM.Topic, p.KVTransport == KVTransportSHM},
		{"actions.topic", p.Actions.Topic, p.Actions.Post.Enabled()},
	} {
		if t.v == "" && !t.inUse {
			continue
		}
		if err := rosparam.ValidateTopicName(t.v); err != nil {
			return fmt.Errorf("parameter %q: %w", t.name, err)
		}
	}
	if err := rosparam.CheckTopicCollisions(fqn, p.topicUses()); err != nil {
		return err
	}
	if p.Sync.Timeout <= 0 {
		return fmt.Errorf("parameter \"sync.timeout\" must be positive, got %v", p.Sync.Timeout)
	}
	if len(p.ClipMin) != len(p.ClipMax) {
		return fmt.Errorf("parameters \"clip.min\" and \"clip.max\" must have the same length, got %d and %d", len(p.ClipMin), len(p.ClipMax))
	}
	for i := range p.ClipMin {
		lo, hi := p.ClipMin[i], p.ClipMax[i]
		if math.IsNaN(lo) || math.IsNaN(hi) || lo > hi {
			return fmt.Errorf("clip bound %d: need clip.min <= clip.max, got [%v, %v]", i, lo, hi)
		}
	}
	if p.ControlPeriod <= 0 {
		return fmt.Errorf("parameter \"control_period\" must be positive, got %v", p.ControlPeriod)
	}
	if p.RTC.Mode > expert.RTCGuided {
		return fmt.Errorf("parameter \"rtc.mode\" is %v; want off, replace or guided", p.RTC.Mode)
	}
	if p.RTC.Schedule > expert.MaskZeros {
		return fmt.Errorf("parameter \"rtc.schedule\" is %v; want exp, linear, ones or zeros", p.RTC.Schedule)
	}
	if b := p.RTC.MaxGuidance; !(b > 0) || b > math.MaxFloat32 {
		return fmt.Errorf("parameter \"rtc.max_guidance\" is %v; want a finite number > 0 (0 would turn the guidance off; use rtc.mode off)", b)
	}
	if p.RTC.ExecutionHorizon < 1 {
		return fmt.Errorf("parameter \"rtc.execution_horizon\" must be at least 1 action, got %d", p.RTC.ExecutionHorizon)
	}
	if d := p.RTC.InferenceDelay; d != AutoDelay && (d < 0 || d > p.RTC.ExecutionHorizon) {
		return fmt.Errorf("parameter \"rtc.inference_delay\" %d must be \"auto\" or in [0, rtc.execution_horizon = %d]: the delayed rows lie within the horizon", d, p.RTC.ExecutionHorizon)
	}
	return p.validateActions()
}
