// Package wmnode is the Fast-WAM world-model ROS 2 node without ROS: it
// subscribes to one or two camera topics (sensor_msgs/Image or
// CompressedImage), a proprio topic (std_msgs/Float64MultiArray, or
// sensor_msgs/JointState through a joint-name map) and a latched
// instruction (std_msgs/String); pairs the latest frames and state by stamp
// within a tolerance, on each new set of frames or at a rate; runs the
// world model (worldmodel.Model) in one worker goroutine; and publishes the
// TextContext and either the VideoKVCache or, with kv_transport shm, a
// KVHandoff whose K/V the model wrote straight into a slot of a
// shared-memory segment (package kvshm), all stamped with the newest
// camera frame's stamp, with /diagnostics.
//
// The node talks to the world through a node.Transport: the rclgo adapter
// of package node/rosnode in cmd/fastwam_world_model, or the in-process
// node.Bus in tests. Every message is hostile: decoded with size checks
// (package camera), refused with a counted reason, never computed on.
package wmnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/worldmodel"
)

// Model is the world model as the node runs it: *worldmodel.Model (the CPU
// path); an NPU path plugs in behind the same two methods.
type Model interface {
	Dims() worldmodel.Dims
	Run(ctx context.Context, obs worldmodel.Observation, out *worldmodel.Output) error
}

// Config is what New needs besides the transport.
type Config struct {
	Params Params
	Model  Model       // required; LoadModel reads the one Params names
	Logger node.Logger // nil discards the log
	// Name is the node's fully qualified name, for its diagnostics;
	// DefaultNodeName when empty.
	Name string
	// Now is the node's ROS clock (input ages, the clock stall check):
	// time.Now when nil, /clock's time with use_sim_time.
	Now func() time.Time
	// Mono measures latencies and silences: Now when nil (a test's fake
	// clock then drives both).
	Mono func() time.Time
	// Tick paces the diagnostics; a ticker of Params.DiagnosticsPeriod
	// when nil.
	Tick <-chan time.Time
	// Trigger paces the cycles when Params.Rate > 0; a ticker of 1/Rate
	// when nil.
	Trigger <-chan time.Time
	// StartInactive makes Run start inactive (a managed node's configured
	// state): inputs are counted and dropped until Activate.
	StartInactive bool
}

// Reasons an input is refused or dropped, as the diagnostics count them
// (refused.<reason>, dropped.<reason>).
const (
	RefuseDecode           = "decode"               // not a valid CDR message of the topic's type
	RefuseStamp            = "stamp"                // a header stamp with nanoseconds ≥ 1e9
	RefuseStampBackwards   = "stamp_backwards"      // older than the topic's previous message
	RefuseImageUnsupported = "image.unsupported"    // encoding or format not decoded (camera.ErrUnsupported)
	RefuseImageGeometry    = "image.geometry"       // width, height, step and data disagree
	RefuseImageTooLarge    = "image.too_large"      // over camera.Limits
	RefuseImageCorrupt     = "image.corrupt"        // compressed data that does not decode
	RefuseImage            = "image"                // refused by the world model's preprocessing
	RefuseState            = "state"                // wrong length, missing joint, not finite
	RefuseInstruction      = "instruction"          // empty, not UTF-8, control characters, too long
	RefuseNoTextEntry      = "instruction.no_entry" // no text cache entry: the previous instruction stays in use
	RefuseModel            = "model"                // the world model refused the cycle's inputs

	DropInactive   = "inactive"   // the node is not active
	DropSuperseded = "superseded" // a camera frame replaced before a cycle used it
	DropTolerance  = "tolerance"  // a frame too far in time from the others to pair
)

