package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// BenchmarkHostPathBurst feeds the node full-size pairs through the
// in-process Bus (which copies every message, as a middleware hands each
// subscriber its own) ten times faster than it denoises them, on the HTP
// backend over the test double, and reports the process's peak resident
// memory during the burst against the buffers the node holds by design.
// Run it alone, so that the peak is this benchmark's:
//
//	go test -run '^$' -bench 'HostPathBurst' -benchtime 1x ./node/
func BenchmarkHostPathBurst(b *testing.B) {
	runtime.GC()
	debug.FreeOSMemory()
	rss0 := rss(b, "VmRSS") // the test binary and the runtime
	d := expert.FullDims()
	fk := qnnfake.New(b, qnnfake.Variant{})
	fk.SetEmptyExecute(true)
	be, path := openFakeHTP(b, fk, d, qnnfake.DataTypeFloat32)
	defer be.Close()
	p := params.Default()
	p.Backend, p.HTP.ContextBinary = params.BackendHTP, path
	p.SelfTest.Skip, p.MaxInputAge = true, 0
	bus := NewBus()
	out := make(chan struct{}, 1024)
	if err := bus.Subscribe(Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk}, func([]byte) { out <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	n, err := New(Config{Params: p, Tick: make(chan time.Time)}, be, bus)
	if err != nil {
		b.Fatal(err)
	}
	kvPub, _ := bus.Advertise(Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache})
	ctxPub, _ := bus.Advertise(Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext})
	stamp := time.Unix(1_700_000_000, 0)
	in := makeInputs(d, 1, stamp)
	kv, ctxMsg := mustCDR(b, &in.kv), mustCDR(b, &in.ctx)
	in = inputs{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	for n.State() != StateActive {
		time.Sleep(time.Millisecond)
	}
	send := func() {
		stamp = stamp.Add(time.Millisecond)
		for _, m := range [][]byte{kv, ctxMsg} {
			binary.LittleEndian.PutUint32(m[4:], uint32(stamp.Unix()))
			binary.LittleEndian.PutUint32(m[8:], uint32(stamp.Nanosecond()))
		}
		if err := kvPub.Publish(kv); err != nil {
			b.Fatal(err)
		}
		if err := ctxPub.Publish(ctxMsg); err != nil {
			b.Fatal(err)
		}
	}
	// The processing rate, from a few chunks one at a time.
	t0 := time.Now()
	for range 5 {
		send()
		<-out
	}
	per := time.Since(t0) / 5
	runtime.GC()
	debug.FreeOSMemory()
	base := rss(b, "VmRSS")
	resetPeak(b)
	const burst = 200
	t1 := time.Now()
	for i := range burst {
		send()
		time.Sleep(time.Until(t1.Add(time.Duration(i+1) * per / 10)))
	}
	time.Sleep(3 * per)
	peak := rss(b, "VmHWM")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("after the burst: RSS %.1f MB; Go heap in use %.1f MB, obtained from the OS %.1f MB, released %.1f MB",
		float64(rss(b, "VmRSS"))/1e6, float64(ms.HeapInuse)/1e6, float64(ms.HeapSys)/1e6, float64(ms.HeapReleased)/1e6)
	cancel()
	<-done
	s := n.Stats()
	msg := int64(len(kv) + len(ctxMsg))
	bound := int64(4 * (2*d.KVLen() + d.ContextLen() + d.ContextTokens))
	// By design: the producer's own pair of messages; the Bus's copy of
	// the one being published; one cache waiting in the pairing buffer for
	// its context (published right after it); the slot's pair; the
	// worker's pair while it decodes; the backend's bound inputs (shared
	// buffers).
	design := 5*msg + bound
	bus.poolMu.Lock()
	made := bus.made
	bus.poolMu.Unlock()
	b.ReportMetric(float64(made), "bus-buffers")
	b.ReportMetric(float64(peak)/1e6, "peakRSS-MB")
	b.ReportMetric(float64(rss0+design)/1e6, "design-MB")
	b.ReportMetric(float64(peak)/float64(rss0+design), "x-design")
	b.Logf("chunk every %v, burst of %d pairs at 10x that rate: %d published, %d superseded; peak RSS %.1f MB; by design %.1f MB = %.1f MB before the node + 5 x %.1f MB messages (producer, Bus copy in flight, pairing buffer, slot, worker) + %.1f MB bound inputs; RSS with the node idle %.1f MB; the Bus allocated %d message buffers; GOGC=%q GOMEMLIMIT=%q",
		per, burst, s.Out, s.Dropped[DropSuperseded], float64(peak)/1e6, float64(rss0+design)/1e6, float64(rss0)/1e6,
		float64(msg)/1e6, float64(bound)/1e6, float64(base)/1e6, made, os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"))
}

// rss reads a field of /proc/self/status in bytes.
func rss(tb testing.TB, field string) int64 {
	tb.Helper()
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range bytes.Split(st, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			f := bytes.Fields(v)
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS.
func resetPeak(tb testing.TB) {
	tb.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// TestBusRecycles: on a topic whose subscribers all recycle, a buffer is
// reused once every subscriber handed it back (and not before); a second
// hand-back and buffers of other topics are ignored; a topic with a
// subscriber that does not recycle gets fresh copies.
func TestBusRecycles(t *testing.T) {
	bus := NewBus()
	var got [][]byte
	keep := func(data []byte) { got = append(got, data) }
	rt := Topic{Name: "r", Type: msgs.TypeVideoKVCache}
	if err := bus.SubscribeRecycled(rt, keep); err != nil {
		t.Fatal(err)
	}
	if err := bus.SubscribeRecycled(rt, func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	mixed := Topic{Name: "m", Type: msgs.TypeVideoKVCache}
	if err := bus.SubscribeRecycled(mixed, keep); err != nil {
		t.Fatal(err)
	}
	if err := bus.Subscribe(mixed, func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	rp, _ := bus.Advertise(rt)
	mp, _ := bus.Advertise(mixed)
	_ = rp.Publish([]byte("first message"))
	first := got[0]
	bus.Recycle(first) // one of two subscribers
	_ = rp.Publish([]byte("second"))
	if &got[1][0] == &first[0] {
		t.Fatal("a buffer was reused before every subscriber handed it back")
	}
	bus.Recycle(first)
	bus.Recycle(first) // a second hand-back of the same delivery is ignored
	_ = rp.Publish([]byte("third"))
	if &got[2][0] != &first[0] || string(got[2]) != "third" {
		t.Fatalf("the handed-back buffer was not reused: %q", got[2])
	}
	_ = rp.Publish([]byte("fourth"))
	if &got[3][0] == &first[0] {
		t.Fatal("one buffer handed out twice")
	}
	_ = mp.Publish([]byte("mixed"))
	bus.Recycle(got[4])
	bus.Recycle(got[4])
	_ = mp.Publish([]byte("mixed again"))
	if &got[5][0] == &got[4][0] {
		t.Fatal("a topic with a subscriber that does not recycle reused a buffer")
	}
	// got[0] was handed back and reused; the others were not.
	if string(got[1]) != "second" || string(got[3]) != "fourth" || string(got[4]) != "mixed" {
		t.Fatalf("deliveries changed: %q", got)
	}
}

// TestBusBestFit: a small message takes the smallest handed-back buffer
// that fits, leaving the large one for the next large message.
func TestBusBestFit(t *testing.T) {
	bus := NewBus()
	var got [][]byte
	rt := Topic{Name: "r", Type: msgs.TypeVideoKVCache}
	if err := bus.SubscribeRecycled(rt, func(d []byte) { got = append(got, d) }); err != nil {
		t.Fatal(err)
	}
	p, _ := bus.Advertise(rt)
	_ = p.Publish(make([]byte, 1000)) // large
	_ = p.Publish(make([]byte, 10))   // small
	bus.Recycle(got[0])
	bus.Recycle(got[1])
	_ = p.Publish(make([]byte, 8)) // fits both: must take the small one
	_ = p.Publish(make([]byte, 900))
	if cap(got[2]) != 10 || cap(got[3]) != 1000 || bus.made != 2 {
		t.Fatalf("small message took a %d-byte buffer, large a %d-byte one, %d buffers made; want 10, 1000, 2", cap(got[2]), cap(got[3]), bus.made)
	}
}
