package qnnrt

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// BindOutput makes output out of graph src write straight into input in of
// graph dst: the output is registered, in src's context, as a tensor at an
// offset inside the input's rpcmem allocation (memRegister, memType
// CUSTOM, QnnMemHtp_Descriptor_t SHARED_BUFFER {size, fd, offset}), so an
// execute of src writes its slice of dst's input in place and no host copy
// is needed. The output is the slab of the input that starts at index at of
// its first axis: a world-model range's video_keys [n,1,Sv,A] written into
// layers at .. at+n-1 of the expert's video_keys [N,1,Sv,A].
//
// The input must live in a shared buffer of its own (Graph.ShareInputs
// returned true) and both graphs must belong to s. The two tensors must
// have the same data type and quantization, the same rank and the same
// dimensions after the first; the slab must fit (at+n <= N) and start on a
// 64-byte boundary of the allocation. On any mismatch it returns an error
// naming it and registers nothing; the output then keeps its own buffer.
//
// From then on every execute of src overwrites that part of dst's input
// (the input's data is the caller's to keep consistent: write it, or run
// src, before an execute of dst). The output can still be read
// (ReadOutput, ReadOutputBytes) but not also feed a Link. A binding lasts
// as long as the session; Close deregisters it before contextFree and
// before the input's rpcmem_free.
func (s *Session) BindOutput(src *Graph, out string, dst *Graph, in string, at int) error {
	o, t, unlock, err := s.lockPair("BindOutput", src, out, dst, in)
	if err != nil {
		return err
	}
	defer unlock()
	off, err := bindOffset(src, o, dst, t, at)
	if err != nil {
		return fmt.Errorf("qnnrt: BindOutput: %w", err)
	}
	l := s.lib
	if l.core[fnMemRegister] == 0 || l.core[fnMemDeRegister] == 0 {
		return fmt.Errorf("qnnrt: BindOutput: provider %s has no memRegister/memDeRegister", l.provider)
	}
	tmp, err := allocC(4096)
	if err != nil {
		return err
	}
	defer tmp.free()
	h, err := src.registerAt(o, t.shared.fd, sharedSize(t.info.Bytes()), uint64(off), tmp)
	if err != nil {
		return fmt.Errorf("qnnrt: BindOutput: %w", err)
	}
	// Executes of src read the slot: keep them out while it changes.
	s.execMu.Lock()
	defer s.execMu.Unlock()
	if err := o.raw.free(); err != nil {
		if ret := ccall(l.core[fnMemDeRegister], uintptr(unsafe.Pointer(&h)), 1); ret != 0 {
			err = errors.Join(err, l.qnnError(fmt.Sprintf("memDeRegister %q", o.info.Name), ret))
		}
		return err
	}
	p := unsafe.Add(t.shared.ptr, off)
	o.shared = &sharedBuffer{rpc: t.shared.rpc, ptr: p, fd: t.shared.fd, handle: h}
	o.buf, o.written = p, false
	v := &o.slot.V2.tensorV1
	v.MemType = memTypeMemHandle
	v.ClientBuf = clientBuffer{}
	*v.memHandle() = h
	src.stats.Shared = append(src.stats.Shared, o.info.Name)
	return nil
}

// bindOffset checks that output o of src can be written as the slab at of
// input t of dst and returns its byte offset in t's allocation; both
// graphs are locked.
func bindOffset(src *Graph, o *ioTensor, dst *Graph, t *ioTensor, at int) (int, error) {
	oname := fmt.Sprintf("output %q of graph %q", o.info.Name, src.info.Name)
	iname := fmt.Sprintf("input %q of graph %q", t.info.Name, dst.info.Name)
	switch {
	case t.link != nil:
		return 0, fmt.Errorf("%s reads another graph's output (Link); it has no buffer of its own to write into", iname)
	case t.shared == nil || !t.shared.owner:
		return 0, fmt.Errorf("%s is not in a shared buffer of its own (ShareInputs); only rpcmem memory can be registered", iname)
	case o.shared != nil:
		return 0, fmt.Errorf("%s already lives in a shared buffer (LinkShared or BindOutput)", oname)
	case len(o.linkedBy) > 0:
		return 0, fmt.Errorf("%s feeds %d linked input(s); it cannot also be bound", oname, len(o.linkedBy))
	case o.info.DataType != t.info.DataType || o.info.Quant != t.info.Quant:
		return 0, fmt.Errorf("%s is %s but %s is %s; they must match", oname, describeTensor(o.info), iname, describeTensor(t.info))
	}
	od, id := o.info.Dims, t.info.Dims
	if len(od) == 0 || len(od) != len(id) || !slices.Equal(od[1:], id[1:]) {
		return 0, fmt.Errorf("%s is %s but %s is %s; they must have the same rank and the same dimensions after the first",
			oname, o.info.Shape(), iname, t.info.Shape())
	}
	if at < 0 || uint64(at)+uint64(od[0]) > uint64(id[0]) {
		return 0, fmt.Errorf("%s (%d along the first axis) does not fit %s (%d) at index %d", oname, od[0], iname, id[0], at)
	}
	slab := t.info.Bytes() / int(id[0])
	off := at * slab
	if off%sharedAlign != 0 {
		return 0, fmt.Errorf("%s would start at byte %d of %s's allocation (index %d x %d bytes), not on a %d-byte boundary",
			oname, off, iname, at, slab, sharedAlign)
	}
	if off+o.info.Bytes() > t.info.Bytes() {
		return 0, fmt.Errorf("%s: %d bytes at byte %d overrun %s's %d", oname, o.info.Bytes(), off, iname, t.info.Bytes())
	}
	return off, nil
}

// sharedSize is the size of the rpcmem allocation register makes for a
// tensor of n bytes.
func sharedSize(n int) int { return (n + sharedAlign - 1) &^ (sharedAlign - 1) }

// registerAt registers t, laid out as t, at offset bytes into the rpcmem
// allocation fd of size bytes with g's context (memRegister, CUSTOM with a
// QnnMemHtp_Descriptor_t SHARED_BUFFER) and returns the handle; tmp holds
// the descriptors and the out-parameter.
func (g *Graph) registerAt(t *ioTensor, fd int32, size int, offset uint64, tmp cmem) (uintptr, error) {
	l := g.s.lib
	desc := (*memDescriptor)(tmp.ptr(0))
	htp := (*htpMemDescriptor)(tmp.ptr(int(unsafe.Sizeof(memDescriptor{}))))
	*htp = htpMemDescriptor{Type: htpMemSharedBuffer, Size: uint64(size), FD: fd, Offset: offset}
	*desc = memDescriptor{
		MemShape: memShape{NumDim: t.slot.V2.Rank, DimSize: t.slot.V2.Dimensions},
		DataType: uint32(t.info.DataType),
		MemType:  qnnMemTypeCustom,
	}
	*(*unsafe.Pointer)(unsafe.Pointer(&desc.Info[0])) = unsafe.Pointer(htp)
	hOut := tmp.ptr(int(unsafe.Sizeof(memDescriptor{}) + unsafe.Sizeof(htpMemDescriptor{})))
	*(*uintptr)(hOut) = 0
	if err := l.call(fmt.Sprintf("memRegister %q (CUSTOM, offset %d)", t.info.Name, offset), l.core[fnMemRegister], g.ctx.handle, uintptr(unsafe.Pointer(desc)), 1, uintptr(hOut)); err != nil {
		return 0, err
	}
	return *(*uintptr)(hOut), nil
}