// Node is one world-model node. Create it with New, call Run, then Close.
type Node struct {
	p     Params
	name  string
	log   node.Logger
	model Model
	// runMu serialises the model's runs: a cycle and the self-test at
	// configure (a cycle under way at deactivate still finishes).
	runMu  sync.Mutex
	dims   worldmodel.Dims
	now    func() time.Time
	mono   func() time.Time
	tick   <-chan time.Time
	trig   <-chan time.Time
	limits camera.Limits
	joints *camera.JointMap
	text   worldmodel.TextCache
	f16    bool

	ctxPub, kvPub, diagPub node.Publisher
	shm                    *kvshm.Writer
	placed                 []msgs.SharedTensor // K and V in a slot

	wake          chan struct{}
	running       sync.Mutex
	started       chan struct{} // closed once Run has started
	startInactive bool

	mu       sync.Mutex // everything below up to the worker's fields
	active   bool
	stopped  bool
	since    time.Time // mono when the node became active
	cams     []camSlot
	state    []float32
	stStamp  time.Time
	stMono   time.Time
	hasState bool
	instr    string
	instrAt  time.Time // mono
	stats    stats
	clockAt  time.Time // the ROS time at the last diagnostics
	clockAdv time.Time // mono when the ROS clock last advanced

	// Receive path scratch (one callback at a time per subscription).
	stateScratch []float32
	rawImg       []msgs.Image
	compImg      []msgs.CompressedImage

	// Worker-owned.
	images []worldmodel.Image
	stBuf  []float32
	out    *worldmodel.Output
	seq    uint64
	ctxMsg msgs.TextContext
	kvMsg  msgs.VideoKVCache
	hand   msgs.KVHandoff
	buf    []byte
}

// camSlot is one camera's latest frame.
type camSlot struct {
	topic   string
	latest  worldmodel.Image
	scratch worldmodel.Image // the receive path decodes here, then swaps
	stamp   time.Time        // header stamp (the node's time when zero)
	recv    time.Time        // mono at receipt
	decode  time.Duration
	has     bool
	seq     uint64 // frames accepted
	used    uint64 // seq of the last frame a cycle took
}

// LoadModel reads the world model the parameters name (the CPU path).
func LoadModel(ctx context.Context, p Params) (*worldmodel.Model, error) {
	frame := worldmodel.LiberoFrame()
	frame.Cameras = frame.Cameras[:len(p.Topics.Cameras)]
	for i := range frame.Cameras {
		frame.Cameras[i].Flip180 = p.FlipCameras
	}
	m, err := worldmodel.LoadModel(ctx, worldmodel.ModelOptions{
		DiTWeights: p.DiTWeights, VAEWeights: p.VAEWeights, StateStats: p.StateStats, StateKey: p.StateKey,
		TextCache: worldmodel.TextCache{Dir: p.TextCache}, Frame: frame,
	})
	if err != nil {
		return nil, fmt.Errorf("wmnode: load the world model: %w", err)
	}
	return m, nil
}

