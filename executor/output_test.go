package executor

import (
	"math"
	"sync"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
)

// outRig is an executor whose output topic and gripper topic are captured
// as raw bytes, for the non-default output types.
type outRig struct {
	*rig
	mu      sync.Mutex
	main    [][]byte
	gripper []float64
	hold    node.Publisher
}

func newOutRig(t *testing.T, mutate func(*Params)) *outRig {
	t.Helper()
	p := DefaultParams()
	mutate(&p)
	o := &outRig{rig: &rig{t: t, bus: node.NewBus(), clock: NewVirtualClock(t0)}}
	if err := o.bus.Subscribe(node.Topic{Name: p.Topics.Action, Type: p.Output.Type.MessageType()}, func(b []byte) {
		o.mu.Lock()
		o.main = append(o.main, append([]byte(nil), b...))
		o.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if p.Output.GripperTopic != "" {
		if err := o.bus.Subscribe(node.Topic{Name: p.Output.GripperTopic, Type: msgs.TypeFloat64}, func(b []byte) {
			var m msgs.Float64
			if err := m.UnmarshalCDR(b); err != nil {
				t.Errorf("gripper message: %v", err)
			}
			o.mu.Lock()
			o.gripper = append(o.gripper, m.Data)
			o.mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.bus.Subscribe(node.Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray}, func(b []byte) {
		var m msgs.DiagnosticArray
		if err := m.UnmarshalCDR(b); err == nil {
			o.rig.mu.Lock()
			o.diags = append(o.diags, m)
			o.rig.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Params: p, Clock: o.clock}, o.bus)
	if err != nil {
		t.Fatal(err)
	}
	o.e = e
	if o.pub, err = o.bus.Advertise(node.Topic{Name: p.Topics.Chunks, Type: msgs.TypeActionChunk}); err != nil {
		t.Fatal(err)
	}
	if o.hold, err = o.bus.Advertise(node.Topic{Name: p.Topics.Hold, Type: msgs.TypeBool}); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *outRig) messages() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([][]byte(nil), o.main...)
}

func (o *outRig) setHold(v bool) {
	o.t.Helper()
	b, err := (&msgs.Bool{Data: v}).MarshalCDR()
	if err != nil {
		o.t.Fatal(err)
	}
	if err := o.hold.Publish(b); err != nil {
		o.t.Fatal(err)
	}
}

// rowsOf gives row i the values base + i + j/10 for dimension j.
func rowsOf(n, dim int) [][]float32 {
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, dim)
		for j := range rows[i] {
			rows[i][j] = float32(i) + float32(j)/10
		}
	}
	return rows
}

// TestOutputJointTrajectory: the remaining rows from the current instant
// as points at i*dt, the gripper dimension on its own topic every period,
// a new trajectory only when the chunk changes.
func TestOutputJointTrajectory(t *testing.T) {
	names := []string{"j1", "j2", "j3", "j4", "j5", "j6"}
	o := newOutRig(t, func(p *Params) {
		p.Output = OutputParams{Type: OutputTrajectory, JointNames: names, FrameID: "base", GripperTopic: "gripper", GripperDim: -1}
	})
	rows := rowsOf(4, 7)
	o.send(chunkMsg(1, t0, rows))
	o.e.Step(at(1))
	o.e.Step(at(2))
	msgsOut := o.messages()
	if len(msgsOut) != 1 {
		t.Fatalf("%d trajectories published over two instants of one chunk, want 1", len(msgsOut))
	}
	var jt msgs.JointTrajectory
	if err := jt.UnmarshalCDR(msgsOut[0]); err != nil {
		t.Fatal(err)
	}
	if jt.Header.FrameID != "base" || jt.Header.Stamp != stampOf(at(1)) || len(jt.JointNames) != 6 || len(jt.Points) != 3 {
		t.Fatalf("trajectory header %+v, %d names, %d points; want frame base, stamp of instant 1, 6 names, rows 1..3", jt.Header, len(jt.JointNames), len(jt.Points))
	}
	for i, pt := range jt.Points {
		if want := (msgs.Duration{Nanosec: uint32(i) * 50_000_000}); pt.TimeFromStart != want {
			t.Errorf("point %d at %+v, want %+v", i, pt.TimeFromStart, want)
		}
		for j, v := range pt.Positions {
			if v != float64(rows[i+1][j]) {
				t.Errorf("point %d joint %d = %v, want row %d's %v", i, j, v, i+1, rows[i+1][j])
			}
		}
	}
	if len(o.gripper) != 2 || o.gripper[0] != float64(rows[1][6]) || o.gripper[1] != float64(rows[2][6]) {
		t.Errorf("gripper %v, want rows 1 and 2's last value", o.gripper)
	}
	o.send(chunkMsg(2, at(2), rowsOf(4, 7)))
	o.e.Step(at(3))
	if n := len(o.messages()); n != 2 {
		t.Errorf("%d trajectories after the chunk changed, want 2", n)
	}
}

// TestOutputArrayAndTwist: one Float64MultiArray per period with the
// action; one TwistStamped per period, the delta / dt in the frame, and a
// zero twist when held.
func TestOutputArrayAndTwist(t *testing.T) {
	o := newOutRig(t, func(p *Params) { p.Output.Type = OutputArray })
	rows := rowsOf(4, 7)
	o.send(chunkMsg(1, t0, rows))
	for k := 0; k < 3; k++ {
		o.e.Step(at(k))
	}
	out := o.messages()
	if len(out) != 3 {
		t.Fatalf("%d arrays over 3 periods", len(out))
	}
	for k, b := range out {
		var m msgs.Float64MultiArray
		if err := m.UnmarshalCDR(b); err != nil {
			t.Fatal(err)
		}
		if len(m.Data) != 7 || m.Data[3] != float64(rows[k][3]) || m.Layout.Dim[0].Size != 7 {
			t.Errorf("array %d: %+v, want row %d", k, m, k)
		}
	}

	w := newOutRig(t, func(p *Params) {
		p.Output = OutputParams{Type: OutputTwist, FrameID: "tool0", GripperTopic: "gripper", GripperDim: -1}
	})
	w.send(chunkMsg(1, t0, rows))
	w.e.Step(at(1))
	w.e.Step(at(9)) // past the chunk: starvation, held
	out = w.messages()
	if len(out) != 2 {
		t.Fatalf("%d twists", len(out))
	}
	var tw msgs.TwistStamped
	if err := tw.UnmarshalCDR(out[0]); err != nil {
		t.Fatal(err)
	}
	want := msgs.Vector3{X: float64(rows[1][0]) / 0.05, Y: float64(rows[1][1]) / 0.05, Z: float64(rows[1][2]) / 0.05}
	if tw.Header.FrameID != "tool0" || math.Abs(tw.Twist.Linear.X-want.X) > 1e-9 || math.Abs(tw.Twist.Angular.Z-float64(rows[1][5])/0.05) > 1e-9 {
		t.Errorf("twist %+v, want frame tool0, linear %+v", tw, want)
	}
	if err := tw.UnmarshalCDR(out[1]); err != nil {
		t.Fatal(err)
	}
	if tw.Twist != (msgs.Twist{}) {
		t.Errorf("held twist %+v, want zero", tw.Twist)
	}
}

// TestHoldInput: while the hold topic is true nothing new is executed:
// the last action is repeated (hold) or nothing is published (stop), the
// diagnostics say held at WARN; after release the chunk's row for the
// instant is executed again.
func TestHoldInput(t *testing.T) {
	for _, mode := range []HoldMode{HoldRepeat, HoldStop} {
		t.Run(string(mode), func(t *testing.T) {
			o := newOutRig(t, func(p *Params) { p.HoldMode = mode })
			rows := rowsOf(8, 7)
			o.send(chunkMsg(1, t0, rows))
			o.e.Step(at(0))
			o.setHold(true)
			if !o.e.Holding() {
				t.Fatal("hold not taken")
			}
			o.e.Step(at(1))
			o.e.Step(at(2))
			out := o.messages()
			switch mode {
			case HoldRepeat:
				if len(out) != 3 {
					t.Fatalf("%d actions, want 3", len(out))
				}
				for _, b := range out[1:] {
					var a msgs.StampedAction
					if err := a.UnmarshalCDR(b); err != nil {
						t.Fatal(err)
					}
					if !a.Held || a.Values[0] != rows[0][0] {
						t.Errorf("held action %+v, want row 0 repeated, held", a)
					}
				}
			case HoldStop:
				if len(out) != 1 {
					t.Fatalf("%d actions while stopped, want only the one before", len(out))
				}
			}
			d := o.e.Diagnostics(at(2)).Status[0]
			if d.Level != msgs.LevelWarn || valueOf(d, "hold") != "true" || valueOf(d, "state") != "held" {
				t.Errorf("diagnostics while held: level %d, hold %q, state %q", d.Level, valueOf(d, "hold"), valueOf(d, "state"))
			}
			o.setHold(false)
			o.e.Step(at(3))
			out = o.messages()
			var a msgs.StampedAction
			if err := a.UnmarshalCDR(out[len(out)-1]); err != nil {
				t.Fatal(err)
			}
			if a.Held || a.Row != 3 {
				t.Errorf("after release: %+v, want row 3 executed", a)
			}
			if valueOf(o.e.Diagnostics(at(3)).Status[0], "hold.instants") != "2" {
				t.Error("hold.instants is not 2")
			}
		})
	}
}

func valueOf(s msgs.DiagnosticStatus, key string) string {
	for _, kv := range s.Values {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

func TestOutputParamsChecked(t *testing.T) {
	for name, mutate := range map[string]func(*Params){
		"joint names":     func(p *Params) { p.Output.Type = OutputTrajectory; p.Output.JointNames = []string{"a"} },
		"twist of 7":      func(p *Params) { p.Output.Type = OutputTwist },
		"no action_dim":   func(p *Params) { p.Output.Type = OutputArray; p.ActionDim = 0 },
		"gripper outside": func(p *Params) { p.Output.GripperTopic = "g"; p.Output.GripperDim = 7 },
		"gripper topic":   func(p *Params) { p.Output.GripperTopic = p.Topics.Action },
		"hold topic":      func(p *Params) { p.Topics.Hold = p.Topics.Chunks },
	} {
		p := DefaultParams()
		mutate(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	p := DefaultParams()
	if err := p.Set("output.joint_names", `"a, b,c"`); err != nil || len(p.Output.JointNames) != 3 || p.Output.JointNames[1] != "b" {
		t.Errorf("joint names %q: %v", p.Output.JointNames, err)
	}
}
