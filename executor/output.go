package executor

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
)

// --- control outputs and the hold input (issue 18) ---

// OutputType selects the message type of the executor's output.
type OutputType string

// Output types accepted by the output.type parameter.
const (
	// OutputStamped publishes one StampedAction per control period (the default).
	OutputStamped OutputType = "stamped_action"
	// OutputTrajectory publishes a trajectory_msgs/JointTrajectory whenever
	// the executed chunk changes: its remaining actions from the current
	// instant, point i at time_from_start i*dt (ros2_control's joint
	// trajectory controller).
	OutputTrajectory OutputType = "joint_trajectory"
	// OutputArray publishes one std_msgs/Float64MultiArray per control
	// period (ros2_control's forward command controllers).
	OutputArray OutputType = "float64_multi_array"
	// OutputTwist publishes one geometry_msgs/TwistStamped per control
	// period: the 6-D end-effector delta divided by dt, a velocity, in
	// output.frame_id (MoveIt Servo, Cartesian controllers).
	OutputTwist OutputType = "twist_stamped"
)

// MessageType is the ROS type name of the output's messages.
func (t OutputType) MessageType() string {
	switch t {
	case OutputTrajectory:
		return msgs.TypeJointTrajectory
	case OutputArray:
		return msgs.TypeFloat64MultiArray
	case OutputTwist:
		return msgs.TypeTwistStamped
	}
	return msgs.TypeStampedAction
}

// HoldMode says what the executor does while the hold input is true.
type HoldMode string

// Hold modes accepted by the hold_mode parameter.
const (
	HoldRepeat HoldMode = "hold" // keep commanding the last action (a zero twist for twist_stamped)
	HoldStop   HoldMode = "stop" // publish nothing
)

// OutputParams configures the control output.
type OutputParams struct {
	Type OutputType
	// JointNames names the trajectory's joints, one per output dimension
	// (output.joint_names, comma-separated).
	JointNames []string
	// FrameID is the frame of the trajectory's and twist's header; empty
	// = the chunk's frame_id.
	FrameID string
	// GripperTopic, when set, carries the gripper dimension as a
	// std_msgs/Float64 every control period, and the main output the
	// other dimensions.
	GripperTopic string
	GripperDim   int // -1 = the last
}

// outputDefs declares the output.*, topics.hold and hold_mode parameters.
func outputDefs() []paramDef {
	return []paramDef{
		rosparam.ChoiceDef("output.type", "message type of the output on topics.action: stamped_action (StampedAction per period), joint_trajectory (the remaining actions as a JointTrajectory when the chunk changes), float64_multi_array (one per period) or twist_stamped (the 6-D delta / dt per period)",
			[]OutputType{OutputStamped, OutputTrajectory, OutputArray, OutputTwist}, func(p *Params) *OutputType { return &p.Output.Type }),
		{Name: "output.joint_names", Type: rosparam.String, Doc: "joint_trajectory's joint names, comma-separated, one per output dimension", Set: func(p *Params, v rosparam.Value) error {
			p.Output.JointNames = nil
			if strings.TrimSpace(v.Str) == "" {
				return nil
			}
			for _, n := range strings.Split(v.Str, ",") {
				n = strings.TrimSpace(n)
				if n == "" {
					return fmt.Errorf("an empty joint name in %q", v.Str)
				}
				p.Output.JointNames = append(p.Output.JointNames, n)
			}
			return nil
		}, Get: func(p *Params) any { return strings.Join(p.Output.JointNames, ",") }},
		rosparam.StringDef("output.frame_id", "frame_id of the joint_trajectory's and twist_stamped's header (empty = the chunk's)", func(p *Params) *string { return &p.Output.FrameID }),
		rosparam.StringDef("output.gripper_topic", "std_msgs/Float64 topic of the gripper dimension, one per period (empty = none; the main output then carries the other dimensions)", func(p *Params) *string { return &p.Output.GripperTopic }),
		{Name: "output.gripper_dim", Type: rosparam.Integer, Doc: "the gripper's dimension (-1 = the last)", Set: func(p *Params, v rosparam.Value) error {
			if v.Int < -1 || v.Int >= maxActionDim {
				return fmt.Errorf("must be -1 or in [0, %d), got %d", maxActionDim, v.Int)
			}
			p.Output.GripperDim = int(v.Int)
			return nil
		}, Get: func(p *Params) any { return int64(p.Output.GripperDim) }},
		rosparam.StringDef("topics.hold", "std_msgs/Bool input: true holds the robot (hold_mode) until false (empty = no hold input)", func(p *Params) *string { return &p.Topics.Hold }),
		rosparam.ChoiceDef("hold_mode", "while held: hold (keep commanding the last action; a zero twist for twist_stamped) or stop (publish nothing)",
			[]HoldMode{HoldRepeat, HoldStop}, func(p *Params) *HoldMode { return &p.HoldMode }),
	}
}

