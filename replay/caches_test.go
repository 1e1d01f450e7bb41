package replay_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/replay"
)

// makeWholePolicyBag writes what `ros2 bag record` of the whole policy
// holds: an image bag's camera, proprio and instruction messages, the
// world model's TextContext and VideoKVCache for each observation and
// the node's chunks.
func makeWholePolicyBag(t *testing.T, n int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "images")
	writeImageBag(t, src, n, nil)
	out := filepath.Join(t.TempDir(), "policy")
	res, err := replay.MakeImageBag(t.Context(), replay.MakeImageOptions{
		Dir: out, Source: src, Reader: testReader{}, World: tinyWorld(t), Backend: tinyBackend(t), Params: cpuParams(t),
		RecordWorld: true,
	})
	if err != nil {
		t.Fatalf("MakeImageBag: %v", err)
	}
	// 1 instruction + n × (2 images + 1 state + context + cache + chunk).
	if res.Chunks != n || res.Messages != 1+6*n {
		t.Fatalf("MakeImageBag: %d chunks, %d messages; want %d, %d", res.Chunks, res.Messages, n, 1+6*n)
	}
	return out
}

// replayWholePolicy replays a whole-policy recording with the cache check.
func replayWholePolicy(t *testing.T, path string, tol float64) *replay.Report {
	t.Helper()
	p := cpuParams(t)
	if ok, err := replay.IsImageBag(t.Context(), path, p.Topics, testReader{}); ok || err != nil {
		t.Fatalf("IsImageBag(whole-policy recording) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := replay.HasObservations(t.Context(), path, testReader{}); !ok || err != nil {
		t.Fatalf("HasObservations(whole-policy recording) = %v, %v; want true, nil", ok, err)
	}
	rec, err := replay.Scan(t.Context(), path, p.Topics)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	rec.ApplySchedule(&p)
	rep, err := replay.Run(t.Context(), rec, replay.Options{Params: p, Backend: tinyBackend(t),
		Caches: &replay.CacheCheck{Reader: testReader{}, World: tinyWorld(t), MaxAbsErr: tol}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Caches == nil {
		t.Fatal("Run with Options.Caches: no Report.Caches")
	}
	return rep
}

func obsStamp(k int) time.Time {
	return time.Unix(replay.DefaultStartUnix, 0).Add(time.Duration(k) * 100 * time.Millisecond)
}

func TestWholePolicyCachesPass(t *testing.T) {
	const n = 3
	rep := replayWholePolicy(t, makeWholePolicyBag(t, n), 0)
	if err := rep.Err(); err != nil {
		t.Fatalf("replay of a freshly made whole-policy recording failed: %v", err)
	}
	c := rep.Caches
	if c.Caches != n || c.Contexts != n || c.Compared() != n || c.NotComparable() != 0 || c.Observations != n {
		t.Fatalf("caches %d, contexts %d, compared %d, not comparable %d, observations %d; want %d, %d, %d, 0, %d",
			c.Caches, c.Contexts, c.Compared(), c.NotComparable(), c.Observations, n, n, n, n)
	}
	for k, row := range c.Rows {
		if !row.Stamp.Equal(obsStamp(k)) || row.Status != replay.CacheOK || !row.HasContext || len(row.Tensors) != 4 {
			t.Fatalf("cache %d: %+v; want ok at %v with K, V, context and mask compared", k, row, obsStamp(k))
		}
		for _, td := range row.Tensors {
			if td.Differ != 0 || td.MaxAbsErr != 0 || td.N == 0 {
				t.Errorf("cache %d %s: %+v; want bit for bit", k, td.Name, td)
			}
		}
	}
	if rep.Compared() != n {
		t.Errorf("%d chunks compared, want %d: the chunks are checked after the caches", rep.Compared(), n)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Passed bool
		Caches struct {
			Passed             bool
			Compared, Recorded int
			Rows               []struct {
				Status  string
				Tensors []struct {
					Name      string
					MaxAbsErr *float64 `json:"max_abs_err"`
				}
			}
		}
	}
	if err := json.Unmarshal(js.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Passed || !res.Caches.Passed || res.Caches.Compared != n || res.Caches.Recorded != n || len(res.Caches.Rows) != n ||
		len(res.Caches.Rows[0].Tensors) != 4 || res.Caches.Rows[0].Tensors[0].MaxAbsErr == nil || *res.Caches.Rows[0].Tensors[0].MaxAbsErr != 0 {
		t.Errorf("JSON result %+v; want passed with %d caches compared", res, n)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	last := strings.TrimSpace(out.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if !strings.HasPrefix(last, "PASS: 3 chunks compared") || !strings.Contains(last, "caches 3 of 3 compared with the world model (K, V, context, mask; bit for bit): 0 differ, largest max|err| 0") {
		t.Errorf("summary line %q; want the chunks' PASS with the caches' figures", last)
	}
}

// flipCacheValue returns an edit flipping the lowest mantissa bit of one
// value of the recorded message of type typ stamped at: element i of
// tensor (K, V or context), or mask entry i.
func flipCacheValue(t *testing.T, at time.Time, tensor string, i int) func(m *bag.Message) bool {
	flip := func(x *msgs.Tensor) {
		x.Data[4*i] ^= 1
	}
	return func(m *bag.Message) bool {
		switch m.Type {
		case msgs.TypeVideoKVCache:
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			if !stampOf(kv.Header).Equal(at) {
				return true
			}
			switch tensor {
			case replay.TensorKeys:
				flip(&kv.Keys)
			case replay.TensorValues:
				flip(&kv.Values)
			default:
				return true
			}
			data, err := kv.MarshalCDR()
			if err != nil {
				t.Fatal(err)
			}
			m.Data = data
		case msgs.TypeTextContext:
			var c msgs.TextContext
			if err := c.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			if !stampOf(c.Header).Equal(at) {
				return true
			}
			switch tensor {
			case replay.TensorContext:
				flip(&c.Context)
			case replay.TensorMask:
				c.AttentionMask[i] = !c.AttentionMask[i]
			default:
				return true
			}
			data, err := c.MarshalCDR()
			if err != nil {
				t.Fatal(err)
			}
			m.Data = data
		}
		return true
	}
}

func stampOf(h msgs.Header) time.Time { return time.Unix(int64(h.Stamp.Sec), int64(h.Stamp.Nanosec)) }

// One flipped bit of one element of one recorded cache fails the replay,
// naming the observation's stamp, the tensor and the element; the other
// caches pass.
func TestWholePolicyFlippedCacheElementFails(t *testing.T) {
	const n = 3
	made := makeWholePolicyBag(t, n)
	for _, tc := range []struct {
		tensor string
		i      int
	}{{replay.TensorKeys, 5}, {replay.TensorValues, 17}, {replay.TensorContext, 3}, {replay.TensorMask, 2}} {
		t.Run(tc.tensor, func(t *testing.T) {
			tampered := filepath.Join(t.TempDir(), "tampered")
			rewriteBag(t, made, tampered, flipCacheValue(t, obsStamp(1), tc.tensor, tc.i))
			rep := replayWholePolicy(t, tampered, 0)
			err := rep.Err()
			if err == nil {
				t.Fatal("a recording with a flipped cache element passed")
			}
			want := "cache of the observation stamped " + "1700000000.100000000"
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.tensor+" differs at 1 of") ||
				!strings.Contains(err.Error(), "first index "+strconv.Itoa(tc.i)) {
				t.Errorf("error %q; want it to name %q, tensor %s and index %d", err, want, tc.tensor, tc.i)
			}
			for k, row := range rep.Caches.Rows {
				want := replay.CacheOK
				if k == 1 {
					want = replay.CacheMismatch
				}
				if row.Status != want {
					t.Errorf("cache %d: %s (%s), want %s", k, row.Status, row.Note, want)
				}
			}
			fails := rep.Caches.Failures()
			if len(fails) != 1 {
				t.Fatalf("%d cache failures, want 1", len(fails))
			}
			for _, td := range fails[0].Tensors {
				switch {
				case td.Name == tc.tensor && (td.Differ != 1 || td.First != tc.i || td.MaxAbsErr == 0):
					t.Errorf("%s: %+v; want 1 differing element at %d", td.Name, td, tc.i)
				case td.Name != tc.tensor && td.Differ != 0:
					t.Errorf("%s differs too: %+v", td.Name, td)
				}
			}
			var out, junit bytes.Buffer
			if err := rep.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteJUnit(&junit); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(junit.String(), `<testcase name="cache kv_seq 1 stamp 1700000000.100000000" classname="replay.tampered" time="0">`+"\n      <failure message=") {
				t.Errorf("JUnit does not fail the tampered cache's case:\n%s", junit.String())
			}
			if !strings.Contains(out.String(), "\nFAIL: caches 3 of 3 compared") {
				t.Errorf("the table's summary does not lead with the caches' failure:\n%s", out.String())
			}
			// A tolerance above the flipped bit's size passes the caches.
			if tc.tensor != replay.TensorMask {
				rep := replayWholePolicy(t, tampered, 1e-3)
				if f := rep.Caches.Failures(); len(f) != 0 || rep.Caches.Err() != nil {
					t.Errorf("with a 1e-3 tolerance: %v", rep.Caches.Err())
				}
			}
		})
	}
}

// A cache whose stamp matches no observation in the recording (the
// frames were published before the recording started) is reported as
// not comparable and fails nothing.
func TestWholePolicyCacheWithoutObservation(t *testing.T) {
	const n = 3
	made := makeWholePolicyBag(t, n)
	cut := filepath.Join(t.TempDir(), "cut")
	rewriteBag(t, made, cut, func(m *bag.Message) bool {
		// Observation 0's frames and state are left out.
		return !(m.Topic != instructionTopic && slices.Contains(testReader{}.Inputs(), m.Topic) && m.LogTime.Before(obsStamp(0).Add(50*time.Millisecond)))
	})
	rep := replayWholePolicy(t, cut, 0)
	if err := rep.Err(); err != nil {
		t.Fatalf("a cache without its observation failed the replay: %v", err)
	}
	c := rep.Caches
	if c.Compared() != n-1 || c.NotComparable() != 1 {
		t.Fatalf("%d compared, %d not comparable; want %d, 1", c.Compared(), c.NotComparable(), n-1)
	}
	row := c.Rows[0]
	if row.Status != replay.CacheNotComparable || !row.Stamp.Equal(obsStamp(0)) || !strings.Contains(row.Note, "no observation stamped 1700000000.000000000") {
		t.Errorf("cache 0: %+v; want NOT COMPARABLE naming its stamp", row)
	}
	if !strings.Contains(c.Summary(), "1 NOT COMPARABLE") {
		t.Errorf("summary %q does not count the cache without its observation", c.Summary())
	}
}

// A recorded cache that does not decode fails the cache check (it fails
// the chunk check too: the node rejects it).
func TestWholePolicyUndecodableCacheFails(t *testing.T) {
	made := makeWholePolicyBag(t, 2)
	bad := filepath.Join(t.TempDir(), "bad")
	rewriteBag(t, made, bad, func(m *bag.Message) bool {
		if m.Type == msgs.TypeVideoKVCache {
			var kv msgs.VideoKVCache
			if kv.UnmarshalCDR(m.Data) == nil && stampOf(kv.Header).Equal(obsStamp(1)) {
				m.Data = m.Data[:len(m.Data)/2]
			}
		}
		return true
	})
	rep := replayWholePolicy(t, bad, 0)
	if rep.Caches.Undecoded != 1 || rep.Caches.Err() == nil || !strings.Contains(rep.Caches.Err().Error(), "1 recorded VideoKVCache or TextContext messages do not decode") {
		t.Errorf("undecoded %d, error %v; want 1 and an error saying so", rep.Caches.Undecoded, rep.Caches.Err())
	}
}

// A float16 cache is compared with the world model's output rounded to
// float16.
func TestWholePolicyFloat16Cache(t *testing.T) {
	made := makeWholePolicyBag(t, 2)
	half := filepath.Join(t.TempDir(), "half")
	toF16 := func(x *msgs.Tensor) {
		n := len(x.Data) / 4
		out := make([]byte, 2*n)
		for i := range n {
			f := math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*i:]))
			binary.LittleEndian.PutUint16(out[2*i:], f32ToF16(f))
		}
		x.DType, x.Data = msgs.DTypeFloat16, out
	}
	rewriteBag(t, made, half, func(m *bag.Message) bool {
		if m.Type == msgs.TypeVideoKVCache {
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			toF16(&kv.Keys)
			toF16(&kv.Values)
			data, err := kv.MarshalCDR()
			if err != nil {
				t.Fatal(err)
			}
			m.Data = data
		}
		return true
	})
	p := cpuParams(t)
	rec, err := replay.Scan(t.Context(), half, p.Topics)
	if err != nil {
		t.Fatal(err)
	}
	c, err := replay.CompareCaches(t.Context(), rec, replay.CacheCheck{Reader: testReader{}, World: tinyWorld(t)}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Err() != nil || c.Compared() != 2 {
		t.Fatalf("float16 caches: %d compared, %v", c.Compared(), c.Err())
	}
}

// f32ToF16 rounds f to the nearest float16 (ties to even), for normal
// values of the test's range (the reference for the replay's rounding).
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := b & 0x7fffff
	if exp <= 0 { // subnormal or zero in float16
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

// Caches recorded out of stamp order are still each matched with their
// observation (the walk starts over).
func TestCompareCachesOutOfOrder(t *testing.T) {
	const n = 3
	made := makeWholePolicyBag(t, n)
	swapped := filepath.Join(t.TempDir(), "swapped")
	rewriteBag(t, made, swapped, func(m *bag.Message) bool {
		if m.Type == msgs.TypeVideoKVCache {
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			if stampOf(kv.Header).Equal(obsStamp(0)) {
				m.LogTime = m.LogTime.Add(time.Second) // recorded after the others
			}
		}
		return true
	})
	rec, err := replay.Scan(t.Context(), swapped, cpuParams(t).Topics)
	if err != nil {
		t.Fatal(err)
	}
	c, err := replay.CompareCaches(t.Context(), rec, replay.CacheCheck{Reader: testReader{}, World: tinyWorld(t)}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Err() != nil || c.Compared() != n || c.Observations != n || !c.Rows[n-1].Stamp.Equal(obsStamp(0)) || !c.Rows[n-1].HasContext {
		t.Fatalf("out-of-order caches: %d compared, last row %+v, %v; want %d, the first observation's last, with its context", c.Compared(), c.Rows[n-1], c.Err(), n)
	}
}

// A world model of other widths than the recording's caches is refused
// before any observation is run.
func TestCompareCachesOtherModel(t *testing.T) {
	made := makeWholePolicyBag(t, 1)
	rec, err := replay.Scan(t.Context(), made, cpuParams(t).Topics)
	if err != nil {
		t.Fatal(err)
	}
	w := tinyWorld(t)
	w.d.VideoTokens++
	_, err = replay.CompareCaches(t.Context(), rec, replay.CacheCheck{Reader: testReader{}, World: w}, nil, 0)
	if err == nil || !strings.Contains(err.Error(), "the world model emits [2 1 9 32]: give the world model the recording was made with") {
		t.Errorf("CompareCaches with another world model: %v", err)
	}
	for _, tol := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := replay.CompareCaches(t.Context(), rec, replay.CacheCheck{Reader: testReader{}, World: tinyWorld(t), MaxAbsErr: tol}, nil, 0); err == nil {
			t.Errorf("tolerance %v accepted", tol)
		}
	}
}
