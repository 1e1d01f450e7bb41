package qnnfake

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/fastwam/actionexpert/expert"
)

// smallDims is a tiny action-step contract for executes.
func smallDims() expert.Dims {
	return expert.Dims{Layers: 2, Heads: 2, HeadDim: 4, VideoTokens: 3, ContextTokens: 5, TextDim: 6,
		ActionTokens: 4, ActionDim: 7}
}

// mixedGraph uses every data type the double computes, with several outputs.
func mixedGraph() Graph {
	q := func(s float32, o int32) *ScaleOffset { return &ScaleOffset{Scale: s, Offset: o} }
	return Graph{
		Name: "mixed",
		Inputs: []Tensor{
			{ID: 5, Name: "a_f32", DataType: DataTypeFloat32, Dims: []uint32{2, 3}},
			{ID: 9, Name: "b_f16", DataType: DataTypeFloat16, Dims: []uint32{4}},
			{ID: 2, Name: "c_bf16", DataType: DataTypeBF16, Dims: []uint32{3}},
			{ID: 7, Name: "d_u8", DataType: DataTypeUFixed8, Dims: []uint32{5}, Quant: q(0.05, -128)},
			{ID: 1, Name: "e_u16", DataType: DataTypeUFixed16, Dims: []uint32{2, 2}, Quant: q(0.001, -30000)},
			{ID: 30, Name: "f_i32", DataType: DataTypeInt32, Dims: []uint32{3}},
			{ID: 31, Name: "g_bool", DataType: DataTypeBool8, Dims: []uint32{2}},
		},
		Outputs: []Tensor{
			{ID: 100, Name: "y_f32", DataType: DataTypeFloat32, Dims: []uint32{2, 3}},
			{ID: 101, Name: "y_f16", DataType: DataTypeFloat16, Dims: []uint32{6}},
			{ID: 102, Name: "y_u8", DataType: DataTypeUFixed8, Dims: []uint32{3}, Quant: q(0.02, -100)},
			{ID: 103, Name: "y_bf16", DataType: DataTypeBF16, Dims: []uint32{7}},
			{ID: 104, Name: "y_i32", DataType: DataTypeInt32, Dims: []uint32{2}},
			{ID: 105, Name: "y_u16", DataType: DataTypeUFixed16, Dims: []uint32{4}, Quant: q(0.0005, -20000)},
			{ID: 106, Name: "y_bool", DataType: DataTypeBool8, Dims: []uint32{1}},
		},
	}
}

func testBinary() Binary {
	return Binary{SocModel: 57, Arch: 75, BuildID: "fake-build-1", Graphs: []Graph{
		ActionStepGraph(DataTypeFloat32, smallDims()),
		mixedGraph(),
	}}
}

// inputsFor returns deterministic, varied inputs for g (seeded by seed).
func inputsFor(g Graph, seed int) [][]float32 {
	in := make([][]float32, len(g.Inputs))
	for m, t := range g.Inputs {
		v := make([]float32, t.Elements())
		for i := range v {
			v[i] = float32(math.Sin(float64(seed*131+m*17+i)*0.7)) * float32(1+m)
		}
		in[m] = v
	}
	return in
}

func sameBits(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for j := range want {
		if len(got[j]) != len(want[j]) {
			t.Fatalf("%s: output %d has %d elements, want %d", what, j, len(got[j]), len(want[j]))
		}
		for i := range want[j] {
			if math.Float32bits(got[j][i]) != math.Float32bits(want[j][i]) {
				t.Fatalf("%s: output %d[%d] = %v, want %v", what, j, i, got[j][i], want[j][i])
			}
		}
	}
}

// guardedAt reports whether the page starting at addr is mapped with no
// access (a guard page), from /proc/self/maps.
func guardedAt(t *testing.T, addr uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		var perms string
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x %s", &lo, &hi, &perms); err != nil {
			continue
		}
		if addr >= lo && addr < hi {
			return strings.HasPrefix(perms, "---")
		}
	}
	return false
}

