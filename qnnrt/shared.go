package qnnrt

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// rpcmem parameters: the system heap and the default (cached) flags.
const (
	rpcmemHeapSystem   = 25
	rpcmemDefaultFlags = 1
	sharedAlign        = 64
)

// rpcmemFns are the rpcmem entry points of libcdsprpc.so.
type rpcmemFns struct {
	alloc func(heapID int32, flags uint32, size int32) unsafe.Pointer
	free  func(p unsafe.Pointer)
	toFD  func(p unsafe.Pointer) int32
}

// rpcmem loads the rpcmem library on first use; the outcome, success or
// failure, is kept for the Library's lifetime.
func (l *Library) rpcmem() (*rpcmemFns, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rpcTried {
		return l.rpc, l.rpcErr
	}
	l.rpcTried = true
	if l.closed {
		l.rpcErr = errors.New("qnnrt: library is closed")
		return nil, l.rpcErr
	}
	h, err := dlopen("rpcmem", l.opts.RPCMemPath)
	if err != nil {
		l.rpcErr = err
		return nil, err
	}
	fns := &rpcmemFns{}
	for _, f := range []struct {
		name string
		fptr any
	}{{"rpcmem_alloc", &fns.alloc}, {"rpcmem_free", &fns.free}, {"rpcmem_to_fd", &fns.toFD}} {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil || sym == 0 {
			purego.Dlclose(h)
			l.rpcErr = fmt.Errorf("qnnrt: %q does not export %s", l.opts.RPCMemPath, f.name)
			return nil, l.rpcErr
		}
		purego.RegisterFunc(f.fptr, sym)
	}
	l.rpcLib, l.rpc = h, fns
	return fns, nil
}

// sharedBuffer is an rpcmem allocation registered with a context. The
// tensor that owns the allocation frees it; a linked input in another
// context holds its own registration of the same memory (owner false),
// one in the same context uses the owner's handle (handle 0 here).
type sharedBuffer struct {
	rpc    *rpcmemFns
	ptr    unsafe.Pointer
	fd     int32
	handle uintptr
	owner  bool
}

// ShareInputs moves the named inputs into rpcmem shared buffers registered
// with the session's context (memRegister, ION), so executes read them in
// place instead of copying them to the DSP each time: the right home for
// inputs that stay constant over many executes. Data already written to
// the inputs is carried over.
//
// It returns true when every named input is shared. When rpcmem or the
// registration is unavailable it undoes any partial work, keeps RAW
// buffers, reports a warning once per Library (Options.Logf,
// Library.Warnings) and returns false with a nil error: executes still
// work, only slower. Errors are for bad names and closed sessions.
func (g *Graph) ShareInputs(names ...string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false, g.closedErr()
	}
	var todo []*ioTensor
	for _, n := range names {
		i := g.InputIndex(n)
		if i < 0 {
			return false, fmt.Errorf("qnnrt: graph %q has no input %q to share", g.info.Name, n)
		}
		if t := g.in[i]; t.link != nil {
			return false, g.linkedErr(t)
		}
		if t := g.in[i]; t.shared == nil && !slices.Contains(todo, t) {
			todo = append(todo, t)
		}
	}
	if len(todo) == 0 {
		return true, nil
	}
	l := g.s.lib
	fallback := func(reason error) (bool, error) {
		l.warnOnce("shared-buffers", "qnnrt: shared buffers unavailable, using RAW client buffers (every execute copies %s): %v",
			strings.Join(names, ", "), reason)
		return false, nil
	}
	if l.core[fnMemRegister] == 0 || l.core[fnMemDeRegister] == 0 {
		return fallback(fmt.Errorf("provider %s has no memRegister/memDeRegister", l.provider))
	}
	rpc, err := l.rpcmem()
	if err != nil {
		return fallback(err)
	}
	tmp, err := allocC(4096)
	if err != nil {
		return false, err
	}
	defer tmp.free()
	var done []*ioTensor
	for _, t := range todo {
		sb, err := g.register(rpc, t, tmp)
		if err != nil {
			for _, d := range done {
				_ = g.unregister(d) // best effort: the fallback is reported below
			}
			return fallback(err)
		}
		t.shared = sb
		done = append(done, t)
	}
	for _, t := range done {
		if t.set && t.buf != nil {
			copy(unsafe.Slice((*byte)(t.shared.ptr), t.info.Bytes()), unsafe.Slice((*byte)(t.buf), t.info.Bytes()))
		}
		if err := t.raw.free(); err != nil {
			return false, err
		}
		t.buf = t.shared.ptr
		v := &t.slot.V2.tensorV1
		v.MemType = memTypeMemHandle
		v.ClientBuf = clientBuffer{}
		*v.memHandle() = t.shared.handle
		g.stats.Shared = append(g.stats.Shared, t.info.Name)
	}
	return true, nil
}

