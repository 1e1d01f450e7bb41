package qnnrt

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// bindGraphs are a producer writing two [2,1,4,16] F16 slabs (128 bytes a
// layer) and an odd [2,1,3,4] one (24 bytes a layer), and a consumer
// reading [5,1,4,16] and [5,1,3,4] inputs, in two binaries (two contexts).
func bindGraphs() []qnnfake.Graph {
	f16 := func(id uint32, name string, dims ...uint32) qnnfake.Tensor {
		return qnnfake.Tensor{ID: id, Name: name, DataType: qnnfake.DataTypeFloat16, Dims: dims}
	}
	return []qnnfake.Graph{
		{Name: "producer", Inputs: []qnnfake.Tensor{f16(1, "x", 6)},
			Outputs: []qnnfake.Tensor{f16(2, "k", 2, 1, 4, 16), f16(3, "v", 2, 1, 4, 16), f16(4, "odd", 2, 1, 3, 4),
				{ID: 5, Name: "k32", DataType: qnnfake.DataTypeFloat32, Dims: []uint32{2, 1, 4, 16}}, f16(6, "flat", 2, 64)}},
		{Name: "consumer", Inputs: []qnnfake.Tensor{f16(10, "keys", 5, 1, 4, 16), f16(11, "values", 5, 1, 4, 16), f16(12, "odd_in", 5, 1, 3, 4)},
			Outputs: []qnnfake.Tensor{f16(13, "y", 7)}},
	}
}