func TestProvidersAndGuardedTables(t *testing.T) {
	page := uintptr(os.Getpagesize())
	l := New(t, Variant{})
	l.SetCoreProviders(
		Provider{Name: "HTP_NEW", BackendID: 6, Major: 2, Minor: 32, Patch: 1},
		Provider{Name: "HTP_218", BackendID: 6, Major: 2, Minor: 20},
		Provider{Name: "HTP_OLD", BackendID: 6, Major: 2, Minor: 7},
		Provider{Name: "CPU", BackendID: 3, Major: 2, Minor: 36},
	)
	a := newABI(t, l)
	ps := a.providers("QnnInterface_getProviders")
	want := []struct {
		name          string
		backend       uint32
		minor         uint32
		entries       uintptr
		callableFirst bool
	}{{"HTP_NEW", 6, 32, 71, true}, {"HTP_218", 6, 20, 62, true}, {"HTP_OLD", 6, 7, 16, false}, {"CPU", 3, 36, 71, true}}
	if len(ps) != len(want) {
		t.Fatalf("%d providers, want %d", len(ps), len(want))
	}
	for k, w := range want {
		p := ps[k]
		if got := cstring(peekPtr(p + offInterfaceName)); got != w.name {
			t.Errorf("provider %d: name %q, want %q", k, got, w.name)
		}
		if got := peek32(p + offInterfaceBackendID); got != w.backend {
			t.Errorf("%s: backendId %d, want %d", w.name, got, w.backend)
		}
		if got := peek32(p + offInterfaceAPIVersion + 4); got != w.minor {
			t.Errorf("%s: core API minor %d, want %d", w.name, got, w.minor)
		}
		if got := peek32(p + offInterfaceAPIVersion + 12); got != 5 {
			t.Errorf("%s: backend API major %d, want 5", w.name, got)
		}
		end := p + offInterfaceTable + 8*w.entries
		if end%page != 0 {
			t.Errorf("%s: table of %d entries ends at %#x, not at a page boundary", w.name, w.entries, end)
		}
		if !guardedAt(t, end) {
			t.Errorf("%s: no guard page after its %d-entry table", w.name, w.entries)
		}
		if guardedAt(t, end-8) {
			t.Errorf("%s: last table entry is not readable", w.name)
		}
		for i := uintptr(0); i < w.entries; i++ {
			if peekPtr(p+offInterfaceTable+8*i) == 0 {
				t.Errorf("%s: entry %d is NULL", w.name, i)
			}
		}
	}
	// A bogus (pre-2.18) table's entries all fail.
	old := &abi{t: t, lib: l, core: ps[2], out: a.out}
	if code := old.call(idxPropertyHasCapability, 1501); code != errNotSupported {
		t.Errorf("bogus table entry returned %d, want %d", code, errNotSupported)
	}

	for _, sys := range []struct {
		minor   uint32
		entries uintptr
	}{{7, 16}, {0, 3}} {
		l.SetSystemAPI(1, sys.minor, 0)
		sp := a.providers("QnnSystemInterface_getProviders")
		if len(sp) != 1 {
			t.Fatalf("system API 1.%d: %d providers", sys.minor, len(sp))
		}
		if got := peek32(sp[0] + offSystemAPIVersion + 4); got != sys.minor {
			t.Errorf("system provider minor %d, want %d", got, sys.minor)
		}
		end := sp[0] + offSystemTable + 8*sys.entries
		if end%page != 0 || !guardedAt(t, end) {
			t.Errorf("system API 1.%d: table of %d entries not followed by a guard page", sys.minor, sys.entries)
		}
	}
	// In system API 1.0, index 2 is systemContextFree.
	a.sys = a.providers("QnnSystemInterface_getProviders")[0]
	a.out.put64(0, 0)
	a.must("systemContextCreate", a.sysCall(sysIdxCreate, a.out.at(0)))
	a.must("systemContextFree at index 2 (API 1.0)", a.sysCall(2, uintptr(a.out.u64(0))))

	l.SetCoreProviders()
	if ps := a.providers("QnnInterface_getProviders"); len(ps) != 0 {
		t.Errorf("no providers configured, got %d", len(ps))
	}
	if l.Calls("QnnInterface_getProviders") != 2 {
		t.Errorf("Calls(QnnInterface_getProviders) = %d, want 2", l.Calls("QnnInterface_getProviders"))
	}
}

func TestDefaultProvider(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	if got := cstring(peekPtr(a.core + offInterfaceName)); got != "FAKE_HTP" {
		t.Errorf("default provider %q", got)
	}
	v := peek(a.core+offInterfaceAPIVersion, 12)
	if binary.LittleEndian.Uint32(v) != 2 || binary.LittleEndian.Uint32(v[4:]) != 32 {
		t.Errorf("default core API %v, want 2.32", v)
	}
	if got := peek32(a.sys + offSystemAPIVersion + 4); got != 7 {
		t.Errorf("default system API minor %d, want 7", got)
	}
	if got := a.call(idxPropertyHasCapability, 1501); got != 0 {
		t.Errorf("device capability: %d, want supported (0)", got)
	}
	l.SetDeviceSupported(false)
	if got := a.call(idxPropertyHasCapability, 1501); got != 1000 {
		t.Errorf("device capability when unsupported: %d, want 1000", got)
	}
	if got := a.call(idxDeviceCreate, 0, 0, a.out.at(0)); got == 0 {
		t.Error("deviceCreate succeeded with the device unsupported")
	}
	if got := a.call(idxPropertyHasCapability, 99999); got != 2000 {
		t.Errorf("unknown property key: %d, want 2000", got)
	}
	// errorGetMessage: a static text per code, upper bits ignored.
	a.must("errorGetMessage", a.call(idxErrorGetMessage, 1<<32|errSubsystemRestart, a.out.at(0)))
	if msg := cstring(uintptr(a.out.u64(0))); !strings.Contains(msg, "SYSTEM_COMMUNICATION") {
		t.Errorf("message for 1007: %q", msg)
	}
	if got := a.call(idxErrorGetMessage, 4242, a.out.at(0)); got == 0 {
		t.Error("errorGetMessage accepted an unknown code")
	}
	// Not-implemented entries answer NOT_SUPPORTED and are counted.
	if got := a.call(idxContextCreate, 0, 0, 0, a.out.at(0)); got != errNotSupported {
		t.Errorf("contextCreate: %d, want %d", got, errNotSupported)
	}
	if l.Calls("contextCreate") != 1 || !strings.Contains(l.LastError(), "contextCreate") {
		t.Errorf("contextCreate: calls %d, last error %q", l.Calls("contextCreate"), l.LastError())
	}
}

// metaTensor is a tensor read back from the metadata.
func readMetaTensor(p uintptr) (version uint32, t Tensor, encDef, enc uint32, scale float32, offset int32) {
	version = peek32(p + offTensorVersion)
	t.ID = peek32(p + offTensorID)
	t.Name = cstring(peekPtr(p + offTensorName))
	t.DataType = peek32(p + offTensorDataType)
	rank := peek32(p + offTensorRank)
	dims := peekPtr(p + offTensorDims)
	for i := uintptr(0); i < uintptr(rank); i++ {
		t.Dims = append(t.Dims, peek32(dims+4*i))
	}
	encDef = peek32(p + offTensorQuant)
	enc = peek32(p + offTensorQuant + 4)
	scale = math.Float32frombits(peek32(p + offTensorQuant + 8))
	offset = int32(peek32(p + offTensorQuant + 12))
	return
}