// register allocates, maps and registers a shared buffer for t, using tmp
// for the descriptor and the handle out-parameter.
func (g *Graph) register(rpc *rpcmemFns, t *ioTensor, tmp cmem) (*sharedBuffer, error) {
	size := (t.info.Bytes() + sharedAlign - 1) &^ (sharedAlign - 1)
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("input %q needs %d bytes, more than one rpcmem allocation holds (2^31-1)", t.info.Name, size)
	}
	p := rpc.alloc(rpcmemHeapSystem, rpcmemDefaultFlags, int32(size))
	if p == nil {
		return nil, fmt.Errorf("rpcmem_alloc of %d bytes for input %q returned NULL", size, t.info.Name)
	}
	fd := rpc.toFD(p)
	if fd < 0 {
		rpc.free(p)
		return nil, fmt.Errorf("rpcmem_to_fd for input %q returned %d", t.info.Name, fd)
	}
	h, err := g.registerFD(t, fd, tmp)
	if err != nil {
		rpc.free(p)
		return nil, err
	}
	return &sharedBuffer{rpc: rpc, ptr: p, fd: fd, handle: h, owner: true}, nil
}

// registerFD registers the rpcmem buffer fd, laid out as t, with g's
// context (memRegister, ION) and returns the handle; tmp holds the
// descriptor and the out-parameter.
func (g *Graph) registerFD(t *ioTensor, fd int32, tmp cmem) (uintptr, error) {
	l := g.s.lib
	desc := (*memDescriptor)(tmp.ptr(0))
	*desc = memDescriptor{
		MemShape: memShape{NumDim: t.slot.V2.Rank, DimSize: t.slot.V2.Dimensions},
		DataType: uint32(t.info.DataType),
		MemType:  qnnMemTypeION,
	}
	desc.Info[0] = uint64(uint32(fd))
	hOut := tmp.ptr(int(unsafe.Sizeof(memDescriptor{})))
	*(*uintptr)(hOut) = 0
	if err := l.call(fmt.Sprintf("memRegister %q", t.info.Name), l.core[fnMemRegister], g.ctx.handle, uintptr(unsafe.Pointer(desc)), 1, uintptr(hOut)); err != nil {
		return 0, err
	}
	return *(*uintptr)(hOut), nil
}

// unregister deregisters and frees (when it owns it) t's shared buffer;
// the slot is left for the caller to repoint.
func (g *Graph) unregister(t *ioTensor) error {
	sb := t.shared
	if sb == nil {
		return nil
	}
	err := g.deregister(t)
	t.shared = nil
	if sb.owner {
		sb.rpc.free(sb.ptr)
	}
	if t.buf == sb.ptr {
		t.buf = nil
	}
	return err
}

// deregister drops t's registration (once) and keeps the memory.
func (g *Graph) deregister(t *ioTensor) error {
	sb := t.shared
	if sb == nil || sb.handle == 0 {
		return nil
	}
	l := g.s.lib
	h := sb.handle
	sb.handle = 0
	if ret := ccall(l.core[fnMemDeRegister], uintptr(unsafe.Pointer(&h)), 1); ret != 0 {
		return l.qnnError(fmt.Sprintf("memDeRegister %q", t.info.Name), ret)
	}
	return nil
}

// releaseShared deregisters every shared buffer of the graph, inputs and
// outputs; g.mu is held and the context is still alive. The memory is
// freed by freeShared, once every context has dropped its registrations.
func (g *Graph) releaseShared() error {
	var errs []error
	for _, t := range slices.Concat(g.in, g.out) {
		errs = append(errs, g.deregister(t))
	}
	return errors.Join(errs...)
}

// freeShared frees the rpcmem buffers the graph's tensors own, after
// releaseShared on every graph of the session.
func (g *Graph) freeShared() {
	for _, t := range slices.Concat(g.in, g.out) {
		if sb := t.shared; sb != nil {
			t.shared = nil
			if sb.owner {
				sb.rpc.free(sb.ptr)
			}
			if t.buf == sb.ptr {
				t.buf = nil
			}
		}
	}
}
