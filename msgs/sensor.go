package msgs

// The robot's observation messages, which the world-model side takes in:
// camera images (sensor_msgs/Image and sensor_msgs/CompressedImage), the
// proprioceptive state (sensor_msgs/JointState, or the Float64MultiArray of
// control.go) and the instruction (std_msgs/String). Definitions: ROS 2
// Humble's (deps/sensor_msgs, deps/std_msgs). Images are on the data path:
// their decoders view the pixel bytes in the message (no copy) and have a
// reusing form that allocates nothing for a stream of frames of one layout.

// ROS type names of the observation messages.
const (
	TypeImage           = "sensor_msgs/msg/Image"
	TypeCompressedImage = "sensor_msgs/msg/CompressedImage"
	TypeJointState      = "sensor_msgs/msg/JointState"
	TypeString          = "std_msgs/msg/String"
)

// Image is sensor_msgs/Image: Height rows of Step bytes each, the pixels
// laid out as Encoding says ("rgb8", "bgr8", "mono8", …). A decoded Image's
// Data views the message buffer it was decoded from. The codec checks only
// the wire format; package camera checks the geometry against the data.
type Image struct {
	Header      Header
	Height      uint32
	Width       uint32
	Encoding    string
	IsBigEndian uint8
	Step        uint32
	Data        []byte
}

// CompressedImage is sensor_msgs/CompressedImage: Format names the codec as
// image_transport writes it ("jpeg", "png", "rgb8; jpeg compressed bgr8", …)
// and Data holds the compressed bytes. A decoded CompressedImage's Data
// views the message buffer.
type CompressedImage struct {
	Header Header
	Format string
	Data   []byte
}

// JointState is sensor_msgs/JointState: per joint a name and, each
// optional (empty), a position, velocity and effort.
type JointState struct {
	Header   Header
	Name     []string
	Position []float64
	Velocity []float64
	Effort   []float64
}

// String is std_msgs/String.
type String struct {
	Data string
}

// --- sensor_msgs/Image and sensor_msgs/CompressedImage ---

// The two image messages share their framing: a header first, the image
// bytes last, viewed in place on decoding. AppendCDR and
// UnmarshalCDRReuse call encode and decode directly, not through
// appendMessage or a function value: there the encoder or decoder would
// escape to the heap, and a stream of frames would allocate one a frame
// (TestImageReuseAllocatesNothing, TestImageAppendAllocatesNothing).
// UnmarshalCDR is UnmarshalCDRReuse on a fresh value.

// decodeHeader decodes the std_msgs/Header field that begins a message.
func decodeHeader(d *decoder, h *Header) {
	d.enter("header")
	h.decode(d)
	d.leave()
}

// encodeBytes writes a uint8[] field; path names it in errors.
func encodeBytes(e *encoder, path string, b []byte) {
	e.seqLen(path, len(b))
	e.raw(b)
}

// viewBytes reads a uint8[] field as a view of the message (nil when
// empty): its length is checked against what the message holds first.
func viewBytes(d *decoder, field string) []byte {
	n := d.seqLen(field, minByte, "bytes")
	if n == 0 {
		return nil
	}
	return d.view(field, n)
}

func (m *Image) encode(e *encoder) {
	m.Header.encode(e)
	e.u32(m.Height)
	e.u32(m.Width)
	e.str("Image.encoding", m.Encoding)
	e.u8(m.IsBigEndian)
	e.u32(m.Step)
	encodeBytes(e, "Image.data", m.Data)
}

func (m *Image) decode(d *decoder) {
	decodeHeader(d, &m.Header)
	m.Height = d.u32("height")
	m.Width = d.u32("width")
	m.Encoding = d.strReuse("encoding", m.Encoding)
	m.IsBigEndian = d.u8("is_bigendian")
	m.Step = d.u32("step")
	m.Data = viewBytes(d, "data")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Image) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to
// dst, growing it at most once, so the pixels are copied once.
func (m *Image) AppendCDR(dst []byte) ([]byte, error) {
	var e encoder
	e.startSizing()
	m.encode(&e)
	if !e.startWriting(dst) {
		return dst, e.err
	}
	m.encode(&e)
	return e.finish(dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on
// error. m.Data views data (no copy): data must outlive m and stay
// unchanged.
func (m *Image) UnmarshalCDR(data []byte) error {
	var v Image
	if err := v.UnmarshalCDRReuse(data); err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalCDRReuse decodes like UnmarshalCDR but in place, reusing m's
// frame id and encoding strings when unchanged, so that decoding a stream
// of frames allocates nothing. On error m holds unspecified values. m.Data
// views data.
func (m *Image) UnmarshalCDRReuse(data []byte) error {
	var d decoder
	if !d.start(data, "Image") {
		return d.err
	}
	m.decode(&d)
	return d.finish()
}

func (m *CompressedImage) encode(e *encoder) {
	m.Header.encode(e)
	e.str("CompressedImage.format", m.Format)
	encodeBytes(e, "CompressedImage.data", m.Data)
}

func (m *CompressedImage) decode(d *decoder) {
	decodeHeader(d, &m.Header)
	m.Format = d.strReuse("format", m.Format)
	m.Data = viewBytes(d, "data")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *CompressedImage) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to
// dst, growing it at most once.
func (m *CompressedImage) AppendCDR(dst []byte) ([]byte, error) {
	var e encoder
	e.startSizing()
	m.encode(&e)
	if !e.startWriting(dst) {
		return dst, e.err
	}
	m.encode(&e)
	return e.finish(dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on
// error. m.Data views data (no copy).
func (m *CompressedImage) UnmarshalCDR(data []byte) error {
	var v CompressedImage
	if err := v.UnmarshalCDRReuse(data); err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalCDRReuse decodes like UnmarshalCDR but in place, reusing m's
// strings when unchanged. On error m holds unspecified values. m.Data views
// data.
func (m *CompressedImage) UnmarshalCDRReuse(data []byte) error {
	var d decoder
	if !d.start(data, "CompressedImage") {
		return d.err
	}
	m.decode(&d)
	return d.finish()
}

// --- sensor_msgs/JointState ---

func (m *JointState) encode(e *encoder) {
	m.Header.encode(e)
	e.strings("JointState.name", m.Name)
	e.float64s("JointState.position", m.Position)
	e.float64s("JointState.velocity", m.Velocity)
	e.float64s("JointState.effort", m.Effort)
}

func (m *JointState) decode(d *decoder) {
	decodeHeader(d, &m.Header)
	m.Name = d.strings("name")
	m.Position = d.float64s("position")
	m.Velocity = d.float64s("velocity")
	m.Effort = d.float64s("effort")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *JointState) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *JointState) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *JointState) UnmarshalCDR(data []byte) error {
	return unmarshalMessage(m, data, "JointState")
}

// --- std_msgs/String ---

func (m *String) encode(e *encoder) { e.str("String.data", m.Data) }

func (m *String) decode(d *decoder) { m.Data = d.str("data") }

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *String) MarshalCDR() ([]byte, error) { return appendMessage(m, nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *String) AppendCDR(dst []byte) ([]byte, error) { return appendMessage(m, dst) }

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *String) UnmarshalCDR(data []byte) error { return unmarshalMessage(m, data, "String") }
