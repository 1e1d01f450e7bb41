package wmnode

import (
	"fmt"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/internal/shutdown"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/node/params"
)

// DefaultNodeName is the world-model node's fully qualified name when
// Config.Name is empty.
const DefaultNodeName = "/fastwam_world_model"

// Image transports accepted by the image_transport parameter.
const (
	ImageRaw        = "raw"        // sensor_msgs/Image
	ImageCompressed = "compressed" // sensor_msgs/CompressedImage (JPEG or PNG)
)

// Proprio message types accepted by the proprio.type parameter.
const (
	ProprioArray      = "float64_multi_array" // std_msgs/Float64MultiArray, the values in order
	ProprioJointState = "joint_state"         // sensor_msgs/JointState, positions of proprio.joint_names
)

// K/V element types accepted by the kv_dtype parameter.
const (
	DTypeFloat32 = "float32"
	DTypeFloat16 = "float16"
)

// Params is the world-model node's configuration, as set by ROS
// parameters. Start from DefaultParams.
type Params struct {
	// The world model's files (worldmodel.ModelOptions).
	DiTWeights, VAEWeights, StateStats, StateKey, TextCache string

	// ImageTransports are the cameras' message types, ImageRaw or
	// ImageCompressed: one per camera, or one for every camera.
	ImageTransports []string
	// FlipCameras rotates every camera's image by 180° before the
	// crop-resize (LIBERO's raw MuJoCo renders); false for a source that
	// already delivers training-orientation images.
	FlipCameras bool
	ProprioType string   // ProprioArray or ProprioJointState
	JointNames  []string // ProprioJointState's joints, in state order

	Topics Topics
	QoS    TopicQoS

	// Tolerance bounds how far each camera frame and the state may be
	// from the newest camera frame of a cycle.
	Tolerance time.Duration
	// Rate is the cycle rate in Hz; 0 runs a cycle on each new set of
	// frames (every camera has a frame no cycle has used).
	Rate float64

	KVTransport string // params.KVTransportDDS or params.KVTransportSHM
	KVDType     string // DTypeFloat32 or DTypeFloat16
	SHM         SHMParams

	// StaleAfter: an input silent for longer, or a clock that does not
	// advance for longer, makes the diagnostics STALE.
	StaleAfter        time.Duration
	DiagnosticsPeriod time.Duration
	ShutdownGrace     time.Duration
	UseSimTime        bool
	// SelfTestGolden is the self-test golden run at configure ("" for
	// none); SelfTestMinCosine the cosine K, V and the context must reach.
	SelfTestGolden    string
	SelfTestMinCosine float64
	// Autostart configures and activates the node at start-up; false
	// leaves it unconfigured for `ros2 lifecycle set` or a lifecycle
	// manager.
	Autostart bool
}

// Topics names the node's topics. Relative names resolve in the node's
// namespace; remapping applies on top.
type Topics struct {
	Cameras     []string // in the world model's camera order (agentview, wrist)
	Proprio     string
	Instruction string
	KVCache     string // VideoKVCache output (kv_transport dds)
	Context     string // TextContext output
	Diagnostics string
}

// TopicQoS are the QoS of the node's topics (/diagnostics uses
// params.DiagnosticsQoS).
type TopicQoS struct {
	Cameras, Proprio, Instruction params.QoS
	// Out is the QoS of the VideoKVCache, TextContext and KVHandoff
	// topics: the action-expert node's input profile.
	Out params.QoS
}

// SHMParams configures the shared-memory hand-off (kv_transport shm).
type SHMParams struct {
	Topic  string // the KVHandoff descriptor topic
	Dir    string // the folder of the segment
	Prefix string // the segment's name is <prefix>.<pid>
	Slots  int
	Group  bool // the segment readable by the group (0660), not only the owner (0600)
}

// DefaultParams returns the defaults of every parameter, the values
// launch/world_model.params.yaml lists.
func DefaultParams() Params {
	ap := params.Default()
	sensor := params.QoS{Reliability: params.ReliabilityBestEffort, Durability: params.DurabilityVolatile, History: params.HistoryKeepLast, Depth: 2}
	return Params{
		DiTWeights: "", VAEWeights: "", StateStats: "", StateKey: "default", TextCache: "",
		ImageTransports: []string{ImageRaw},
		FlipCameras:     true,
		ProprioType:     ProprioArray,
		Topics: Topics{
			Cameras:     []string{camera.DefaultAgentviewTopic, camera.DefaultWristTopic},
			Proprio:     camera.DefaultProprioTopic,
			Instruction: camera.DefaultInstructionTopic,
			KVCache:     ap.Topics.KVCache,
			Context:     ap.Topics.Context,
			Diagnostics: ap.Topics.Diagnostics,
		},
		QoS: TopicQoS{
			Cameras: sensor, Proprio: sensor,
			Instruction: params.QoS{Reliability: params.ReliabilityReliable, Durability: params.DurabilityTransientLocal, History: params.HistoryKeepLast, Depth: 1},
			Out:         ap.QoS.KVCache,
		},
		Tolerance:         camera.DefaultTolerance,
		Rate:              0,
		KVTransport:       params.KVTransportDDS,
		KVDType:           DTypeFloat32,
		SHM:               SHMParams{Topic: ap.SHM.Topic, Dir: ap.SHM.Dir, Prefix: "fastwam_kv", Slots: 3},
		StaleAfter:        params.DefaultStaleAfter,
		DiagnosticsPeriod: time.Second,
		ShutdownGrace:     shutdown.DefaultGrace,
		SelfTestMinCosine: DefaultSelfTestMinCosine,
		Autostart:         true,
	}
}