// TestBindOutput binds the producer's k and v as layers 2..3 of the
// consumer's keys and values: the producer's execute writes them in place
// (the double's record: its outputs at the consumer's input address plus
// 2 x 128 bytes, CUSTOM registrations at that offset of the input's fd),
// the consumer reads layers the caller wrote and layers the producer
// wrote, every mismatch is refused with nothing registered, and Close
// leaves no handle.
func TestBindOutput(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	gs := bindGraphs()
	var paths []string
	dir := t.TempDir()
	for _, g := range gs {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, actionBinary(g).Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	s, err := l.NewSession(context.Background(), SessionOptions{ContextPaths: paths})
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := s.Graph("producer")
	cons, _ := s.Graph("consumer")

	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", what, err, want)
		}
	}
	// Before ShareInputs the input has no rpcmem allocation.
	refused("unshared input", s.BindOutput(prod, "k", cons, "keys", 2), "not in a shared buffer")
	if ok, err := cons.ShareInputs("keys", "values", "odd_in"); !ok || err != nil {
		t.Fatalf("ShareInputs = %v, %v", ok, err)
	}
	regs := len(fk.MemRecords())
	refused("data type", s.BindOutput(prod, "k32", cons, "keys", 0), "they must match")
	refused("shape", s.BindOutput(prod, "flat", cons, "keys", 0), "same rank")
	refused("past the end", s.BindOutput(prod, "k", cons, "keys", 4), "does not fit")
	refused("negative index", s.BindOutput(prod, "k", cons, "keys", -1), "does not fit")
	refused("alignment", s.BindOutput(prod, "odd", cons, "odd_in", 1), "64-byte boundary")
	refused("unknown output", s.BindOutput(prod, "nope", cons, "keys", 0), "no output")
	refused("own input", s.BindOutput(cons, "y", cons, "keys", 0), "its own input")
	if n := len(fk.MemRecords()); n != regs {
		t.Fatalf("refused bindings registered %d descriptors", n-regs)
	}
	// A registration the library refuses leaves the output in its own
	// buffer, usable.
	fk.FailCall("memRegister", 8003, 1)
	refused("memRegister failing", s.BindOutput(prod, "k", cons, "keys", 2), "8003")
	if err := prod.SetInput(0, make([]float32, 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunChain(context.Background(), prod); err != nil {
		t.Fatalf("the producer after a failed BindOutput: %v", err)
	}
	if ex := fk.ExecuteRecords(); ex[len(ex)-1].Outputs[0] == 0 || len(fk.MemRecords()) != regs {
		t.Errorf("after a failed BindOutput: output at %#x, %d registrations (want %d)", ex[len(ex)-1].Outputs[0], len(fk.MemRecords()), regs)
	}
	for _, b := range [][2]string{{"k", "keys"}, {"v", "values"}} {
		if err := s.BindOutput(prod, b[0], cons, b[1], 2); err != nil {
			t.Fatalf("BindOutput %s -> %s: %v", b[0], b[1], err)
		}
	}
	refused("bound twice", s.BindOutput(prod, "k", cons, "values", 0), "already lives in a shared buffer")
	refused("link from a bound output", s.Link(prod, "k", cons, "keys"), "BindOutput")

	// The caller writes every layer of the inputs; the producer then
	// overwrites layers 2 and 3.
	x := randomInputs(gs[0], 1)[0]
	in := randomInputs(gs[1], 2)
	for m := range in {
		buf, dt, err := cons.InputBuffer(m)
		if err != nil || dt != Float16 {
			t.Fatalf("InputBuffer %d: %v %v", m, dt, err)
		}
		h := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/2)
		for i, v := range in[m] {
			h[i] = float16.Fromfloat32(v).Bits()
		}
		if err := cons.InputWritten(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.SetInput(0, x); err != nil {
		t.Fatal(err)
	}
	written := fk.MemHandleBytesWritten()
	if _, err := s.RunChain(context.Background(), prod, cons); err != nil {
		t.Fatal(err)
	}
	pe := qnnfake.Expected(gs[0], [][]float32{x})
	const layer = 4 * 16
	for m := range 2 {
		in[m] = roundF16(in[m])
		copy(in[m][2*layer:4*layer], pe[m])
	}
	in[2] = roundF16(in[2])
	want := qnnfake.Expected(gs[1], in)[0]
	got := make([]float32, 7)
	if err := cons.ReadOutput(0, got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("consumer output %v, want %v (the double on the caller's layers and the producer's)", got, want)
	}
	k := make([]float32, 2*layer)
	if err := prod.ReadOutput(0, k); err != nil || !slices.Equal(k, pe[0]) {
		t.Errorf("the bound output reads back %v (%v), want %v", k[:4], err, pe[0][:4])
	}
	if n := fk.MemHandleBytesWritten() - written; n != 2*2*layer*2 {
		t.Errorf("%d bytes written through registered memory, want %d", n, 2*2*layer*2)
	}
	ex := fk.ExecuteRecords()
	p, c := ex[len(ex)-2], ex[len(ex)-1]
	for m := range 2 {
		if p.Outputs[m] != c.Inputs[m]+2*128 {
			t.Errorf("producer output %d at %#x, want the consumer's input %d at %#x + 256", m, p.Outputs[m], m, c.Inputs[m])
		}
	}
	recs := fk.MemRecords()
	var ion, custom []qnnfake.MemRecord
	for _, r := range recs {
		switch r.MemType {
		case 1:
			ion = append(ion, r)
		case 2:
			custom = append(custom, r)
		}
	}
	if len(ion) != 3 || len(custom) != 2 {
		t.Fatalf("registrations %+v: want 3 ION (the consumer's inputs) and 2 CUSTOM (the bound outputs)", recs)
	}
	for m, r := range custom {
		if r.FD != ion[m].FD || r.Offset != 256 || r.Size != 256 || r.Seq == ion[m].Seq || r.Addr != c.Inputs[m]+256 || r.DataType != qnnfake.DataTypeFloat16 {
			t.Errorf("CUSTOM registration %+v; want fd %d (the consumer input's), offset 256, size 256, in the producer's context", r, ion[m].FD)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
	for _, r := range fk.MemRecords() {
		if r.Live {
			t.Errorf("registration %+v still live after Close", r)
		}
	}
	if err := s.BindOutput(prod, "k", cons, "keys", 0); err == nil {
		t.Error("BindOutput on a closed session succeeded")
	}
}

// roundF16 rounds every value to float16 and back, as the consumer's F16
// input holds it.
func roundF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float16.Fromfloat32(v).Float32()
	}
	return y
}
