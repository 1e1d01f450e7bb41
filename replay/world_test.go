package replay_test

import (
	"context"
	"errors"
	"hash/fnv"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/replay"
	"github.com/fastwam/actionexpert/worldmodel"
)

// hashWorld is a test double of the replay.WorldModel interface, NOT
// Fast-WAM's world model: its K/V cache and context are seeded noise whose
// seed is a hash of the whole observation (every pixel, the state and the
// instruction), so any change of an input changes every output value. It
// tests the replay's plumbing (feeding, pairing, comparing); the real
// world model's replay is tested in cmd/fastwam with golden/tiny/world.
type hashWorld struct{ d replay.WorldDims }

func (w hashWorld) Dims() replay.WorldDims { return w.d }

func (w hashWorld) Run(ctx context.Context, obs *replay.Observation, out *replay.WorldOutput) error {
	if len(obs.Images) != 2 || len(obs.State) != worldmodel.ProprioDim {
		return errors.New("hashWorld: want 2 images and 8 state values")
	}
	h := fnv.New64a()
	for _, im := range obs.Images {
		h.Write(im.Pix)
	}
	for _, v := range obs.State {
		b := math.Float32bits(v)
		h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
	}
	h.Write([]byte(obs.Instruction))
	seed := h.Sum64()
	copy(out.Keys, expert.Noise(seed, len(out.Keys)))
	copy(out.Values, expert.Noise(seed+1, len(out.Values)))
	copy(out.Context, expert.Noise(seed+2, len(out.Context)))
	worldmodel.ContextMask(out.Mask)
	out.Stages = append(out.Stages, replay.Stage{Name: "hash", Duration: time.Microsecond})
	return nil
}

// tinyWorld is a hashWorld emitting what the tiny backend takes.
func tinyWorld(t *testing.T) hashWorld {
	d := tinyBackend(t).Dims()
	return hashWorld{replay.WorldDims{Layers: d.Layers, VideoTokens: d.VideoTokens, AttnWidth: d.AttnWidth(), ContextTokens: d.ContextTokens, TextDim: d.TextDim}}
}

// Topics of the test image bags.
const (
	camA, camB, proprioTopic, instructionTopic = "/cam/a", "/cam/b", "/proprio", "/instruction"
)

// testReader is a minimal observation reader of the test image bags: an
// observation is complete when both cameras and the proprio state of one
// stamp are in; the instruction is the last one received.
type testReader struct{}

func (testReader) Inputs() []string { return []string{camA, camB, proprioTopic, instructionTopic} }

func (testReader) Observations(ctx context.Context, path string) iter.Seq2[replay.Observation, error] {
	return func(yield func(replay.Observation, error) bool) {
		r, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: testReader{}.Inputs()})
		if err != nil {
			yield(replay.Observation{}, err)
			return
		}
		defer r.Close()
		type partial struct {
			images [2]*worldmodel.Image
			state  []float32
		}
		pending := map[int64]*partial{}
		instruction := ""
		for m, err := range r.Messages(ctx) {
			if err != nil {
				yield(replay.Observation{}, err)
				return
			}
			var stamp msgs.Time
			get := func(k int64) *partial {
				if pending[k] == nil {
					pending[k] = &partial{}
				}
				return pending[k]
			}
			switch m.Topic {
			case instructionTopic:
				var s msgs.String
				if err := s.UnmarshalCDR(m.Data); err != nil {
					yield(replay.Observation{}, err)
					return
				}
				instruction = s.Data
				continue
			case proprioTopic:
				var js msgs.JointState
				if err := js.UnmarshalCDR(m.Data); err != nil {
					yield(replay.Observation{}, err)
					return
				}
				stamp = js.Header.Stamp
				p := get(stampNs(stamp))
				for _, v := range js.Position {
					p.state = append(p.state, float32(v))
				}
			default:
				var im msgs.Image
				if err := im.UnmarshalCDR(m.Data); err != nil {
					yield(replay.Observation{}, err)
					return
				}
				stamp = im.Header.Stamp
				i := 0
				if m.Topic == camB {
					i = 1
				}
				get(stampNs(stamp)).images[i] = &worldmodel.Image{Width: int(im.Width), Height: int(im.Height), Pix: slices.Clone(im.Data)}
			}
			k := stampNs(stamp)
			p := pending[k]
			if p.images[0] == nil || p.images[1] == nil || p.state == nil {
				continue
			}
			delete(pending, k)
			obs := replay.Observation{Stamp: time.Unix(0, k), LogTime: m.LogTime, Images: []worldmodel.Image{*p.images[0], *p.images[1]},
				State: p.state, Instruction: instruction}
			if !yield(obs, nil) {
				return
			}
		}
	}
}

