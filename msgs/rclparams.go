package msgs

// rcl_interfaces (ROS 2 Humble, deps/rcl_interfaces): parameters, their
// descriptors and events, the request/response of the parameter services,
// and rosgraph_msgs/Clock.

// ROS type names of the rcl_interfaces and rosgraph_msgs messages and
// services.
const (
	TypeParameterValue         = "rcl_interfaces/msg/ParameterValue"
	TypeParameter              = "rcl_interfaces/msg/Parameter"
	TypeParameterDescriptor    = "rcl_interfaces/msg/ParameterDescriptor"
	TypeParameterEvent         = "rcl_interfaces/msg/ParameterEvent"
	TypeSetParametersResult    = "rcl_interfaces/msg/SetParametersResult"
	TypeListParametersResult   = "rcl_interfaces/msg/ListParametersResult"
	TypeClock                  = "rosgraph_msgs/msg/Clock"
	SrvListParameters          = "rcl_interfaces/srv/ListParameters"
	SrvGetParameters           = "rcl_interfaces/srv/GetParameters"
	SrvGetParameterTypes       = "rcl_interfaces/srv/GetParameterTypes"
	SrvSetParameters           = "rcl_interfaces/srv/SetParameters"
	SrvSetParametersAtomically = "rcl_interfaces/srv/SetParametersAtomically"
	SrvDescribeParameters      = "rcl_interfaces/srv/DescribeParameters"
)

// Parameter types of rcl_interfaces/ParameterType: which field of a
// ParameterValue holds the value.
const (
	ParameterNotSet       uint8 = 0
	ParameterBool         uint8 = 1
	ParameterInteger      uint8 = 2
	ParameterDouble       uint8 = 3
	ParameterString       uint8 = 4
	ParameterByteArray    uint8 = 5
	ParameterBoolArray    uint8 = 6
	ParameterIntegerArray uint8 = 7
	ParameterDoubleArray  uint8 = 8
	ParameterStringArray  uint8 = 9
)

// ListParametersDepthRecursive is rcl_interfaces/srv/ListParameters'
// DEPTH_RECURSIVE: list at every depth below the prefixes.
const ListParametersDepthRecursive uint64 = 0

// ParameterValue is rcl_interfaces/ParameterValue: Type selects the field
// that holds the value.
type ParameterValue struct {
	Type              uint8
	BoolValue         bool
	IntegerValue      int64
	DoubleValue       float64
	StringValue       string
	ByteArrayValue    []byte
	BoolArrayValue    []bool
	IntegerArrayValue []int64
	DoubleArrayValue  []float64
	StringArrayValue  []string
}

// Parameter is rcl_interfaces/Parameter.
type Parameter struct {
	Name  string
	Value ParameterValue
}

// FloatingPointRange is rcl_interfaces/FloatingPointRange.
type FloatingPointRange struct {
	FromValue float64
	ToValue   float64
	Step      float64
}

// IntegerRange is rcl_interfaces/IntegerRange.
type IntegerRange struct {
	FromValue int64
	ToValue   int64
	Step      uint64
}

// ParameterDescriptor is rcl_interfaces/ParameterDescriptor. The two range
// sequences are bounded to one element each (FloatingPointRange[<=1]).
type ParameterDescriptor struct {
	Name                  string
	Type                  uint8
	Description           string
	AdditionalConstraints string
	ReadOnly              bool
	DynamicTyping         bool
	FloatingPointRange    []FloatingPointRange
	IntegerRange          []IntegerRange
}

// SetParametersResult is rcl_interfaces/SetParametersResult.
type SetParametersResult struct {
	Successful bool
	Reason     string
}

// ListParametersResult is rcl_interfaces/ListParametersResult.
type ListParametersResult struct {
	Names    []string
	Prefixes []string
}

// ParameterEvent is rcl_interfaces/ParameterEvent.
type ParameterEvent struct {
	Stamp             Time
	Node              string
	NewParameters     []Parameter
	ChangedParameters []Parameter
	DeletedParameters []Parameter
}

// ListParametersRequest is rcl_interfaces/srv/ListParameters_Request.
type ListParametersRequest struct {
	Prefixes []string
	Depth    uint64
}

// ListParametersResponse is rcl_interfaces/srv/ListParameters_Response.
type ListParametersResponse struct {
	Result ListParametersResult
}

// GetParametersRequest is rcl_interfaces/srv/GetParameters_Request.
type GetParametersRequest struct {
	Names []string
}

// GetParametersResponse is rcl_interfaces/srv/GetParameters_Response.
type GetParametersResponse struct {
	Values []ParameterValue
}

// GetParameterTypesRequest is rcl_interfaces/srv/GetParameterTypes_Request.
type GetParameterTypesRequest struct {
	Names []string
}

// GetParameterTypesResponse is rcl_interfaces/srv/GetParameterTypes_Response.
type GetParameterTypesResponse struct {
	Types []uint8
}

// SetParametersRequest is rcl_interfaces/srv/SetParameters_Request.
type SetParametersRequest struct {
	Parameters []Parameter
}