// Bounds of the numeric parameters.
const (
	maxTolerance = time.Minute
	maxRate      = 1000.0
	minPeriod    = time.Millisecond
	maxPeriod    = time.Minute
	maxCameras   = 2 // worldmodel.FrameConfig takes one or two
	maxJoints    = 1 << 10
)

// paramDef declares one of the node's parameters.
type paramDef = rosparam.Def[Params]

// qosDefs declares the qos.<topic>.* parameters of the profile qos(p).
func qosDefs(prefix string, qos func(*Params) *params.QoS) []paramDef {
	return rosparam.QoSDefs(prefix, "queue depth of keep_last, in [1, 1000]", func(p *Params) rosparam.QoSFields {
		q := qos(p)
		return rosparam.QoSFields{Reliability: (*string)(&q.Reliability), Durability: (*string)(&q.Durability), History: (*string)(&q.History), Depth: &q.Depth}
	})
}

// paramDefs declares every parameter the node accepts, in documentation
// order.
func paramDefs() []paramDef {
	defs := []paramDef{
		rosparam.StringDef("model.dit_weights", "the video DiT and proprio encoder (the DiT weight file contract, docs/world-model.md)", func(p *Params) *string { return &p.DiTWeights }),
		rosparam.StringDef("model.vae_weights", "the Wan2.2 VAE encoder weights", func(p *Params) *string { return &p.VAEWeights }),
		rosparam.StringDef("model.dataset_stats", "the checkpoint's dataset_stats.json (state statistics)", func(p *Params) *string { return &p.StateStats }),
		rosparam.StringDef("model.state_key", "the state key of dataset_stats.json", func(p *Params) *string { return &p.StateKey }),
		rosparam.StringDef("model.text_cache", "the folder of per-instruction text cache entries", func(p *Params) *string { return &p.TextCache }),
		rosparam.StringsDef("image_transports", "camera messages, one per camera or one for all: raw (sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage, JPEG or PNG)",
			maxCameras, func(p *Params) *[]string { return &p.ImageTransports }),
		rosparam.BoolDef("flip_cameras", "rotate every camera image by 180° before the crop-resize (LIBERO's raw renders); false for training-orientation images",
			func(p *Params) *bool { return &p.FlipCameras }),
		rosparam.ChoiceDef("proprio.type", "the proprio topic's message: float64_multi_array (the values in order) or joint_state (positions of proprio.joint_names)",
			[]string{ProprioArray, ProprioJointState}, func(p *Params) *string { return &p.ProprioType }),
		rosparam.StringsDef("proprio.joint_names", "joint_state: the joints whose positions make the state, in order", maxJoints, func(p *Params) *[]string { return &p.JointNames }),
		rosparam.StringsDef("topics.cameras", "camera topics in the world model's order (agentview, then wrist); one or two", maxCameras, func(p *Params) *[]string { return &p.Topics.Cameras }),
		rosparam.StringDef("topics.proprio", "proprio state topic", func(p *Params) *string { return &p.Topics.Proprio }),
		rosparam.StringDef("topics.instruction", "instruction topic (std_msgs/String, latched)", func(p *Params) *string { return &p.Topics.Instruction }),
		rosparam.StringDef("topics.video_kv_cache", "VideoKVCache output (kv_transport dds)", func(p *Params) *string { return &p.Topics.KVCache }),
		rosparam.StringDef("topics.text_context", "TextContext output", func(p *Params) *string { return &p.Topics.Context }),
		rosparam.StringDef("topics.diagnostics", "diagnostics topic", func(p *Params) *string { return &p.Topics.Diagnostics }),
		rosparam.DurationDef("sync.tolerance", "seconds each camera frame and the state may be from the newest frame of a cycle", 0, maxTolerance,
			func(p *Params) *time.Duration { return &p.Tolerance }),
		rosparam.DoubleDef("rate", fmt.Sprintf("cycles per second, in [0, %g]; 0 runs a cycle on each new set of frames", maxRate), 0, maxRate, func(p *Params) *float64 { return &p.Rate }),
		rosparam.ChoiceDef("kv_transport", "dds (VideoKVCache messages) or shm (K/V written into a shared-memory slot, KVHandoff descriptors)",
			[]string{params.KVTransportDDS, params.KVTransportSHM}, func(p *Params) *string { return &p.KVTransport }),
		rosparam.ChoiceDef("kv_dtype", "element type of the K/V: float32 or float16", []string{DTypeFloat32, DTypeFloat16}, func(p *Params) *string { return &p.KVDType }),
		rosparam.StringDef("shm.topic", "KVHandoff descriptor topic (kv_transport shm)", func(p *Params) *string { return &p.SHM.Topic }),
		rosparam.StringDef("shm.dir", "folder of the shared-memory segment", func(p *Params) *string { return &p.SHM.Dir }),
		rosparam.StringDef("shm.prefix", "segment name prefix (the segment is <prefix>.<pid>)", func(p *Params) *string { return &p.SHM.Prefix }),
		rosparam.IntDef("shm.slots", fmt.Sprintf("slots of the segment, in [2, %d]", kvshm.MaxSlots), 2, kvshm.MaxSlots, func(p *Params) *int { return &p.SHM.Slots }),
		rosparam.BoolDef("shm.group", "make the segment readable by the group (0660) rather than the owner only (0600)", func(p *Params) *bool { return &p.SHM.Group }),
	}
	defs = append(defs, qosDefs("qos.cameras.", func(p *Params) *params.QoS { return &p.QoS.Cameras })...)
	defs = append(defs, qosDefs("qos.proprio.", func(p *Params) *params.QoS { return &p.QoS.Proprio })...)
	defs = append(defs, qosDefs("qos.instruction.", func(p *Params) *params.QoS { return &p.QoS.Instruction })...)
	defs = append(defs, qosDefs("qos.out.", func(p *Params) *params.QoS { return &p.QoS.Out })...)
	defs = append(defs,
		rosparam.DurationDef("diagnostics.stale_after", "seconds an input, or the clock, may stay silent before the diagnostics say STALE", minPeriod, maxPeriod,
			func(p *Params) *time.Duration { return &p.StaleAfter }),
		rosparam.DurationDef("diagnostics.period", "seconds between two diagnostics reports", minPeriod, maxPeriod,
			func(p *Params) *time.Duration { return &p.DiagnosticsPeriod }),
		rosparam.DurationDef("shutdown_grace", "seconds the shutdown after the first SIGINT/SIGTERM may take", 10*time.Millisecond, shutdown.MaxGrace,
			func(p *Params) *time.Duration { return &p.ShutdownGrace }),
		rosparam.BoolDef("use_sim_time", "standard ROS parameter: the node's clock (input ages, stale checks) is /clock", func(p *Params) *bool { return &p.UseSimTime }),
		rosparam.StringDef("self_test.golden", "self-test golden .npz run through the world model at configure, K, V and context compared (empty = none)",
			func(p *Params) *string { return &p.SelfTestGolden }),
		rosparam.FractionDef("self_test.min_cosine", "cosine K, V and the context must each reach against the self-test golden, in (0, 1]", func(p *Params) *float64 { return &p.SelfTestMinCosine }),
		rosparam.BoolDef("autostart", "configure and activate at start-up; false waits unconfigured for `ros2 lifecycle set` or a lifecycle manager",
			func(p *Params) *bool { return &p.Autostart }),
	)
	return defs
}

