package qnnrt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// SessionOptions configure a resident session on one context binary.
type SessionOptions struct {
	// ContextPath is the context binary to load (required).
	ContextPath string
	// Graphs lists the graphs to retrieve; empty retrieves every graph.
	Graphs []string
	// Expect, when set, lists I/O contracts the binary must meet; they are
	// checked against the metadata before the context is loaded.
	Expect []GraphSpec
	// PerfMode is the HTP performance vote held while the session is open.
	PerfMode PerfMode
	// Profiling enables basic per-execute profiling (Timing.Device).
	Profiling bool
	// PersistentBinary keeps the binary mapped for the session's lifetime
	// and tells the backend so (QNN_CONTEXT_CONFIG_PERSISTENT_BINARY);
	// otherwise it is unmapped as soon as the context is created.
	PersistentBinary bool
	// LogLevel is the QNN log level of the session's logger, 1 (error) to
	// 5 (debug) as LogLevel numbers them; 0 means warnings. Lines up to it
	// go to Options.LogSink.
	LogLevel int
	// RPCVote also sends the RPC options (control latency, polling time)
	// of the performance vote, in a setPowerConfig call after the DCVS
	// part (and not after a refused DCVS part). Off by default: some
	// backends cannot take them (Qualcomm's x86 HTP emulator crashes
	// inside setPowerConfig when they are present, even alone), and they
	// are not yet verified on the device.
	RPCVote bool
}

// Session is a resident QNN session: log, backend, device, profile, context
// and retrieved graphs, with the performance vote it holds. Create it with
// Library.NewSession and release it with Close.
type Session struct {
	lib  *Library
	opts SessionOptions
	info *ContextInfo

	mu      sync.Mutex // guards the handles during teardown
	closed  bool
	log     uintptr
	backend uintptr
	device  uintptr
	profile uintptr
	context uintptr
	perf    perfState
	status  PerfStatus
	noDev   string // why the session has no device handle, when it has none
	binary  *mappedFile
	scratch arena
	graphs  []*Graph

	profMu sync.Mutex // serialises use of the shared profile handle
}

// NewSession loads the context binary of opts.ContextPath: it reads and
// checks the metadata, creates the log, backend, device (when the backend
// supports one), profile (when asked for) and power vote, creates the
// context from the binary and retrieves the graphs. Any failure undoes
// what was built.
func (l *Library) NewSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	if opts.ContextPath == "" {
		return nil, errors.New("qnnrt: SessionOptions.ContextPath is empty")
	}
	if opts.LogLevel == 0 {
		opts.LogLevel = logLevelWarn
	}
	if opts.LogLevel < 1 || opts.LogLevel > 5 {
		return nil, fmt.Errorf("qnnrt: log level %d out of range [1,5]", opts.LogLevel)
	}
	s := &Session{lib: l, opts: opts}
	if err := l.addSession(s); err != nil {
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *Session) open(ctx context.Context) error {
	l := s.lib
	var err error
	if s.scratch.mem, err = allocC(4096); err != nil {
		return err
	}
	bin, err := mapContextBinary(s.opts.ContextPath)
	if err != nil {
		return err
	}
	s.binary = bin
	info, err := l.parseContextInfo(bin.data)
	if err != nil {
		return fmt.Errorf("%w (file %s)", err, bin.path)
	}
	info.Path, info.Format = bin.path, bin.format
	s.info = info
	names := s.opts.Graphs
	if len(names) == 0 {
		names = info.GraphNames()
	}
	for _, n := range names {
		if _, ok := info.Graph(n); !ok {
			return fmt.Errorf("qnnrt: context binary %s has no graph %q; it has %q", bin.path, n, info.GraphNames())
		}
	}
	for _, spec := range s.opts.Expect {
		if err := info.Check(spec); err != nil {
			return fmt.Errorf("%w (file %s)", err, bin.path)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("qnnrt: load %s: %w", bin.path, err)
	}

	if err := l.call("logCreate", l.core[fnLogCreate], l.logFn, uintptr(s.opts.LogLevel), uintptr(unsafe.Pointer(&s.log))); err != nil {
		s.log = 0
		return err
	}
	if err := l.call("backendCreate", l.core[fnBackendCreate], s.log, 0, uintptr(unsafe.Pointer(&s.backend))); err != nil {
		s.backend = 0
		return err
	}
	switch fn := l.core[fnPropertyHasCapability]; {
	case fn == 0 || l.core[fnDeviceCreate] == 0:
		s.noDev = fmt.Sprintf("provider %s has no propertyHasCapability or deviceCreate entry, so no device was created", l.provider)
	default:
		if ret := ccall(fn, propertyGroupDevice); ret != propertySupported {
			s.noDev = fmt.Sprintf("the backend reports no device capability (propertyHasCapability(QNN_PROPERTY_GROUP_DEVICE) answered %s, not %d QNN_PROPERTY_SUPPORTED), so no device was created",
				propertyAnswer(ret), propertySupported)
			break
		}
		if err := l.call("deviceCreate", l.core[fnDeviceCreate], s.log, 0, uintptr(unsafe.Pointer(&s.device))); err != nil {
			s.device = 0
			return err
		}
	}
	if s.opts.Profiling {
		if l.core[fnProfileCreate] == 0 || l.core[fnProfileGetEvents] == 0 || l.core[fnProfileGetEventData] == 0 || l.core[fnProfileFree] == 0 {
			return fmt.Errorf("qnnrt: profiling requested but provider %s has no profile functions", l.provider)
		}
		if err := l.call("profileCreate", l.core[fnProfileCreate], s.backend, profileLevelBasic, uintptr(unsafe.Pointer(&s.profile))); err != nil {
			s.profile = 0
			return err
		}
	}
	if err := s.votePerf(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("qnnrt: load %s: %w", bin.path, err)
	}

	var configs uintptr
	if s.opts.PersistentBinary {
		cfg, err := s.scratch.alloc(int(unsafe.Sizeof(contextConfig{})), 8)
		if err != nil {
			return err
		}
		*(*contextConfig)(cfg) = contextConfig{Option: contextConfigPersist, Value: 1}
		list, err := s.scratch.alloc(16, 8)
		if err != nil {
			return err
		}
		*(*unsafe.Pointer)(list) = cfg
		configs = uintptr(list)
	}
	if err := l.call(fmt.Sprintf("contextCreateFromBinary %q", bin.path), l.core[fnContextCreateFromBinary], s.backend, s.device, configs,
		uintptr(unsafe.Pointer(&bin.data[0])), uintptr(len(bin.data)), uintptr(unsafe.Pointer(&s.context)), 0); err != nil {
		s.context = 0
		return err
	}
	if !s.opts.PersistentBinary {
		if err := s.binary.unmap(); err != nil {
			return err
		}
		s.binary = nil
	}
	for _, n := range names {
		g, err := s.retrieve(n)
		if err != nil {
			return err
		}
		s.graphs = append(s.graphs, g)
	}
	return nil
}

// Info returns the metadata of the session's context binary.
func (s *Session) Info() *ContextInfo { return s.info }

// HasDevice reports whether the session created a device handle (the
// backend supports the device API).
func (s *Session) HasDevice() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.device != 0
}

