package msgs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// TestRoundTrip encodes and decodes every sample plus a few larger values.
func TestRoundTrip(t *testing.T) {
	big := &msgs.VideoKVCache{
		Header: msgs.Header{Stamp: msgs.Time{Sec: math.MaxInt32, Nanosec: 999999999}, FrameID: "ünïcode/frame"},
		Seq:    math.MaxUint64,
		Keys:   msgs.NewTensorF32([]uint32{3, 1, 7, 9}, seqF32(189, func(i int) float32 { return float32(i) / 7 })),
		Values: msgs.NewTensorF32([]uint32{3, 1, 7, 9}, seqF32(189, func(i int) float32 { return -float32(i) / 3 })),
	}
	cases := []sample{{"big_kv", big, func() cdrMessage { return &msgs.VideoKVCache{} }}}
	cases = append(cases, samples()...)
	for _, s := range cases {
		t.Run(s.name, func(t *testing.T) {
			b, err := s.msg.MarshalCDR()
			if err != nil {
				t.Fatal(err)
			}
			got := s.fresh()
			if err := got.UnmarshalCDR(b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, s.msg) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, s.msg)
			}
		})
	}
}

// TestTruncatedMessages cuts every golden message at every length: each
// prefix must be rejected with an error, never a panic.
func TestTruncatedMessages(t *testing.T) {
	for _, s := range samples() {
		full := golden(t, s.name)
		for n := range len(full) {
			err := s.fresh().UnmarshalCDR(full[:n])
			if err == nil {
				t.Fatalf("%s cut to %d of %d bytes: no error", s.name, n, len(full))
			}
			if !errors.Is(err, msgs.ErrTruncated) {
				t.Fatalf("%s cut to %d bytes: %v, want ErrTruncated", s.name, n, err)
			}
			if !strings.HasPrefix(err.Error(), "msgs: ") {
				t.Fatalf("error %q does not start with the package name", err)
			}
		}
	}
}

func TestTruncationErrorNamesTheField(t *testing.T) {
	full := golden(t, "action_chunk")
	// Cut inside the second action row's values.
	var m msgs.ActionChunk
	if err := m.UnmarshalCDR(full); err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(full, f32Bytes(m.Actions[1].Values[3]))
	err := new(msgs.ActionChunk).UnmarshalCDR(full[:cut+2])
	if err == nil || !strings.Contains(err.Error(), "msgs: ActionChunk.actions[1].values: ") {
		t.Fatalf("got %v, want an error naming ActionChunk.actions[1].values", err)
	}
}

func TestEncapsulationHeader(t *testing.T) {
	good := golden(t, "header")
	for _, tc := range []struct {
		name   string
		header []byte
		ok     bool
	}{
		{"cdr_le", []byte{0, 1, 0, 0}, true},
		{"options_ignored", []byte{0, 1, 0, 3}, true},
		{"cdr_be", []byte{0, 0, 0, 0}, false},
		{"pl_cdr_le", []byte{0, 3, 0, 0}, false},
		{"xcdr2_le", []byte{0, 7, 0, 0}, false},
		{"garbage", []byte{0xff, 1, 0, 0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(append([]byte(nil), tc.header...), good[4:]...)
			err := new(msgs.Header).UnmarshalCDR(b)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, msgs.ErrEncapsulation) {
				t.Fatalf("err = %v, want ErrEncapsulation", err)
			}
		})
	}
	err := new(msgs.Header).UnmarshalCDR([]byte{0, 1})
	if !errors.Is(err, msgs.ErrTruncated) || !strings.Contains(err.Error(), "4-byte CDR encapsulation header") {
		t.Fatalf("2-byte message: %v", err)
	}
}

func TestTrailingBytes(t *testing.T) {
	good := golden(t, "time")
	var m msgs.Time
	if err := m.UnmarshalCDR(append(bytes.Clone(good), 0, 0, 0)); err != nil {
		t.Fatalf("3 bytes of padding: %v", err)
	}
	err := m.UnmarshalCDR(append(bytes.Clone(good), 0, 0, 0, 0))
	if !errors.Is(err, msgs.ErrMalformed) || !strings.Contains(err.Error(), "4 unexpected bytes after the message") {
		t.Fatalf("4 trailing bytes: %v", err)
	}
}