// table is the node's parameter table.
func table() rosparam.Table[Params] {
	return rosparam.Table[Params]{Defs: paramDefs(), Of: " of the world-model node"}
}

// ParamNames lists every parameter name the node accepts, sorted.
func ParamNames() []string { return table().Names() }

// setParam assigns one typed value; see rosparam.SetFunc.
func setParam(p *Params, name string, v rosparam.Value) error { return table().SetValue(p, name, v) }

// Set assigns one parameter from a value in ROS's YAML syntax (the right
// side of `-p name:=value`).
func (p *Params) Set(name, yamlValue string) error { return table().Set(p, name, yamlValue) }

// LoadParams returns the defaults overridden by the parameter rules among
// args (`--ros-args -p name:=value --params-file FILE`), validated for the
// node whose fully qualified name is nodeName.
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

// ImageTransport is camera i's message type (ImageRaw or ImageCompressed).
func (p *Params) ImageTransport(i int) string {
	if len(p.ImageTransports) == 1 {
		return p.ImageTransports[0]
	}
	return p.ImageTransports[i]
}

// topicUses lists the topics the node creates with these parameters.
func (p *Params) topicUses() []rosparam.TopicUse {
	var t []rosparam.TopicUse
	for _, c := range p.Topics.Cameras {
		t = append(t, rosparam.TopicUse{Param: "topics.cameras", Name: c})
	}
	t = append(t,
		rosparam.TopicUse{Param: "topics.proprio", Name: p.Topics.Proprio},
		rosparam.TopicUse{Param: "topics.instruction", Name: p.Topics.Instruction},
		rosparam.TopicUse{Param: "topics.text_context", Name: p.Topics.Context},
		rosparam.TopicUse{Param: "topics.diagnostics", Name: p.Topics.Diagnostics},
	)
	if p.KVTransport == params.KVTransportSHM {
		t = append(t, rosparam.TopicUse{Param: "shm.topic", Name: p.SHM.Topic})
	} else {
		t = append(t, rosparam.TopicUse{Param: "topics.video_kv_cache", Name: p.Topics.KVCache})
	}
	return append(t, params.FixedTopics(p.UseSimTime)...)
}

