package qnnfake

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/fastwam/actionexpert/expert"
)

// Data types the test double computes with (QNN_DATATYPE_* values from the
// constants section of layout-api2.32.txt). Other QNN data types may appear
// in a binary's metadata, but an execute on a graph that uses them fails.
const (
	DataTypeInt32    uint32 = 0x032 // QNN_DATATYPE_INT_32
	DataTypeFloat16  uint32 = 0x216 // QNN_DATATYPE_FLOAT_16
	DataTypeBF16     uint32 = 0x226 // QNN_DATATYPE_BFLOAT_16
	DataTypeFloat32  uint32 = 0x232 // QNN_DATATYPE_FLOAT_32
	DataTypeUFixed8  uint32 = 0x408 // QNN_DATATYPE_UFIXED_POINT_8
	DataTypeUFixed16 uint32 = 0x416 // QNN_DATATYPE_UFIXED_POINT_16
	DataTypeBool8    uint32 = 0x508 // QNN_DATATYPE_BOOL_8
)

// Quantisation enum values written into a binary (layout-api2.32.txt).
const (
	definitionDefined         uint32 = 1          // QNN_DEFINITION_DEFINED
	definitionUndefined       uint32 = 0x7fffffff // QNN_DEFINITION_UNDEFINED
	encodingScaleOffset       uint32 = 0          // QNN_QUANTIZATION_ENCODING_SCALE_OFFSET
	binaryFormatMajor         uint32 = 2
	binaryFormatMinor         uint32 = 3
	payloadOffset                    = 0x40
	payloadMagic                     = "FAKEQNN1"
	payloadMagicSpill                = "FAKEQNN2"
	headerPayloadOffsetOffset        = 0x18
	headerPayloadSizeOffset          = 0x20
)

// ActionStepName is the graph name of the action_step context binary.
const ActionStepName = "action_step"

// ScaleOffset is a per-tensor scale/offset quantisation: real = (q + Offset) * Scale.
type ScaleOffset struct {
	Scale  float32
	Offset int32
}

// Tensor describes one graph input or output in a context binary.
type Tensor struct {
	ID       uint32
	Name     string
	DataType uint32   // QNN_DATATYPE_* value
	Dims     []uint32 // rank = len(Dims)
	// Quant is the scale/offset quantisation of a fixed-point tensor. A nil
	// Quant is written the way the real library marks float tensors:
	// encodingDefinition UNDEFINED, quantizationEncoding 0, scale 0, offset 0.
	Quant *ScaleOffset
}

// Elements is the number of elements of t (1 for a rank-0 tensor).
func (t Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= uint64(d)
	}
	return n
}

// Graph describes one graph of a context binary.
type Graph struct {
	Name            string
	Inputs, Outputs []Tensor
	// SpillFill is the spill-fill buffer size the graph needs, reported in
	// the metadata (graph-info v3's HTP graph blob info, and the largest
	// of a binary's graphs in binary-info v1/v2's HTP hardware-info blob).
	SpillFill uint64
}

// Binary describes a context binary in the test double's format.
type Binary struct {
	SocModel, Arch uint32
	BuildID        string
	Graphs         []Graph
}

// Marshal serialises b in the test double's context-binary format: a 64-byte
// header (big-endian format version 2.3 in bytes 0..7, little-endian uint64
// payload offset at 0x18 and payload size at 0x20), then the payload: the
// magic "FAKEQNN1", the SoC model, the DSP architecture, the build id and the
// graphs, little-endian, strings as a uint32 length and the bytes. When a
// graph has a SpillFill size the magic is "FAKEQNN2" and every graph's name
// is followed by its SpillFill as a uint64.
//
// Marshal writes b as given, without validation, so tests can produce
// binaries the library must reject; truncating or padding the result also
// gives a malformed binary.
func (b Binary) Marshal() []byte {
	spill := false
	for _, g := range b.Graphs {
		spill = spill || g.SpillFill != 0
	}
	p := []byte(payloadMagic)
	if spill {
		p = []byte(payloadMagicSpill)
	}
	p = binary.LittleEndian.AppendUint32(p, b.SocModel)
	p = binary.LittleEndian.AppendUint32(p, b.Arch)
	p = appendString(p, b.BuildID)
	p = binary.LittleEndian.AppendUint32(p, uint32(len(b.Graphs)))
	for _, g := range b.Graphs {
		p = appendString(p, g.Name)
		if spill {
			p = binary.LittleEndian.AppendUint64(p, g.SpillFill)
		}
		p = appendTensors(p, g.Inputs)
		p = appendTensors(p, g.Outputs)
	}
	out := make([]byte, payloadOffset, payloadOffset+len(p))
	binary.BigEndian.PutUint32(out[0:], binaryFormatMajor)
	binary.BigEndian.PutUint32(out[4:], binaryFormatMinor)
	binary.LittleEndian.PutUint64(out[headerPayloadOffsetOffset:], payloadOffset)
	binary.LittleEndian.PutUint64(out[headerPayloadSizeOffset:], uint64(len(p)))
	return append(out, p...)
}

func appendString(p []byte, s string) []byte {
	p = binary.LittleEndian.AppendUint32(p, uint32(len(s)))
	return append(p, s...)
}