// validateOutput checks the output parameters against each other.
func (p *Params) validateOutput() error {
	o := p.Output
	switch o.Type {
	case OutputStamped, OutputTrajectory, OutputArray, OutputTwist:
	default:
		return fmt.Errorf("parameter \"output.type\" must be stamped_action, joint_trajectory, float64_multi_array or twist_stamped, got %q", o.Type)
	}
	if p.HoldMode != HoldRepeat && p.HoldMode != HoldStop {
		return fmt.Errorf("parameter \"hold_mode\" must be %q or %q, got %q", HoldRepeat, HoldStop, p.HoldMode)
	}
	if o.Type == OutputStamped && o.GripperTopic == "" {
		return nil
	}
	if p.ActionDim == 0 {
		return fmt.Errorf("output.type %s and output.gripper_topic need action_dim set (not 0)", o.Type)
	}
	g := o.GripperDim
	if g == -1 {
		g = p.ActionDim - 1
	}
	if o.GripperTopic != "" && (g < 0 || g >= p.ActionDim) {
		return fmt.Errorf("parameter \"output.gripper_dim\" %d is outside action_dim %d", o.GripperDim, p.ActionDim)
	}
	main := p.ActionDim
	if o.GripperTopic != "" {
		main--
	}
	switch o.Type {
	case OutputTrajectory:
		if len(o.JointNames) != main {
			return fmt.Errorf("parameter \"output.joint_names\" has %d names; want %d, one per output dimension (action_dim %d%s)",
				len(o.JointNames), main, p.ActionDim, map[bool]string{true: " less the gripper", false: ""}[o.GripperTopic != ""])
		}
	case OutputTwist:
		if main != 6 {
			return fmt.Errorf("output.type twist_stamped needs 6 output dimensions (a 6-D delta), got %d (action_dim %d, gripper topic %q)", main, p.ActionDim, o.GripperTopic)
		}
	}
	return nil
}

// output is the executor's publishing side for the configured type.
type output struct {
	p       OutputParams
	period  time.Duration
	gripper int // the gripper's dimension, -1 without a gripper topic
	main    Publisher
	grip    Publisher

	// The chunk the last trajectory was published for.
	trajChunk *chunk
	holdSent  bool // a hold trajectory was sent since the hold began

	// Reused messages and buffer.
	traj  msgs.JointTrajectory
	arr   msgs.Float64MultiArray
	twist msgs.TwistStamped
	f64   msgs.Float64
	buf   []byte
	vals  []float64
}

func newOutput(p Params, t node.Transport) (*output, error) {
	o := &output{p: p.Output, period: p.ControlPeriod, gripper: -1}
	if p.Output.GripperTopic != "" {
		o.gripper = p.Output.GripperDim
		if o.gripper == -1 {
			o.gripper = p.ActionDim - 1
		}
	}
	var err error
	if o.main, err = t.Advertise(node.Topic{Name: p.Topics.Action, Type: p.Output.Type.MessageType(), QoS: p.QoS.Action}); err != nil {
		return nil, fmt.Errorf("executor: advertise %s: %w", p.Topics.Action, err)
	}
	if p.Output.GripperTopic != "" {
		if o.grip, err = t.Advertise(node.Topic{Name: p.Output.GripperTopic, Type: msgs.TypeFloat64, QoS: p.QoS.Action}); err != nil {
			return nil, fmt.Errorf("executor: advertise %s: %w", p.Output.GripperTopic, err)
		}
	}
	o.arr.Layout.Dim = []msgs.MultiArrayDimension{{Label: "action"}}
	o.traj.JointNames = p.Output.JointNames
	return o, nil
}

// mainValues copies row without the gripper dimension into o.vals.
func (o *output) mainValues(row []float32) []float64 {
	o.vals = o.vals[:0]
	for j, v := range row {
		if j != o.gripper {
			o.vals = append(o.vals, float64(v))
		}
	}
	return o.vals
}

