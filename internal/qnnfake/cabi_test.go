package qnnfake

import (
	"encoding/binary"
	"math"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// This file drives the test double through its C ABI the way a runtime
// does, with purego and memory outside the Go heap. Offsets are those of
// /work/shared/qnn/layout-api2.32.txt, written here independently of the C
// source so the two check each other.

// Core function-table indices (layout file).
const (
	idxPropertyHasCapability   = 0
	idxBackendCreate           = 1
	idxBackendGetAPIVersion    = 3
	idxBackendFree             = 8
	idxContextCreate           = 9
	idxContextCreateFromBinary = 13
	idxContextFree             = 14
	idxGraphRetrieve           = 20
	idxGraphExecute            = 21
	idxLogCreate               = 25
	idxLogFree                 = 27
	idxProfileCreate           = 28
	idxProfileGetEvents        = 30
	idxProfileGetEventData     = 32
	idxProfileFree             = 34
	idxMemRegister             = 35
	idxMemDeRegister           = 36
	idxDeviceGetInfrastructure = 39
	idxDeviceCreate            = 40
	idxDeviceFree              = 43
	idxErrorGetMessage         = 48

	sysIdxCreate        = 0
	sysIdxGetBinaryInfo = 1
	sysIdxGetMetaData   = 2
	sysIdxFree          = 3 // 2 in system API 1.0
)

// Struct sizes and offsets (layout file).
const (
	offInterfaceBackendID  = 0
	offInterfaceName       = 8
	offInterfaceAPIVersion = 16 // coreApiVersion, then backendApiVersion at +12
	offInterfaceTable      = 40
	offSystemAPIVersion    = 16
	offSystemTable         = 32

	sizeTensor        = 144
	offTensorVersion  = 0
	offTensorID       = 8
	offTensorName     = 16
	offTensorType     = 24
	offTensorDataType = 32
	offTensorQuant    = 40 // encodingDefinition, quantizationEncoding, scale, offset
	offTensorRank     = 80
	offTensorDims     = 88
	offTensorMemType  = 96
	offTensorData     = 104 // clientBuf.data and memHandle
	offTensorDataSize = 112
	offTensorIsDyn    = 120 // v2 isDynamicDimensions
	offTensorProduced = 140 // v2 isProduced

	sizeMemDescriptor = 48
	sizeHtpMemDesc    = 32
	sizePowerConfig   = 68
	sizeEventData     = 24
)

// Error codes used by the tests (layout file).
const (
	errNotSupported      = 1000
	errInvalidArgument   = 1004
	errNotPermitted      = 1005
	errSubsystemRestart  = 1007
	errBackendHandle     = 4011
	errContextBinaryVer  = 5004
	errContextFromBinary = 5005
	errGraphNotExist     = 6002
	errGraphArgument     = 6000
	errGraphTensor       = 6004
	errMemHandle         = 8001
	errMemRegistered     = 8002
	errLogHandle         = 11004
	errSysHandle         = 30000
	errSysArgument       = 30001
	errSysMalformed      = 30010
	errPerfInput         = 13001
)

// cmem is memory outside the Go heap (anonymous mmap), safe to hand to C.
type cmem []byte

func newCMem(t testing.TB, n int) cmem {
	t.Helper()
	if n == 0 {
		n = 1
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatalf("mmap %d bytes: %v", n, err)
	}
	t.Cleanup(func() { syscall.Munmap(b) })
	return b
}

func (m cmem) addr() uintptr                 { return uintptr(unsafe.Pointer(&m[0])) }
func (m cmem) at(off int) uintptr            { return m.addr() + uintptr(off) }
func (m cmem) u32(off int) uint32            { return binary.LittleEndian.Uint32(m[off:]) }
func (m cmem) u64(off int) uint64            { return binary.LittleEndian.Uint64(m[off:]) }
func (m cmem) put32(off int, v uint32)       { binary.LittleEndian.PutUint32(m[off:], v) }
func (m cmem) put64(off int, v uint64)       { binary.LittleEndian.PutUint64(m[off:], v) }
func (m cmem) putPtr(off int, p uintptr)     { m.put64(off, uint64(p)) }
func (m cmem) putString(off int, s string)   { copy(m[off:], s); m[off+len(s)] = 0 }
func (m cmem) copyIn(off int, b []byte) cmem { copy(m[off:], b); return m }

// cptr turns an address from C into an unsafe.Pointer (the address is not
// Go memory; the double conversion keeps vet's unsafeptr check quiet).
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// peek returns n bytes of C memory at p.
func peek(p uintptr, n int) []byte { return unsafe.Slice((*byte)(cptr(p)), n) }

func peek32(p uintptr) uint32   { return binary.LittleEndian.Uint32(peek(p, 4)) }
func peek64(p uintptr) uint64   { return binary.LittleEndian.Uint64(peek(p, 8)) }
func peekPtr(p uintptr) uintptr { return uintptr(peek64(p)) }

// cstring reads a NUL-terminated C string.
func cstring(p uintptr) string {
	if p == 0 {
		return ""
	}
	n := 0
	for peek(p+uintptr(n), 1)[0] != 0 {
		n++
	}
	return string(peek(p, n))
}

// abi is a runtime's view of one loaded instance: the library opened a
// second time (same file, so same state) and its chosen providers.
type abi struct {
	t    testing.TB
	lib  *Lib
	h    uintptr
	core uintptr // const QnnInterface_t*
	sys  uintptr // const QnnSystemInterface_t*
	out  cmem    // scratch for out-parameters
}

func newABI(t testing.TB, l *Lib) *abi {
	t.Helper()
	h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatalf("dlopen %s: %v", l.Path, err)
	}
	t.Cleanup(func() { purego.Dlclose(h) })
	return &abi{t: t, lib: l, h: h, out: newCMem(t, 4096)}
}

