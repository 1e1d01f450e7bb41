package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

// wholePolicyRecording writes what `ros2 bag record` of the whole policy
// holds, made in Go: golden/policy's camera, proprio and instruction
// messages (policyFrames), the embedded tiny world model's TextContext
// and VideoKVCache for each observation, and the CPU reference's chunks
// on them.
func wholePolicyRecording(t *testing.T) string {
	t.Helper()
	src := writePolicySource(t)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var wf worldFlags
	var cf cpuFlags
	wf.register(fs)
	cf.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	wm, cleanup, err := wf.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	r, err := newImageBagReader(wm.frame)
	if err != nil {
		t.Fatal(err)
	}
	p := replay.BaseParams(params.BackendCPU)
	seedParams(&p, &cf, nil)
	if err := replay.ResolveTopics(&p, "/"); err != nil {
		t.Fatal(err)
	}
	d := wm.Dims()
	if err := checkInputSizes(&p, d.VideoTokens, d.ContextTokens, "the world model's output"); err != nil {
		t.Fatal(err)
	}
	b, _, err := cf.open(t.Context(), d.VideoTokens, d.ContextTokens, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeBackend(b); err != nil {
			t.Error(err)
		}
	}()
	out := filepath.Join(t.TempDir(), "policy_rec")
	res, err := replay.MakeImageBag(t.Context(), replay.MakeImageOptions{Dir: out, Source: src, Reader: r, World: wm, Backend: b, Params: p, RecordWorld: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks != policyCycles {
		t.Fatalf("%d chunks recorded, want %d", res.Chunks, policyCycles)
	}
	return out
}

// flipKeys rewrites the recording with the lowest bit of one key of the
// cache stamped at flipped.
func flipKeys(t *testing.T, src string, at time.Time, i int) string {
	t.Helper()
	r, err := bag.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defs := map[string]string{}
	for _, tp := range r.Topics() {
		defs[tp.Type] = tp.Definition
	}
	dir := filepath.Join(t.TempDir(), "flipped")
	w, err := bag.Create(dir, bag.WriterOptions{Definition: func(typ string) (string, error) {
		if d := defs[typ]; d != "" {
			return d, nil
		}
		return msgs.Definition(typ)
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range r.Topics() {
		if err := w.AddTopic(tp.Name, tp.Type, tp.OfferedQoSProfiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	flipped := 0
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		data := m.Data
		if m.Type == msgs.TypeVideoKVCache {
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			if time.Unix(int64(kv.Header.Stamp.Sec), int64(kv.Header.Stamp.Nanosec)).Equal(at) {
				kv.Keys.Data[4*i] ^= 1
				if data, err = kv.MarshalCDR(); err != nil {
					t.Fatal(err)
				}
				flipped++
			}
		}
		if err := w.Write(m.Topic, m.LogTime, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if flipped != 1 {
		t.Fatalf("%d caches stamped %v, want 1", flipped, at)
	}
	return dir
}

// The replay of a whole-policy recording checks each recorded cache
// against the real (tiny) world model, bit for bit, then the chunks; a
// cache with one flipped bit fails, naming its observation's stamp and
// the tensor.
func TestReplayWholePolicyCaches(t *testing.T) {
	rec := wholePolicyRecording(t)
	code, out, stderr := runCmd(t, "replay", rec)
	if code != 0 {
		t.Fatalf("replay of the whole-policy recording: exit %d\n%s\n%s", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"PASS: 4 chunks compared", "caches 4 of 4 compared with the world model (K, V, context, mask; bit for bit): 0 differ, largest max|err| 0, lowest cosine 1.000000000000"} {
		if !strings.Contains(last, want) {
			t.Errorf("summary line %q lacks %q", last, want)
		}
	}
	if !strings.Contains(out, "world model embedded golden/tiny/world") || !strings.Contains(out, "caches   4 VideoKVCache and 4 TextContext recorded, against the world model on the 4 observations") {
		t.Errorf("output does not describe the cache check:\n%s", out)
	}

	// An observation's stamp is its newest frame's: the wrist camera's,
	// 2 ms after the agentview frame.
	at := time.Unix(policyFirstSec, 0).Add(2*policyPeriod + 2*time.Millisecond)
	flipped := flipKeys(t, rec, at, 7)
	code, out, stderr = runCmd(t, "replay", flipped)
	if code != 1 {
		t.Fatalf("replay with a flipped key: exit %d, want 1\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"cache of the observation stamped 1700000000.202000000", "K differs at 1 of", "first index 7"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the failure lacks %q:\n%s", want, stderr)
		}
	}
	// -caches=false leaves the check out: the chunks alone are replayed.
	code, out, stderr = runCmd(t, "replay", "-caches=false", rec)
	if code != 0 || strings.Contains(out, "caches ") {
		t.Errorf("-caches=false: exit %d, want 0 without a cache check\n%s\n%s", code, out, stderr)
	}
}

func TestReplayCacheFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-cache-max-err", "1e-6", embeddedBag(t)}, "has no caches to check"},
		{[]string{"replay", "-cache-max-err", "-1", embeddedBag(t)}, "-cache-max-err"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
