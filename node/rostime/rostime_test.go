package rostime

import (
	"testing"
	"time"
)

func TestSimClock(t *testing.T) {
	c := NewSim()
	if c.Valid() || !c.Now().Equal(time.Unix(0, 0)) {
		t.Fatalf("new clock: valid %v, now %v; want ROS zero time", c.Valid(), c.Now())
	}
	t0 := time.Unix(100, 0)
	if c.Set(t0) {
		t.Fatal("the first /clock is not a jump backwards")
	}
	if !c.Valid() || !c.Now().Equal(t0) {
		t.Fatalf("after Set: %v", c.Now())
	}
	if c.Set(t0.Add(time.Second)) || !c.Set(t0) || c.JumpsBack() != 1 {
		t.Fatalf("jumps back %d, want 1", c.JumpsBack())
	}
}

func recv(t *testing.T, tk *Ticker) (time.Time, bool) {
	t.Helper()
	select {
	case v := <-tk.C:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestSimTicker(t *testing.T) {
	c := NewSim()
	// A ticker made on a running clock ticks one period on, not at once.
	c0 := NewSim()
	c0.Set(time.Unix(100, 0))
	tk0 := c0.NewTicker(50 * time.Millisecond)
	if v, ok := recv(t, tk0); ok {
		t.Fatalf("tick %v at creation", v)
	}
	c0.Set(time.Unix(100, 50e6))
	if v, ok := recv(t, tk0); !ok || !v.Equal(time.Unix(100, 50e6)) {
		t.Fatalf("first tick %v %v, want 100.05", v, ok)
	}
	tk0.Stop()
	tk := c.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	base := time.Unix(1_700_000_000, 0)
	c.Set(base.Add(10 * time.Millisecond)) // anchors: the next tick is base+50ms
	if v, ok := recv(t, tk); ok {
		t.Fatalf("tick %v before any period was crossed", v)
	}
	c.Set(base.Add(49 * time.Millisecond))
	if _, ok := recv(t, tk); ok {
		t.Fatal("tick before base+50ms")
	}
	c.Set(base.Add(50 * time.Millisecond))
	if v, ok := recv(t, tk); !ok || !v.Equal(base.Add(50*time.Millisecond)) {
		t.Fatalf("tick %v %v, want base+50ms", v, ok)
	}
	// A jump over three periods delivers one tick, the latest crossed.
	c.Set(base.Add(210 * time.Millisecond))
	if v, ok := recv(t, tk); !ok || !v.Equal(base.Add(200*time.Millisecond)) {
		t.Fatalf("tick %v %v, want base+200ms", v, ok)
	}
	c.Set(base.Add(240 * time.Millisecond))
	if _, ok := recv(t, tk); ok {
		t.Fatal("tick before base+250ms")
	}
	// Backwards: the ticker restarts from the new time.
	c.Set(base.Add(-time.Second + 20*time.Millisecond))
	if _, ok := recv(t, tk); ok {
		t.Fatal("tick on a jump backwards")
	}
	c.Set(base.Add(-time.Second + 50*time.Millisecond))
	if v, ok := recv(t, tk); !ok || !v.Equal(base.Add(-time.Second+50*time.Millisecond)) {
		t.Fatalf("after the jump: tick %v %v", v, ok)
	}
	tk.Stop()
	c.Set(base.Add(time.Hour))
	if _, ok := recv(t, tk); ok {
		t.Fatal("tick after Stop")
	}
}