func TestMetadataRoundTrip(t *testing.T) {
	b := testBinary()
	raw := b.Marshal()
	// The header, as the contract states it.
	if binary.BigEndian.Uint32(raw) != 2 || binary.BigEndian.Uint32(raw[4:]) != 3 {
		t.Fatalf("header version %x", raw[:8])
	}
	off, size := binary.LittleEndian.Uint64(raw[0x18:]), binary.LittleEndian.Uint64(raw[0x20:])
	if off+size != uint64(len(raw)) || string(raw[off:off+8]) != "FAKEQNN1" {
		t.Fatalf("payload offset %d size %d in a %d-byte binary", off, size, len(raw))
	}

	l := New(t, Variant{})
	a := newABI(t, l).open()
	buf := newCMem(t, len(raw)).copyIn(0, raw)
	a.out.put64(0, 0)
	a.must("systemContextCreate", a.sysCall(sysIdxCreate, a.out.at(0)))
	sys := uintptr(a.out.u64(0))

	for _, bi := range []uint32{1, 2, 3} {
		for _, gi3 := range []bool{true, false} {
			for _, tv := range []uint32{1, 2} {
				name := fmt.Sprintf("binaryInfo%d/graphInfoV3=%v/tensor%d", bi, gi3, tv)
				l.SetBinaryInfoVersion(bi)
				l.SetGraphInfoV3(gi3)
				l.SetTensorVersion(tv)
				a.must(name, a.sysCall(sysIdxGetMetaData, sys, buf.addr(), uintptr(len(raw)), a.out.at(0)))
				info := uintptr(a.out.u64(0))
				checkInfo(t, name, info, b, bi, gi3, tv)
			}
		}
	}

	// The deprecated call needs a size out-parameter and leaves it 0.
	l.SetBinaryInfoVersion(3)
	l.SetGraphInfoV3(true)
	if got := a.sysCall(sysIdxGetBinaryInfo, sys, buf.addr(), uintptr(len(raw)), a.out.at(0), 0); got != errSysArgument {
		t.Errorf("getBinaryInfo without size out-parameter: %d, want %d", got, errSysArgument)
	}
	a.out.put64(8, 77)
	a.must("getBinaryInfo", a.sysCall(sysIdxGetBinaryInfo, sys, buf.addr(), uintptr(len(raw)), a.out.at(0), a.out.at(8)))
	if a.out.u64(8) != 0 {
		t.Errorf("getBinaryInfo size = %d, want 0", a.out.u64(8))
	}
	checkInfo(t, "getBinaryInfo", uintptr(a.out.u64(0)), b, 3, true, 2)

	// Malformed, truncated, padded, wrong-version and empty binaries.
	bad := map[string][]byte{
		"truncated": raw[:len(raw)-3],
		"padded":    append(append([]byte{}, raw...), 0),
		"version":   append([]byte{0, 0, 0, 2, 0, 0, 0, 9}, raw[8:]...),
		"magic":     append(append([]byte{}, raw[:off]...), append([]byte("FAKEQNN2"), raw[off+8:]...)...),
		"header":    raw[:0x20],
	}
	for name, r := range bad {
		m := newCMem(t, len(r)).copyIn(0, r)
		if got := a.sysCall(sysIdxGetMetaData, sys, m.addr(), uintptr(len(r)), a.out.at(0)); got != errSysMalformed {
			t.Errorf("%s binary: %d, want %d", name, got, errSysMalformed)
		}
		if !strings.Contains(l.LastError(), "malformed") {
			t.Errorf("%s binary: last error %q", name, l.LastError())
		}
	}
	if got := a.sysCall(sysIdxGetMetaData, sys, buf.addr(), 0, a.out.at(0)); got != errSysArgument {
		t.Errorf("empty binary: %d, want %d", got, errSysArgument)
	}
	a.must("systemContextFree", a.sysCall(sysIdxFree, sys))
	if got := a.sysCall(sysIdxFree, sys); got != errSysHandle || l.DoubleFrees() != 1 {
		t.Errorf("second systemContextFree: %d (double frees %d), want %d", got, l.DoubleFrees(), errSysHandle)
	}
	if got := a.sysCall(sysIdxGetMetaData, sys, buf.addr(), uintptr(len(raw)), a.out.at(0)); got != errSysHandle {
		t.Errorf("getMetaData on a freed handle: %d", got)
	}
	if n := l.LiveHandles(); n != 0 {
		t.Errorf("%d live handles after systemContextFree", n)
	}
}

// checkInfo walks a QnnSystemContext_BinaryInfo_t as a runtime must and
// compares it with b.
func checkInfo(t *testing.T, name string, info uintptr, b Binary, bi uint32, gi3 bool, tv uint32) {
	t.Helper()
	if v := peek32(info); v != bi {
		t.Fatalf("%s: version %d", name, v)
	}
	var numOff, graphsOff uintptr = 120, 128 // V1/V2
	if bi == 3 {
		numOff, graphsOff = 96, 104
		if soc := peek32(info + 8 + 128); soc != b.SocModel {
			t.Errorf("%s: socModel %d, want %d", name, soc, b.SocModel)
		}
	}
	if id := cstring(peekPtr(info + 8 + 8)); id != b.BuildID {
		t.Errorf("%s: buildId %q", name, id)
	}
	stride := uintptr(64)
	wantGV := uint32(1)
	if gi3 {
		stride, wantGV = 88, 3
	}
	n := peek32(info + numOff)
	graphs := peekPtr(info + graphsOff)
	if int(n) != len(b.Graphs) {
		t.Fatalf("%s: %d graphs, want %d", name, n, len(b.Graphs))
	}
	for g, want := range b.Graphs {
		e := graphs + uintptr(g)*stride
		if v := peek32(e); v != wantGV {
			t.Errorf("%s: graph %d info version %d, want %d", name, g, v, wantGV)
		}
		if got := cstring(peekPtr(e + 8)); got != want.Name {
			t.Errorf("%s: graph %d name %q, want %q", name, g, got, want.Name)
		}
		for _, side := range []struct {
			num, arr uintptr
			ts       []Tensor
		}{{8 + 8, 8 + 16, want.Inputs}, {8 + 24, 8 + 32, want.Outputs}} {
			if got := peek32(e + side.num); int(got) != len(side.ts) {
				t.Fatalf("%s: graph %q has %d tensors, want %d", name, want.Name, got, len(side.ts))
			}
			arr := peekPtr(e + side.arr)
			for k, wt := range side.ts {
				ver, got, encDef, enc, scale, offset := readMetaTensor(arr + uintptr(k*sizeTensor))
				if ver != tv || got.ID != wt.ID || got.Name != wt.Name || got.DataType != wt.DataType ||
					fmt.Sprint(got.Dims) != fmt.Sprint(wt.Dims) {
					t.Errorf("%s: tensor %q: got v%d %+v, want v%d %+v", name, wt.Name, ver, got, tv, wt)
				}
				if wt.Quant == nil {
					if encDef != 0x7fffffff || enc != 0 || scale != 0 || offset != 0 {
						t.Errorf("%s: float tensor %q quant %#x %d %v %d", name, wt.Name, encDef, enc, scale, offset)
					}
				} else if encDef != 1 || enc != 0 || scale != wt.Quant.Scale || offset != wt.Quant.Offset {
					t.Errorf("%s: quantized tensor %q quant %#x %d %v %d", name, wt.Name, encDef, enc, scale, offset)
				}
			}
		}
	}
}

