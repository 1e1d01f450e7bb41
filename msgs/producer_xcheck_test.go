package msgs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
)

// The Python producer kit (python/fastwam_action_expert/producer.py) has its own CDR writer,
// written from the CDR rules rather than from this codec. These tests run it on fixed arrays
// and require its bytes to equal MarshalCDR's for the same messages, f32 and f16, and run its
// unit tests (the contract checks, kv_player's golden reading).

// pythonWithNumpy returns a python3 that imports numpy, preferring Debian's /usr/bin/python3
// (pyenv shims often shadow it without numpy), or skips the test (fails under CI).
func pythonWithNumpy(t *testing.T) string {
	t.Helper()
	return testenv.Python3With(t, "numpy", "install python3-numpy for the producer kit's tests")
}

// pythonDir returns the repository's python/ folder.
func pythonDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fastwam_action_expert", "producer.py")); err != nil {
		t.Fatalf("producer kit not found: %v", err)
	}
	return dir
}

func runPython(t *testing.T, python, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", python, args, err, out)
	}
	return out
}

// TestProducerPythonUnitTests runs the kit's Python unit tests.
func TestProducerPythonUnitTests(t *testing.T) {
	python := pythonWithNumpy(t)
	dir := pythonDir(t)
	out := runPython(t, python, dir, "-m", "unittest", "discover", "-s", filepath.Join(dir, "test"))
	t.Logf("%s", out)
}

// xcheckCase is one observation given to the Python kit: its arrays (raw little-endian
// float32 files), stamp, seq and strings.
type xcheckCase struct {
	Name        string   `json:"name"`
	F16         bool     `json:"f16"`
	KVShape     []uint32 `json:"kv_shape"`
	CtxShape    []uint32 `json:"ctx_shape"`
	Mask        []bool   `json:"mask"`
	StampNs     uint64   `json:"stamp_ns"`
	Seq         uint64   `json:"seq"`
	FrameID     string   `json:"frame_id"`
	Instruction string   `json:"instruction"`
	Visible     uint32   `json:"visible"`

	keys, values, context []float32
}

// edgeValues are float32 values where float16 rounding is delicate: ties to even, the
// largest finite half and what rounds to it, subnormals and what underflows, signed zero.
var edgeValues = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.1, -0.3333333,
	1 + 1.0/2048, 1 + 3.0/2048, // ties: to 1, and up to 1+2^-9
	65504, 65519, -65519, // the largest half, and the largest float32 that still rounds to it
	6.103515625e-05, 6.0975552e-05, // smallest normal half, a subnormal
	5.9604645e-08, 2.9802322e-08, 4.4703484e-08, // smallest subnormal, its half (tie to 0), 1.5x it
	1e-9, 3.14159265, -2.71828, 1000.0625, 12345.678,
}

func fill(n int, salt int) []float32 {
	out := make([]float32, n)
	for i := range out {
		switch {
		case (i+salt)%3 == 0:
			out[i] = edgeValues[(i+salt)%len(edgeValues)]
		default:
			out[i] = float32(math.Sin(float64(i*7+salt))) * float32(1+i%5)
		}
	}
	return out
}

func numel(shape []uint32) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// tensor builds the wire tensor of values: float32, or float16 converted by this codec
// (DecodeF16Checked, the node's own path).
func tensor(t *testing.T, shape []uint32, values []float32, f16 bool) msgs.Tensor {
	t.Helper()
	t32 := msgs.NewTensorF32(shape, values)
	if !f16 {
		return t32
	}
	h := make([]uint16, len(values))
	if i, v, err := t32.DecodeF16Checked(h); err != nil || i >= 0 {
		t.Fatalf("f16 conversion: element %d (%v): %v", i, v, err)
	}
	data := make([]byte, 0, 2*len(h))
	for _, x := range h {
		data = binary.LittleEndian.AppendUint16(data, x)
	}
	return msgs.Tensor{Shape: append([]uint32(nil), shape...), DType: msgs.DTypeFloat16, Data: data}
}