// New checks the configuration, creates the shared-memory segment
// (kv_transport shm) and the node's publishers and subscriptions on t.
func New(cfg Config, t node.Transport) (*Node, error) {
	p := cfg.Params
	name := cfg.Name
	if name == "" {
		name = DefaultNodeName
	}
	if err := p.ValidateAs(name); err != nil {
		return nil, err
	}
	if cfg.Model == nil {
		return nil, errors.New("wmnode: no world model")
	}
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return nil, errors.New("wmnode: a big-endian host: the K/V views assume little-endian floats (CDR's order)")
	}
	d := cfg.Model.Dims()
	n := &Node{
		p: p, name: name, log: cfg.Logger, model: cfg.Model, dims: d, now: cfg.Now, mono: cfg.Mono,
		tick: cfg.Tick, trig: cfg.Trigger, f16: p.KVDType == DTypeFloat16,
		text: worldmodel.TextCache{Dir: p.TextCache, Rows: d.ContextRows - 1, Dim: d.TextDim},
		wake: make(chan struct{}, 1), started: make(chan struct{}), startInactive: cfg.StartInactive,
		state: make([]float32, worldmodel.ProprioDim), stateScratch: make([]float32, worldmodel.ProprioDim),
		stBuf: make([]float32, worldmodel.ProprioDim),
		cams:  make([]camSlot, len(p.Topics.Cameras)), images: make([]worldmodel.Image, len(p.Topics.Cameras)),
		rawImg: make([]msgs.Image, len(p.Topics.Cameras)), compImg: make([]msgs.CompressedImage, len(p.Topics.Cameras)),
		stats: newStats(),
	}
	if n.log == nil {
		n.log = nopLogger{}
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.mono == nil {
		n.mono = n.now
	}
	if p.ProprioType == ProprioJointState {
		var err error
		if n.joints, err = camera.NewJointMap(p.JointNames); err != nil {
			return nil, fmt.Errorf("wmnode: %w", err)
		}
	}
	kvShape := []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.Width)}
	dtype := msgs.DTypeFloat32
	if n.f16 {
		dtype = msgs.DTypeFloat16
	}
	var err error
	if p.KVTransport == params.KVTransportSHM {
		size := int64(4)
		if n.f16 {
			size = 2
		}
		kvBytes := size * int64(d.Layers*d.VideoTokens*d.Width)
		if n.shm, err = kvshm.Create(p.SHM.Dir, p.SHM.Prefix, kvshm.Layout{Slots: p.SHM.Slots, SlotSize: kvshm.SlotSizeFor(kvBytes, kvBytes)}, p.SHM.Group); err != nil {
			return nil, fmt.Errorf("wmnode: shm: %w", err)
		}
		if n.placed, err = n.shm.Place([]uint8{dtype, dtype}, kvShape, kvShape); err != nil {
			n.shm.Close()
			return nil, fmt.Errorf("wmnode: shm: %w", err)
		}
		n.out = &worldmodel.Output{Context: make([]float32, d.ContextRows*d.TextDim), Mask: make([]bool, d.ContextRows)}
		n.hand = msgs.KVHandoff{Segment: n.shm.Name(), Keys: n.placed[0], Values: n.placed[1]}
	} else {
		kvLen := d.Layers * d.VideoTokens * d.Width
		n.out = &worldmodel.Output{Context: make([]float32, d.ContextRows*d.TextDim), Mask: make([]bool, d.ContextRows)}
		if n.f16 {
			n.out.Keys, n.out.Values = expert.TensorView{F16: make([]uint16, kvLen)}, expert.TensorView{F16: make([]uint16, kvLen)}
		} else {
			n.out.Keys, n.out.Values = expert.TensorView{F32: make([]float32, kvLen)}, expert.TensorView{F32: make([]float32, kvLen)}
		}
		n.kvMsg = msgs.VideoKVCache{Keys: msgs.Tensor{Shape: kvShape, DType: dtype, Data: viewBytes(n.out.Keys)},
			Values: msgs.Tensor{Shape: kvShape, DType: dtype, Data: viewBytes(n.out.Values)}}
	}
	n.ctxMsg = msgs.TextContext{Context: msgs.Tensor{Shape: []uint32{1, uint32(d.ContextRows), uint32(d.TextDim)}, DType: msgs.DTypeFloat32,
		Data: viewBytes(expert.TensorView{F32: n.out.Context})}, AttentionMask: n.out.Mask}
	if err := n.connect(t); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// connect creates the publishers and subscriptions.