func TestInvalidContent(t *testing.T) {
	text := golden(t, "text_context")
	badBool := bytes.Clone(text)
	badBool[len(badBool)-1] = 2 // the last attention_mask entry
	err := new(msgs.TextContext).UnmarshalCDR(badBool)
	if !errors.Is(err, msgs.ErrMalformed) || !strings.HasPrefix(err.Error(), "msgs: TextContext.attention_mask: bool is 2") {
		t.Fatalf("bool 2: %v", err)
	}

	hdr := golden(t, "header")
	noNUL := bytes.Clone(hdr)
	noNUL[len(noNUL)-1] = 'x'
	err = new(msgs.Header).UnmarshalCDR(noNUL)
	if !errors.Is(err, msgs.ErrMalformed) || !strings.HasPrefix(err.Error(), "msgs: Header.frame_id: ") {
		t.Fatalf("string without NUL: %v", err)
	}

	// A zero string length is read as an empty string.
	zeroLen := []byte{0, 1, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}
	var h msgs.Header
	if err := h.UnmarshalCDR(zeroLen); err != nil || h != (msgs.Header{Stamp: msgs.Time{Sec: 1, Nanosec: 2}}) {
		t.Fatalf("zero-length string: %v %+v", err, h)
	}
}

// kvBytes encodes a VideoKVCache by hand with the given keys fields.
func kvBytes(shape []uint32, dtype uint8, dataLen uint32, data []byte) []byte {
	b := []byte{0, 1, 0, 0}
	b = binary.LittleEndian.AppendUint32(b, 1) // stamp.sec
	b = binary.LittleEndian.AppendUint32(b, 2) // stamp.nanosec
	b = binary.LittleEndian.AppendUint32(b, 1) // frame_id length
	b = append(b, 0, 0, 0, 0)                  // NUL + padding to 8
	b = binary.LittleEndian.AppendUint64(b, 9) // seq
	b = binary.LittleEndian.AppendUint32(b, 0) // visible_video_tokens
	b = binary.LittleEndian.AppendUint32(b, uint32(len(shape)))
	for _, d := range shape {
		b = binary.LittleEndian.AppendUint32(b, d)
	}
	b = append(b, dtype, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, dataLen)
	b = append(b, data...)
	// values: an empty tensor
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return b
}

func TestTensorShapeMismatch(t *testing.T) {
	b := kvBytes([]uint32{30, 1, 98, 3072}, msgs.DTypeFloat32, 100, make([]byte, 100))
	err := new(msgs.VideoKVCache).UnmarshalCDR(b)
	const want = "msgs: VideoKVCache.keys: shape [30 1 98 3072] needs 36126720 bytes of float32, got 100"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if !errors.Is(err, msgs.ErrTensorShape) {
		t.Fatalf("%v is not ErrTensorShape", err)
	}
	var e *msgs.Error
	if !errors.As(err, &e) || e.Path != "VideoKVCache.keys" {
		t.Fatalf("errors.As: %#v", e)
	}

	err = new(msgs.VideoKVCache).UnmarshalCDR(kvBytes([]uint32{2}, 7, 8, make([]byte, 8)))
	if !errors.Is(err, msgs.ErrTensorShape) || !strings.Contains(err.Error(), "dtype 7 is not DTYPE_FLOAT32") {
		t.Fatalf("unknown dtype: %v", err)
	}

	if err := new(msgs.VideoKVCache).UnmarshalCDR(kvBytes([]uint32{2}, msgs.DTypeFloat16, 4, make([]byte, 4))); err != nil {
		t.Fatalf("valid f16 keys: %v", err)
	}
}