func stampNs(t msgs.Time) int64 { return int64(t.Sec)*1e9 + int64(t.Nanosec) }

// writeImageBag writes an image bag of n observations of two 8 × 6 rgb8
// cameras, an 8-value JointState and a latched instruction; tamper, when
// not nil, edits observation k's first camera pixels before writing.
func writeImageBag(t *testing.T, dir string, n int, tamper func(k int, pix []byte)) {
	t.Helper()
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latched := bag.DefaultQoS()
	latched.Durability = bag.DurabilityTransientLocal
	for _, tp := range []struct {
		name, typ string
		q         bag.QoS
	}{{camA, msgs.TypeImage, bag.DefaultQoS()}, {camB, msgs.TypeImage, bag.DefaultQoS()}, {proprioTopic, msgs.TypeJointState, bag.DefaultQoS()}, {instructionTopic, msgs.TypeString, latched}} {
		if err := w.AddTopic(tp.name, tp.typ, tp.q); err != nil {
			t.Fatal(err)
		}
	}
	write := func(topic string, at time.Time, m interface{ MarshalCDR() ([]byte, error) }) {
		data, err := m.MarshalCDR()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(topic, at, data); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Unix(replay.DefaultStartUnix, 0)
	write(instructionTopic, start.Add(-time.Second), &msgs.String{Data: "put the bowl on the plate"})
	for k := range n {
		stamp := start.Add(time.Duration(k) * 100 * time.Millisecond)
		h := msgs.Header{Stamp: msgs.Time{Sec: int32(stamp.Unix()), Nanosec: uint32(stamp.Nanosecond())}}
		for c, topic := range []string{camA, camB} {
			pix := make([]byte, 8*6*3)
			for i := range pix {
				pix[i] = byte(i*7 + k*13 + c*101)
			}
			if tamper != nil && c == 0 {
				tamper(k, pix)
			}
			write(topic, stamp.Add(time.Duration(c+1)*time.Millisecond), &msgs.Image{Header: h, Height: 6, Width: 8, Encoding: "rgb8", Step: 24, Data: pix})
		}
		state := make([]float64, 8)
		for i := range state {
			state[i] = 0.1*float64(i) - 0.05*float64(k)
		}
		write(proprioTopic, stamp.Add(3*time.Millisecond), &msgs.JointState{Header: h, Position: state})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// makeImageRegression writes an image bag and the regression bag made from
// it with the test world model; it returns the regression bag.
func makeImageRegression(t *testing.T, n int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "images")
	writeImageBag(t, src, n, nil)
	out := filepath.Join(t.TempDir(), "policy")
	res, err := replay.MakeImageBag(t.Context(), replay.MakeImageOptions{
		Dir: out, Source: src, Reader: testReader{}, World: tinyWorld(t), Backend: tinyBackend(t), Params: cpuParams(t),
	})
	if err != nil {
		t.Fatalf("MakeImageBag: %v", err)
	}
	// 1 instruction + n × (2 images + 1 state) copied, n chunks recorded.
	if res.Chunks != n || res.Messages != 1+3*n+n || len(res.Refused) != 0 {
		t.Fatalf("MakeImageBag: %d chunks, %d messages, %d refused; want %d, %d, 0", res.Chunks, res.Messages, len(res.Refused), n, 1+4*n)
	}
	return out
}

// replayImages replays an image bag with the test world model.
func replayImages(t *testing.T, path string) *replay.Report {
	t.Helper()
	p := cpuParams(t)
	w := tinyWorld(t)
	if ok, err := replay.IsImageBag(t.Context(), path, p.Topics, testReader{}); err != nil || !ok {
		t.Fatalf("IsImageBag = %v, %v; want true", ok, err)
	}
	rec, err := replay.ScanImages(t.Context(), path, p.Topics, testReader{}, w.Dims())
	if err != nil {
		t.Fatalf("ScanImages: %v", err)
	}
	rec.ApplySchedule(&p)
	rep, err := replay.Run(t.Context(), rec, replay.Options{Params: p, Backend: tinyBackend(t), World: w})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func TestImageBagReplayPasses(t *testing.T) {
	const n = 3
	rep := replayImages(t, makeImageRegression(t, n))
	if err := rep.Err(); err != nil {
		t.Fatalf("replay of a freshly made image bag failed: %v", err)
	}
	if rep.Recorded != n || rep.Inputs != n || len(rep.Rows) != n {
		t.Fatalf("%d recorded, %d inputs, %d rows; want %d each", rep.Recorded, rep.Inputs, len(rep.Rows), n)
	}
	for _, r := range rep.Rows {
		if r.Produced == nil || r.Recorded == nil || r.MaxAbsErr != 0 {
			t.Errorf("row %s: produced %v, recorded %v, max|err| %g; want both, bit for bit", r.Stamp, r.Produced != nil, r.Recorded != nil, r.MaxAbsErr)
		}
	}
}

// A changed pixel changes the world model's output and so the chunk: the
// replay fails, naming that chunk only.
func TestImageBagReplayTamperedImageFails(t *testing.T) {
	const n = 3
	made := makeImageRegression(t, n)
	// Rebuild the bag with observation 1's first pixel changed, keeping
	// the recorded chunks.
	tampered := filepath.Join(t.TempDir(), "tampered")
	writeImageBag(t, tampered, n, func(k int, pix []byte) {
		if k == 1 {
			pix[0] ^= 1
		}
	})
	merged := filepath.Join(t.TempDir(), "merged")
	copyTopics(t, merged, []topicSource{{tampered, testReader{}.Inputs()}, {made, []string{cpuParams(t).Topics.Actions}}})
	rep := replayImages(t, merged)
	err := rep.Err()
	if err == nil {
		t.Fatal("the replay of a bag with a tampered image passed")
	}
	var failed []int
	for i, r := range rep.Rows {
		if r.Status != replay.StatusOK {
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{1}) {
		t.Fatalf("failing rows %v, want [1] (the tampered observation); report error: %v", failed, err)
	}
}

type topicSource struct {
	path   string
	topics []string
}

// copyTopics writes a bag of the given topics of other bags.
func copyTopics(t *testing.T, dir string, srcs []topicSource) {
	t.Helper()
	w, err := bag.Create(dir, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range srcs {
		r, err := bag.OpenWith(t.Context(), s.path, bag.ReaderOptions{Topics: s.topics})
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range r.Topics() {
			if slices.Contains(s.topics, tp.Name) {
				if err := w.AddTopic(tp.Name, tp.Type, tp.OfferedQoSProfiles[0]); err != nil {
					t.Fatal(err)
				}
			}
		}
		for m, err := range r.Messages(t.Context()) {
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(m.Topic, m.LogTime, m.Data); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// RunPolicy gives the chunks MakeImageBag recorded, bit for bit: the same
// pipeline.
func TestRunPolicyMatchesMadeBag(t *testing.T) {
	const n = 2
	made := makeImageRegression(t, n)
	rec, err := replay.ScanImages(t.Context(), made, cpuParams(t).Topics, testReader{}, tinyWorld(t).Dims())
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.RunPolicy(t.Context(), replay.PolicyOptions{
		World: tinyWorld(t), Backend: tinyBackend(t), Params: cpuParams(t), Observations: testReader{}.Observations(t.Context(), made),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Chunks) != n || len(rec.Recorded) != n {
		t.Fatalf("%d chunks, %d recorded; want %d", len(res.Chunks), len(rec.Recorded), n)
	}
	for k, c := range res.Chunks {
		want := rec.Recorded[k].Chunk
		if c.Model.Header.Stamp != want.Header.Stamp || c.Model.Seq != want.Seq {
			t.Errorf("chunk %d: stamp %v seq %d; want %v, %d", k, c.Model.Header.Stamp, c.Model.Seq, want.Header.Stamp, want.Seq)
		}
		for i := range c.Model.Actions {
			for j, v := range c.Model.Actions[i].Values {
				if math.Float32bits(v) != math.Float32bits(want.Actions[i].Values[j]) {
					t.Fatalf("chunk %d action [%d][%d] = %v, recorded %v", k, i, j, v, want.Actions[i].Values[j])
				}
			}
		}
		if len(c.World) != 2 || c.World[0].Name != "hash" || c.World[1].Name != "world model" {
			t.Errorf("chunk %d: world stages %v; want hash, then world model", k, c.World)
		}
	}
}

func TestImageBagRefusals(t *testing.T) {
	p := cpuParams(t)
	// The regression bag holds the node's inputs: not an image bag.
	if ok, err := replay.IsImageBag(t.Context(), regressionBag(t), p.Topics, testReader{}); ok || err != nil {
		t.Errorf("IsImageBag(regression bag) = %v, %v; want false, nil", ok, err)
	}
	// A bag of both kinds is a whole-policy recording: its recorded
	// inputs are replayed, its caches checked (caches_test.go).
	both := filepath.Join(t.TempDir(), "both")
	src := filepath.Join(t.TempDir(), "images")
	writeImageBag(t, src, 1, nil)
	copyTopics(t, both, []topicSource{{src, testReader{}.Inputs()}, {regressionBag(t), []string{p.Topics.KVCache, p.Topics.Context}}})
	if ok, err := replay.IsImageBag(t.Context(), both, p.Topics, testReader{}); ok || err != nil {
		t.Errorf("IsImageBag(both kinds) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := replay.HasObservations(t.Context(), both, testReader{}); !ok || err != nil {
		t.Errorf("HasObservations(both kinds) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := replay.HasObservations(t.Context(), regressionBag(t), testReader{}); ok || err != nil {
		t.Errorf("HasObservations(regression bag) = %v, %v; want false, nil", ok, err)
	}
	// Run of an image recording without a world model.
	rec, err := replay.ScanImages(t.Context(), src, p.Topics, testReader{}, tinyWorld(t).Dims())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Run(t.Context(), rec, replay.Options{Params: p, Backend: tinyBackend(t)}); err == nil || !strings.Contains(err.Error(), "world model") {
		t.Errorf("Run without a world model: %v; want an error asking for one", err)
	}
	// A world model whose widths do not fit the expert.
	w := tinyWorld(t)
	w.d.TextDim++
	_, err = replay.MakeImageBag(t.Context(), replay.MakeImageOptions{Dir: filepath.Join(t.TempDir(), "x"), Source: src, Reader: testReader{}, World: w, Backend: tinyBackend(t), Params: p})
	if err == nil || !strings.Contains(err.Error(), "matching widths") {
		t.Errorf("MakeImageBag with a mismatched world model: %v; want a width error", err)
	}
	// An empty image bag.
	empty := filepath.Join(t.TempDir(), "empty")
	writeImageBag(t, empty, 0, nil)
	if _, err := replay.ScanImages(t.Context(), empty, p.Topics, testReader{}, tinyWorld(t).Dims()); err == nil || !strings.Contains(err.Error(), "no complete observation") {
		t.Errorf("ScanImages of a bag without observations: %v", err)
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("a refused MakeImageBag left its output folder")
	}
}
