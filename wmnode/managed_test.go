package wmnode

import (
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/worldmodel"
)

// TestLifecycle: a managed node starts inactive (inputs dropped), goes
// active through configure and activate (a cycle runs), and inactive
// again through deactivate; its lifecycle services are served.
func TestLifecycle(t *testing.T) {
	p := tinyParams()
	r := newRig(t, p, tinyModel(t, p), false, func(c *Config) { c.StartInactive = true })
	mach, err := r.wm.ServeLifecycle(t.Context(), r.bus)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.bus.Call("~/get_state", msgs.SrvGetState, []byte{0, 1, 0, 0, 0}); err != nil {
		t.Errorf("~/get_state: %v", err)
	}
	images := []worldmodel.Image{testImage(64, 64, 1), testImage(64, 64, 2)}
	r.sendCycle(time.Now(), images)
	if s := r.diag(); value(s, "dropped.inactive") != "3" || value(s, "cycles") != "0" {
		t.Fatalf("unconfigured: dropped.inactive %s, cycles %s", value(s, "dropped.inactive"), value(s, "cycles"))
	}
	if err := node.Autostart(t.Context(), mach); err != nil {
		t.Fatal(err)
	}
	if st := mach.State(); st.Label != "active" {
		t.Fatalf("after autostart: %s", st.Label)
	}
	r.sendCycle(time.Now(), images)
	r.cap.wait(t, p.Topics.KVCache)
	r.waitCycles(1)
	if out, err := mach.Deactivate(t.Context()); err != nil || !out.Success() {
		t.Fatalf("deactivate: %v %v", out, err)
	}
	r.sendCycle(time.Now(), images)
	if s := r.diag(); value(s, "dropped.inactive") != "6" || value(s, "cycles") != "1" {
		t.Errorf("deactivated: dropped.inactive %s, cycles %s", value(s, "dropped.inactive"), value(s, "cycles"))
	}
}