func appendTensors(p []byte, ts []Tensor) []byte {
	p = binary.LittleEndian.AppendUint32(p, uint32(len(ts)))
	for _, t := range ts {
		p = binary.LittleEndian.AppendUint32(p, t.ID)
		p = appendString(p, t.Name)
		p = binary.LittleEndian.AppendUint32(p, t.DataType)
		p = binary.LittleEndian.AppendUint32(p, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			p = binary.LittleEndian.AppendUint32(p, d)
		}
		def, enc, scale, offset := definitionUndefined, encodingScaleOffset, float32(0), int32(0)
		if t.Quant != nil {
			def, scale, offset = definitionDefined, t.Quant.Scale, t.Quant.Offset
		}
		p = binary.LittleEndian.AppendUint32(p, def)
		p = binary.LittleEndian.AppendUint32(p, enc)
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(scale))
		p = binary.LittleEndian.AppendUint32(p, uint32(offset))
	}
	return p
}

// Tensor ids of the action_step graph. They are deliberately neither the
// positions of the tensors nor consecutive from zero, so a runtime that wires
// tensors by position instead of by id is caught.
const (
	idLatents     = 11
	idTimestep    = 12
	idVideoKeys   = 13
	idVideoValues = 14
	idContext     = 15
	idContextMask = 16
	idPredNoise   = 200
)

// ActionStepGraph is the action_step graph of the I/O contract d, every
// tensor of data type dt (DataTypeFloat32 or DataTypeFloat16 in the
// contract; a fixed-point dt needs Quant set on the tensors by the caller):
//
//	latents_action [1, S, a]   timestep [1]
//	video_keys     [N, 1, Sv, A]   video_values [N, 1, Sv, A]
//	context        [1, L, T]   context_mask [1, L]
//	-> pred_noise  [1, S, a]
func ActionStepGraph(dt uint32, d expert.Dims) Graph {
	u := func(v int) uint32 { return uint32(v) }
	t := func(id uint32, name string, dims ...uint32) Tensor {
		return Tensor{ID: id, Name: name, DataType: dt, Dims: dims}
	}
	return Graph{
		Name: ActionStepName,
		Inputs: []Tensor{
			t(idLatents, "latents_action", 1, u(d.ActionTokens), u(d.ActionDim)),
			t(idTimestep, "timestep", 1),
			t(idVideoKeys, "video_keys", u(d.Layers), 1, u(d.VideoTokens), u(d.AttnWidth())),
			t(idVideoValues, "video_values", u(d.Layers), 1, u(d.VideoTokens), u(d.AttnWidth())),
			t(idContext, "context", 1, u(d.ContextTokens), u(d.TextDim)),
			t(idContextMask, "context_mask", 1, u(d.ContextTokens)),
		},
		Outputs: []Tensor{
			t(idPredNoise, "pred_noise", 1, u(d.ActionTokens), u(d.ActionDim)),
		},
	}
}

// Graph names of the split action bundle.
const (
	ActionContextName = "action_context"
	ActionStepCtxName = "action_step_ctx"
)

// Tensor ids of the split action graphs (again neither positions nor
// consecutive).
const (
	idCtxContext     = 21
	idCtxCrossKeys   = 301
	idCtxCrossValues = 302
	idStepCrossKeys  = 17
	idStepCrossVals  = 18
)

// ActionContextGraph is the split bundle's once-per-chunk graph for d:
//
//	context [1, L, T] -> cross_keys, cross_values [N, 1, L, A]
func ActionContextGraph(dt uint32, d expert.Dims) Graph {
	u := func(v int) uint32 { return uint32(v) }
	t := func(id uint32, name string, dims ...uint32) Tensor {
		return Tensor{ID: id, Name: name, DataType: dt, Dims: dims}
	}
	return Graph{
		Name:   ActionContextName,
		Inputs: []Tensor{t(idCtxContext, "context", 1, u(d.ContextTokens), u(d.TextDim))},
		Outputs: []Tensor{
			t(idCtxCrossKeys, "cross_keys", u(d.Layers), 1, u(d.ContextTokens), u(d.AttnWidth())),
			t(idCtxCrossValues, "cross_values", u(d.Layers), 1, u(d.ContextTokens), u(d.AttnWidth())),
		},
	}
}

// ActionStepCtxGraph is the split bundle's per-step graph for d: the
// action_step contract with context replaced by the cross-attention keys
// and values:
//
//	latents_action [1, S, a]   timestep [1]
//	video_keys, video_values [N, 1, Sv, A]
//	cross_keys, cross_values [N, 1, L, A]   context_mask [1, L]
//	-> pred_noise [1, S, a]
func ActionStepCtxGraph(dt uint32, d expert.Dims) Graph {
	g := ActionStepGraph(dt, d)
	g.Name = ActionStepCtxName
	u := func(v int) uint32 { return uint32(v) }
	cross := []uint32{u(d.Layers), 1, u(d.ContextTokens), u(d.AttnWidth())}
	var in []Tensor
	for _, t := range g.Inputs {
		if t.Name == "context" {
			in = append(in,
				Tensor{ID: idStepCrossKeys, Name: "cross_keys", DataType: dt, Dims: cross},
				Tensor{ID: idStepCrossVals, Name: "cross_values", DataType: dt, Dims: slices.Clone(cross)})
			continue
		}
		in = append(in, t)
	}
	g.Inputs = in
	return g
}
