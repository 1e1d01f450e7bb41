package asyncsim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/executor"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

const (
	kvTopic  = "/video_kv_cache"
	ctxTopic = "/text_context"
)

// setup returns the regression pairs and a tiny CPU backend sized for them.
func setup(t *testing.T) ([]Pair, expert.Backend) {
	t.Helper()
	pairs, err := LoadRegression(t.Context(), kvTopic, ctxTopic)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cpu.TinyWeights()
	if err != nil {
		t.Fatal(err)
	}
	if w, err = w.ForInputs(int(pairs[0].KVShape[2]), int(pairs[0].ContextShape[1])); err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(w, cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return pairs, b
}

func baseOptions(pairs []Pair, b expert.Backend) Options {
	p := params.Default()
	p.Backend, p.CPU.Weights = params.BackendCPU, "injected by the test"
	return Options{
		Pairs: pairs, Backend: b, Params: p,
		Latency: 4, Delay: -1, Horizon: 24, Schedule: expert.MaskExp, MaxGuidance: 5,
		Aggregation: executor.AggregateLatest, Periods: 60,
	}
}

func run(t *testing.T, o Options) *Result {
	t.Helper()
	r, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modes) != 3 {
		t.Fatalf("%d modes, want 3", len(r.Modes))
	}
	return r
}