// PerfMode returns the performance mode the session voted for.
func (s *Session) PerfMode() PerfMode { return s.opts.PerfMode }

// Graph returns the retrieved graph named name.
func (s *Session) Graph(name string) (*Graph, error) {
	for _, g := range s.graphs {
		if g.info.Name == name {
			return g, nil
		}
	}
	have := make([]string, len(s.graphs))
	for i, g := range s.graphs {
		have[i] = g.info.Name
	}
	return nil, fmt.Errorf("qnnrt: session has no graph %q; retrieved %q", name, have)
}

// Close tears the session down in the documented order, each step once:
// waits for running executes, deregisters and frees shared buffers, frees
// the context and the profile, votes the HTP down and destroys the power
// config, frees the device, the backend and the log, then unmaps the
// runtime's memory. It continues past failures and returns them all. It is
// safe to call more than once and after a DSP subsystem restart.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	l := s.lib
	var errs []error
	call := func(handle *uintptr, fn int, name string, args ...uintptr) {
		if *handle == 0 {
			return
		}
		h := *handle
		*handle = 0
		if l.core[fn] == 0 {
			return
		}
		if ret := ccall(l.core[fn], append([]uintptr{h}, args...)...); ret != 0 {
			errs = append(errs, l.qnnError(name, ret))
		}
	}
	for _, g := range s.graphs {
		g.mu.Lock()
		g.closed = true
		errs = append(errs, g.releaseShared())
	}
	call(&s.context, fnContextFree, "contextFree", 0)
	call(&s.profile, fnProfileFree, "profileFree")
	errs = append(errs, s.releasePerf())
	call(&s.device, fnDeviceFree, "deviceFree")
	call(&s.backend, fnBackendFree, "backendFree")
	call(&s.log, fnLogFree, "logFree")
	for _, g := range s.graphs {
		errs = append(errs, g.freeMemory())
		g.mu.Unlock()
	}
	if s.binary != nil {
		errs = append(errs, s.binary.unmap())
		s.binary = nil
	}
	errs = append(errs, s.scratch.mem.free())
	l.removeSession(s)
	return errors.Join(errs...)
}

// propertyAnswer names propertyHasCapability's answer: its code and the
// code's name, QNN_PROPERTY_NOT_SUPPORTED for 1000 (QnnProperty.h gives
// it the value of QNN_COMMON_ERROR_NOT_SUPPORTED), else ErrorName's.
func propertyAnswer(ret uint64) string {
	code := errorCode(ret)
	name := ErrorName(code)
	if code == codeNotSupported {
		name = "QNN_PROPERTY_NOT_SUPPORTED"
	}
	return fmt.Sprintf("%d %s", code, name)
}
