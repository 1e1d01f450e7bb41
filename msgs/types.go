// Package msgs holds the Go form of the node's ROS 2 messages (the
// definitions under msg/) and of the standard messages they use, with a CDR
// (XCDR1, little-endian) codec that produces and reads exactly the bytes
// ROS 2 puts on the wire and rosbag2 stores.
package msgs

// ROS type names of the messages, as ROS 2 and rosbag2 spell them.
const (
	Package             = "fastwam_action_expert"
	TypeTensor          = Package + "/msg/Tensor"
	TypeVideoKVCache    = Package + "/msg/VideoKVCache"
	TypeTextContext     = Package + "/msg/TextContext"
	TypeActionRow       = Package + "/msg/ActionRow"
	TypeActionChunk     = Package + "/msg/ActionChunk"
	TypeStampedAction   = Package + "/msg/StampedAction"
	TypeSharedTensor    = Package + "/msg/SharedTensor"
	TypeKVHandoff       = Package + "/msg/KVHandoff"
	TypeDiagnosticArray = "diagnostic_msgs/msg/DiagnosticArray"
)

// Time is builtin_interfaces/Time.
type Time struct {
	Sec     int32
	Nanosec uint32
}

// Header is std_msgs/Header.
type Header struct {
	Stamp   Time
	FrameID string
}

// Element types of a Tensor.
const (
	DTypeFloat32 uint8 = 0
	DTypeFloat16 uint8 = 1
)

// Tensor is fastwam_action_expert/Tensor: a row-major shape, an element type
// and the little-endian payload. A decoded Tensor's Data may view the
// message buffer it was decoded from.
type Tensor struct {
	Shape []uint32
	DType uint8
	Data  []byte
}

// VideoKVCache is fastwam_action_expert/VideoKVCache.
type VideoKVCache struct {
	Header             Header
	Seq                uint64
	VisibleVideoTokens uint32
	Keys               Tensor
	Values             Tensor
}

// SharedTensor is fastwam_action_expert/SharedTensor: a tensor's shape,
// element type and where its bytes are in a shared-memory slot.
type SharedTensor struct {
	Shape  []uint32
	DType  uint8
	Offset uint64
	Length uint64
}

// KVHandoff is fastwam_action_expert/KVHandoff: a VideoKVCache whose
// tensors are in a slot of a shared-memory segment (package kvshm).
type KVHandoff struct {
	Header             Header
	Seq                uint64
	VisibleVideoTokens uint32
	Segment            string
	Slot               uint32
	Generation         uint64
	Keys               SharedTensor
	Values             SharedTensor
}

// TextContext is fastwam_action_expert/TextContext.
type TextContext struct {
	Header        Header
	Seq           uint64
	Instruction   string
	Context       Tensor
	AttentionMask []bool
}

// ActionRow is fastwam_action_expert/ActionRow.
type ActionRow struct {
	Values []float32
}

// ActionChunk is fastwam_action_expert/ActionChunk.
type ActionChunk struct {
	Header     Header
	Seq        uint64
	KVSeq      uint64
	ContextSeq uint64
	Actions    []ActionRow

	Steps     uint32
	Shift     float32
	NoiseSeed uint64
	Backend   string

	DenoiseMs          float32
	ReceiveToPublishMs float32
	InputAgeMs         float32

	DryRun     bool
	Clipped    bool
	StaleInput bool

	// Timing: action i is for Header.Stamp + i*Dt; the first
	// InferenceDelay actions were already past when the chunk was
	// published.
	Dt             float64
	InferenceDelay uint32

	// Real-time chunking: what tied this chunk to the previous one
	// (RTCMode "off": nothing, and the other fields are zero).
	RTCMode        string
	RTCPrevSeq     uint64
	RTCShift       uint32
	RTCDelay       uint32
	RTCHorizon     uint32
	RTCSchedule    string
	RTCMaxGuidance float32
}

// StampedAction is fastwam_action_expert/StampedAction: one action of the
// chunk executor, for the instant Header.Stamp.
type StampedAction struct {
	Header Header
	Values []float32

	ChunkSeq   uint64 // seq of the newest chunk covering the instant
	Row        uint32 // that chunk's row for the instant
	Aggregated uint32 // chunks whose rows were combined

	Held bool // starvation: the last action repeated
}

// Diagnostic levels of diagnostic_msgs/DiagnosticStatus.
const (
	LevelOK    byte = 0
	LevelWarn  byte = 1
	LevelError byte = 2
	LevelStale byte = 3
)

// KeyValue is diagnostic_msgs/KeyValue.
type KeyValue struct {
	Key   string
	Value string
}

// DiagnosticStatus is diagnostic_msgs/DiagnosticStatus.
type DiagnosticStatus struct {
	Level      byte
	Name       string
	Message    string
	HardwareID string
	Values     []KeyValue
}

// DiagnosticArray is diagnostic_msgs/DiagnosticArray.
type DiagnosticArray struct {
	Header Header
	Status []DiagnosticStatus
}
