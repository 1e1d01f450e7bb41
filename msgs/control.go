package msgs

// The standard messages robot controllers take, for the executor's control
// outputs (deps/trajectory_msgs, deps/geometry_msgs, deps/std_msgs,
// deps/builtin_interfaces: ROS 2 Humble's definitions), and std_msgs/Bool
// for its hold input. They are published once per control period or
// chunk, not on the data path, so they share the generic helpers of
// svccodec.go.

// ROS type names of the control messages.
const (
	TypeJointTrajectory   = "trajectory_msgs/msg/JointTrajectory"
	TypeFloat64MultiArray = "std_msgs/msg/Float64MultiArray"
	TypeTwistStamped      = "geometry_msgs/msg/TwistStamped"
	TypeFloat64           = "std_msgs/msg/Float64"
	TypeBool              = "std_msgs/msg/Bool"
)

// Duration is builtin_interfaces/Duration.
type Duration struct {
	Sec     int32
	Nanosec uint32
}

// JointTrajectoryPoint is trajectory_msgs/JointTrajectoryPoint.
type JointTrajectoryPoint struct {
	Positions     []float64
	Velocities    []float64
	Accelerations []float64
	Effort        []float64
	TimeFromStart Duration
}

// JointTrajectory is trajectory_msgs/JointTrajectory.
type JointTrajectory struct {
	Header     Header
	JointNames []string
	Points     []JointTrajectoryPoint
}

// MultiArrayDimension is std_msgs/MultiArrayDimension.
type MultiArrayDimension struct {
	Label  string
	Size   uint32
	Stride uint32
}

// MultiArrayLayout is std_msgs/MultiArrayLayout.
type MultiArrayLayout struct {
	Dim        []MultiArrayDimension
	DataOffset uint32
}

// Float64MultiArray is std_msgs/Float64MultiArray.
type Float64MultiArray struct {
	Layout MultiArrayLayout
	Data   []float64
}

// Vector3 is geometry_msgs/Vector3.
type Vector3 struct{ X, Y, Z float64 }

// Twist is geometry_msgs/Twist.
type Twist struct{ Linear, Angular Vector3 }

// TwistStamped is geometry_msgs/TwistStamped.
type TwistStamped struct {
	Header Header
	Twist  Twist
}

// Float64 is std_msgs/Float64.
type Float64 struct{ Data float64 }

// Bool is std_msgs/Bool.
type Bool struct{ Data bool }

// minimum encoded sizes of sequence elements, for the decoder's bounds.
const (
	minTrajectoryPoint = 4*4 + 8   // four empty sequences, time_from_start
	minArrayDimension  = 4 + 4 + 4 // label length, size, stride
)

func (m *Duration) encode(e *encoder) {
	e.i32(m.Sec)
	e.u32(m.Nanosec)
}

func (m *Duration) decode(d *decoder) {
	m.Sec = d.i32("sec")
	m.Nanosec = d.u32("nanosec")
}

func (m *JointTrajectoryPoint) encode(e *encoder) {
	e.float64s("JointTrajectoryPoint.positions", m.Positions)
	e.float64s("JointTrajectoryPoint.velocities", m.Velocities)
	e.float64s("JointTrajectoryPoint.accelerations", m.Accelerations)
	e.float64s("JointTrajectoryPoint.effort", m.Effort)
	m.TimeFromStart.encode(e)
}

func (m *JointTrajectoryPoint) decode(d *decoder) {
	m.Positions = d.float64s("positions")
	m.Velocities = d.float64s("velocities")
	m.Accelerations = d.float64s("accelerations")
	m.Effort = d.float64s("effort")
	d.enter("time_from_start")
	m.TimeFromStart.decode(d)
	d.leave()
}

func (m *JointTrajectory) encode(e *encoder) {
	m.Header.encode(e)
	e.strings("JointTrajectory.joint_names", m.JointNames)
	e.seqLen("JointTrajectory.points", len(m.Points))
	for i := range m.Points {
		m.Points[i].encode(e)
	}
}

func (m *JointTrajectory) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	m.JointNames = d.strings("joint_names")
	n := d.seqLen("points", minTrajectoryPoint, "JointTrajectoryPoint")
	if n <= 0 {
		return
	}
	m.Points = make([]JointTrajectoryPoint, n)
	for i := range m.Points {
		d.enterIndex(i)
		m.Points[i].decode(d)
		d.leave()
		if d.err != nil {
			return
		}
	}
}

func (m *MultiArrayLayout) encode(e *encoder) {
	e.seqLen("MultiArrayLayout.dim", len(m.Dim))
	for _, dim := range m.Dim {
		e.str("MultiArrayDimension.label", dim.Label)
		e.u32(dim.Size)
		e.u32(dim.Stride)
	}
	e.u32(m.DataOffset)
}

func (m *MultiArrayLayout) decode(d *decoder) {
	n := d.seqLen("dim", minArrayDimension, "MultiArrayDimension")
	if n > 0 {
		m.Dim = make([]MultiArrayDimension, n)
		for i := range m.Dim {
			m.Dim[i].Label = d.str("label")
			m.Dim[i].Size = d.u32("size")
			m.Dim[i].Stride = d.u32("stride")
		}
	}
	m.DataOffset = d.u32("data_offset")
}

func (m *Float64MultiArray) encode(e *encoder) {
	m.Layout.encode(e)
	e.float64s("Float64MultiArray.data", m.Data)
}

func (m *Float64MultiArray) decode(d *decoder) {
	d.enter("layout")
	m.Layout.decode(d)
	d.leave()
	m.Data = d.float64s("data")
}

func (m *Vector3) encode(e *encoder) {
	e.f64(m.X)
	e.f64(m.Y)
	e.f64(m.Z)
}

func (m *Vector3) decode(d *decoder) {
	m.X = d.f64("x")
	m.Y = d.f64("y")
	m.Z = d.f64("z")
}

func (m *TwistStamped) encode(e *encoder) {
	m.Header.encode(e)
	m.Twist.Linear.encode(e)
	m.Twist.Angular.encode(e)
}

func (m *TwistStamped) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	d.enter("twist")
	m.Twist.Linear.decode(d)
	m.Twist.Angular.decode(d)
	d.leave()
}

func (m *Float64) encode(e *encoder) { e.f64(m.Data) }

func (m *Float64) decode(d *decoder) { m.Data = d.f64("data") }

func (m *Bool) encode(e *encoder) { e.boolean(m.Data) }

func (m *Bool) decode(d *decoder) { m.Data = d.boolean("data") }

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *JointTrajectory) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *JointTrajectory) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *JointTrajectory) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "JointTrajectory")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Float64MultiArray) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Float64MultiArray) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *Float64MultiArray) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "Float64MultiArray")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *TwistStamped) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *TwistStamped) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *TwistStamped) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "TwistStamped")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Float64) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Float64) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *Float64) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "Float64") }

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Bool) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Bool) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *Bool) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "Bool") }
