package camera_test

import (
	"testing"
	"time"

	"github.com/fastwam/actionexpert/camera"
)

func TestPairing(t *testing.T) {
	at := func(n int) time.Time { return t0.Add(ms(n)) }
	p, err := camera.NewPairing(2, ms(20))
	if err != nil {
		t.Fatal(err)
	}
	p.Frame(0, at(0))
	p.Frame(1, at(5))
	p.State(at(2))
	if p.Ready() {
		t.Fatal("ready without an instruction")
	}
	p.Instruction()
	if !p.Ready() {
		t.Fatal("not ready with both frames, a state and an instruction within 20 ms")
	}
	if got := p.Take(); !got.Equal(at(5)) {
		t.Fatalf("Take = %v, want the newest frame's stamp", got)
	}
	if p.Ready() {
		t.Fatal("ready again with the frames already used")
	}
	// A new frame on one camera only: not ready; the state may serve again.
	p.Frame(0, at(100))
	if p.Ready() {
		t.Fatal("ready with camera 1's frame used")
	}
	p.Frame(1, at(121)) // 21 ms after camera 0's: out of tolerance
	p.State(at(110))
	if p.Ready() {
		t.Fatal("ready with frames 21 ms apart")
	}
	if p.Frame(1, at(119)) != true || p.Unpaired() != 1 { // replaces the unused 121
		t.Fatalf("replacing an unused frame: unpaired %d", p.Unpaired())
	}
	if !p.Ready() { // 100, 119 and the state at 110: within 20 ms of 119
		t.Fatal("not ready with frames 19 ms apart")
	}
	p.Take()
	p.Frame(0, at(200))
	p.Frame(1, at(200))
	if p.Ready() { // the state at 110 is 90 ms old
		t.Fatal("ready with a stale state")
	}
	p.State(at(215)) // the state may be newer than the frames, within tolerance
	if !p.Ready() {
		t.Fatal("not ready with a state 15 ms after the frames")
	}
	p.Take()
	p.Frame(0, at(300))
	if n := p.Flush(); n != 2 {
		t.Fatalf("Flush = %d unpaired, want 2", n)
	}
	for _, c := range []struct {
		n   int
		tol time.Duration
	}{{0, ms(1)}, {65, ms(1)}, {2, 0}, {2, -ms(1)}} {
		if _, err := camera.NewPairing(c.n, c.tol); err == nil {
			t.Errorf("NewPairing(%d, %v) accepted", c.n, c.tol)
		}
	}
}