func l2(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// TestSeamTiming checks the timing model: a chunk every ceil(latency)
// periods, the executor switching at row ceil(latency) of the new chunk,
// and the executor's seam jumps equal to |A_new[d] - A_prev[s+d]| computed
// here from the chunks.
func TestSeamTiming(t *testing.T) {
	pairs, b := setup(t)
	for _, lat := range []float64{4, 2.5, 0} {
		o := baseOptions(pairs, b)
		o.Latency = lat
		r := run(t, o)
		every := max(int(math.Ceil(lat)), 1)
		first := int(math.Ceil(lat)) // the row played first
		for _, m := range r.Modes {
			name := m.Mode.String()
			if m.Stats.Starvations != 0 || m.Stats.SeamGaps != 0 {
				t.Errorf("latency %v %s: %d starvations, %d seam gaps; want none", lat, name, m.Stats.Starvations, m.Stats.SeamGaps)
			}
			if want := (o.Periods-1)/every + 1; len(m.Chunks) != want && len(m.Chunks) != want-1 {
				t.Errorf("latency %v %s: %d chunks delivered in %d periods, want about %d", lat, name, len(m.Chunks), o.Periods, want)
			}
			for j, c := range m.Chunks {
				if c.K != j*every {
					t.Fatalf("latency %v %s: chunk %d is of instant %d, want %d", lat, name, j, c.K, j*every)
				}
				if want := r.Start.Add(time.Duration(math.Round((float64(c.K) + lat) * float64(r.ControlPeriod)))); !c.Delivered.Equal(want) {
					t.Errorf("latency %v %s: chunk %d delivered at %v, want %v", lat, name, j, c.Delivered, want)
				}
			}
			if len(m.Seams) != len(m.Chunks)-1 {
				t.Fatalf("latency %v %s: %d seams for %d chunks", lat, name, len(m.Seams), len(m.Chunks))
			}
			for j := 1; j < len(m.Chunks); j++ {
				prev, cur := m.Chunks[j-1].Msg.Actions, m.Chunks[j].Msg.Actions
				want := l2(prev[every+first].Values, cur[first].Values)
				if got := m.Seams[j-1]; math.Abs(got-want) > 1e-9*max(1, want) {
					t.Errorf("latency %v %s: seam %d is %v, want |A_new[%d] - A_prev[%d]| = %v", lat, name, j, got, first, every+first, want)
				}
			}
			seams := 0
			for i, a := range m.Executed {
				if i > 0 && a.ChunkSeq != m.Executed[i-1].ChunkSeq {
					seams++
					if int(a.Row) != first {
						t.Errorf("latency %v %s: instant %d switches to row %d of chunk %d, want row %d", lat, name, a.K, a.Row, a.ChunkSeq, first)
					}
				}
			}
			if seams != len(m.Seams) {
				t.Errorf("latency %v %s: %d switches in the executed stream, %d seam jumps", lat, name, seams, len(m.Seams))
			}
		}
	}
}

// TestRTCShows: with off the frozen rows are far from the previous
// chunk's; replace pins them exactly; guided pulls them close but not
// exactly; both cut the seam jump to below 10 % of off's here. A node that
// ignored rtc.mode, or pushed instead of pulled, fails.
func TestRTCShows(t *testing.T) {
	pairs, b := setup(t)
	r := run(t, baseOptions(pairs, b))
	off, rep, gui := r.Mode(expert.RTCOff), r.Mode(expert.RTCReplace), r.Mode(expert.RTCGuided)
	if off.FrozenRows == 0 || off.FrozenRows != rep.FrozenRows || off.FrozenRows != gui.FrozenRows {
		t.Fatalf("frozen rows %d, %d, %d; want the same non-zero count", off.FrozenRows, rep.FrozenRows, gui.FrozenRows)
	}
	if !(off.FrozenMax > 1) {
		t.Errorf("off: frozen max |A-Y| %v; want > 1 (independent chunks)", off.FrozenMax)
	}
	if rep.FrozenMax != 0 {
		t.Errorf("replace: frozen max |A-Y| %v; want 0 (the rows are pinned to Y)", rep.FrozenMax)
	}
	if !(gui.FrozenMax > 0 && gui.FrozenMax < 0.1*off.FrozenMax) {
		t.Errorf("guided: frozen max |A-Y| %v; want in (0, %v)", gui.FrozenMax, 0.1*off.FrozenMax)
	}
	if off.Tied != 0 || rep.Tied != len(rep.Chunks)-1 || gui.Tied != len(gui.Chunks)-1 {
		t.Errorf("tied chunks: off %d, replace %d of %d, guided %d of %d; want 0 and all but the first",
			off.Tied, rep.Tied, len(rep.Chunks), gui.Tied, len(gui.Chunks))
	}
	oq := off.SeamQuantiles()
	for _, m := range []*ModeResult{rep, gui} {
		q := m.SeamQuantiles()
		if !(q.P50 < 0.1*oq.P50 && q.P95 < 0.1*oq.P95 && q.Max < 0.1*oq.Max) {
			t.Errorf("%v: seam p50/p95/max %v/%v/%v; want below 10 %% of off's %v/%v/%v", m.Mode, q.P50, q.P95, q.Max, oq.P50, oq.P95, oq.Max)
		}
	}
	// The same noise in every mode: the first chunk (untied) is the same.
	for _, m := range []*ModeResult{rep, gui} {
		for i, row := range m.Chunks[0].Msg.Actions {
			if !slices.Equal(row.Values, off.Chunks[0].Msg.Actions[i].Values) {
				t.Fatalf("%v: first chunk row %d differs from off's: not the same noise and inputs", m.Mode, i)
			}
		}
	}
}

// TestStarvation: no starvation at a latency below the horizon as long as
// a chunk lasts until the next arrives (ceil(L) + L <= 32 rows); beyond,
// starvations are counted.
func TestStarvation(t *testing.T) {
	pairs, b := setup(t)
	for _, c := range []struct {
		lat    float64
		starve bool
	}{{12, false}, {15.5, false}, {17, true}} {
		o := baseOptions(pairs, b)
		o.Latency, o.Periods = c.lat, 90
		r := run(t, o)
		for _, m := range r.Modes {
			if got := m.Stats.Starvations > 0; got != c.starve {
				t.Errorf("latency %v %v: %d starvations; want starvation %v", c.lat, m.Mode, m.Stats.Starvations, c.starve)
			}
		}
	}
}

// TestDeterministic: the same options give the same figures; another
// noise seed others; the drift is the inputs.
func TestDeterministic(t *testing.T) {
	pairs, b := setup(t)
	o := baseOptions(pairs, b)
	o.Drift, o.DriftSeed, o.Periods = true, 7, 40
	a, c := run(t, o), run(t, o)
	for i := range a.Modes {
		x, y := &a.Modes[i], &c.Modes[i]
		if !slices.Equal(x.Seams, y.Seams) || x.FrozenMax != y.FrozenMax || len(x.Executed) != len(y.Executed) {
			t.Fatalf("%v: two runs differ: seams %v vs %v, frozen %v vs %v", x.Mode, x.Seams, y.Seams, x.FrozenMax, y.FrozenMax)
		}
		for k := range x.Executed {
			if !slices.Equal(x.Executed[k].Values, y.Executed[k].Values) {
				t.Fatalf("%v: executed action %d differs between two runs", x.Mode, k)
			}
		}
	}
	o2 := o
	o2.Params.NoiseSeed = 99
	if d := run(t, o2); slices.Equal(d.Modes[0].Seams, a.Modes[0].Seams) {
		t.Errorf("noise seed 99 gives the same seams as seed 0")
	}
	o3 := o
	o3.Drift = false
	if d := run(t, o3); slices.Equal(d.Modes[0].Chunks[1].Msg.Actions[0].Values, a.Modes[0].Chunks[1].Msg.Actions[0].Values) {
		t.Errorf("the drift gives the same chunk as the cycle of pairs: the drift is not what the node sees")
	}
}

// TestDrift: small smooth seeded perturbations of the base pair.
func TestDrift(t *testing.T) {
	pairs, _ := setup(t)
	base := pairs[0]
	rms := func(x []float32) float64 {
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		return math.Sqrt(s / float64(len(x)))
	}
	d, e, f := newDrift(base, 1), newDrift(base, 1), newDrift(base, 2)
	var prev []float32
	moved := 0.0
	for k := range 100 {
		obs := slices.Clone(d.at(k).Context)
		if !slices.Equal(obs, e.at(k).Context) {
			t.Fatalf("k %d: the same seed gives another drift", k)
		}
		if k > 0 && slices.Equal(obs, f.at(k).Context) {
			t.Fatalf("k %d: seeds 1 and 2 give the same drift", k)
		}
		amp := 0.0
		for i := range obs {
			amp = max(amp, math.Abs(float64(obs[i]-base.Context[i])))
		}
		if lim := DriftAmplitude*rms(base.Context) + 1e-6; amp > lim || amp == 0 {
			t.Fatalf("k %d: drift of %v; want in (0, %v]", k, amp, lim)
		}
		if prev != nil {
			step := 0.0
			for i := range obs {
				step = max(step, math.Abs(float64(obs[i]-prev[i])))
			}
			// A sine of period >= 50 moves at most 2*pi/50 of its amplitude a period.
			if lim := 2 * math.Pi / driftMinPeriod * DriftAmplitude * rms(base.Context) * 1.001; step > lim {
				t.Fatalf("k %d: a step of %v; want a smooth drift, at most %v", k, step, lim)
			}
			moved = max(moved, step)
		}
		prev = obs
	}
	if moved == 0 {
		t.Error("the drift never moves")
	}
	if !slices.Equal(d.base.Context, base.Context) {
		t.Error("the drift changed its base pair")
	}
}

// TestOptionsRefused: bad options are errors naming the value and what is
// wanted.
func TestOptionsRefused(t *testing.T) {
	pairs, b := setup(t)
	for _, c := range []struct {
		name string
		set  func(o *Options)
		want string
	}{
		{"no backend", func(o *Options) { o.Backend = nil }, "no backend"},
		{"no pairs", func(o *Options) { o.Pairs = nil }, "no input pairs"},
		{"negative latency", func(o *Options) { o.Latency = -1 }, "latency -1 control periods; want 0 to 31"},
		{"NaN latency", func(o *Options) { o.Latency = math.NaN() }, "latency NaN"},
		{"latency past the chunk", func(o *Options) { o.Latency = 31.5 }, "want 0 to 31"},
		{"horizon 0", func(o *Options) { o.Horizon = 0 }, "horizon 0; want 1 to 32"},
		{"horizon 33", func(o *Options) { o.Horizon = 33 }, "horizon 33; want 1 to 32"},
		{"delay past horizon", func(o *Options) { o.Latency, o.Horizon = 10, 8 }, "delay 10 exceeds the horizon 8"},
		{"beta NaN", func(o *Options) { o.MaxGuidance = math.NaN() }, "max guidance NaN"},
		{"periods 0", func(o *Options) { o.Periods = 0 }, "0 periods; want 1 to"},
		{"control period", func(o *Options) { o.ControlPeriod = time.Microsecond }, "control period 1µs"},
		{"aggregation", func(o *Options) { o.Aggregation = "median" }, `"aggregation" must be`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := baseOptions(pairs, b)
			c.set(&o)
			_, err := Run(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one containing %q", err, c.want)
			}
			t.Log(err)
		})
	}
}

