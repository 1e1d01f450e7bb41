package camera

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// Topics names the topics of an image bag: one per camera (in the world
// model's camera order), the proprio state and the instruction.
type Topics struct {
	Cameras     []string
	Proprio     string
	Instruction string
}

// Default topic names.
const (
	DefaultAgentviewTopic   = "/camera/agentview/image_raw"
	DefaultWristTopic       = "/camera/wrist/image_raw"
	DefaultProprioTopic     = "/robot/proprio"
	DefaultInstructionTopic = "/instruction"
)

// DefaultTopics returns LIBERO's two cameras (agentview, then wrist), the
// proprio topic and the instruction topic under their default names.
func DefaultTopics() Topics {
	return Topics{
		Cameras:     []string{DefaultAgentviewTopic, DefaultWristTopic},
		Proprio:     DefaultProprioTopic,
		Instruction: DefaultInstructionTopic,
	}
}

// withDefaults fills the empty fields from DefaultTopics.
func (t Topics) withDefaults() Topics {
	d := DefaultTopics()
	if len(t.Cameras) == 0 {
		t.Cameras = d.Cameras
	}
	if t.Proprio == "" {
		t.Proprio = d.Proprio
	}
	if t.Instruction == "" {
		t.Instruction = d.Instruction
	}
	return t
}

// CameraFrame is one camera's image of a Frame and how it is recorded.
type CameraFrame struct {
	// Stamp is the header stamp; zero means the Frame's.
	Stamp time.Time
	Image worldmodel.Image
	// Codec 0 records a sensor_msgs/Image in Encoding; JPEG or PNG a
	// sensor_msgs/CompressedImage. All frames of a camera must agree on
	// raw or compressed (a topic has one type); the codec of compressed
	// frames may vary.
	Codec Codec
	// Encoding of a raw frame: rgb8 (the default), bgr8, rgba8 or bgra8
	// (alpha 255).
	Encoding string
	// StepPadding bytes end each row of a raw frame (step = width ×
	// channels + StepPadding), as some camera drivers align rows.
	StepPadding int
}

// Frame is one cycle of an image bag: each camera's image, the proprio
// state, and the instruction when it changes.
type Frame struct {
	Stamp   time.Time
	Cameras []CameraFrame
	// State goes to the proprio topic as a std_msgs/Float64MultiArray,
	// stamped (logged) at StateStamp, zero meaning Stamp.
	State      []float64
	StateStamp time.Time
	// Instruction is recorded (std_msgs/String, latched) when it differs
	// from the last one recorded; "" keeps the one in force.
	Instruction string
}

// BagOptions configures WriteBag.
type BagOptions struct {
	Topics Topics // empty fields: DefaultTopics
	// FrameIDs are the cameras' header frame ids; empty: "camera<i>".
	FrameIDs []string
	// JPEGQuality of compressed frames, 1..100; 0 means 90.
	JPEGQuality int
	Writer      bag.WriterOptions
}

// EncodeImage makes the sensor_msgs/Image of an RGB8 image in encoding
// (rgb8, bgr8, rgba8 or bgra8, alpha 255), each row followed by padding
// bytes (zero).
func EncodeImage(img worldmodel.Image, encoding string, padding int) (msgs.Image, error) {
	lay, ok := encodingLayout(encoding)
	if !ok || lay.channels == 1 {
		return msgs.Image{}, fmt.Errorf("camera: cannot encode an RGB image as %q: %w: want rgb8, bgr8, rgba8 or bgra8", encoding, ErrUnsupported)
	}
	if err := checkRGB(img); err != nil {
		return msgs.Image{}, err
	}
	if padding < 0 || padding > 64 {
		return msgs.Image{}, fmt.Errorf("camera: row padding %d: want 0..64 bytes", padding)
	}
	c := lay.channels
	step := img.Width*c + padding
	data := make([]byte, step*img.Height)
	for y := range img.Height {
		for x := range img.Width {
			p := img.Pix[(y*img.Width+x)*3:]
			o := data[y*step+x*c:]
			o[lay.r], o[lay.g], o[lay.b] = p[0], p[1], p[2]
			if c == 4 {
				o[3] = 255
			}
		}
	}
	return msgs.Image{Height: uint32(img.Height), Width: uint32(img.Width), Encoding: encoding, Step: uint32(step), Data: data}, nil
}