// Validate checks what no single parameter can; topic names are compared
// as written (ValidateAs resolves them for the node).
func (p *Params) Validate() error { return p.ValidateAs("") }

// ValidateAs is Validate for the node whose fully qualified name is fqn:
// the model files named, one or two cameras, the joint names of a
// joint_state proprio, valid and distinct topic names.
func (p *Params) ValidateAs(fqn string) error {
	for _, f := range []struct{ name, v string }{
		{"model.dit_weights", p.DiTWeights}, {"model.vae_weights", p.VAEWeights},
		{"model.dataset_stats", p.StateStats}, {"model.text_cache", p.TextCache},
	} {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("parameter %q is not set: the world model needs it (a path)", f.name)
		}
	}
	if n := len(p.Topics.Cameras); n < 1 || n > maxCameras {
		return fmt.Errorf("parameter \"topics.cameras\" names %d topics; want 1 or %d", n, maxCameras)
	}
	switch p.ProprioType {
	case ProprioArray:
	case ProprioJointState:
		if len(p.JointNames) == 0 {
			return fmt.Errorf("parameter \"proprio.joint_names\" is empty: proprio.type %s needs the joints of the state, in order", ProprioJointState)
		}
		if _, err := camera.NewJointMap(p.JointNames); err != nil {
			return fmt.Errorf("parameter \"proprio.joint_names\": %w", err)
		}
	default:
		return fmt.Errorf("parameter \"proprio.type\" must be %q or %q, got %q", ProprioArray, ProprioJointState, p.ProprioType)
	}
	if n := len(p.ImageTransports); n != 1 && n != len(p.Topics.Cameras) {
		return fmt.Errorf("parameter \"image_transports\" has %d values for %d cameras: want one for every camera, or one per camera", n, len(p.Topics.Cameras))
	}
	for _, tr := range p.ImageTransports {
		if tr != ImageRaw && tr != ImageCompressed {
			return fmt.Errorf("parameter \"image_transports\": each must be %q or %q, got %q", ImageRaw, ImageCompressed, tr)
		}
	}
	if p.KVTransport != params.KVTransportDDS && p.KVTransport != params.KVTransportSHM {
		return fmt.Errorf("parameter \"kv_transport\" must be %q or %q, got %q", params.KVTransportDDS, params.KVTransportSHM, p.KVTransport)
	}
	if p.KVDType != DTypeFloat32 && p.KVDType != DTypeFloat16 {
		return fmt.Errorf("parameter \"kv_dtype\" must be %q or %q, got %q", DTypeFloat32, DTypeFloat16, p.KVDType)
	}
	if p.KVTransport == params.KVTransportSHM && (p.SHM.Slots < 2 || p.SHM.Slots > kvshm.MaxSlots || p.SHM.Prefix == "" || p.SHM.Dir == "") {
		return fmt.Errorf("parameters shm.*: want slots in [2, %d] (got %d), a prefix and a folder", kvshm.MaxSlots, p.SHM.Slots)
	}
	if p.Tolerance < 0 || p.Tolerance > maxTolerance {
		return fmt.Errorf("parameter \"sync.tolerance\" must be in [0, %v], got %v", maxTolerance, p.Tolerance)
	}
	if !(p.Rate >= 0 && p.Rate <= maxRate) {
		return fmt.Errorf("parameter \"rate\" must be in [0, %g], got %v", maxRate, p.Rate)
	}
	if p.StaleAfter < minPeriod || p.DiagnosticsPeriod < minPeriod {
		return fmt.Errorf("parameters diagnostics.stale_after (%v) and diagnostics.period (%v) must be at least %v", p.StaleAfter, p.DiagnosticsPeriod, minPeriod)
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
	return rosparam.CheckTopicCollisions(fqn, uses)
}
