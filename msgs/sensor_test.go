package msgs_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// TestImageLengthNotTrusted: an Image declaring more pixel bytes than the
// message holds is refused as truncated before anything is sized by it.
func TestImageLengthNotTrusted(t *testing.T) {
	b, err := (&msgs.Image{Height: 1, Width: 1, Encoding: "rgb8", Step: 3, Data: []byte{1, 2, 3}}).MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	// The data length is the uint32 before the last 3 bytes.
	lie := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(lie[len(lie)-7:], 1<<31)
	var m msgs.Image
	err = m.UnmarshalCDR(lie)
	if !errors.Is(err, msgs.ErrTruncated) || !strings.Contains(err.Error(), "Image.data") {
		t.Fatalf("lying length: %v, want ErrTruncated naming Image.data", err)
	}
	for n := range len(b) {
		if err := m.UnmarshalCDR(b[:n]); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte Image decoded", n, len(b))
		}
	}
	// A JointState declaring 2^30 names in a short message.
	js, _ := (&msgs.JointState{Name: []string{"a"}}).MarshalCDR()
	binary.LittleEndian.PutUint32(js[4+8+4+4:], 1<<30) // after stamp and the empty frame id ("\0" padded)
	if err := new(msgs.JointState).UnmarshalCDR(js); !errors.Is(err, msgs.ErrTruncated) {
		t.Fatalf("JointState with 2^30 names: %v, want ErrTruncated", err)
	}
}

// TestImageReuseAllocatesNothing: decoding a stream of frames of one layout
// into one Image allocates nothing, and Data views the message.
func TestImageReuseAllocatesNothing(t *testing.T) {
	src := msgs.Image{Header: msgs.Header{FrameID: "cam"}, Height: 4, Width: 4, Encoding: "rgb8", Step: 12, Data: make([]byte, 48)}
	b, err := src.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	var m msgs.Image
	if err := m.UnmarshalCDRReuse(b); err != nil {
		t.Fatal(err)
	}
	if &m.Data[0] != &b[len(b)-48] {
		t.Fatal("Image.Data does not view the message")
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := m.UnmarshalCDRReuse(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("UnmarshalCDRReuse allocates %v times per frame, want 0", allocs)
	}
	var c msgs.CompressedImage
	cb, _ := (&msgs.CompressedImage{Format: "png", Data: []byte{1, 2}}).MarshalCDR()
	_ = c.UnmarshalCDRReuse(cb)
	if allocs := testing.AllocsPerRun(100, func() { _ = c.UnmarshalCDRReuse(cb) }); allocs != 0 {
		t.Fatalf("CompressedImage.UnmarshalCDRReuse allocates %v times, want 0", allocs)
	}
}

// TestImageAppendAllocatesNothing: encoding a frame into a buffer with
// room for it allocates nothing, for both image messages.
func TestImageAppendAllocatesNothing(t *testing.T) {
	img := msgs.Image{Header: msgs.Header{FrameID: "cam"}, Height: 4, Width: 4, Encoding: "rgb8", Step: 12, Data: make([]byte, 48)}
	cmp := msgs.CompressedImage{Header: msgs.Header{FrameID: "cam"}, Format: "png", Data: make([]byte, 48)}
	buf := make([]byte, 0, 1024)
	for name, m := range map[string]interface {
		AppendCDR([]byte) ([]byte, error)
	}{"Image": &img, "CompressedImage": &cmp} {
		if out, err := m.AppendCDR(buf); err != nil || &out[0] != &buf[:1][0] {
			t.Fatalf("%s: AppendCDR did not write into dst: %v", name, err)
		}
		if a := testing.AllocsPerRun(100, func() { _, _ = m.AppendCDR(buf[:0]) }); a != 0 {
			t.Errorf("%s.AppendCDR into a large enough buffer allocates %v times, want 0", name, a)
		}
	}
}