func TestExecuteMatchesExpected(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	b := testBinary()
	s := a.load(b)
	for gi, g := range b.Graphs {
		gh := a.graph(s, g.Name)
		if again := a.graph(s, g.Name); again != gh {
			t.Errorf("graphRetrieve %q twice gave different handles", g.Name)
		}
		for seed := range 2 {
			in := inputsFor(g, seed+10*gi)
			got, code := a.execute(gh, g, in, 0)
			if code != 0 {
				t.Fatalf("execute %q: %d: %s", g.Name, code, l.LastError())
			}
			want := Expected(g, in)
			sameBits(t, g.Name, got, want)
		}
	}
	// Every input matters: changing any one changes the output.
	g := b.Graphs[1]
	gh := a.graph(s, g.Name)
	base := inputsFor(g, 3)
	ref, _ := a.execute(gh, g, base, 0)
	for m := range g.Inputs {
		in := inputsFor(g, 3)
		if last := len(in[m]) - 1; g.Inputs[m].DataType == DataTypeBool8 {
			in[m][last] = float32(1 - encode(g.Inputs[m], float64(in[m][last])))
		} else {
			in[m][last] += 3
		}
		got, code := a.execute(gh, g, in, 0)
		if code != 0 {
			t.Fatal(code)
		}
		if got[0][0] == ref[0][0] {
			t.Errorf("output does not depend on input %q", g.Inputs[m].Name)
		}
	}
	// Inputs are matched by id, not position: a reversed array works.
	rev := Graph{Name: g.Name, Outputs: g.Outputs}
	revIn := make([][]float32, len(g.Inputs))
	for m := range g.Inputs {
		rev.Inputs = append(rev.Inputs, g.Inputs[len(g.Inputs)-1-m])
		revIn[m] = base[len(g.Inputs)-1-m]
	}
	got, code := a.execute(gh, rev, revIn, 0)
	if code != 0 {
		t.Fatalf("reversed inputs: %d: %s", code, l.LastError())
	}
	sameBits(t, "reversed inputs", got, ref)

	var rawIn uint64
	for _, ten := range g.Inputs {
		rawIn += ten.Elements() * uint64(elemSize(ten.DataType))
	}
	before := l.RawBytesRead()
	l.SetEmptyExecute(true)
	if _, code := a.execute(gh, g, base, 0); code != 0 {
		t.Fatalf("empty execute: %d", code)
	}
	if d := l.RawBytesRead() - before; d != rawIn {
		t.Errorf("RawBytesRead grew by %d in one execute, want %d", d, rawIn)
	}
	l.SetEmptyExecute(false)

	a.free(s)
	if got := a.call(idxGraphExecute, gh, 0, 0, 0, 0, 0, 0); got != 6001 {
		t.Errorf("execute after contextFree: %d, want 6001", got)
	}
	if n := l.LiveHandles(); n != 0 {
		t.Errorf("%d live handles after teardown", n)
	}
	if n := l.DoubleFrees(); n != 0 {
		t.Errorf("%d double frees", n)
	}
}