// EncodeCompressed makes the sensor_msgs/CompressedImage of an RGB8 image
// as image_transport's compressed plugin names it ("rgb8; jpeg compressed
// bgr8", "rgb8; png compressed bgr8"), encoded with Go's image/jpeg (at
// quality, 1..100) or image/png.
func EncodeCompressed(img worldmodel.Image, codec Codec, quality int) (msgs.CompressedImage, error) {
	if err := checkRGB(img); err != nil {
		return msgs.CompressedImage{}, err
	}
	rgba := image.NewNRGBA(image.Rect(0, 0, img.Width, img.Height))
	for i := range img.Width * img.Height {
		copy(rgba.Pix[4*i:4*i+3], img.Pix[3*i:3*i+3])
		rgba.Pix[4*i+3] = 255
	}
	var buf bytes.Buffer
	var err error
	switch codec {
	case JPEG:
		if quality < 1 || quality > 100 {
			return msgs.CompressedImage{}, fmt.Errorf("camera: JPEG quality %d: want 1..100", quality)
		}
		err = jpeg.Encode(&buf, rgba, &jpeg.Options{Quality: quality})
	case PNG:
		err = (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, rgba)
	default:
		return msgs.CompressedImage{}, fmt.Errorf("camera: codec %v: %w: want JPEG or PNG", codec, ErrUnsupported)
	}
	if err != nil {
		return msgs.CompressedImage{}, fmt.Errorf("camera: encode %v: %w", codec, err)
	}
	return msgs.CompressedImage{Format: "rgb8; " + codec.String() + " compressed bgr8", Data: buf.Bytes()}, nil
}

func checkRGB(img worldmodel.Image) error {
	if err := DefaultLimits().checkSize("image", img.Width, img.Height); err != nil {
		return err
	}
	if len(img.Pix) != img.Width*img.Height*3 {
		return fmt.Errorf("camera: image of %d × %d has %d bytes: %w: want width × height × 3 = %d", img.Width, img.Height, len(img.Pix), ErrGeometry, img.Width*img.Height*3)
	}
	return nil
}

// stampOf returns the ROS time of t.
func stampOf(t time.Time) msgs.Time {
	ns := t.UnixNano()
	return msgs.Time{Sec: int32(ns / 1e9), Nanosec: uint32(ns % 1e9)}
}