// writeBag writes the messages to a new bag and returns its folder.
func writeBag(t *testing.T, write func(w *bag.Writer)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bag")
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []struct{ name, typ string }{{kvTopic, msgs.TypeVideoKVCache}, {ctxTopic, msgs.TypeTextContext}} {
		if err := w.AddTopic(tp.name, tp.typ, bag.DefaultQoS()); err != nil {
			t.Fatal(err)
		}
	}
	write(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func cdr(t *testing.T, m interface{ MarshalCDR() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadPairsHostile: a bag's inputs are checked before they are kept.
func TestReadPairsHostile(t *testing.T) {
	pairs, _ := setup(t)
	at := time.Unix(DefaultStartUnix, 0)
	good := func(k int) (msgs.TextContext, msgs.VideoKVCache) {
		return pairs[0].messages(at.Add(time.Duration(k)*time.Second), uint64(k))
	}
	for _, c := range []struct {
		name  string
		write func(t *testing.T, w *bag.Writer)
		want  string
	}{
		{"garbage cache", func(t *testing.T, w *bag.Writer) {
			if err := w.Write(kvTopic, at, []byte{0, 1, 0, 0, 0xff}); err != nil {
				t.Fatal(err)
			}
		}, kvTopic + " at"},
		{"shape larger than the data", func(t *testing.T, w *bag.Writer) {
			// The encoder refuses such a shape: patch the bytes.
			c, kv := good(0)
			b := cdr(t, &kv)
			var shape []byte
			for _, v := range append([]uint32{4}, kv.Keys.Shape...) {
				shape = binary.LittleEndian.AppendUint32(shape, v)
			}
			i := bytes.Index(b, shape)
			if i < 0 {
				t.Fatal("the keys' shape is not in the encoded cache")
			}
			binary.LittleEndian.PutUint32(b[i+4:], 1<<20)
			w.Write(ctxTopic, at, cdr(t, &c))
			w.Write(kvTopic, at, b)
		}, "keys:"},
		{"keys and values of other shapes", func(t *testing.T, w *bag.Writer) {
			c, kv := good(0)
			kv.Values = msgs.NewTensorF32([]uint32{1, 1, 1, 4}, []float32{1, 2, 3, 4})
			w.Write(ctxTopic, at, cdr(t, &c))
			w.Write(kvTopic, at, cdr(t, &kv))
		}, "want the same"},
		{"NaN context", func(t *testing.T, w *bag.Writer) {
			c, kv := good(0)
			x := slices.Clone(pairs[0].Context)
			x[3] = float32(math.NaN())
			c.Context = msgs.NewTensorF32(pairs[0].ContextShape, x)
			w.Write(ctxTopic, at, cdr(t, &c))
			w.Write(kvTopic, at, cdr(t, &kv))
		}, "context: value 3 is NaN"},
		{"no partner", func(t *testing.T, w *bag.Writer) {
			c, _ := good(0)
			_, kv := good(1)
			w.Write(ctxTopic, at, cdr(t, &c))
			w.Write(kvTopic, at.Add(time.Second), cdr(t, &kv))
		}, "no /video_kv_cache and /text_context messages with the same stamp"},
		{"shapes change", func(t *testing.T, w *bag.Writer) {
			c, kv := good(0)
			w.Write(ctxTopic, at, cdr(t, &c))
			w.Write(kvTopic, at, cdr(t, &kv))
			c, kv = good(1)
			c.Context = msgs.NewTensorF32([]uint32{1, 1, 4}, []float32{1, 2, 3, 4})
			w.Write(ctxTopic, at.Add(time.Second), cdr(t, &c))
			w.Write(kvTopic, at.Add(time.Second), cdr(t, &kv))
		}, "pair 1 has shapes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeBag(t, func(w *bag.Writer) { c.write(t, w) })
			_, err := ReadPairs(t.Context(), dir, kvTopic, ctxTopic)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want one containing %q", err, c.want)
			}
			t.Log(err)
		})
	}
	// The good case reads back what was written.
	dir := writeBag(t, func(w *bag.Writer) {
		c, kv := good(0)
		w.Write(kvTopic, at, cdr(t, &kv))
		w.Write(ctxTopic, at, cdr(t, &c))
	})
	got, err := ReadPairs(t.Context(), dir, kvTopic, ctxTopic)
	if err != nil || len(got) != 1 || !slices.Equal(got[0].Keys, pairs[0].Keys) || !slices.Equal(got[0].Context, pairs[0].Context) {
		t.Fatalf("ReadPairs of a good bag: %d pairs, %v", len(got), err)
	}
}

// TestPairsInTurn: the node's j-th observation takes pair j, whatever the
// latency (at latency 8 the instants 0, 8, 16 would all take pair 0 of 8).
func TestPairsInTurn(t *testing.T) {
	pairs, b := setup(t)
	o := baseOptions(pairs, b)
	o.Latency, o.Periods = 8, 25
	o.Pairs = []Pair{pairs[0], pairs[1]}
	two := run(t, o)
	o.Pairs = []Pair{pairs[0], pairs[0]}
	one := run(t, o)
	c2, c1 := two.Modes[0].Chunks, one.Modes[0].Chunks
	if len(c2) != 3 || len(c1) != 3 {
		t.Fatalf("%d and %d chunks, want 3", len(c2), len(c1))
	}
	if !slices.Equal(c2[0].Msg.Actions[0].Values, c1[0].Msg.Actions[0].Values) {
		t.Error("chunk 0 differs: both take pair 0")
	}
	if slices.Equal(c2[1].Msg.Actions[0].Values, c1[1].Msg.Actions[0].Values) {
		t.Error("chunk 1 is the same with pairs {0, 1} as with {0, 0}: the second observation did not take pair 1")
	}
}

// TestCancelled: a cancelled context stops the simulation with its error.
func TestCancelled(t *testing.T) {
	pairs, b := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Run(ctx, baseOptions(pairs, b))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want context.Canceled", err)
	}
}

// TestRTCShowsOffGrid: with the observations' stamps off the control grid
// by up to StampJitter periods (issue 16: kv_player's stamps jitter, the
// executor's timer has its own phase), the tied chunks' seams stay below
// 10 % of the untied (rtc off) reference, as on the grid. Before the
// executor indexed a tied chunk on its predecessor's grid, a seam there
// compared the predecessor's row s+i±1 with the chunk's row i.
func TestRTCShowsOffGrid(t *testing.T) {
	pairs, b := setup(t)
	for _, c := range []struct {
		jitter, latency float64
	}{{0.9, 4}, {0.6, 2.5}, {0.3, 7}} {
		o := baseOptions(pairs, b)
		o.StampJitter, o.Latency, o.Periods = c.jitter, c.latency, 120
		r := run(t, o)
		off := r.Mode(expert.RTCOff)
		oq := off.SeamQuantiles()
		for _, m := range []*ModeResult{r.Mode(expert.RTCReplace), r.Mode(expert.RTCGuided)} {
			q := m.SeamQuantiles()
			t.Logf("jitter %.1f latency %.1f %v: seam p50/p95/max %.3f/%.3f/%.3f, off %.3f/%.3f/%.3f (%d tied, %d resets)",
				c.jitter, c.latency, m.Mode, q.P50, q.P95, q.Max, oq.P50, oq.P95, oq.Max, m.Tied, m.Resets)
			if m.Tied != len(m.Chunks)-1 || m.Resets != 0 {
				t.Errorf("jitter %v latency %v %v: %d of %d chunks tied, %d resets; want all but the first, 0", c.jitter, c.latency, m.Mode, m.Tied, len(m.Chunks), m.Resets)
			}
			if !(q.P95 < 0.1*oq.P95 && q.Max < 0.1*oq.Max) {
				t.Errorf("jitter %v latency %v %v: seam p95/max %v/%v; want below 10 %% of off's %v/%v", c.jitter, c.latency, m.Mode, q.P95, q.Max, oq.P95, oq.Max)
			}
		}
	}
	if d := stampOffset(3, 0.9, 50*time.Millisecond); d <= 0 || d >= 45*time.Millisecond || d == stampOffset(4, 0.9, 50*time.Millisecond) {
		t.Errorf("stamp offsets %v, %v; want distinct, in (0, 45 ms)", d, stampOffset(4, 0.9, 50*time.Millisecond))
	}
}