func (n *Node) connect(t node.Transport) error {
	p := n.p
	var err error
	if n.ctxPub, err = t.Advertise(node.Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext, QoS: p.QoS.Out}); err != nil {
		return fmt.Errorf("wmnode: advertise %s: %w", p.Topics.Context, err)
	}
	if n.shm != nil {
		n.kvPub, err = t.Advertise(node.Topic{Name: p.SHM.Topic, Type: msgs.TypeKVHandoff, QoS: p.QoS.Out})
	} else {
		n.kvPub, err = t.Advertise(node.Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache, QoS: p.QoS.Out})
	}
	if err != nil {
		return fmt.Errorf("wmnode: advertise the K/V output: %w", err)
	}
	if n.diagPub, err = t.Advertise(node.Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray, QoS: params.DiagnosticsQoS()}); err != nil {
		return fmt.Errorf("wmnode: advertise %s: %w", p.Topics.Diagnostics, err)
	}
	for i, topic := range p.Topics.Cameras {
		n.cams[i].topic = topic
		imgType := msgs.TypeImage
		if p.ImageTransport(i) == ImageCompressed {
			imgType = msgs.TypeCompressedImage
		}
		if err := t.Subscribe(node.Topic{Name: topic, Type: imgType, QoS: p.QoS.Cameras}, func(data []byte) { n.onImage(i, data) }); err != nil {
			return fmt.Errorf("wmnode: subscribe %s: %w", topic, err)
		}
	}
	stType := msgs.TypeFloat64MultiArray
	if n.joints != nil {
		stType = msgs.TypeJointState
	}
	if err := t.Subscribe(node.Topic{Name: p.Topics.Proprio, Type: stType, QoS: p.QoS.Proprio}, n.onState); err != nil {
		return fmt.Errorf("wmnode: subscribe %s: %w", p.Topics.Proprio, err)
	}
	if err := t.Subscribe(node.Topic{Name: p.Topics.Instruction, Type: msgs.TypeString, QoS: p.QoS.Instruction}, n.onInstruction); err != nil {
		return fmt.Errorf("wmnode: subscribe %s: %w", p.Topics.Instruction, err)
	}
	return nil
}

// Close removes the shared-memory segment, if any. Call it after Run has
// returned.
func (n *Node) Close() error {
	if n.shm == nil {
		return nil
	}
	err := n.shm.Close()
	n.shm = nil
	return err
}

// viewBytes is the little-endian bytes of a tensor view, without a copy.
func viewBytes(v expert.TensorView) []byte {
	switch {
	case len(v.F32) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&v.F32[0])), 4*len(v.F32))
	case len(v.F16) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&v.F16[0])), 2*len(v.F16))
	}
	return nil
}

// slotView is the tensor view of t's bytes in a slot's payload: the model
// writes straight into the shared memory.
func slotView(mem []byte, t msgs.SharedTensor, f16 bool) expert.TensorView {
	b := mem[t.Offset : t.Offset+t.Length]
	if f16 {
		return expert.TensorView{F16: unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)}
	}
	return expert.TensorView{F32: unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)}
}

func stampTime(t msgs.Time) time.Time { return time.Unix(int64(t.Sec), int64(t.Nanosec)) }

// headerStamp is a header's stamp, or now when it is zero.
func headerStamp(h msgs.Header, now time.Time) (time.Time, bool) {
	if h.Stamp.Nanosec >= 1e9 {
		return time.Time{}, false
	}
	if h.Stamp.Sec == 0 && h.Stamp.Nanosec == 0 {
		return now, true
	}
	return stampTime(h.Stamp), true
}

// imageReason is the refusal reason of a camera decoding error.
func imageReason(err error) string {
	switch {
	case errors.Is(err, camera.ErrUnsupported):
		return RefuseImageUnsupported
	case errors.Is(err, camera.ErrGeometry):
		return RefuseImageGeometry
	case errors.Is(err, camera.ErrTooLarge):
		return RefuseImageTooLarge
	case errors.Is(err, camera.ErrCorrupt):
		return RefuseImageCorrupt
	}
	return RefuseImage
}