// emit publishes the action a for its instant: cur is the chunk and row
// it comes from (nil when held: starvation or the hold input, a then
// being the last action). It returns whether anything was published and
// the first error.
func (o *output) emit(a *msgs.StampedAction, cur *chunk, row int) (bool, error) {
	held := cur == nil
	sent := false
	if o.grip != nil && len(a.Values) > o.gripper {
		o.f64.Data = float64(a.Values[o.gripper])
		if err := o.sendOn(o.grip, &o.f64); err != nil {
			return false, err
		}
		sent = true
	}
	frame := o.p.FrameID
	if frame == "" {
		frame = a.Header.FrameID
	}
	switch o.p.Type {
	case OutputStamped:
		return true, o.send(a)
	case OutputArray:
		o.arr.Data = o.mainValues(a.Values)
		o.arr.Layout.Dim[0].Size, o.arr.Layout.Dim[0].Stride = uint32(len(o.arr.Data)), uint32(len(o.arr.Data))
		return true, o.send(&o.arr)
	case OutputTwist:
		o.twist.Header = msgs.Header{Stamp: a.Header.Stamp, FrameID: frame}
		o.twist.Twist = msgs.Twist{}
		if !held {
			// A held velocity would keep the arm moving: held is a zero twist.
			v := o.mainValues(a.Values)
			dt := o.period.Seconds()
			o.twist.Twist = msgs.Twist{
				Linear:  msgs.Vector3{X: v[0] / dt, Y: v[1] / dt, Z: v[2] / dt},
				Angular: msgs.Vector3{X: v[3] / dt, Y: v[4] / dt, Z: v[5] / dt},
			}
		}
		return true, o.send(&o.twist)
	case OutputTrajectory:
		if held {
			// Once per hold: stop at the last commanded position.
			if o.holdSent {
				return sent, nil
			}
			o.holdSent, o.trajChunk = true, nil
			o.traj.Header = msgs.Header{Stamp: a.Header.Stamp, FrameID: frame}
			o.traj.Points = o.points(1)
			o.traj.Points[0].Positions = append(o.traj.Points[0].Positions[:0], o.mainValues(a.Values)...)
			o.traj.Points[0].TimeFromStart = duration(o.period)
			return true, o.send(&o.traj)
		}
		o.holdSent = false
		if cur == o.trajChunk {
			return sent, nil // the controller has this chunk's trajectory
		}
		o.trajChunk = cur
		rest := cur.rows[row:]
		o.traj.Header = msgs.Header{Stamp: a.Header.Stamp, FrameID: frame}
		o.traj.Points = o.points(len(rest))
		for i, r := range rest {
			o.traj.Points[i].Positions = append(o.traj.Points[i].Positions[:0], o.mainValues(r)...)
			o.traj.Points[i].TimeFromStart = duration(time.Duration(i) * o.period)
		}
		return true, o.send(&o.traj)
	}
	return sent, nil
}

// points resizes the trajectory's points to n, reusing their slices.
func (o *output) points(n int) []msgs.JointTrajectoryPoint {
	if cap(o.traj.Points) < n {
		o.traj.Points = append(o.traj.Points[:cap(o.traj.Points)], make([]msgs.JointTrajectoryPoint, n-cap(o.traj.Points))...)
	}
	return o.traj.Points[:n]
}

func (o *output) send(m interface{ AppendCDR([]byte) ([]byte, error) }) error {
	return o.sendOn(o.main, m)
}

func (o *output) sendOn(pub Publisher, m interface{ AppendCDR([]byte) ([]byte, error) }) error {
	var err error
	if o.buf, err = m.AppendCDR(o.buf[:0]); err != nil {
		return err
	}
	return pub.Publish(o.buf)
}

func duration(d time.Duration) msgs.Duration {
	s := math.Floor(d.Seconds())
	return msgs.Duration{Sec: int32(s), Nanosec: uint32(d - time.Duration(s)*time.Second)}
}

// onHold is the hold input's receive path (std_msgs/Bool).
func (e *Executor) onHold(data []byte) {
	var m msgs.Bool
	if err := m.UnmarshalCDR(data); err != nil {
		e.mu.Lock()
		e.st.HoldRefused++
		e.mu.Unlock()
		e.log.Warnf("hold input %s: %v (ignored; the hold state stays as it was)", e.p.Topics.Hold, err)
		return
	}
	e.mu.Lock()
	changed := e.holding != m.Data
	e.holding = m.Data
	if changed && m.Data {
		e.st.Holds++
	}
	e.mu.Unlock()
	if changed {
		if m.Data {
			e.log.Warnf("hold: %s is true, holding (%s) until released", e.p.Topics.Hold, e.p.HoldMode)
		} else {
			e.log.Infof("hold released on %s: executing again", e.p.Topics.Hold)
		}
	}
}

// Holding reports whether the hold input holds the executor.
func (e *Executor) Holding() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.holding
}

// --- end of control outputs and hold ---