// TestHugeLengthsAllocateNothing feeds lengths of 2^32-1 to every sequence
// kind; each must fail without allocating anything near that size.
func TestHugeLengthsAllocateNothing(t *testing.T) {
	const huge = math.MaxUint32
	cases := map[string]struct {
		data []byte
		dst  cdrMessage
	}{
		"shape": {kvBytes(nil, 0, 0, nil)[:36], &msgs.VideoKVCache{}},
		"data":  {kvBytes([]uint32{2}, 0, huge, nil), &msgs.VideoKVCache{}},
		"frame": {[]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'a', 0}, &msgs.Header{}},
		"rows":  {append(bytes.Clone(golden(t, "action_chunk_empty")[:44]), 0xff, 0xff, 0xff, 0xff), &msgs.ActionChunk{}},
		"status": {append([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff),
			&msgs.DiagnosticArray{}},
		"stamped": {append(bytes.Clone(golden(t, "stamped_action_empty")[:20]), 0xff, 0xff, 0xff, 0xff), &msgs.StampedAction{}},
		"values":  {[]byte{0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}, &msgs.ActionRow{}},
	}
	// Make "shape" claim 2^32-1 dimensions.
	binary.LittleEndian.PutUint32(cases["shape"].data[32:], huge)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := tc.dst.UnmarshalCDR(tc.data)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, msgs.ErrTruncated) {
				t.Fatalf("got %v, want ErrTruncated", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Fatalf("decoding allocated %d bytes", grew)
			}
		})
	}
}

func TestUnmarshalLeavesMessageUnchangedOnError(t *testing.T) {
	m := msgs.ActionChunk{Seq: 99, Backend: "htp"}
	full := golden(t, "action_chunk")
	if err := m.UnmarshalCDR(full[:len(full)-1]); err == nil {
		t.Fatal("no error")
	}
	if m.Seq != 99 || m.Backend != "htp" || m.Actions != nil {
		t.Fatalf("message changed: %+v", m)
	}
}

func TestDecodedTensorViewsInput(t *testing.T) {
	data := golden(t, "tensor_f32")
	var tn msgs.Tensor
	if err := tn.UnmarshalCDR(data); err != nil {
		t.Fatal(err)
	}
	if &tn.Data[0] != &data[len(data)-24] {
		t.Fatal("Data is a copy, want a view of the message")
	}
	if cap(tn.Data) != len(tn.Data) {
		t.Fatalf("cap(Data) = %d, want %d so appends cannot overwrite the message", cap(tn.Data), len(tn.Data))
	}
}

func TestMarshalRejectsInvalidTensor(t *testing.T) {
	m := msgs.VideoKVCache{
		Keys:   msgs.NewTensorF32([]uint32{2, 2}, []float32{1, 2, 3, 4}),
		Values: msgs.NewTensorF32([]uint32{2, 3}, []float32{1, 2, 3, 4}),
	}
	_, err := m.MarshalCDR()
	const want = "msgs: VideoKVCache.values: shape [2 3] needs 24 bytes of float32, got 16"
	if err == nil || err.Error() != want || !errors.Is(err, msgs.ErrTensorShape) {
		t.Fatalf("got %v, want %s", err, want)
	}
	dst := []byte{1, 2}
	out, err := m.AppendCDR(dst)
	if err == nil || !bytes.Equal(out, dst) {
		t.Fatalf("AppendCDR on error: %v, % x", err, out)
	}
	tc := msgs.TextContext{Context: msgs.Tensor{Shape: []uint32{1}, DType: 3, Data: []byte{0}}}
	if _, err := tc.MarshalCDR(); err == nil || !strings.HasPrefix(err.Error(), "msgs: TextContext.context: dtype 3") {
		t.Fatalf("TextContext with dtype 3: %v", err)
	}
}

func TestAppendReusesBuffer(t *testing.T) {
	m := samples()[6].msg // video_kv_cache
	first, err := m.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	out, err := m.AppendCDR(buf)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &buf[:1][0] || !bytes.Equal(out, first) {
		t.Fatal("AppendCDR did not write into the spare capacity of dst")
	}
	if n := testing.AllocsPerRun(20, func() { out, _ = m.AppendCDR(buf[:0]) }); n != 0 {
		t.Fatalf("AppendCDR into a large enough buffer allocated %v times", n)
	}
}