func xcheckCases() []xcheckCase {
	var cases []xcheckCase
	base := []struct {
		frame, instruction string
		seq, stamp         uint64
		visible            uint32
		kv, ctx            []uint32
		mask               []bool
	}{
		// Strings of every length mod 4 move the alignment of what follows them.
		{"", "", 0, 1, 0, []uint32{2, 1, 3, 8}, []uint32{1, 5, 6}, []bool{true, true, true, true, false}},
		{"a", "x", 1, 1_700_000_000_999_999_999, 3, []uint32{1, 1, 4, 4}, []uint32{1, 1, 3}, []bool{true}},
		{"cam", "pick up the red block", 1<<40 + 3, 1_700_000_000_500_000_000, 2, []uint32{3, 1, 2, 6},
			[]uint32{1, 3, 4}, []bool{false, true, false}},
		{"kamera_ünï", "日本語の指示", math.MaxUint64, (1<<31-1)*1_000_000_000 + 5, 0, []uint32{2, 1, 5, 3},
			[]uint32{1, 4, 7}, []bool{true, false, true, true}},
	}
	for i, b := range base {
		for _, f16 := range []bool{false, true} {
			c := xcheckCase{
				Name: fmt.Sprintf("case%d_f16_%v", i, f16), F16: f16, KVShape: b.kv, CtxShape: b.ctx, Mask: b.mask,
				StampNs: b.stamp, Seq: b.seq, FrameID: b.frame, Instruction: b.instruction, Visible: b.visible,
			}
			c.keys = fill(numel(b.kv), 3*i)
			c.values = fill(numel(b.kv), 3*i+1)
			c.context = fill(numel(b.ctx), 3*i+2)
			cases = append(cases, c)
		}
	}
	return cases
}

