package qnnfake

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// memLayout lists the memory-descriptor structs the double reads for a
// CUSTOM registration, with the offsets this package's tests (and the
// runtime) write them at: checked against the layout table and against the
// C source's FQ_SIZE/FQ_OFF assertions, so that all three agree.
var memLayout = map[string]struct {
	size   uint64
	fields map[string]uint64
}{
	"Qnn_MemDescriptor_t":            {sizeMemDescriptor, map[string]uint64{"memShape": 0, "dataType": 24, "memType": 28, "customInfo": 32}},
	"QnnMemHtp_Descriptor_t":         {sizeHtpMemDesc, map[string]uint64{"type": 0, "size": 8, "sharedBufferConfig": 16}},
	"QnnHtpMem_SharedBufferConfig_t": {16, map[string]uint64{"fd": 0, "offset": 8}},
}

func TestMemDescriptorLayout(t *testing.T) {
	// The layout table (a copy of /work/shared/qnn/layout-api2.32.txt).
	f, err := os.Open("../../qnnrt/testdata/layout-api2.32.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reSize := regexp.MustCompile(`^sizeof\((\w+)\) = (\d+)`)
	reField := regexp.MustCompile(`^\s+(\w+)\s+off=\s*(\d+)\s+size=`)
	table := map[string]map[string]uint64{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := reSize.FindStringSubmatch(sc.Text()); m != nil {
			cur = m[1]
			table[cur] = map[string]uint64{"sizeof": atou(m[2])}
		} else if m := reField.FindStringSubmatch(sc.Text()); m != nil && cur != "" {
			table[cur][m[1]] = atou(m[2])
		}
	}
	// The C source's static assertions.
	src, err := os.ReadFile("csrc/fakeqnn.c")
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]map[string]uint64{}
	for _, m := range regexp.MustCompile(`FQ_(SIZE|OFF)\((\w+), (?:(\w+), )?(\d+)\);`).FindAllStringSubmatch(string(src), -1) {
		if c[m[2]] == nil {
			c[m[2]] = map[string]uint64{}
		}
		key := m[3]
		if m[1] == "SIZE" {
			key = "sizeof"
		}
		c[m[2]][key] = atou(m[4])
	}
	for name, want := range memLayout {
		for field, off := range want.fields {
			if got, ok := table[name][field]; !ok || got != off {
				t.Errorf("%s.%s: table offset %d (present %v), tests write it at %d", name, field, got, ok, off)
			}
			if got, ok := c[name][field]; !ok || got != off {
				t.Errorf("%s.%s: C source asserts offset %d (present %v), want %d", name, field, got, ok, off)
			}
		}
		if table[name]["sizeof"] != want.size || c[name]["sizeof"] != want.size {
			t.Errorf("sizeof(%s): table %d, C %d, tests %d", name, table[name]["sizeof"], c[name]["sizeof"], want.size)
		}
	}
}

func atou(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// TestCustomOutputsAtOffsets registers a graph's two outputs as CUSTOM
// regions at offsets 128 and 384 of one rpcmem buffer (the way a runtime
// binds a producer's outputs into a consumer's input allocation) and
// checks that the execute writes the results there, counts the bytes as
// written through registered memory, records the addresses, and that the
// registrations are recorded as the double read them.
func TestCustomOutputsAtOffsets(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	rm := bindRPCMem(t, a)
	g := Graph{Name: "producer",
		Inputs: []Tensor{{ID: 1, Name: "x", DataType: DataTypeFloat16, Dims: []uint32{2, 8}}},
		Outputs: []Tensor{
			{ID: 2, Name: "k", DataType: DataTypeFloat16, Dims: []uint32{2, 1, 4, 16}},
			{ID: 3, Name: "v", DataType: DataTypeFloat16, Dims: []uint32{2, 1, 4, 16}},
		}}
	s := a.load(Binary{Graphs: []Graph{g}})
	gh := a.graph(s, g.Name)
	const bufSize, outBytes = 1024, 2 * 4 * 16 * 2
	buf := rm.alloc(25, 1, bufSize)
	fd := rm.toFD(buf)
	if buf == 0 || fd < 0 {
		t.Fatalf("rpcmem: %#x fd %d", buf, fd)
	}
	offs := []uint64{128, 384}
	descs := newCMem(t, 2*sizeMemDescriptor)
	htp := newCMem(t, 2*sizeHtpMemDesc)
	for k, off := range offs {
		h := htp[k*sizeHtpMemDesc:]
		cmem(h).put32(0, 1) // SHARED_BUFFER
		cmem(h).put64(8, bufSize)
		cmem(h).put32(16, uint32(fd))
		cmem(h).put64(24, off)
		descriptor(t, descs[k*sizeMemDescriptor:], g.Outputs[k], 2, 0, htp.at(k*sizeHtpMemDesc))
	}
	handles := newCMem(t, 16)
	a.must("memRegister", a.call(idxMemRegister, s.context, descs.addr(), 2, handles.addr()))

	in := inputsFor(g, 3)
	want := Expected(g, in)
	ia, ibufs := tensorArray(t, g.Inputs)
	writeElems(g.Inputs[0], ibufs[0], in[0])
	oa, _ := tensorArray(t, g.Outputs)
	for k := range g.Outputs {
		oa.put32(k*sizeTensor+offTensorMemType, 1)
		oa.put64(k*sizeTensor+offTensorData, handles.u64(8*k))
	}
	a.must("execute into CUSTOM regions", a.call(idxGraphExecute, gh, ia.addr(), 1, oa.addr(), 2, 0, 0))
	got := [][]float32{
		readElems(g.Outputs[0], peek(buf+uintptr(offs[0]), outBytes)),
		readElems(g.Outputs[1], peek(buf+uintptr(offs[1]), outBytes)),
	}
	sameBits(t, "outputs in the shared buffer", got, want)
	if n := l.MemHandleBytesWritten(); n != 2*outBytes {
		t.Errorf("MemHandleBytesWritten %d, want %d", n, 2*outBytes)
	}
	ex := l.ExecuteRecords()
	if len(ex) != 1 || ex[0].Outputs[0] != buf+128 || ex[0].Outputs[1] != buf+384 {
		t.Errorf("execute record %+v, want outputs at %#x and %#x", ex, buf+128, buf+384)
	}
	recs := l.MemRecords()
	if len(recs) != 2 {
		t.Fatalf("%d memory records, want 2", len(recs))
	}
	for k, r := range recs {
		w := MemRecord{Seq: 1, FD: fd, Offset: offs[k], Size: outBytes, MemType: 2, DataType: DataTypeFloat16, Live: true, Addr: buf + uintptr(offs[k])}
		if r != w {
			t.Errorf("record %d: %+v, want %+v", k, r, w)
		}
	}
	// A region past the declared size is refused, nothing registered.
	cmem(htp).put64(24, bufSize-64)
	if code := a.call(idxMemRegister, s.context, descs.addr(), 1, a.out.at(0)); code == 0 || len(l.MemRecords()) != 2 {
		t.Errorf("a region past the buffer: code %d, %d records", code, len(l.MemRecords()))
	}
	a.must("memDeRegister", a.call(idxMemDeRegister, handles.addr(), 2))
	a.free(s)
	rm.free(buf)
	for _, r := range l.MemRecords() {
		if r.Live || r.Addr != 0 {
			t.Errorf("after teardown: %+v", r)
		}
	}
	if n := l.LiveHandles(); n != 0 || l.DoubleFrees() != 0 {
		t.Errorf("%d live handles, %d double frees after teardown", n, l.DoubleFrees())
	}
}