func TestExecuteValidation(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	b := testBinary()
	s := a.load(b)
	g := b.Graphs[0]
	gh := a.graph(s, g.Name)
	in := inputsFor(g, 1)

	run := func(name string, want uint64, edit func(in, out cmem)) {
		t.Helper()
		ia, ibufs := tensorArray(t, g.Inputs)
		oa, _ := tensorArray(t, g.Outputs)
		for m, ten := range g.Inputs {
			writeElems(ten, ibufs[m], in[m])
		}
		edit(ia, oa)
		got := a.call(idxGraphExecute, gh, ia.addr(), uintptr(len(g.Inputs)), oa.addr(), uintptr(len(g.Outputs)), 0, 0)
		if got != want {
			t.Errorf("%s: %d, want %d (%s)", name, got, want, l.LastError())
		} else if want != 0 && l.LastError() == "" {
			t.Errorf("%s: no last error", name)
		}
	}
	run("valid", 0, func(in, out cmem) {})
	run("wrong id", errGraphTensor, func(in, out cmem) { in.put32(offTensorID, 999) })
	run("duplicate id", errGraphTensor, func(in, out cmem) { in.put32(sizeTensor+offTensorID, g.Inputs[0].ID) })
	run("wrong data type", errGraphTensor, func(in, out cmem) { in.put32(offTensorDataType, DataTypeFloat16) })
	run("wrong rank", errGraphTensor, func(in, out cmem) { in.put32(offTensorRank, 2) })
	run("wrong dims", errGraphTensor, func(in, out cmem) {
		dims := cmem(peek(uintptr(in.u64(offTensorDims)), 12))
		dims.put32(4, 5)
	})
	run("wrong data size", errGraphTensor, func(in, out cmem) { in.put32(offTensorDataSize, in.u32(offTensorDataSize)-4) })
	run("wrong output size", errGraphTensor, func(in, out cmem) { out.put32(offTensorDataSize, 4) })
	run("NULL buffer", errGraphTensor, func(in, out cmem) { in.put64(offTensorData, 0) })
	run("bad memType", errGraphTensor, func(in, out cmem) { in.put32(offTensorMemType, 2) })
	run("unregistered memhandle", errGraphTensor, func(in, out cmem) { in.put32(offTensorMemType, 1) })
	run("tensor version", errGraphTensor, func(in, out cmem) { in.put32(offTensorVersion, 3) })
	if got := a.call(idxGraphExecute, gh, 0, 0, 0, 0, 0, 0); got != errGraphArgument {
		t.Errorf("no tensors: %d, want %d", got, errGraphArgument)
	}
	if got := a.call(idxGraphExecute, 12345, 0, 0, 0, 0, 0, 0); got != 6001 {
		t.Errorf("bogus graph handle: %d, want 6001", got)
	}
	name := newCMem(t, 8)
	name.putString(0, "nope")
	if got := a.call(idxGraphRetrieve, s.context, name.addr(), a.out.at(0)); got != errGraphNotExist {
		t.Errorf("unknown graph: %d, want %d", got, errGraphNotExist)
	}
	// An output of a type the double does not compute fails the execute.
	odd := Binary{Graphs: []Graph{{Name: "odd", Inputs: g.Inputs,
		Outputs: []Tensor{{ID: 1, Name: "u8_no_quant", DataType: DataTypeUFixed8, Dims: []uint32{2}}}}}}
	s2 := a.load(odd)
	if _, code := a.execute(a.graph(s2, "odd"), odd.Graphs[0], in, 0); code != errGraphTensor {
		t.Errorf("fixed-point output without quantization: %d, want %d", code, errGraphTensor)
	}
	if Expected(odd.Graphs[0], in) != nil {
		t.Error("Expected computed a graph the library refuses")
	}
	a.free(s2)
	a.free(s)

	// Core API loading errors.
	s = a.load(b)
	raw := b.Marshal()
	for name, c := range map[string]struct {
		r    []byte
		want uint64
	}{
		"truncated": {raw[:len(raw)-1], errContextFromBinary},
		"padded":    {append(append([]byte{}, raw...), 1, 2), errContextFromBinary},
		"version":   {append([]byte{0, 0, 0, 2, 0, 0, 0, 2}, raw[8:]...), errContextBinaryVer},
	} {
		m := newCMem(t, len(c.r)).copyIn(0, c.r)
		if got := a.call(idxContextCreateFromBinary, s.backend, 0, 0, m.addr(), uintptr(len(c.r)), a.out.at(0), 0); got != c.want {
			t.Errorf("contextCreateFromBinary %s: %d, want %d", name, got, c.want)
		}
	}
	a.free(s)
	if n := l.LiveHandles(); n != 0 {
		t.Errorf("%d live handles after teardown", n)
	}
}

func TestExecuteActionStepF16(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	g := ActionStepGraph(DataTypeFloat16, smallDims())
	s := a.load(Binary{Graphs: []Graph{g}})
	in := inputsFor(g, 5)
	got, code := a.execute(a.graph(s, ActionStepName), g, in, 0)
	if code != 0 {
		t.Fatalf("execute: %d: %s", code, l.LastError())
	}
	sameBits(t, "f16 action_step", got, Expected(g, in))
	a.free(s)
}

// rpcmem is the rpcmem API of the library, bound with purego.
type rpcmem struct {
	alloc func(heap int32, flags uint32, size int32) uintptr
	free  func(p uintptr)
	toFD  func(p uintptr) int32
}

func bindRPCMem(t *testing.T, a *abi) *rpcmem {
	r := &rpcmem{}
	purego.RegisterFunc(&r.alloc, a.sym("rpcmem_alloc"))
	purego.RegisterFunc(&r.free, a.sym("rpcmem_free"))
	purego.RegisterFunc(&r.toFD, a.sym("rpcmem_to_fd"))
	return r
}

// descriptor writes a Qnn_MemDescriptor_t for tensor ten at d.
func descriptor(t *testing.T, d cmem, ten Tensor, memType uint32, fd int32, htp uintptr) {
	dims := newCMem(t, 4*len(ten.Dims))
	for i, v := range ten.Dims {
		dims.put32(4*i, v)
	}
	d.put32(0, uint32(len(ten.Dims)))
	d.putPtr(8, dims.addr())
	d.put32(24, ten.DataType)
	d.put32(28, memType)
	if memType == 1 {
		d.put32(32, uint32(fd))
	} else {
		d.putPtr(32, htp)
	}
}