// WriteBag writes frames as a rosbag2 MCAP bag in dir (which must not
// exist): per camera a topic of sensor_msgs/Image or
// sensor_msgs/CompressedImage, the proprio topic of
// std_msgs/Float64MultiArray and the instruction topic of std_msgs/String
// with a latched QoS (keep last 1, reliable, transient local), so that
// `ros2 bag play` gives a late subscriber the instruction in force. Each
// message is logged at its stamp.
func WriteBag(dir string, frames []Frame, opts BagOptions) (err error) {
	topics := opts.Topics.withDefaults()
	nc := len(topics.Cameras)
	quality := opts.JPEGQuality
	if quality == 0 {
		quality = 90
	}
	if len(frames) == 0 {
		return errors.New("camera: image bag: no frames")
	}
	// A camera's topic type: raw or compressed, the same in every frame.
	types := make([]string, nc)
	for i, f := range frames {
		if len(f.Cameras) != nc {
			return fmt.Errorf("camera: image bag: frame %d has %d camera images, want %d (one per camera topic)", i, len(f.Cameras), nc)
		}
		if f.Stamp.IsZero() {
			return fmt.Errorf("camera: image bag: frame %d has no stamp", i)
		}
		for c, cf := range f.Cameras {
			typ := msgs.TypeImage
			if cf.Codec != 0 {
				typ = msgs.TypeCompressedImage
			}
			if types[c] != "" && types[c] != typ {
				return fmt.Errorf("camera: image bag: camera %s is %s in frame %d but %s before: a topic has one type", topics.Cameras[c], typ, i, types[c])
			}
			types[c] = typ
		}
	}
	w, err := bag.Create(dir, opts.Writer)
	if err != nil {
		return fmt.Errorf("camera: image bag: %w", err)
	}
	defer func() {
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("camera: image bag: %w", cerr)
		}
	}()
	for c, name := range topics.Cameras {
		if err := w.AddTopic(name, types[c], bag.DefaultQoS()); err != nil {
			return fmt.Errorf("camera: image bag: %w", err)
		}
	}
	if err := w.AddTopic(topics.Proprio, msgs.TypeFloat64MultiArray, bag.DefaultQoS()); err != nil {
		return fmt.Errorf("camera: image bag: %w", err)
	}
	if err := w.AddTopic(topics.Instruction, msgs.TypeString, bag.LatchedQoS()); err != nil {
		return fmt.Errorf("camera: image bag: %w", err)
	}
	var instruction string
	for i, f := range frames {
		if f.Instruction != "" && f.Instruction != instruction {
			instruction = f.Instruction
			if _, err := Instruction(&msgs.String{Data: instruction}); err != nil {
				return fmt.Errorf("camera: image bag: frame %d: %w", i, err)
			}
			b, err := (&msgs.String{Data: instruction}).MarshalCDR()
			if err == nil {
				err = w.Write(topics.Instruction, f.Stamp, b)
			}
			if err != nil {
				return fmt.Errorf("camera: image bag: frame %d instruction: %w", i, err)
			}
		}
		for c, cf := range f.Cameras {
			stamp := cf.Stamp
			if stamp.IsZero() {
				stamp = f.Stamp
			}
			frameID := fmt.Sprintf("camera%d", c)
			if c < len(opts.FrameIDs) {
				frameID = opts.FrameIDs[c]
			}
			header := msgs.Header{Stamp: stampOf(stamp), FrameID: frameID}
			var b []byte
			if cf.Codec == 0 {
				enc := cf.Encoding
				if enc == "" {
					enc = "rgb8"
				}
				m, err := EncodeImage(cf.Image, enc, cf.StepPadding)
				if err != nil {
					return fmt.Errorf("camera: image bag: frame %d camera %d: %w", i, c, err)
				}
				m.Header = header
				b, err = m.MarshalCDR()
				if err != nil {
					return fmt.Errorf("camera: image bag: frame %d camera %d: %w", i, c, err)
				}
			} else {
				m, err := EncodeCompressed(cf.Image, cf.Codec, quality)
				if err != nil {
					return fmt.Errorf("camera: image bag: frame %d camera %d: %w", i, c, err)
				}
				m.Header = header
				b, err = m.MarshalCDR()
				if err != nil {
					return fmt.Errorf("camera: image bag: frame %d camera %d: %w", i, c, err)
				}
			}
			if err := w.Write(topics.Cameras[c], stamp, b); err != nil {
				return fmt.Errorf("camera: image bag: frame %d camera %d: %w", i, c, err)
			}
		}
		if f.State != nil {
			stamp := f.StateStamp
			if stamp.IsZero() {
				stamp = f.Stamp
			}
			m := msgs.Float64MultiArray{
				Layout: msgs.MultiArrayLayout{Dim: []msgs.MultiArrayDimension{{Label: "state", Size: uint32(len(f.State)), Stride: uint32(len(f.State))}}},
				Data:   f.State,
			}
			b, err := m.MarshalCDR()
			if err == nil {
				err = w.Write(topics.Proprio, stamp, b)
			}
			if err != nil {
				return fmt.Errorf("camera: image bag: frame %d state: %w", i, err)
			}
		}
	}
	return nil
}