// onImage is camera i's receive path: decode into the camera's scratch
// image, then make it the latest frame.
func (n *Node) onImage(i int, data []byte) {
	now, mono := n.now(), n.mono()
	c := &n.cams[i]
	n.received(c.topic)
	if !n.isActive() {
		n.drop(c.topic, DropInactive)
		return
	}
	var h msgs.Header
	if n.p.ImageTransport(i) == ImageCompressed {
		m := &n.compImg[i]
		if err := m.UnmarshalCDRReuse(data); err != nil {
			n.refuse(c.topic, RefuseDecode, err)
			return
		}
		h = m.Header
		if err := n.limits.DecodeCompressed(&c.scratch, m); err != nil {
			n.refuse(c.topic, imageReason(err), err)
			return
		}
	} else {
		m := &n.rawImg[i]
		if err := m.UnmarshalCDRReuse(data); err != nil {
			n.refuse(c.topic, RefuseDecode, err)
			return
		}
		h = m.Header
		if err := n.limits.DecodeImage(&c.scratch, m); err != nil {
			n.refuse(c.topic, imageReason(err), err)
			return
		}
	}
	stamp, ok := headerStamp(h, now)
	if !ok {
		n.refuse(c.topic, RefuseStamp, fmt.Errorf("header stamp nanosec %d: want < 1e9", h.Stamp.Nanosec))
		return
	}
	n.mu.Lock()
	if c.has && stamp.Before(c.stamp) {
		prev := c.stamp
		n.mu.Unlock()
		n.refuse(c.topic, RefuseStampBackwards, fmt.Errorf("stamp %s is older than the previous frame's %s", fmtTime(stamp), fmtTime(prev)))
		return
	}
	superseded := c.has && c.seq > c.used
	c.latest, c.scratch = c.scratch, c.latest
	c.stamp, c.recv, c.decode, c.has = stamp, mono, n.mono().Sub(mono), true
	c.seq++
	n.mu.Unlock()
	if superseded {
		n.drop(c.topic, DropSuperseded)
	}
	if n.p.Rate == 0 {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// onState is the proprio topic's receive path.
func (n *Node) onState(data []byte) {
	now, mono := n.now(), n.mono()
	topic := n.p.Topics.Proprio
	n.received(topic)
	if !n.isActive() {
		n.drop(topic, DropInactive)
		return
	}
	stamp := now
	if n.joints != nil {
		var m msgs.JointState
		if err := m.UnmarshalCDR(data); err != nil {
			n.refuse(topic, RefuseDecode, err)
			return
		}
		var ok bool
		if stamp, ok = headerStamp(m.Header, now); !ok {
			n.refuse(topic, RefuseStamp, fmt.Errorf("header stamp nanosec %d: want < 1e9", m.Header.Stamp.Nanosec))
			return
		}
		if err := n.joints.State(n.stateScratch, &m); err != nil {
			n.refuse(topic, RefuseState, err)
			return
		}
	} else {
		var m msgs.Float64MultiArray
		if err := m.UnmarshalCDR(data); err != nil {
			n.refuse(topic, RefuseDecode, err)
			return
		}
		if err := camera.StateFromArray(n.stateScratch, &m); err != nil {
			n.refuse(topic, RefuseState, err)
			return
		}
	}
	n.mu.Lock()
	if n.hasState && stamp.Before(n.stStamp) {
		n.mu.Unlock()
		n.refuse(topic, RefuseStampBackwards, fmt.Errorf("stamp %s is older than the previous state's", fmtTime(stamp)))
		return
	}
	copy(n.state, n.stateScratch)
	n.stStamp, n.stMono, n.hasState = stamp, mono, true
	n.mu.Unlock()
}

// onInstruction is the instruction topic's receive path: a new
// instruction is checked and its text cache entry looked up before it is
// taken; a refused one leaves the previous instruction in use.
func (n *Node) onInstruction(data []byte) {
	mono := n.mono()
	topic := n.p.Topics.Instruction
	n.received(topic)
	var m msgs.String
	if err := m.UnmarshalCDR(data); err != nil {
		n.refuse(topic, RefuseDecode, err)
		return
	}
	text, err := camera.Instruction(&m)
	if err != nil {
		n.refuse(topic, RefuseInstruction, err)
		return
	}
	n.mu.Lock()
	same := text == n.instr
	if same {
		n.instrAt = mono
	}
	n.mu.Unlock()
	if same {
		return
	}
	if _, err := n.text.Lookup(text); err != nil {
		n.refuse(topic, RefuseNoTextEntry, err)
		return
	}
	n.mu.Lock()
	n.instr, n.instrAt = text, mono
	n.mu.Unlock()
	n.log.Infof("instruction in use: %q", text)
	n.wakeUp()
}

func (n *Node) wakeUp() {
	if n.p.Rate == 0 {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

func (n *Node) isActive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.active
}

// Run processes inputs until ctx is done and publishes diagnostics all
// along; a last STALE report says the node stopped. Run may be called
// once.
func (n *Node) Run(ctx context.Context) error {
	if !n.running.TryLock() {
		return errors.New("wmnode: Run called twice")
	}
	tick := n.tick
	if tick == nil {
		t := time.NewTicker(n.p.DiagnosticsPeriod)
		defer t.Stop()
		tick = t.C
	}
	trig := n.trig
	if trig == nil && n.p.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / n.p.Rate))
		defer t.Stop()
		trig = t.C
	}
	n.mu.Lock()
	n.active, n.since = !n.startInactive, n.mono()
	n.clockAt, n.clockAdv = n.now(), n.since
	n.mu.Unlock()
	close(n.started)
	n.log.Infof("active: %v + %s + %s -> %s and %s (%s, %s), rate %v (0: each new set of frames), tolerance %v",
		n.p.Topics.Cameras, n.p.Topics.Proprio, n.p.Topics.Instruction, n.p.Topics.Context, n.kvTopic(), n.p.KVTransport, n.p.KVDType, n.p.Rate, n.p.Tolerance)
	var wg sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	wg.Go(func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick:
				n.PublishDiagnostics()
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
		n.mu.Lock()
		n.active, n.stopped = false, true
		n.mu.Unlock()
		n.PublishDiagnostics()
		s := n.Stats()
		n.log.Infof("stopped: %d cycles published, %d refused, %d dropped", s.Cycles, s.total(s.Refused), s.total(s.Dropped))
	}()
	for {
		if n.p.Rate > 0 {
			select {
			case <-runCtx.Done():
				return nil
			case <-trig:
			}
		} else {
			select {
			case <-runCtx.Done():
				return nil
			case <-n.wake:
			}
		}
		n.cycle(runCtx)
	}
}