func TestSharedMemory(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	rm := bindRPCMem(t, a)
	g := mixedGraph()
	s := a.load(Binary{Graphs: []Graph{g}})
	gh := a.graph(s, g.Name)
	in := inputsFor(g, 7)
	want := Expected(g, in)

	// Inputs 0 and 1 each in their own ION buffer; inputs 2 and 3 in one
	// buffer at offsets 0 and 64 (CUSTOM); the rest RAW.
	sizes := make([]int, len(g.Inputs))
	for m, ten := range g.Inputs {
		sizes[m] = int(ten.Elements()) * elemSize(ten.DataType)
	}
	ion0, ion1 := rm.alloc(25, 1, int32(sizes[0])), rm.alloc(25, 1, int32(sizes[1]))
	shared := rm.alloc(25, 1, 4096)
	if ion0 == 0 || ion1 == 0 || shared == 0 || ion0%64 != 0 {
		t.Fatalf("rpcmem_alloc: %#x %#x %#x", ion0, ion1, shared)
	}
	writeElems(g.Inputs[0], peek(ion0, sizes[0]), in[0])
	writeElems(g.Inputs[1], peek(ion1, sizes[1]), in[1])
	writeElems(g.Inputs[2], peek(shared, sizes[2]), in[2])
	writeElems(g.Inputs[3], peek(shared+64, sizes[3]), in[3])

	descs := newCMem(t, 4*sizeMemDescriptor)
	htp := newCMem(t, 2*sizeHtpMemDesc)
	for k, off := range []uint64{0, 64} {
		h := htp[k*sizeHtpMemDesc:]
		cmem(h).put32(0, 1) // SHARED_BUFFER
		cmem(h).put64(8, 4096)
		cmem(h).put32(16, uint32(rm.toFD(shared)))
		cmem(h).put64(24, off)
	}
	descriptor(t, descs[0:], g.Inputs[0], 1, rm.toFD(ion0), 0)
	descriptor(t, descs[sizeMemDescriptor:], g.Inputs[1], 1, rm.toFD(ion1), 0)
	descriptor(t, descs[2*sizeMemDescriptor:], g.Inputs[2], 2, 0, htp.at(0))
	descriptor(t, descs[3*sizeMemDescriptor:], g.Inputs[3], 2, 0, htp.at(sizeHtpMemDesc))
	handles := newCMem(t, 4*8)
	a.must("memRegister", a.call(idxMemRegister, s.context, descs.addr(), 4, handles.addr()))
	if got := a.call(idxMemRegister, s.context, descs.addr(), 1, a.out.at(0)); got != errMemRegistered {
		t.Errorf("registering a buffer twice: %d, want %d", got, errMemRegistered)
	}

	ia, ibufs := tensorArray(t, g.Inputs)
	oa, obufs := tensorArray(t, g.Outputs)
	for m, ten := range g.Inputs {
		if m < 4 {
			ia.put32(m*sizeTensor+offTensorMemType, 1)
			ia.put64(m*sizeTensor+offTensorData, handles.u64(8*m))
			continue
		}
		writeElems(ten, ibufs[m], in[m])
	}
	a.must("execute with memhandles", a.call(idxGraphExecute, gh, ia.addr(), uintptr(len(g.Inputs)), oa.addr(), uintptr(len(g.Outputs)), 0, 0))
	got := make([][]float32, len(g.Outputs))
	for j, ten := range g.Outputs {
		got[j] = readElems(ten, obufs[j])
	}
	sameBits(t, "memhandle inputs", got, want)
	if got, want := l.MemHandleBytesRead(), uint64(sizes[0]+sizes[1]+sizes[2]+sizes[3]); got != want {
		t.Errorf("MemHandleBytesRead %d, want %d", got, want)
	}
	var raw uint64
	for m := 4; m < len(sizes); m++ {
		raw += uint64(sizes[m])
	}
	if got := l.RawBytesRead(); got != raw {
		t.Errorf("RawBytesRead %d, want %d", got, raw)
	}

	// A memory handle of another context is refused.
	s2 := a.load(Binary{Graphs: []Graph{g}})
	a.out.put64(0, 0)
	ia2, _ := tensorArray(t, g.Inputs)
	oa2, _ := tensorArray(t, g.Outputs)
	ia2.put32(offTensorMemType, 1)
	ia2.put64(offTensorData, handles.u64(0))
	if got := a.call(idxGraphExecute, a.graph(s2, g.Name), ia2.addr(), uintptr(len(g.Inputs)), oa2.addr(), uintptr(len(g.Outputs)), 0, 0); got != errGraphTensor {
		t.Errorf("foreign memory handle: %d, want %d", got, errGraphTensor)
	}
	a.free(s2)

	// contextFree with live registrations is refused.
	if got := a.call(idxContextFree, s.context, 0); got != errNotPermitted {
		t.Errorf("contextFree with registered memory: %d, want %d", got, errNotPermitted)
	}
	a.must("memDeRegister", a.call(idxMemDeRegister, handles.addr(), 4))
	if got := a.call(idxMemDeRegister, handles.addr(), 1); got != errMemHandle || l.DoubleFrees() != 1 {
		t.Errorf("second memDeRegister: %d (double frees %d), want %d", got, l.DoubleFrees(), errMemHandle)
	}
	a.free(s)
	for _, p := range []uintptr{ion0, ion1, shared} {
		rm.free(p)
	}
	rm.free(shared)
	if l.DoubleFrees() != 2 {
		t.Errorf("rpcmem_free twice: double frees %d, want 2", l.DoubleFrees())
	}
	if n := l.LiveHandles(); n != 0 {
		t.Errorf("%d live handles after teardown", n)
	}

	// rpcmem unavailable, and injected failures.
	l.SetRPCMemAvailable(false)
	if p := rm.alloc(25, 1, 64); p != 0 {
		t.Error("rpcmem_alloc succeeded while unavailable")
	}
	l.SetRPCMemAvailable(true)
	l.FailCall("rpcmem_alloc", 1, 1)
	if p := rm.alloc(25, 1, 64); p != 0 {
		t.Error("rpcmem_alloc succeeded despite an injected failure")
	}
	p := rm.alloc(25, 1, 64)
	if p == 0 || rm.toFD(p) < 0 || rm.toFD(p+1) != -1 {
		t.Errorf("rpcmem after the injected failure: %#x fd %d", p, rm.toFD(p))
	}
	rm.free(p)
}

