package wmnode

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/worldmodel"
)

const (
	tinyDir  = "../golden/tiny/world/"
	tinyTask = "put the bowl on the plate"
)

// tinyParams are the defaults with the tiny world model's files.
func tinyParams() Params {
	p := DefaultParams()
	p.DiTWeights, p.VAEWeights = tinyDir+"dit.safetensors", tinyDir+"vae.safetensors"
	p.StateStats, p.TextCache = tinyDir+"dataset_stats.json", tinyDir+"text"
	// No test but the stale one depends on the machine's speed: a slow
	// run (-race, a loaded machine) must not turn a report STALE, nor
	// part a Float64MultiArray state (stamped on receipt) from frames
	// stamped when the test began sending.
	p.StaleAfter, p.Tolerance = time.Minute, time.Second
	return p
}

// tinyModel loads the tiny world model once per test.
func tinyModel(t *testing.T, p Params) *worldmodel.Model {
	t.Helper()
	m, err := LoadModel(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testImage is a deterministic RGB8 picture of w × h.
func testImage(w, h, seed int) worldmodel.Image {
	img := worldmodel.Image{Width: w, Height: h, Pix: make([]byte, 3*w*h)}
	for i := range img.Pix {
		img.Pix[i] = byte((i*7 + seed*31 + (i/(3*w))*5) % 251)
	}
	return img
}

// testState is a finite LIBERO proprio state.
var testState = []float64{0.1, -0.05, 1.02, 3.1, 0.2, -0.1, 0.03, -0.03}

type capture struct {
	mu   sync.Mutex
	msgs map[string][][]byte
	n    map[string]int
	ch   map[string]chan struct{}
}

func (c *capture) on(bus *node.Bus, t testing.TB, topic, typ string) {
	t.Helper()
	c.mu.Lock()
	if c.msgs == nil {
		c.msgs, c.n, c.ch = map[string][][]byte{}, map[string]int{}, map[string]chan struct{}{}
	}
	c.ch[topic] = make(chan struct{}, 1024)
	c.mu.Unlock()
	if err := bus.Subscribe(node.Topic{Name: topic, Type: typ}, func(data []byte) {
		c.mu.Lock()
		c.msgs[topic] = append(c.msgs[topic], data)
		c.n[topic]++
		if len(c.msgs[topic]) > 16 { // a benchmark's stream: keep the last ones
			c.msgs[topic] = c.msgs[topic][1:]
		}
		ch := c.ch[topic]
		c.mu.Unlock()
		select {
		case ch <- struct{}{}:
		default: // nobody waits on this topic
		}
	}); err != nil {
		t.Fatal(err)
	}
}

func (c *capture) wait(t testing.TB, topic string) []byte {
	t.Helper()
	select {
	case <-c.ch[topic]:
	case <-time.After(60 * time.Second):
		t.Fatalf("nothing on %s in 60 s", topic)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs[topic][len(c.msgs[topic])-1]
}

func (c *capture) count(topic string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[topic]
}

// rig is a world-model node and, optionally, the action-expert node on
// the tiny CPU backend, on one in-process bus.
type rig struct {
	t      testing.TB
	bus    *node.Bus
	wm     *Node
	p      Params
	cap    *capture
	pubs   map[string]node.Publisher
	tick   chan time.Time
	cancel context.CancelFunc
	done   sync.WaitGroup
	ae     *node.Node
}

func newRig(t testing.TB, p Params, model Model, withExpert bool, opts ...func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, bus: node.NewBus(), p: p, cap: &capture{}, pubs: map[string]node.Publisher{}, tick: make(chan time.Time)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(r.stop)
	ap := params.Default()
	if withExpert {
		d := model.Dims()
		w, err := cpu.TinyWeights()
		if err != nil {
			t.Fatal(err)
		}
		if w, err = w.ForInputs(d.VideoTokens, d.ContextRows); err != nil {
			t.Fatal(err)
		}
		be, err := cpu.New(w, cpu.Options{BLAS: "gonum"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		ap.Backend, ap.CPU.Weights = params.BackendCPU, "injected"
		ap.Steps, ap.MaxInputAge, ap.SelfTest.Skip = 3, 0, true
		if p.KVTransport == params.KVTransportSHM {
			ap.KVTransport, ap.SHM.Dir = params.KVTransportSHM, p.SHM.Dir
		}
		r.cap.on(r.bus, t, ap.Topics.Actions, msgs.TypeActionChunk)
		ae, err := node.New(node.Config{Params: ap, Tick: make(chan time.Time)}, be, r.bus)
		if err != nil {
			t.Fatal(err)
		}
		r.ae = ae
		r.done.Go(func() { ae.Run(ctx) })
	}
	if p.KVTransport == params.KVTransportSHM {
		if !withExpert {
			r.cap.on(r.bus, t, p.SHM.Topic, msgs.TypeKVHandoff)
		}
	} else {
		r.cap.on(r.bus, t, p.Topics.KVCache, msgs.TypeVideoKVCache)
	}
	r.cap.on(r.bus, t, p.Topics.Context, msgs.TypeTextContext)
	r.cap.on(r.bus, t, p.Topics.Diagnostics, msgs.TypeDiagnosticArray)
	cfg := Config{Params: p, Model: model, Tick: r.tick}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	if r.wm, err = New(cfg, r.bus); err != nil {
		t.Fatal(err)
	}
	for i, c := range p.Topics.Cameras {
		imgType := msgs.TypeImage
		if p.ImageTransport(i) == ImageCompressed {
			imgType = msgs.TypeCompressedImage
		}
		r.advertise(c, imgType)
	}
	stType := msgs.TypeFloat64MultiArray
	if p.ProprioType == ProprioJointState {
		stType = msgs.TypeJointState
	}
	r.advertise(p.Topics.Proprio, stType)
	r.advertise(p.Topics.Instruction, msgs.TypeString)
	r.done.Go(func() { r.wm.Run(ctx) })
	<-r.wm.Started()
	return r
}

func (r *rig) advertise(topic, typ string) {
	pub, err := r.bus.Advertise(node.Topic{Name: topic, Type: typ})
	if err != nil {
		r.t.Fatal(err)
	}
	r.pubs[topic] = pub
}

func (r *rig) stop() {
	r.cancel()
	r.done.Wait()
	r.wm.Close()
}

type marshaler interface{ MarshalCDR() ([]byte, error) }

func (r *rig) send(topic string, m marshaler) {
	r.t.Helper()
	b, err := m.MarshalCDR()
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendRaw(topic, b)
}

func (r *rig) sendRaw(topic string, b []byte) {
	r.t.Helper()
	if err := r.pubs[topic].Publish(b); err != nil {
		r.t.Fatal(err)
	}
}

func stampOf(t time.Time) msgs.Header {
	return msgs.Header{Stamp: msgs.Time{Sec: int32(t.Unix()), Nanosec: uint32(t.Nanosecond())}, FrameID: "cam"}
}

// sendCycle sends the instruction, the state and one frame per camera.
func (r *rig) sendCycle(stamp time.Time, images []worldmodel.Image) {
	r.t.Helper()
	r.send(r.p.Topics.Instruction, &msgs.String{Data: tinyTask})
	r.send(r.p.Topics.Proprio, &msgs.Float64MultiArray{Data: testState})
	for i, c := range r.p.Topics.Cameras {
		m, err := camera.EncodeImage(images[i], "bgr8", 3)
		if err != nil {
			r.t.Fatal(err)
		}
		m.Header = stampOf(stamp)
		r.send(c, &m)
	}
}

// waitCycles waits until the node has counted n published cycles: the
// worker counts a cycle after its messages are on the bus, so a test that
// saw them can still read the count before it moves.
func (r *rig) waitCycles(n uint64) {
	r.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r.wm.Stats().Cycles < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d cycles counted in 60 s, want %d", r.wm.Stats().Cycles, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// diag publishes a report and returns it.
func (r *rig) diag() msgs.DiagnosticStatus {
	r.t.Helper()
	r.wm.PublishDiagnostics()
	var a msgs.DiagnosticArray
	if err := a.UnmarshalCDR(r.cap.wait(r.t, r.p.Topics.Diagnostics)); err != nil {
		r.t.Fatal(err)
	}
	return a.Status[0]
}

func value(s msgs.DiagnosticStatus, key string) string {
	for _, kv := range s.Values {
		if kv.Key == key {
			return kv.Value
		}
	}
	return "<missing>"
}

// TestPairToChunk: two camera frames, a state and the instruction in; the
// node publishes the TextContext and VideoKVCache the world model computes
// on the same inputs (bit for bit, stamped with the frames' stamp), and
// the action-expert node turns them into a chunk.
func TestPairToChunk(t *testing.T) {
	p := tinyParams()
	model := tinyModel(t, p)
	r := newRig(t, p, model, true)
	images := []worldmodel.Image{testImage(96, 80, 1), testImage(64, 64, 2)}
	stamp := time.Now().Truncate(time.Microsecond)
	r.sendCycle(stamp, images)

	var kv msgs.VideoKVCache
	if err := kv.UnmarshalCDR(r.cap.wait(t, p.Topics.KVCache)); err != nil {
		t.Fatal(err)
	}
	var cx msgs.TextContext
	if err := cx.UnmarshalCDR(r.cap.wait(t, p.Topics.Context)); err != nil {
		t.Fatal(err)
	}
	var chunk msgs.ActionChunk
	if err := chunk.UnmarshalCDR(r.cap.wait(t, params.Default().Topics.Actions)); err != nil {
		t.Fatal(err)
	}
	if got := stampTime(kv.Header.Stamp); !got.Equal(stamp) || !stampTime(cx.Header.Stamp).Equal(stamp) || !stampTime(chunk.Header.Stamp).Equal(stamp) {
		t.Errorf("stamps: kv %v, context %v, chunk %v; want the frames' %v", got, stampTime(cx.Header.Stamp), stampTime(chunk.Header.Stamp), stamp)
	}
	if kv.Seq != 1 || cx.Seq != 1 || chunk.KVSeq != 1 || cx.Instruction != tinyTask {
		t.Errorf("seq kv %d context %d chunk kv_seq %d, instruction %q", kv.Seq, cx.Seq, chunk.KVSeq, cx.Instruction)
	}
	if len(chunk.Actions) == 0 {
		t.Fatal("empty chunk")
	}

	// The same inputs through a second model instance, in Go, directly.
	ref := tinyModel(t, p)
	out := ref.NewOutput(false)
	state := make([]float32, len(testState))
	for i, v := range testState {
		state[i] = float32(v)
	}
	if err := ref.Run(t.Context(), worldmodel.Observation{Images: images, State: state, Instruction: tinyTask}, out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kv.Keys.Data, viewBytes(out.Keys)) || !slices.Equal(kv.Values.Data, viewBytes(out.Values)) {
		t.Error("published K/V differ from the model's on the same inputs")
	}
	d := model.Dims()
	if !slices.Equal(kv.Keys.Shape, []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.Width)}) {
		t.Errorf("K shape %v", kv.Keys.Shape)
	}
	ctxF := make([]float32, len(out.Context))
	if err := cx.Context.DecodeF32Into(ctxF); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ctxF, out.Context) || !slices.Equal(cx.AttentionMask, out.Mask) {
		t.Error("published context differs from the model's")
	}
	r.waitCycles(1)
	s := r.diag()
	if s.Level != msgs.LevelOK || value(s, "cycles") != "1" || value(s, "instruction") != tinyTask {
		t.Errorf("diagnostics %d %q: cycles %s instruction %s", s.Level, s.Message, value(s, "cycles"), value(s, "instruction"))
	}
	for _, st := range []string{"decode", "preprocess", "vae", "prefill", "handoff"} {
		if v := value(s, "stage."+st+".last_ms"); v == "<missing>" || v == "0.000" && st != "decode" {
			t.Errorf("stage %s last_ms %s", st, v)
		}
	}
}

// TestSHMHandoff: with kv_transport shm the model writes K/V into the
// slot and the action-expert node reading the segment makes the chunk the
// DDS path makes on the same inputs.
func TestSHMHandoff(t *testing.T) {
	images := []worldmodel.Image{testImage(96, 80, 3), testImage(64, 64, 4)}
	chunks := map[string][]byte{} // the actions' bits
	for _, tr := range []string{params.KVTransportDDS, params.KVTransportSHM} {
		p := tinyParams()
		p.KVTransport, p.SHM.Dir, p.SHM.Prefix = tr, t.TempDir(), "wmtest"
		r := newRig(t, p, tinyModel(t, p), true)
		// The state of a Float64MultiArray is stamped on receipt: the
		// frames must be recent.
		r.sendCycle(time.Now(), images)
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(r.cap.wait(t, params.Default().Topics.Actions)); err != nil {
			t.Fatal(err)
		}
		if c.KVSeq != 1 || len(c.Actions) == 0 {
			t.Fatalf("%s: chunk of kv_seq %d, %d rows", tr, c.KVSeq, len(c.Actions))
		}
		for _, row := range c.Actions {
			for _, v := range row.Values {
				chunks[tr] = binary.LittleEndian.AppendUint32(chunks[tr], math.Float32bits(v))
			}
		}
		r.stop()
		if tr == params.KVTransportSHM {
			if left, _ := os.ReadDir(p.SHM.Dir); len(left) != 0 {
				t.Errorf("segment left behind after Close: %v", left)
			}
		}
	}
	if !slices.Equal(chunks[params.KVTransportDDS], chunks[params.KVTransportSHM]) {
		t.Error("the chunk over shm differs from the chunk over dds")
	}
}

// TestHostileInputs: every malformed message is refused with its reason
// counted, nothing is computed on it, and a good set of inputs afterwards
// still makes a cycle.
func TestHostileInputs(t *testing.T) {
	p := tinyParams()
	r := newRig(t, p, tinyModel(t, p), false)
	cam := p.Topics.Cameras[0]
	good := testImage(64, 48, 5)
	raw := func(edit func(*msgs.Image)) *msgs.Image {
		m, err := camera.EncodeImage(good, "rgb8", 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Header = stampOf(time.Now())
		edit(&m)
		return &m
	}
	r.sendRaw(cam, []byte{0, 1, 0, 0, 9, 9})
	r.send(cam, raw(func(m *msgs.Image) { m.Encoding = "32FC1" }))
	r.send(cam, raw(func(m *msgs.Image) { m.Step = 7 }))
	r.send(cam, raw(func(m *msgs.Image) { m.Data = m.Data[:len(m.Data)-1] }))
	r.send(cam, raw(func(m *msgs.Image) { m.Width, m.Height, m.Step = 1<<16, 1<<16, 3<<16 }))
	r.send(cam, raw(func(m *msgs.Image) { m.Header.Stamp.Nanosec = 2e9 }))
	r.send(p.Topics.Proprio, &msgs.Float64MultiArray{Data: testState[:5]})
	r.send(p.Topics.Proprio, &msgs.Float64MultiArray{Data: append(slices.Clone(testState[:7]), math.NaN())})
	r.sendRaw(p.Topics.Proprio, []byte{0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f})
	r.send(p.Topics.Instruction, &msgs.String{Data: ""})
	r.send(p.Topics.Instruction, &msgs.String{Data: "bad\x01control"})
	r.send(p.Topics.Instruction, &msgs.String{Data: "juggle three plates"}) // no text cache entry
	s := r.diag()
	for reason, want := range map[string]string{
		RefuseDecode: "2", RefuseImageUnsupported: "1", RefuseImageGeometry: "2", RefuseImageTooLarge: "1",
		RefuseStamp: "1", RefuseState: "2", RefuseInstruction: "2", RefuseNoTextEntry: "1",
	} {
		if got := value(s, "refused."+reason); got != want {
			t.Errorf("refused.%s = %s, want %s", reason, got, want)
		}
	}
	if s.Level != msgs.LevelWarn || value(s, "cycles") != "0" || value(s, "instruction") != "none" {
		t.Errorf("after hostile inputs: level %d %q, cycles %s, instruction %s", s.Level, s.Message, value(s, "cycles"), value(s, "instruction"))
	}
	if n := r.cap.count(p.Topics.KVCache); n != 0 {
		t.Fatalf("%d caches published on refused inputs", n)
	}
	r.sendCycle(time.Now(), []worldmodel.Image{good, good})
	r.cap.wait(t, p.Topics.KVCache)
}

// TestStaleCameraAndClock: a camera that stops, and a clock that stops
// advancing, make the diagnostics STALE, naming what is silent.
func TestStaleCameraAndClock(t *testing.T) {
	p := tinyParams()
	p.StaleAfter = 2 * time.Second // on the test's clocks
	var mu sync.Mutex
	mono, ros := time.Unix(1_700_000_000, 0), time.Unix(1_700_000_000, 0)
	clock := func(c *time.Time) func() time.Time {
		return func() time.Time { mu.Lock(); defer mu.Unlock(); return *c }
	}
	advance := func(d time.Duration, rosToo bool) {
		mu.Lock()
		mono = mono.Add(d)
		if rosToo {
			ros = ros.Add(d)
		}
		mu.Unlock()
	}
	r := newRig(t, p, tinyModel(t, p), false, func(c *Config) { c.Now, c.Mono = clock(&ros), clock(&mono) })
	images := []worldmodel.Image{testImage(64, 64, 6), testImage(64, 64, 7)}
	r.sendCycle(ros, images)
	r.cap.wait(t, p.Topics.KVCache)
	if s := r.diag(); s.Level != msgs.LevelOK {
		t.Fatalf("fresh inputs: level %d %q", s.Level, s.Message)
	}
	// The wrist camera stops; the rest keep coming.
	for range 3 {
		advance(time.Second, true)
		r.send(p.Topics.Proprio, &msgs.Float64MultiArray{Data: testState})
		m, err := camera.EncodeImage(images[0], "rgb8", 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Header = stampOf(ros)
		r.send(p.Topics.Cameras[0], &m)
	}
	s := r.diag()
	if s.Level != msgs.LevelStale || !strings.Contains(s.Message, p.Topics.Cameras[1]) || strings.Contains(s.Message, p.Topics.Cameras[0]+":") {
		t.Errorf("wrist camera silent 3 s: level %d %q", s.Level, s.Message)
	}
	// The clock stalls (sim time without /clock): inputs keep coming on
	// the monotonic clock.
	r.sendCycle(ros, images)
	r.diag()
	advance(3*time.Second, false)
	r.sendCycle(ros, images)
	s = r.diag()
	if s.Level != msgs.LevelStale || !strings.Contains(s.Message, "clock has not advanced") {
		t.Errorf("stalled clock: level %d %q", s.Level, s.Message)
	}
}

// TestRateAndInactive: at a rate, a cycle runs on the trigger, not on a
// frame; an inactive node drops its inputs and runs nothing.
func TestRateAndInactive(t *testing.T) {
	p := tinyParams()
	p.Rate = 10
	trig := make(chan time.Time)
	r := newRig(t, p, tinyModel(t, p), false, func(c *Config) { c.Trigger = trig })
	images := []worldmodel.Image{testImage(64, 64, 8), testImage(64, 64, 9)}
	r.sendCycle(time.Now(), images)
	r.diag() // every callback has returned; no cycle without a trigger
	if n := r.cap.count(p.Topics.KVCache); n != 0 {
		t.Fatalf("%d caches before the trigger", n)
	}
	trig <- time.Now()
	r.cap.wait(t, p.Topics.KVCache)
	trig <- time.Now() // no new frames: nothing to do
	if err := r.wm.Deactivate(); err != nil {
		t.Fatal(err)
	}
	r.sendCycle(time.Now(), images)
	trig <- time.Now()
	r.waitCycles(1)
	s := r.diag()
	if value(s, "cycles") != "1" || value(s, "dropped.inactive") != "3" {
		t.Errorf("cycles %s, dropped.inactive %s; want 1 and 3", value(s, "cycles"), value(s, "dropped.inactive"))
	}
	if err := r.wm.Activate(); err != nil {
		t.Fatal(err)
	}
	r.sendCycle(time.Now(), images)
	trig <- time.Now()
	r.cap.wait(t, p.Topics.KVCache)
}

// TestTolerance: frames further apart than sync.tolerance do not pair (the
// older is dropped); a state too old is waited for; a set within the
// tolerance makes a cycle stamped with the newest frame.
func TestTolerance(t *testing.T) {
	p := tinyParams()
	p.Tolerance = 40 * time.Millisecond
	base := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	ros := base
	r := newRig(t, p, tinyModel(t, p), false, func(c *Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return ros }
		c.Mono = time.Now
	})
	img := testImage(64, 64, 1)
	frame := func(cam int, at time.Time) {
		m, err := camera.EncodeImage(img, "rgb8", 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Header = stampOf(at)
		r.send(p.Topics.Cameras[cam], &m)
	}
	r.send(p.Topics.Instruction, &msgs.String{Data: tinyTask})
	r.send(p.Topics.Proprio, &msgs.Float64MultiArray{Data: testState}) // stamped base
	frame(0, base)
	frame(1, base.Add(100*time.Millisecond)) // 100 ms after camera 0's
	// The worker pairs on its own goroutine: wait for its verdict.
	for end := time.Now().Add(30 * time.Second); r.wm.Stats().Dropped[DropTolerance] == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if s := r.wm.Stats(); s.Dropped[DropTolerance] != 1 || s.Cycles != 0 {
		t.Fatalf("frames 100 ms apart: dropped %v, cycles %d", s.Dropped, s.Cycles)
	}
	// Camera 0 catches up; the state (at base) is now 100 ms too old:
	// the cycle waits for a newer one.
	frame(0, base.Add(110*time.Millisecond))
	if s := r.diag(); value(s, "cycles") != "0" {
		t.Fatalf("state 110 ms old: cycles %s", value(s, "cycles"))
	}
	mu.Lock()
	ros = base.Add(105 * time.Millisecond)
	mu.Unlock()
	r.send(p.Topics.Proprio, &msgs.Float64MultiArray{Data: testState})
	r.wm.wakeUp()
	var kv msgs.VideoKVCache
	if err := kv.UnmarshalCDR(r.cap.wait(t, p.Topics.KVCache)); err != nil {
		t.Fatal(err)
	}
	if got := stampTime(kv.Header.Stamp); !got.Equal(base.Add(110 * time.Millisecond)) {
		t.Errorf("cycle stamp %v, want the newest frame's", got)
	}
}
