package node

import (
	"testing"
	"time"

	"github.com/fastwam/actionexpert/node/params"
)

// TestSyncTimeoutBoundary: sync.timeout is exact. A partner that arrives
// exactly sync.timeout after its peer still pairs; 1 µs later the peer
// has timed out (dropped.pair_timeout), for either policy's waiting
// input (exact: the context waits; latest: the cache waits for a first
// context).
func TestSyncTimeoutBoundary(t *testing.T) {
	d := tinyDims()
	for _, policy := range []params.SyncPolicy{params.SyncExact, params.SyncLatest} {
		for _, late := range []time.Duration{0, time.Microsecond} {
			clock := newFakeClock()
			p := testParams()
			p.Sync.Policy = policy
			p.StaleAfter = 0
			h := newHarness(t, p, newTestBackend(d), withClock(clock))
			h.waitState(StateActive)
			in := makeInputs(d, 1, clock.Now())
			if policy == params.SyncExact {
				h.sendCtx(in.ctx)
			} else {
				h.sendKV(in.kv)
			}
			clock.Advance(p.Sync.Timeout + late)
			if policy == params.SyncExact {
				h.sendKV(in.kv)
			} else {
				h.sendCtx(in.ctx)
			}
			s := h.node.Stats() // the receive path runs in send
			if late == 0 && (s.Paired != 1 || s.Dropped[DropPairTimeout] != 0) {
				t.Errorf("%s: partner exactly sync.timeout later: paired %d, dropped %v; want paired", policy, s.Paired, s.Dropped)
			}
			if late > 0 && (s.Paired != 0 || s.Dropped[DropPairTimeout] != 1) {
				t.Errorf("%s: partner sync.timeout + 1µs later: paired %d, dropped %v; want the peer timed out", policy, s.Paired, s.Dropped)
			}
			h.stop()
		}
	}
}