func TestProfiling(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	g := mixedGraph()
	s := a.load(Binary{Graphs: []Graph{g}})
	gh := a.graph(s, g.Name)
	prof := a.handle("profileCreate", idxProfileCreate, s.backend, 1)
	for _, us := range []uint64{1500, 250} {
		if us != 1500 {
			l.SetProfileMicros(us)
		}
		if _, code := a.execute(gh, g, inputsFor(g, 1), prof); code != 0 {
			t.Fatalf("execute: %d", code)
		}
		a.must("profileGetEvents", a.call(idxProfileGetEvents, prof, a.out.at(0), a.out.at(8)))
		if n := a.out.u32(8); n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
		events := uintptr(a.out.u64(0))
		// The event array belongs to the profile: creating many handles
		// (growing the library's tables) must not move it.
		for range 100 {
			a.must("logFree", a.call(idxLogFree, a.handle("logCreate", idxLogCreate, 0, 1)))
		}
		ev := peekPtr(events)
		data := newCMem(t, sizeEventData)
		a.must("profileGetEventData", a.call(idxProfileGetEventData, ev, data.addr()))
		if data.u32(0) != 400 || data.u32(4) != 1 || data.u64(8) != us {
			t.Errorf("event type %d unit %d value %d, want 400 1 %d", data.u32(0), data.u32(4), data.u64(8), us)
		}
	}
	a.must("profileFree", a.call(idxProfileFree, prof))
	if got := a.call(idxProfileFree, prof); got != 12000 {
		t.Errorf("second profileFree: %d", got)
	}
	a.free(s)
}

func TestPerfInfrastructure(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	a.must("deviceGetInfrastructure", a.call(idxDeviceGetInfrastructure, a.out.at(0)))
	infra := uintptr(a.out.u64(0))
	if typ := peek32(infra); typ != 0 {
		t.Fatalf("infraType %d, want PERF (0)", typ)
	}
	fns := make([]uintptr, 4)
	for i := range fns {
		fns[i] = peekPtr(infra + 8 + uintptr(8*i))
	}
	call := func(fn uintptr, args ...uintptr) uint64 {
		r, _, _ := purego.SyscallN(fn, args...)
		return uint64(r)
	}
	if got := call(fns[0], 0, 0, a.out.at(0)); got != 0 {
		t.Fatalf("createPowerConfigId: %d", got)
	}
	id := a.out.u32(0)
	// burst: DCVS v3 + RPC control latency + polling time, NULL-terminated.
	cfg := newCMem(t, 3*sizePowerConfig+4*8)
	d := cfg[0:]
	cmem(d).put32(0, 1)
	for i, v := range []uint32{id, 1, 0, 0x10, 1, 40, 0, 0, 1, 0xA0, 0xA0, 0xA0, 1, 0xA0, 0xA0, 0xA0} {
		cmem(d).put32(4+4*i, v)
	}
	cmem(cfg[sizePowerConfig:]).put32(0, 2)
	cmem(cfg[sizePowerConfig:]).put32(4, 100)
	cmem(cfg[2*sizePowerConfig:]).put32(0, 3)
	cmem(cfg[2*sizePowerConfig:]).put32(4, 9999)
	list := 3*sizePowerConfig + 4 // 8-aligned pointer array after the configs
	list += (8 - list%8) % 8
	for k := range 3 {
		cfg.putPtr(list+8*k, cfg.at(k*sizePowerConfig))
	}
	if got := call(fns[2], uintptr(id), cfg.at(list)); got != 0 {
		t.Fatalf("setPowerConfig: %d: %s", got, l.LastError())
	}
	votes := l.PowerVotes()
	want := []PowerVote{
		{Option: 1, PowerMode: 0x10, DcvsEnable: 0, SleepLatency: 40, BusMin: 0xA0, BusTarget: 0xA0, BusMax: 0xA0,
			CoreMin: 0xA0, CoreTarget: 0xA0, CoreMax: 0xA0, Call: 1},
		{Option: 2, RPCValue: 100, Call: 1},
		{Option: 3, RPCValue: 9999, Call: 1},
	}
	if fmt.Sprint(votes) != fmt.Sprint(want) {
		t.Errorf("votes %+v, want %+v", votes, want)
	}
	// A second call's configs carry its call number (the failed call with
	// the wrong contextId below counts too).
	cfg.putPtr(list+8, 0) // the DCVS config alone
	if got := call(fns[2], uintptr(id), cfg.at(list)); got != 0 {
		t.Fatalf("setPowerConfig, DCVS only: %d: %s", got, l.LastError())
	}
	if v := l.PowerVotes(); len(v) != 4 || v[3].Call != 2 || v[3].Option != 1 {
		t.Errorf("second call recorded as %+v", v[3:])
	}
	cfg.putPtr(list+8, cfg.at(sizePowerConfig))
	cmem(d).put32(4, id+1) // contextId must be the power config id
	if got := call(fns[2], uintptr(id), cfg.at(list)); got != errPerfInput || len(l.PowerVotes()) != 4 {
		t.Errorf("DCVS vote with a wrong contextId: %d, %d votes", got, len(l.PowerVotes()))
	}
	if got := call(fns[1], uintptr(id)); got != 0 {
		t.Errorf("destroyPowerConfigId: %d", got)
	}
	if got := call(fns[1], uintptr(id)); got != errPerfInput || l.DoubleFrees() != 1 {
		t.Errorf("second destroyPowerConfigId: %d, double frees %d", got, l.DoubleFrees())
	}
	if got := call(fns[2], uintptr(id), cfg.at(list)); got != errPerfInput {
		t.Errorf("setPowerConfig on a destroyed id: %d", got)
	}
	l.SetDeviceSupported(false)
	if got := a.call(idxDeviceGetInfrastructure, a.out.at(0)); got == 0 {
		t.Error("deviceGetInfrastructure succeeded with the device unsupported")
	}
}