// DefaultTolerance is ReadOptions.Tolerance's default: a little more than
// one frame at 30 Hz.
const DefaultTolerance = 40 * time.Millisecond

// ReadOptions configures OpenBag.
type ReadOptions struct {
	Topics Topics // empty fields: DefaultTopics
	// Tolerance bounds how far each camera frame and the state may be
	// from the newest camera frame of an observation; 0 means
	// DefaultTolerance.
	Tolerance time.Duration
	// JointNames map a sensor_msgs/JointState proprio topic to the state
	// (see JointMap); unused for a Float64MultiArray topic.
	JointNames []string
	// StateDim is the state's length; 0 means worldmodel.ProprioDim.
	StateDim int
	Limits   Limits
}

// Observation is one synchronized input of the world model. Its Images and
// State view the reader's buffers: they are valid until the next call of
// Next.
type Observation struct {
	// Seq counts the observations from 0.
	Seq int
	// Stamp is the newest of the camera frames' stamps.
	Stamp       time.Time
	Images      []worldmodel.Image // one per camera, in Topics.Cameras order
	ImageStamps []time.Time
	State       []float32
	StateStamp  time.Time
	// Instruction is the one in force: the last recorded at or before the
	// observation's last message.
	Instruction string
}

// Stats counts what a BagReader read.
type Stats struct {
	Messages     int // messages of the image bag's topics read
	Observations int
	// UnpairedFrames are camera frames replaced by a newer frame of their
	// camera (or left at the end) before any observation used them.
	UnpairedFrames int
}

// cameraState is a camera's latest frame.
type cameraState struct {
	img   worldmodel.Image
	stamp time.Time
	has   bool // a frame was read
	fresh bool // not used by an observation yet
}

// BagReader walks an image bag and yields synchronized observations.
//
// Pairing policy: messages are read in log-time order. Each camera keeps
// its latest frame (decoded on arrival, into a buffer reused from frame
// to frame), the proprio topic its latest state, the instruction topic
// the latest instruction. After each message an observation is made when
// every camera has a frame no observation has used yet, a state and an
// instruction have been read, and every camera frame's stamp and the
// state's lie within Tolerance of the newest camera stamp. A camera's
// stamp is its header stamp (the log time when that is zero); the state's
// is the header stamp of a JointState or the log time of a
// Float64MultiArray (which has no header). A frame replaced before it was
// used counts in Stats.UnpairedFrames. A message that does not decode, or
// an image, state or instruction that is refused, ends the walk with an
// error naming the topic and the log time.
type BagReader struct {
	r         *bag.Reader
	topics    Topics
	tol       time.Duration
	camIndex  map[string]int
	camTypes  []string
	propType  string
	joints    *JointMap
	cams      []cameraState
	state     []float32
	stateAt   time.Time
	hasState  bool
	instr     string
	frames    FrameDecoder
	arrMsg    msgs.Float64MultiArray
	jsMsg     msgs.JointState
	strMsg    msgs.String
	obs       Observation
	stats     Stats
	done, bad bool
}