// Started returns a channel closed once Run has started (active, or
// inactive with Config.StartInactive).
func (n *Node) Started() <-chan struct{} { return n.started }

// Activate makes the node take inputs (a managed node's activate
// transition); the silence of every input counts from now. It is an
// error once Run has returned.
func (n *Node) Activate() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return errors.New("wmnode: cannot activate a stopped node")
	}
	if !n.active {
		n.active, n.since = true, n.mono()
		for i := range n.cams {
			n.cams[i].has, n.cams[i].used = false, n.cams[i].seq
		}
		n.hasState = false
	}
	return nil
}

// Deactivate stops the node taking inputs (a managed node's deactivate
// transition): inputs are counted as dropped (inactive) until Activate;
// a cycle under way is still published.
func (n *Node) Deactivate() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return errors.New("wmnode: cannot deactivate a stopped node")
	}
	n.active = false
	return nil
}

func (n *Node) kvTopic() string {
	if n.shm != nil {
		return n.p.SHM.Topic
	}
	return n.p.Topics.KVCache
}

// take pairs the latest inputs for a cycle: every camera has a frame no
// cycle used, a state and an instruction are there, and each frame and
// the state lie within the tolerance of the newest frame. It copies them
// into the worker's buffers and returns the cycle's stamp, the
// instruction and the frames' decode time.
func (n *Node) take() (stamp time.Time, instr string, decode time.Duration, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.active || !n.hasState || n.instr == "" {
		return time.Time{}, "", 0, false
	}
	for i := range n.cams {
		c := &n.cams[i]
		if !c.has || c.seq == c.used {
			return time.Time{}, "", 0, false
		}
		if c.stamp.After(stamp) {
			stamp = c.stamp
		}
	}
	tol := n.p.Tolerance
	var late []string
	for i := range n.cams {
		if c := &n.cams[i]; stamp.Sub(c.stamp) > tol {
			c.used = c.seq // it can never pair with a newer frame
			late = append(late, c.topic)
		}
	}
	if len(late) > 0 {
		n.mu.Unlock()
		for _, t := range late {
			n.drop(t, DropTolerance)
		}
		n.mu.Lock()
		return time.Time{}, "", 0, false
	}
	if d := n.stStamp.Sub(stamp); d > tol {
		// The state is newer than the frames can be paired with: the
		// frames are dropped (a newer set will pair).
		for i := range n.cams {
			n.cams[i].used = n.cams[i].seq
		}
		n.mu.Unlock()
		n.drop(n.p.Topics.Cameras[0], DropTolerance)
		n.mu.Lock()
		return time.Time{}, "", 0, false
	} else if -d > tol {
		return time.Time{}, "", 0, false // a newer state may still come
	}
	for i := range n.cams {
		c := &n.cams[i]
		img := &n.images[i]
		img.Width, img.Height = c.latest.Width, c.latest.Height
		img.Pix = append(img.Pix[:0], c.latest.Pix...)
		c.used = c.seq
		decode += c.decode
	}
	copy(n.stBuf, n.state)
	return stamp, n.instr, decode, true
}