func TestFailureInjection(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	g := mixedGraph()
	s := a.load(Binary{Graphs: []Graph{g}})
	gh := a.graph(s, g.Name)
	in := inputsFor(g, 2)

	l.FailCall("graphExecute", errSubsystemRestart, 2)
	var codes []uint64
	for range 4 {
		_, code := a.execute(gh, g, in, 0)
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[0 1007 0 0]" {
		t.Errorf("execute codes %v, want [0 1007 0 0]", codes)
	}
	if !strings.Contains(l.LastError(), "injected") {
		t.Errorf("last error %q", l.LastError())
	}
	if n := l.Calls("graphExecute"); n != 4 {
		t.Errorf("Calls(graphExecute) = %d, want 4", n)
	}
	// Every call, with the code returned as given (upper bits included),
	// until removed.
	l.FailCall("contextCreateFromBinary", 1<<40|errContextFromBinary, 0)
	for range 2 {
		if got := a.call(idxContextCreateFromBinary, s.backend, 0, 0, s.bin.addr(), uintptr(len(s.bin)), a.out.at(0), 0); got != 1<<40|errContextFromBinary {
			t.Errorf("injected contextCreateFromBinary: %#x", got)
		}
	}
	l.FailCall("contextCreateFromBinary", 0, -1)
	if l.c.failCall("noSuchFunction", 1, 1) != -1 || l.c.calls("noSuchFunction") != -1 {
		t.Error("unknown function names are accepted")
	}
	if names := l.functionNames(); len(names) != 71+16+9 || names[21] != "graphExecute" || names[71+2] != "systemContextGetMetaData" {
		t.Errorf("function registry: %d names", len(names))
	}
	a.free(s)
}

func TestDoubleFreeDetection(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	s := a.load(testBinary())
	if n := l.LiveHandles(); n != 4 {
		t.Errorf("%d live handles, want 4 (log, backend, device, context)", n)
	}
	a.free(s)
	checks := []struct {
		name string
		idx  int
		args []uintptr
		want uint64
	}{
		{"backendFree", idxBackendFree, []uintptr{s.backend}, errBackendHandle},
		{"logFree", idxLogFree, []uintptr{s.log}, errLogHandle},
		{"deviceFree", idxDeviceFree, []uintptr{s.device}, 14000},
		{"contextFree", idxContextFree, []uintptr{s.context, 0}, 5002},
		{"backendFree of a log handle", idxBackendFree, []uintptr{s.log}, errBackendHandle},
		{"logFree of garbage", idxLogFree, []uintptr{0xdeadbeef}, errLogHandle},
	}
	for k, c := range checks {
		if got := a.call(c.idx, c.args...); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if n := l.DoubleFrees(); n != k+1 {
			t.Errorf("after %s: %d double frees, want %d", c.name, n, k+1)
		}
	}
	if n := l.LiveHandles(); n != 0 {
		t.Errorf("%d live handles", n)
	}
}

func TestVariants(t *testing.T) {
	// Build into a fresh directory once; the other variants come from the
	// build cache New uses (built on a cache miss).
	built, err := Build(t.TempDir(), Variant{NoRPCMem: true})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(built); err != nil || fi.Size() == 0 || !strings.HasSuffix(built, "libfakeqnn-norpcmem.so") {
		t.Fatalf("Build returned %q: %v", built, err)
	}
	for _, c := range []struct {
		v       Variant
		missing []string
		present []string
	}{
		{Variant{}, nil, []string{"QnnInterface_getProviders", "QnnSystemInterface_getProviders", "rpcmem_alloc"}},
		{Variant{NoCoreProviders: true}, []string{"QnnInterface_getProviders"}, []string{"QnnSystemInterface_getProviders", "rpcmem_to_fd"}},
		{Variant{NoSystemProviders: true}, []string{"QnnSystemInterface_getProviders"}, []string{"QnnInterface_getProviders"}},
		{Variant{NoRPCMem: true}, []string{"rpcmem_alloc", "rpcmem_free", "rpcmem_to_fd"}, []string{"QnnInterface_getProviders"}},
	} {
		path := built
		var err error
		if !c.v.NoRPCMem {
			path, err = cachedBuild(c.v)
		}
		if err != nil {
			t.Fatal(err)
		}
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatalf("%+v: %v", c.v, err)
		}
		for _, s := range c.missing {
			if _, err := purego.Dlsym(h, s); err == nil {
				t.Errorf("%+v: %s is exported", c.v, s)
			}
		}
		for _, s := range c.present {
			if _, err := purego.Dlsym(h, s); err != nil {
				t.Errorf("%+v: %s is missing: %v", c.v, s, err)
			}
		}
		purego.Dlclose(h)
	}
	// Instances from New are independent.
	l1, l2 := New(t, Variant{}), New(t, Variant{})
	l1.FailCall("logCreate", 1, 0)
	a1, a2 := newABI(t, l1).open(), newABI(t, l2).open()
	if a1.call(idxLogCreate, 0, 2, a1.out.at(0)) == 0 || a2.call(idxLogCreate, 0, 2, a2.out.at(0)) != 0 {
		t.Error("instances share state")
	}
	if l2.LiveHandles() != 1 || l1.LiveHandles() != 0 {
		t.Errorf("live handles %d and %d, want 0 and 1", l1.LiveHandles(), l2.LiveHandles())
	}
}

// BenchmarkEmptyExecute measures the double's own cost of one validated
// execute in empty-execute mode on the full-size action_step graph (f16),
// all inputs RAW: the floor under any runtime's per-step host overhead
// measured against it.
func BenchmarkEmptyExecute(b *testing.B) {
	l := New(b, Variant{})
	l.SetEmptyExecute(true)
	a := newABI(b, l).open()
	g := ActionStepGraph(DataTypeFloat16, expert.FullDims())
	s := a.load(Binary{Graphs: []Graph{g}})
	gh := a.graph(s, g.Name)
	in, _ := tensorArray(b, g.Inputs)
	out, _ := tensorArray(b, g.Outputs)
	fn := peekPtr(a.core + offInterfaceTable + 8*idxGraphExecute)
	b.ResetTimer()
	for range b.N {
		if r, _, _ := purego.SyscallN(fn, gh, in.addr(), uintptr(len(g.Inputs)), out.addr(), uintptr(len(g.Outputs)), 0, 0); r != 0 {
			b.Fatalf("execute: %d: %s", r, l.LastError())
		}
	}
}