func writeF32(t *testing.T, path string, values []float32) {
	t.Helper()
	b := make([]byte, 0, 4*len(values))
	for _, v := range values {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// producerScript reads the cases, runs each through Producer.observe and writes the two
// serialized messages.
const producerScript = `
import json, os, sys
import numpy as np
from fastwam_action_expert.producer import Producer
d = sys.argv[1]
for c in json.load(open(os.path.join(d, "cases.json"))):
    def arr(kind, shape):
        return np.fromfile(os.path.join(d, c["name"] + "." + kind + ".f32"), dtype="<f4").reshape(shape)
    p = Producer(f16=c["f16"], first_seq=c["seq"], frame_id=c["frame_id"])
    o = p.observe(arr("keys", c["kv_shape"]), arr("values", c["kv_shape"]), arr("context", c["ctx_shape"]),
                  np.array(c["mask"], dtype=bool), instruction=c["instruction"],
                  visible_video_tokens=c["visible"], stamp_ns=c["stamp_ns"])
    with open(os.path.join(d, c["name"] + ".kv.cdr"), "wb") as f:
        f.write(o.video_kv_cache_cdr())
    with open(os.path.join(d, c["name"] + ".ctx.cdr"), "wb") as f:
        f.write(o.text_context_cdr())
`

// TestProducerCDRMatchesCodec compares the Python kit's serialized VideoKVCache and
// TextContext with MarshalCDR of the same messages, byte for byte, in f32 and f16.
func TestProducerCDRMatchesCodec(t *testing.T) {
	python := pythonWithNumpy(t)
	dir := pythonDir(t)
	work := t.TempDir()
	cases := xcheckCases()
	for _, c := range cases {
		writeF32(t, filepath.Join(work, c.Name+".keys.f32"), c.keys)
		writeF32(t, filepath.Join(work, c.Name+".values.f32"), c.values)
		writeF32(t, filepath.Join(work, c.Name+".context.f32"), c.context)
	}
	spec, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "cases.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	runPython(t, python, dir, "-c", producerScript, work)

	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			stamp := msgs.Time{Sec: int32(c.StampNs / 1e9), Nanosec: uint32(c.StampNs % 1e9)}
			header := msgs.Header{Stamp: stamp, FrameID: c.FrameID}
			kv := msgs.VideoKVCache{
				Header: header, Seq: c.Seq, VisibleVideoTokens: c.Visible,
				Keys:   tensor(t, c.KVShape, c.keys, c.F16),
				Values: tensor(t, c.KVShape, c.values, c.F16),
			}
			tc := msgs.TextContext{
				Header: header, Seq: c.Seq, Instruction: c.Instruction,
				Context: tensor(t, c.CtxShape, c.context, c.F16), AttentionMask: c.Mask,
			}
			for _, m := range []struct {
				file string
				msg  interface{ MarshalCDR() ([]byte, error) }
			}{{c.Name + ".kv.cdr", &kv}, {c.Name + ".ctx.cdr", &tc}} {
				want, err := m.msg.MarshalCDR()
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(work, m.file))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s: the Python kit wrote %d bytes, MarshalCDR %d; first difference at byte %d",
						m.file, len(got), len(want), firstDiff(got, want))
				}
			}
			// And the codec reads the kit's bytes back as the same message.
			var back msgs.VideoKVCache
			b, _ := os.ReadFile(filepath.Join(work, c.Name+".kv.cdr"))
			if err := back.UnmarshalCDR(b); err != nil {
				t.Fatalf("UnmarshalCDR of the kit's VideoKVCache: %v", err)
			}
			if back.Seq != c.Seq || back.Header.Stamp != stamp || back.Header.FrameID != c.FrameID {
				t.Errorf("decoded seq %d stamp %+v frame %q, want %d %+v %q", back.Seq, back.Header.Stamp,
					back.Header.FrameID, c.Seq, stamp, c.FrameID)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// shmScript publishes one cache through the kit's ShmPublisher into a segment in argv[1] and
// writes the descriptor; the segment is left for the Go reader (no close).
const shmScript = `
import os, sys
import numpy as np
from fastwam_action_expert.producer import ShmPublisher
d, f16 = sys.argv[1], sys.argv[2] == "1"
shape = (2, 1, 3, 4)
k = (np.arange(24, dtype=np.float32) * 0.25 - 3).reshape(shape)
v = (np.arange(24, dtype=np.float32) * -0.5 + 1).reshape(shape)
p = ShmPublisher(shape, f16=f16, slots=2, dir=d, prefix="kv", frame_id="wm")
p.publish(k + 100, v + 100, stamp_ns=1_700_000_000_000_000_001)   # slot 0, overwritten below
p.publish(k - 100, v - 100, stamp_ns=1_700_000_000_000_000_002)   # slot 1
desc = p.publish(k, v, stamp_ns=1_700_000_000_100_000_000, seq=41, visible_video_tokens=2)  # slot 0 again
open(os.path.join(d, "desc.cdr"), "wb").write(desc)
print(oct(os.stat(p.path).st_mode & 0o777))
`

// TestProducerShmMatchesReader: the kit's segment and KVHandoff are read by the node's
// reader (kvshm) as the tensors the kit was given, in f32 and f16, mode 0600.
func TestProducerShmMatchesReader(t *testing.T) {
	python := pythonWithNumpy(t)
	dir := pythonDir(t)
	for _, f16 := range []bool{false, true} {
		work := t.TempDir()
		arg := "0"
		if f16 {
			arg = "1"
		}
		out := runPython(t, python, dir, "-c", shmScript, work, arg)
		if !bytes.Contains(out, []byte("0o600")) {
			t.Errorf("segment mode %s, want 0o600", out)
		}
		b, err := os.ReadFile(filepath.Join(work, "desc.cdr"))
		if err != nil {
			t.Fatal(err)
		}
		var d msgs.KVHandoff
		if err := d.UnmarshalCDR(b); err != nil {
			t.Fatalf("the kit's KVHandoff: %v", err)
		}
		if d.Seq != 41 || d.Slot != 0 || d.Generation != 4 || d.VisibleVideoTokens != 2 || d.Header.FrameID != "wm" ||
			d.Header.Stamp != (msgs.Time{Sec: 1_700_000_000, Nanosec: 100_000_000}) {
			t.Fatalf("descriptor %+v", d)
		}
		r := kvshm.NewReader(kvshm.Policy{Dir: work})
		var l kvshm.Lease
		if err := r.Acquire(&d, &l); err != nil {
			t.Fatalf("f16 %v: %v", f16, err)
		}
		for i, c := range []struct {
			data []byte
			f    func(i int) float32
		}{{l.Keys, func(i int) float32 { return float32(i)*0.25 - 3 }}, {l.Values, func(i int) float32 { return float32(i)*-0.5 + 1 }}} {
			shape := d.Keys.Shape
			dt := d.Keys.DType
			if i == 1 {
				shape, dt = d.Values.Shape, d.Values.DType
			}
			got := make([]float32, 24)
			tn := msgs.Tensor{Shape: shape, DType: dt, Data: c.data}
			if err := tn.DecodeF32Into(got); err != nil {
				t.Fatal(err)
			}
			for j, v := range got {
				if v != c.f(j) {
					t.Fatalf("f16 %v tensor %d [%d] = %v, want %v", f16, i, j, v, c.f(j))
				}
			}
		}
		if !l.Intact() {
			t.Error("the kit's slot is not intact")
		}
		l.Release()
		r.Close()
	}
}