// cycle runs the world model on the latest paired inputs, if any, and
// publishes its output.
func (n *Node) cycle(ctx context.Context) {
	stamp, instr, decode, ok := n.take()
	if !ok {
		return
	}
	if stamp.Unix() < 0 || stamp.Unix() > 1<<31-1 {
		n.refuse(n.p.Topics.Cameras[0], RefuseStamp, fmt.Errorf("stamp %s is outside a ROS time's range", fmtTime(stamp)))
		return
	}
	obs := worldmodel.Observation{Images: n.images, State: n.stBuf, Instruction: instr}
	var slot int
	if n.shm != nil {
		var mem []byte
		var err error
		if slot, mem, err = n.shm.Begin(); err != nil {
			n.log.Errorf("shm: %v", err)
			n.stats.failed(err)
			return
		}
		n.out.Keys, n.out.Values = slotView(mem, n.placed[0], n.f16), slotView(mem, n.placed[1], n.f16)
	}
	n.runMu.Lock()
	runErr := n.model.Run(ctx, obs, n.out)
	n.runMu.Unlock()
	var gen uint64
	if n.shm != nil {
		// The slot is committed whatever Run did: no descriptor names it
		// unless Run succeeded.
		var err error
		if gen, err = n.shm.Commit(); err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return
		}
		reason := RefuseModel
		switch {
		case errors.Is(runErr, worldmodel.ErrNoTextEntry):
			reason = RefuseNoTextEntry
		}
		n.refuse("cycle", reason, runErr)
		return
	}
	t0 := n.mono()
	n.seq++
	h := msgs.Header{Stamp: msgs.Time{Sec: int32(stamp.Unix()), Nanosec: uint32(stamp.Nanosecond())}, FrameID: "cameras"}
	n.ctxMsg.Header, n.ctxMsg.Seq, n.ctxMsg.Instruction = h, n.seq, instr
	var err error
	if n.buf, err = n.ctxMsg.AppendCDR(n.buf[:0]); err == nil {
		err = n.ctxPub.Publish(n.buf)
	}
	if err == nil {
		if n.shm != nil {
			n.hand.Header, n.hand.Seq, n.hand.Slot, n.hand.Generation = h, n.seq, uint32(slot), gen
			n.buf, err = n.hand.AppendCDR(n.buf[:0])
		} else {
			n.kvMsg.Header, n.kvMsg.Seq = h, n.seq
			n.buf, err = n.kvMsg.AppendCDR(n.buf[:0])
		}
		if err == nil {
			err = n.kvPub.Publish(n.buf)
		}
	}
	if err != nil {
		n.log.Errorf("publish cycle %d: %v", n.seq, err)
		n.stats.failed(err)
		return
	}
	t := n.out.Times
	n.stats.cycle(StageTimes{Decode: decode, Preprocess: t.Preprocess, VAE: t.VAE, Text: t.Text, Proprio: t.Proprio, Prefill: t.Prefill, Handoff: n.mono().Sub(t0)}, n.seq)
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

type nopLogger struct{}

func (nopLogger) Debugf(string, ...any) {}
func (nopLogger) Infof(string, ...any)  {}
func (nopLogger) Warnf(string, ...any)  {}
func (nopLogger) Errorf(string, ...any) {}
