package qnnfake

import (
	"testing"
)

// TestGroupRegistration drives contextCreateFromBinary with hand-built
// config lists (QnnContext_Config_t {option CUSTOM 0, customConfig} ->
// QnnHtpContext_CustomConfig_t {option 2, groupRegistration
// {firstGroupHandle, maxSpillFillBuffer}} at the offsets of the layout
// file) and checks what the double records and what it refuses.
func TestGroupRegistration(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	g := func(name string, spill uint64) Binary {
		return Binary{SocModel: 69, Arch: 79, BuildID: "b", Graphs: []Graph{{Name: name, SpillFill: spill,
			Inputs:  []Tensor{{ID: 1, Name: "x", DataType: DataTypeFloat32, Dims: []uint32{2}}},
			Outputs: []Tensor{{ID: 2, Name: "y", DataType: DataTypeFloat32, Dims: []uint32{2}}}}}}
	}
	s := a.load(g("first", 0)) // log, backend, device, and an ungrouped context
	// create builds the config list in C memory and creates a context.
	create := func(b Binary, custom bool, option uint32, first uintptr, max uint64) (uintptr, uint64) {
		m := newCMem(t, 128)
		list := 0
		if custom {
			m.put32(32, 0)         // QnnContext_Config_t.option = CUSTOM
			m.putPtr(40, m.at(64)) // .customConfig
			m.put32(64, option)    // QnnHtpContext_CustomConfig_t.option
			m.putPtr(72, first)    // .groupRegistration.firstGroupHandle
			m.put64(80, max)       // .groupRegistration.maxSpillFillBuffer
			m.putPtr(0, m.at(32))  // config list: one entry
			m.putPtr(8, 0)         // NULL terminator
		} else {
			m.putPtr(0, 0)
		}
		raw := b.Marshal()
		bin := newCMem(t, len(raw)).copyIn(0, raw)
		a.out.put64(0, 0)
		code := a.call(idxContextCreateFromBinary, s.backend, s.device, m.at(list), bin.addr(), uintptr(len(raw)), a.out.at(0), 0)
		return uintptr(a.out.u64(0)), code & 0xFFFF
	}
	c1, code := create(g("a", 4096), true, 2, 0, 8192)
	if code != 0 {
		t.Fatalf("new group: %d %s", code, l.LastError())
	}
	c2, code := create(g("b", 8192), true, 2, c1, 8192)
	if code != 0 {
		t.Fatalf("join group: %d %s", code, l.LastError())
	}
	for _, c := range []struct {
		name   string
		option uint32
		first  uintptr
		max    uint64
		spill  uint64
	}{
		{"maxSpillFillBuffer 0", 2, 0, 0, 0},
		{"max below the binary's", 2, 0, 100, 4096},
		{"first handle unknown", 2, 0x5A5A0000deadbeef, 8192, 0},
		{"first handle not a group's first", 2, c2, 8192, 0},
		{"first handle of an ungrouped context", 2, s.context, 8192, 0},
		{"binary above the group's buffer", 2, c1, 1 << 20, 9000},
		{"unknown HTP option", 9, 0, 8192, 0},
	} {
		if _, code := create(g("z", c.spill), true, c.option, c.first, c.max); code != 5010 {
			t.Errorf("%s: code %d, want 5010 (QNN_CONTEXT_ERROR_INVALID_CONFIG); %s", c.name, code, l.LastError())
		}
	}
	// A later context's different maximum is disregarded: the group's
	// buffer stays the first context's.
	c3, code := create(g("c", 100), true, 2, c1, 1<<30)
	if code != 0 {
		t.Fatalf("join with another maximum: %d %s", code, l.LastError())
	}
	want := []ContextRecord{
		{Seq: 1},
		{Seq: 2, Group: true, FirstSeq: 0, MaxSpillFill: 8192, BinarySpillFill: 4096, GroupSpillFill: 8192},
		{Seq: 3, Group: true, FirstSeq: 2, MaxSpillFill: 8192, BinarySpillFill: 8192, GroupSpillFill: 8192},
		{Seq: 4, Group: true, FirstSeq: 2, MaxSpillFill: 1 << 30, BinarySpillFill: 100, GroupSpillFill: 8192},
	}
	got := l.ContextRecords()
	if len(got) != len(want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	a.must("contextFree", a.call(idxContextFree, c3, 0))
	a.must("contextFree", a.call(idxContextFree, c2, 0))
	a.must("contextFree", a.call(idxContextFree, c1, 0))
	a.free(s)
	if n := l.LiveHandles(); n != 0 {
		t.Errorf("%d live handles", n)
	}
}