func (a *abi) sym(name string) uintptr {
	a.t.Helper()
	p, err := purego.Dlsym(a.h, name)
	if err != nil {
		a.t.Fatalf("dlsym %s: %v", name, err)
	}
	return p
}

// providers calls a getProviders export and returns the provider pointers.
func (a *abi) providers(export string) []uintptr {
	a.t.Helper()
	ret, _, _ := purego.SyscallN(a.sym(export), a.out.at(0), a.out.at(8))
	if ret != 0 {
		a.t.Fatalf("%s: error %d (%s)", export, ret, a.lib.LastError())
	}
	list, n := uintptr(a.out.u64(0)), a.out.u32(8)
	ps := make([]uintptr, n)
	for i := range ps {
		ps[i] = peekPtr(list + uintptr(8*i))
	}
	return ps
}

// open picks the first core provider and the system provider.
func (a *abi) open() *abi {
	a.t.Helper()
	core := a.providers("QnnInterface_getProviders")
	sys := a.providers("QnnSystemInterface_getProviders")
	if len(core) == 0 || len(sys) != 1 {
		a.t.Fatalf("providers: %d core, %d system", len(core), len(sys))
	}
	a.core, a.sys = core[0], sys[0]
	return a
}

// call calls core table entry idx and returns its error code.
func (a *abi) call(idx int, args ...uintptr) uint64 {
	fn := peekPtr(a.core + offInterfaceTable + uintptr(8*idx))
	r, _, _ := purego.SyscallN(fn, args...)
	return uint64(r)
}

// sysCall calls system table entry idx.
func (a *abi) sysCall(idx int, args ...uintptr) uint64 {
	fn := peekPtr(a.sys + offSystemTable + uintptr(8*idx))
	r, _, _ := purego.SyscallN(fn, args...)
	return uint64(r)
}

// must fails the test unless code is QNN_SUCCESS.
func (a *abi) must(what string, code uint64) {
	a.t.Helper()
	if code != 0 {
		a.t.Fatalf("%s: error %d: %s", what, code, a.lib.LastError())
	}
}

// handle calls a create-style entry whose last argument is an out-handle.
func (a *abi) handle(what string, idx int, args ...uintptr) uintptr {
	a.t.Helper()
	a.out.put64(0, 0)
	a.must(what, a.call(idx, append(args, a.out.at(0))...))
	return uintptr(a.out.u64(0))
}

// session is a created backend with a context loaded from a binary.
type session struct {
	log, backend, device, context uintptr
	bin                           cmem
}

// load creates log, backend, device and a context from b.
func (a *abi) load(b Binary) *session {
	a.t.Helper()
	s := &session{}
	s.log = a.handle("logCreate", idxLogCreate, 0, 2)
	s.backend = a.handle("backendCreate", idxBackendCreate, s.log, 0)
	s.device = a.handle("deviceCreate", idxDeviceCreate, s.log, 0)
	raw := b.Marshal()
	s.bin = newCMem(a.t, len(raw)).copyIn(0, raw)
	a.out.put64(0, 0)
	a.must("contextCreateFromBinary", a.call(idxContextCreateFromBinary, s.backend, s.device, 0,
		s.bin.addr(), uintptr(len(raw)), a.out.at(0), 0))
	s.context = uintptr(a.out.u64(0))
	return s
}