// OpenBag opens an image bag (a folder, or one .mcap or .db3 file: what
// bag.OpenWith reads) for reading observations. Each camera topic must be
// sensor_msgs/Image or sensor_msgs/CompressedImage, the proprio topic
// std_msgs/Float64MultiArray or (with ReadOptions.JointNames)
// sensor_msgs/JointState, the instruction topic std_msgs/String.
func OpenBag(ctx context.Context, path string, opts ReadOptions) (*BagReader, error) {
	topics := opts.Topics.withDefaults()
	tol := opts.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	if tol < 0 {
		return nil, fmt.Errorf("camera: image bag: tolerance %v is negative", tol)
	}
	dim := opts.StateDim
	if dim == 0 {
		dim = worldmodel.ProprioDim
	}
	want := append(append([]string(nil), topics.Cameras...), topics.Proprio, topics.Instruction)
	r, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: want})
	if err != nil {
		return nil, fmt.Errorf("camera: image bag: %w", err)
	}
	br := &BagReader{
		r: r, topics: topics, tol: tol, frames: FrameDecoder{Limits: opts.Limits},
		camIndex: make(map[string]int, len(topics.Cameras)),
		camTypes: make([]string, len(topics.Cameras)),
		cams:     make([]cameraState, len(topics.Cameras)),
		state:    make([]float32, dim),
	}
	types := map[string]string{}
	for _, t := range r.Topics() {
		types[t.Name] = t.Type
	}
	fail := func(err error) (*BagReader, error) {
		_ = r.Close()
		return nil, err
	}
	for i, name := range topics.Cameras {
		if _, dup := br.camIndex[name]; dup {
			return fail(fmt.Errorf("camera: image bag: camera topic %s is named twice", name))
		}
		br.camIndex[name] = i
		switch types[name] {
		case msgs.TypeImage, msgs.TypeCompressedImage:
			br.camTypes[i] = types[name]
		case "":
			return fail(fmt.Errorf("camera: image bag %s has no camera topic %s (it has %s)", path, name, topicList(types)))
		default:
			return fail(fmt.Errorf("camera: image bag: camera topic %s is %s: want %s or %s", name, types[name], msgs.TypeImage, msgs.TypeCompressedImage))
		}
	}
	switch types[topics.Proprio] {
	case msgs.TypeFloat64MultiArray:
	case msgs.TypeJointState:
		if br.joints, err = NewJointMap(opts.JointNames); err != nil {
			return fail(fmt.Errorf("camera: image bag: proprio topic %s is %s: %w", topics.Proprio, msgs.TypeJointState, err))
		}
		if len(opts.JointNames) != dim {
			return fail(fmt.Errorf("camera: image bag: %d joint names for a state of %d values", len(opts.JointNames), dim))
		}
	case "":
		return fail(fmt.Errorf("camera: image bag %s has no proprio topic %s (it has %s)", path, topics.Proprio, topicList(types)))
	default:
		return fail(fmt.Errorf("camera: image bag: proprio topic %s is %s: want %s or %s", topics.Proprio, types[topics.Proprio], msgs.TypeFloat64MultiArray, msgs.TypeJointState))
	}
	br.propType = types[topics.Proprio]
	switch types[topics.Instruction] {
	case msgs.TypeString:
	case "":
		return fail(fmt.Errorf("camera: image bag %s has no instruction topic %s (it has %s)", path, topics.Instruction, topicList(types)))
	default:
		return fail(fmt.Errorf("camera: image bag: instruction topic %s is %s: want %s", topics.Instruction, types[topics.Instruction], msgs.TypeString))
	}
	br.obs.Images = make([]worldmodel.Image, len(topics.Cameras))
	br.obs.ImageStamps = make([]time.Time, len(topics.Cameras))
	return br, nil
}

func topicList(types map[string]string) string {
	if len(types) == 0 {
		return "no topics"
	}
	s := ""
	for _, n := range slices.Sorted(maps.Keys(types)) {
		if s != "" {
			s += ", "
		}
		s += n + " (" + types[n] + ")"
	}
	return s
}

// headerTime returns the header's stamp, or logTime when the stamp is zero.
func headerTime(h msgs.Header, logTime time.Time) time.Time {
	if h.Stamp == (msgs.Time{}) {
		return logTime
	}
	return time.Unix(int64(h.Stamp.Sec), int64(h.Stamp.Nanosec))
}