// SetParametersResponse is rcl_interfaces/srv/SetParameters_Response.
type SetParametersResponse struct {
	Results []SetParametersResult
}

// SetParametersAtomicallyRequest is
// rcl_interfaces/srv/SetParametersAtomically_Request.
type SetParametersAtomicallyRequest struct {
	Parameters []Parameter
}

// SetParametersAtomicallyResponse is
// rcl_interfaces/srv/SetParametersAtomically_Response.
type SetParametersAtomicallyResponse struct {
	Result SetParametersResult
}

// DescribeParametersRequest is rcl_interfaces/srv/DescribeParameters_Request.
type DescribeParametersRequest struct {
	Names []string
}

// DescribeParametersResponse is
// rcl_interfaces/srv/DescribeParameters_Response.
type DescribeParametersResponse struct {
	Descriptors []ParameterDescriptor
}

// Clock is rosgraph_msgs/Clock.
type Clock struct {
	Clock Time
}

func (m *ParameterValue) encode(e *encoder) {
	e.u8(m.Type)
	e.boolean(m.BoolValue)
	e.i64(m.IntegerValue)
	e.f64(m.DoubleValue)
	e.str("ParameterValue.string_value", m.StringValue)
	e.bytesSeq("ParameterValue.byte_array_value", m.ByteArrayValue)
	e.bools("ParameterValue.bool_array_value", m.BoolArrayValue)
	e.int64s("ParameterValue.integer_array_value", m.IntegerArrayValue)
	e.float64s("ParameterValue.double_array_value", m.DoubleArrayValue)
	e.strings("ParameterValue.string_array_value", m.StringArrayValue)
}

func (m *ParameterValue) decode(d *decoder) {
	m.Type = d.u8("type")
	m.BoolValue = d.boolean("bool_value")
	m.IntegerValue = d.i64("integer_value")
	m.DoubleValue = d.f64("double_value")
	m.StringValue = d.str("string_value")
	m.ByteArrayValue = d.bytesSeq("byte_array_value")
	m.BoolArrayValue = d.bools("bool_array_value")
	m.IntegerArrayValue = d.int64s("integer_array_value")
	m.DoubleArrayValue = d.float64s("double_array_value")
	m.StringArrayValue = d.strings("string_array_value")
}

func (m *Parameter) encode(e *encoder) {
	e.str("Parameter.name", m.Name)
	m.Value.encode(e)
}

func (m *Parameter) decode(d *decoder) {
	m.Name = d.str("name")
	d.enter("value")
	m.Value.decode(d)
	d.leave()
}

func (m *FloatingPointRange) encode(e *encoder) {
	e.f64(m.FromValue)
	e.f64(m.ToValue)
	e.f64(m.Step)
}

func (m *FloatingPointRange) decode(d *decoder) {
	m.FromValue = d.f64("from_value")
	m.ToValue = d.f64("to_value")
	m.Step = d.f64("step")
}

func (m *IntegerRange) encode(e *encoder) {
	e.i64(m.FromValue)
	e.i64(m.ToValue)
	e.u64(m.Step)
}

func (m *IntegerRange) decode(d *decoder) {
	m.FromValue = d.i64("from_value")
	m.ToValue = d.i64("to_value")
	m.Step = d.u64("step")
}

func (m *ParameterDescriptor) encode(e *encoder) {
	e.str("ParameterDescriptor.name", m.Name)
	e.u8(m.Type)
	e.str("ParameterDescriptor.description", m.Description)
	e.str("ParameterDescriptor.additional_constraints", m.AdditionalConstraints)
	e.boolean(m.ReadOnly)
	e.boolean(m.DynamicTyping)
	e.boundedLen("ParameterDescriptor.floating_point_range", len(m.FloatingPointRange), 1)
	for i := range m.FloatingPointRange {
		m.FloatingPointRange[i].encode(e)
	}
	e.boundedLen("ParameterDescriptor.integer_range", len(m.IntegerRange), 1)
	for i := range m.IntegerRange {
		m.IntegerRange[i].encode(e)
	}
}

func (m *ParameterDescriptor) decode(d *decoder) {
	m.Name = d.str("name")
	m.Type = d.u8("type")
	m.Description = d.str("description")
	m.AdditionalConstraints = d.str("additional_constraints")
	m.ReadOnly = d.boolean("read_only")
	m.DynamicTyping = d.boolean("dynamic_typing")
	m.FloatingPointRange = decodeSeq[FloatingPointRange](d, "floating_point_range", d.boundedLen("floating_point_range", 1, minRange, "FloatingPointRanges"))
	m.IntegerRange = decodeSeq[IntegerRange](d, "integer_range", d.boundedLen("integer_range", 1, minRange, "IntegerRanges"))
}

func (m *SetParametersResult) encode(e *encoder) {
	e.boolean(m.Successful)
	e.str("SetParametersResult.reason", m.Reason)
}

func (m *SetParametersResult) decode(d *decoder) {
	m.Successful = d.boolean("successful")
	m.Reason = d.str("reason")
}

