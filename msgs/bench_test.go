package msgs_test

import (
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// kvMessage encodes a VideoKVCache whose keys and values have the given
// [layers, 1, tokens, width] shape.
func kvMessage(tb testing.TB, layers, tokens, width uint32) ([]byte, int) {
	tb.Helper()
	n := int(layers * tokens * width)
	keys := make([]float32, n)
	values := make([]float32, n)
	for i := range keys {
		keys[i] = float32(i%1000) * 0.001
		values[i] = -keys[i]
	}
	shape := []uint32{layers, 1, tokens, width}
	m := msgs.VideoKVCache{Seq: 1, Keys: msgs.NewTensorF32(shape, keys), Values: msgs.NewTensorF32(shape, values)}
	b, err := m.MarshalCDR()
	if err != nil {
		tb.Fatal(err)
	}
	return b, n
}

// decodeKV is the node's receive path: decode the message (tensors view the
// buffer) and copy each tensor once into the backend's buffers.
func decodeKV(msg []byte, keys, values []float32) error {
	var m msgs.VideoKVCache
	if err := m.UnmarshalCDR(msg); err != nil {
		return err
	}
	if err := m.Keys.DecodeF32Into(keys); err != nil {
		return err
	}
	return m.Values.DecodeF32Into(values)
}

// TestDecodeKVAllocatesNoPayload checks that decoding a KV message into
// caller buffers allocates a small constant, not per element or per byte.
func TestDecodeKVAllocatesNoPayload(t *testing.T) {
	msg, n := kvMessage(t, 4, 16, 1024) // 512 KiB of payload
	keys, values := make([]float32, n), make([]float32, n)
	if allocs := testing.AllocsPerRun(10, func() {
		if err := decodeKV(msg, keys, values); err != nil {
			t.Fatal(err)
		}
	}); allocs > 2 { // the two Shape slices; the payloads are views and copies into keys/values
		t.Fatalf("decoding allocated %v times per message", allocs)
	}
	for i := range keys {
		if want := float32(i%1000) * 0.001; keys[i] != want || values[i] != -want {
			t.Fatalf("element %d: keys %v values %v, want ±%v", i, keys[i], values[i], want)
		}
	}
}

// BenchmarkDecodeKVIntoBuffers decodes a full-size KV message (2 x
// 30x1x98x3072 float32, 72 MB) into backend buffers. Compare its ns/op with
// BenchmarkPlainCopy's, which copies the same bytes once.
func BenchmarkDecodeKVIntoBuffers(b *testing.B) {
	msg, n := kvMessage(b, 30, 98, 3072)
	keys, values := make([]float32, n), make([]float32, n)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeKV(msg, keys, values); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainCopy copies the bytes of the full-size KV message once: the
// floor for any receive path that leaves the data in a separate buffer.
func BenchmarkPlainCopy(b *testing.B) {
	msg, _ := kvMessage(b, 30, 98, 3072)
	dst := make([]byte, len(msg))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		copy(dst, msg)
	}
}

// BenchmarkDecodeKVChecked decodes the full-size KV message into float32
// buffers with the non-finite check fused into the same pass (the node's
// receive path since issue 11). Compare with BenchmarkDecodeKVIntoBuffers
// and BenchmarkPlainCopy.
func BenchmarkDecodeKVChecked(b *testing.B) {
	msg, n := kvMessage(b, 30, 98, 3072)
	var m msgs.VideoKVCache
	if err := m.UnmarshalCDR(msg); err != nil {
		b.Fatal(err)
	}
	keys, values := make([]float32, n), make([]float32, n)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range []struct {
			t   msgs.Tensor
			dst []float32
		}{{m.Keys, keys}, {m.Values, values}} {
			if i, _, err := p.t.DecodeF32Checked(p.dst); err != nil || i >= 0 {
				b.Fatal(i, err)
			}
		}
	}
}