// Next returns the next observation, or io.EOF after the last one. The
// observation is valid until the next call.
func (br *BagReader) Next(ctx context.Context) (*Observation, error) {
	if br.bad {
		return nil, errors.New("camera: image bag: reader failed before")
	}
	if br.done {
		return nil, io.EOF
	}
	for {
		m, err := br.r.Next(ctx)
		if err == io.EOF {
			br.done = true
			for _, c := range br.cams {
				if c.fresh {
					br.stats.UnpairedFrames++
				}
			}
			return nil, io.EOF
		}
		if err != nil {
			br.bad = true
			return nil, fmt.Errorf("camera: image bag: %w", err)
		}
		br.stats.Messages++
		if err := br.take(m); err != nil {
			br.bad = true
			return nil, fmt.Errorf("camera: image bag: %s at %s: %w", m.Topic, m.LogTime.UTC().Format(time.RFC3339Nano), err)
		}
		if br.ready() {
			return br.emit(), nil
		}
	}
}

// take decodes one message into the reader's state.
func (br *BagReader) take(m bag.Message) error {
	if i, ok := br.camIndex[m.Topic]; ok {
		c := &br.cams[i]
		h, err := br.frames.Decode(&c.img, br.camTypes[i], m.Data)
		if err != nil {
			return err
		}
		if c.fresh {
			br.stats.UnpairedFrames++
		}
		c.stamp, c.has, c.fresh = headerTime(h, m.LogTime), true, true
		return nil
	}
	switch m.Topic {
	case br.topics.Proprio:
		if br.propType == msgs.TypeJointState {
			if err := br.jsMsg.UnmarshalCDR(m.Data); err != nil {
				return err
			}
			if err := br.joints.State(br.state, &br.jsMsg); err != nil {
				return err
			}
			br.stateAt = headerTime(br.jsMsg.Header, m.LogTime)
		} else {
			if err := br.arrMsg.UnmarshalCDR(m.Data); err != nil {
				return err
			}
			if err := StateFromArray(br.state, &br.arrMsg); err != nil {
				return err
			}
			br.stateAt = m.LogTime
		}
		br.hasState = true
	case br.topics.Instruction:
		if err := br.strMsg.UnmarshalCDR(m.Data); err != nil {
			return err
		}
		s, err := Instruction(&br.strMsg)
		if err != nil {
			return err
		}
		br.instr = s
	}
	return nil
}

// ready applies the pairing policy (see BagReader).
func (br *BagReader) ready() bool {
	if !br.hasState || br.instr == "" {
		return false
	}
	var newest time.Time
	for _, c := range br.cams {
		if !c.has || !c.fresh {
			return false
		}
		if c.stamp.After(newest) {
			newest = c.stamp
		}
	}
	within := func(t time.Time) bool {
		d := newest.Sub(t)
		return d >= -br.tol && d <= br.tol
	}
	for _, c := range br.cams {
		if !within(c.stamp) {
			return false
		}
	}
	return within(br.stateAt)
}

func (br *BagReader) emit() *Observation {
	o := &br.obs
	o.Seq = br.stats.Observations
	o.Stamp = time.Time{}
	for i := range br.cams {
		c := &br.cams[i]
		c.fresh = false
		o.Images[i] = c.img
		o.ImageStamps[i] = c.stamp
		if c.stamp.After(o.Stamp) {
			o.Stamp = c.stamp
		}
	}
	o.State = br.state
	o.StateStamp = br.stateAt
	o.Instruction = br.instr
	br.stats.Observations++
	return o
}

// All yields every observation, then stops; an error is yielded once, last.
func (br *BagReader) All(ctx context.Context) iter.Seq2[*Observation, error] {
	return func(yield func(*Observation, error) bool) {
		for {
			o, err := br.Next(ctx)
			if err == io.EOF {
				return
			}
			if !yield(o, err) || err != nil {
				return
			}
		}
	}
}

// Stats returns what was read so far.
func (br *BagReader) Stats() Stats { return br.stats }

// Topics returns the topics read (defaults filled in).
func (br *BagReader) Topics() Topics { return br.topics }

// Close closes the bag.
func (br *BagReader) Close() error { return br.r.Close() }