// free tears s down in the documented order.
func (a *abi) free(s *session) {
	a.t.Helper()
	a.must("contextFree", a.call(idxContextFree, s.context, 0))
	a.must("deviceFree", a.call(idxDeviceFree, s.device))
	a.must("backendFree", a.call(idxBackendFree, s.backend))
	a.must("logFree", a.call(idxLogFree, s.log))
}

// graph retrieves a graph handle by name.
func (a *abi) graph(s *session, name string) uintptr {
	a.t.Helper()
	n := newCMem(a.t, len(name)+1)
	n.putString(0, name)
	return a.handle("graphRetrieve "+name, idxGraphRetrieve, s.context, n.addr())
}

// tensorArray lays out Qnn_Tensor_t v2 entries for ts, each with a RAW
// client buffer of the right size (buffers returned in the same order).
func tensorArray(t testing.TB, ts []Tensor) (cmem, []cmem) {
	arr := newCMem(t, sizeTensor*len(ts))
	bufs := make([]cmem, len(ts))
	for k, ten := range ts {
		o := k * sizeTensor
		dims := newCMem(t, 4*len(ten.Dims))
		for i, d := range ten.Dims {
			dims.put32(4*i, d)
		}
		size := int(ten.Elements()) * elemSize(ten.DataType)
		bufs[k] = newCMem(t, size)
		arr.put32(o+offTensorVersion, 2)
		arr.put32(o+offTensorID, ten.ID)
		arr.put32(o+offTensorDataType, ten.DataType)
		arr.put32(o+offTensorRank, uint32(len(ten.Dims)))
		arr.putPtr(o+offTensorDims, dims.addr())
		arr.put32(o+offTensorMemType, 0)
		arr.putPtr(o+offTensorData, bufs[k].addr())
		arr.put32(o+offTensorDataSize, uint32(size))
	}
	return arr, bufs
}

// execute runs graph g (declared as decl) on inputs and returns the outputs
// read back as float32, or the error code.
func (a *abi) execute(gh uintptr, decl Graph, inputs [][]float32, profile uintptr) ([][]float32, uint64) {
	a.t.Helper()
	in, inBufs := tensorArray(a.t, decl.Inputs)
	out, outBufs := tensorArray(a.t, decl.Outputs)
	for m, ten := range decl.Inputs {
		writeElems(ten, inBufs[m], inputs[m])
	}
	code := a.call(idxGraphExecute, gh, in.addr(), uintptr(len(decl.Inputs)), out.addr(),
		uintptr(len(decl.Outputs)), profile, 0)
	if code != 0 {
		return nil, code
	}
	res := make([][]float32, len(decl.Outputs))
	for j, ten := range decl.Outputs {
		res[j] = readElems(ten, outBufs[j])
	}
	return res, 0
}

// elemSize is the byte size of one element of the types the double computes.
func elemSize(dt uint32) int {
	switch dt {
	case DataTypeFloat32, DataTypeInt32:
		return 4
	case DataTypeFloat16, DataTypeBF16, DataTypeUFixed16:
		return 2
	}
	return 1
}

// writeElems stores vals in buf in ten's data type, converted as a runtime
// does (the package's encode).
func writeElems(ten Tensor, buf []byte, vals []float32) {
	for i, v := range vals {
		q := encode(ten, float64(v))
		switch ten.DataType {
		case DataTypeFloat32:
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(q)))
		case DataTypeInt32:
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(int32(q)))
		case DataTypeFloat16, DataTypeBF16, DataTypeUFixed16:
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(q))
		default:
			buf[i] = uint8(q)
		}
	}
}

// readElems decodes buf, in ten's data type, to float32.
func readElems(ten Tensor, buf []byte) []float32 {
	out := make([]float32, ten.Elements())
	for i := range out {
		var q float64
		switch ten.DataType {
		case DataTypeFloat32:
			q = float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:])))
		case DataTypeInt32:
			q = float64(int32(binary.LittleEndian.Uint32(buf[4*i:])))
		case DataTypeFloat16, DataTypeBF16, DataTypeUFixed16:
			q = float64(binary.LittleEndian.Uint16(buf[2*i:]))
		default:
			q = float64(buf[i])
		}
		out[i] = float32(decode(ten, q))
	}
	return out
}