func (m *ListParametersResult) encode(e *encoder) {
	e.strings("ListParametersResult.names", m.Names)
	e.strings("ListParametersResult.prefixes", m.Prefixes)
}

func (m *ListParametersResult) decode(d *decoder) {
	m.Names = d.strings("names")
	m.Prefixes = d.strings("prefixes")
}

// decodeParameters reads a Parameter sequence named field.
func decodeParameters(d *decoder, field string) []Parameter {
	return decodeSeq[Parameter](d, field, d.seqLen(field, minParameter, "Parameters"))
}

func (m *ParameterEvent) encode(e *encoder) {
	m.Stamp.encode(e)
	e.str("ParameterEvent.node", m.Node)
	encodeSeq(e, "ParameterEvent.new_parameters", m.NewParameters)
	encodeSeq(e, "ParameterEvent.changed_parameters", m.ChangedParameters)
	encodeSeq(e, "ParameterEvent.deleted_parameters", m.DeletedParameters)
}

func (m *ParameterEvent) decode(d *decoder) {
	d.enter("stamp")
	m.Stamp.decode(d)
	d.leave()
	m.Node = d.str("node")
	m.NewParameters = decodeParameters(d, "new_parameters")
	m.ChangedParameters = decodeParameters(d, "changed_parameters")
	m.DeletedParameters = decodeParameters(d, "deleted_parameters")
}

func (m *ListParametersRequest) encode(e *encoder) {
	e.strings("ListParameters_Request.prefixes", m.Prefixes)
	e.u64(m.Depth)
}

func (m *ListParametersRequest) decode(d *decoder) {
	m.Prefixes = d.strings("prefixes")
	m.Depth = d.u64("depth")
}

func (m *ListParametersResponse) encode(e *encoder) { m.Result.encode(e) }

func (m *ListParametersResponse) decode(d *decoder) {
	d.enter("result")
	m.Result.decode(d)
	d.leave()
}

func (m *GetParametersRequest) encode(e *encoder) {
	e.strings("GetParameters_Request.names", m.Names)
}

func (m *GetParametersRequest) decode(d *decoder) { m.Names = d.strings("names") }

func (m *GetParametersResponse) encode(e *encoder) {
	encodeSeq(e, "GetParameters_Response.values", m.Values)
}

func (m *GetParametersResponse) decode(d *decoder) {
	m.Values = decodeSeq[ParameterValue](d, "values", d.seqLen("values", minParameterValue, "ParameterValues"))
}

func (m *GetParameterTypesRequest) encode(e *encoder) {
	e.strings("GetParameterTypes_Request.names", m.Names)
}

func (m *GetParameterTypesRequest) decode(d *decoder) { m.Names = d.strings("names") }

func (m *GetParameterTypesResponse) encode(e *encoder) {
	e.bytesSeq("GetParameterTypes_Response.types", m.Types)
}

func (m *GetParameterTypesResponse) decode(d *decoder) { m.Types = d.uint8s("types") }

func (m *SetParametersRequest) encode(e *encoder) {
	encodeSeq(e, "SetParameters_Request.parameters", m.Parameters)
}

func (m *SetParametersRequest) decode(d *decoder) {
	m.Parameters = decodeParameters(d, "parameters")
}

func (m *SetParametersResponse) encode(e *encoder) {
	encodeSeq(e, "SetParameters_Response.results", m.Results)
}

func (m *SetParametersResponse) decode(d *decoder) {
	m.Results = decodeSeq[SetParametersResult](d, "results", d.seqLen("results", minSetParametersResult, "SetParametersResults"))
}

func (m *SetParametersAtomicallyRequest) encode(e *encoder) {
	encodeSeq(e, "SetParametersAtomically_Request.parameters", m.Parameters)
}

func (m *SetParametersAtomicallyRequest) decode(d *decoder) {
	m.Parameters = decodeParameters(d, "parameters")
}

func (m *SetParametersAtomicallyResponse) encode(e *encoder) { m.Result.encode(e) }

func (m *SetParametersAtomicallyResponse) decode(d *decoder) {
	d.enter("result")
	m.Result.decode(d)
	d.leave()
}

func (m *DescribeParametersRequest) encode(e *encoder) {
	e.strings("DescribeParameters_Request.names", m.Names)
}

func (m *DescribeParametersRequest) decode(d *decoder) { m.Names = d.strings("names") }

func (m *DescribeParametersResponse) encode(e *encoder) {
	encodeSeq(e, "DescribeParameters_Response.descriptors", m.Descriptors)
}

func (m *DescribeParametersResponse) decode(d *decoder) {
	m.Descriptors = decodeSeq[ParameterDescriptor](d, "descriptors", d.seqLen("descriptors", minParameterDescriptor, "ParameterDescriptors"))
}

func (m *Clock) encode(e *encoder) { m.Clock.encode(e) }

func (m *Clock) decode(d *decoder) {
	d.enter("clock")
	m.Clock.decode(d)
	d.leave()
}
