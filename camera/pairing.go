package camera

import (
	"fmt"
	"time"
)

// Pairing is the pairing policy of observations, apart from the data: the
// image bag reader (BagReader) applies it to a bag, and a node can apply it
// to live topics, so that both pair the same messages. It sees, in arrival
// order, each camera frame's stamp, each state's stamp and whether an
// instruction is in force:
//
//   - each camera keeps its latest frame, the proprio topic its latest
//     state;
//   - an observation is ready when every camera has a frame no
//     observation has used yet, a state and an instruction have arrived,
//     and every frame's stamp and the state's lie within Tolerance of the
//     newest frame's (either side);
//   - Take marks the frames used (the state may serve again);
//   - a frame replaced before any observation used it is unpaired.
//
// The zero value is not usable: use NewPairing. Not safe for concurrent use.
type Pairing struct {
	tolerance   time.Duration
	frames      []pairFrame
	stateAt     time.Time
	hasState    bool
	instruction bool
	unpaired    int
}

type pairFrame struct {
	stamp      time.Time
	has, fresh bool
}

// NewPairing returns the policy for cameras cameras (at least 1) and a
// tolerance (positive).
func NewPairing(cameras int, tolerance time.Duration) (*Pairing, error) {
	if cameras < 1 || cameras > 64 {
		return nil, fmt.Errorf("camera: pairing of %d cameras: want 1..64", cameras)
	}
	if tolerance <= 0 {
		return nil, fmt.Errorf("camera: pairing tolerance %v: want a positive duration", tolerance)
	}
	return &Pairing{tolerance: tolerance, frames: make([]pairFrame, cameras)}, nil
}

// Frame records a new frame of camera i (0-based, in camera order) stamped
// at stamp; it reports whether it replaced a frame no observation used.
func (p *Pairing) Frame(i int, stamp time.Time) (replacedUnused bool) {
	f := &p.frames[i]
	replacedUnused = f.fresh
	if replacedUnused {
		p.unpaired++
	}
	*f = pairFrame{stamp: stamp, has: true, fresh: true}
	return replacedUnused
}

// State records a new state stamped at stamp.
func (p *Pairing) State(stamp time.Time) { p.stateAt, p.hasState = stamp, true }

// Instruction records that an instruction is in force.
func (p *Pairing) Instruction() { p.instruction = true }

// Ready reports whether an observation can be made now.
func (p *Pairing) Ready() bool {
	if !p.hasState || !p.instruction {
		return false
	}
	newest, ok := p.newest()
	if !ok {
		return false
	}
	within := func(t time.Time) bool {
		d := newest.Sub(t)
		return d >= -p.tolerance && d <= p.tolerance
	}
	for _, f := range p.frames {
		if !within(f.stamp) {
			return false
		}
	}
	return within(p.stateAt)
}

// newest returns the newest frame stamp, and false unless every camera has
// a fresh frame.
func (p *Pairing) newest() (time.Time, bool) {
	var newest time.Time
	for _, f := range p.frames {
		if !f.has || !f.fresh {
			return time.Time{}, false
		}
		if f.stamp.After(newest) {
			newest = f.stamp
		}
	}
	return newest, true
}

// Take marks the current frames used by an observation and returns the
// observation's stamp (the newest frame's). Call it only when Ready.
func (p *Pairing) Take() time.Time {
	newest, _ := p.newest()
	for i := range p.frames {
		p.frames[i].fresh = false
	}
	return newest
}

// FrameStamp returns camera i's latest frame stamp.
func (p *Pairing) FrameStamp(i int) time.Time { return p.frames[i].stamp }

// StateStamp returns the latest state's stamp.
func (p *Pairing) StateStamp() time.Time { return p.stateAt }

// Flush counts the frames no observation used as unpaired (at the end of a
// bag) and returns the unpaired count.
func (p *Pairing) Flush() int {
	for i := range p.frames {
		if p.frames[i].fresh {
			p.unpaired++
			p.frames[i].fresh = false
		}
	}
	return p.unpaired
}

// Unpaired returns how many frames were replaced (or flushed) unused.
func (p *Pairing) Unpaired() int { return p.unpaired }
