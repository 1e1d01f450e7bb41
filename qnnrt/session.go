package qnnrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// SessionOptions configure a resident session on one or several context
// binaries.
type SessionOptions struct {
	// ContextPath is the context binary to load. It may be empty when
	// ContextPaths names the binaries.
	ContextPath string
	// ContextPaths lists further context binaries to load on the same
	// backend and device (after ContextPath, when both are set). With two
	// or more binaries the session registers them as one HTP spill-fill
	// group (see NewSession). Graph names must be unique across them.
	ContextPaths []string
	// NoSpillFillGroup loads several binaries without the spill-fill
	// group registration (each context then gets its own spill-fill
	// buffer).
	NoSpillFillGroup bool
	// Graphs lists the graphs to retrieve; empty retrieves every graph of
	// every binary.
	Graphs []string
	// Expect, when set, lists I/O contracts the binaries must meet (each
	// against the binary holding the graph it names); they are checked
	// against the metadata before any context is loaded.
	Expect []GraphSpec
	// PerfMode is the HTP performance vote held while the session is open.
	PerfMode PerfMode
	// Profiling enables basic per-execute profiling (Timing.Device).
	Profiling bool
	// PersistentBinary keeps the binaries mapped for the session's lifetime
	// and tells the backend so (QNN_CONTEXT_CONFIG_PERSISTENT_BINARY);
	// otherwise each is unmapped as soon as its context is created.
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

// Session is a resident QNN session: log, backend, device, profile, one or
// more contexts and their retrieved graphs, with the performance vote it
// holds. Create it with Library.NewSession and release it with Close. Its
// graphs execute one at a time (a session-wide lock around every execute),
// so graphs of one session may be chained (Link).
type Session struct {
	lib  *Library
	opts SessionOptions
	info *ContextInfo // the first binary's

	mu       sync.Mutex // guards the handles during teardown
	closed   bool
	log      uintptr
	backend  uintptr
	device   uintptr
	profile  uintptr
	contexts []*loadedContext // in creation order
	group    SpillFillGroup
	perf     perfState
	status   PerfStatus
	noDev    string // why the session has no device handle, when it has none
	scratch  arena
	graphs   []*Graph

	profMu sync.Mutex // serialises use of the shared profile handle
	execMu sync.Mutex // one execute at a time across the session's graphs
	linkMu sync.Mutex // serialises Link, which locks two graphs
}

// loadedContext is one context binary of a session and, once created, its
// context handle.
type loadedContext struct {
	path   string
	info   *ContextInfo
	handle uintptr
	binary *mappedFile
	graphs []string // graphs to retrieve from it
}

// SpillFillGroup describes the HTP spill-fill group registration of a
// session's contexts.
type SpillFillGroup struct {
	// Registered is true when the contexts were created with
	// QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_MULTI_CONTEXTS.
	Registered bool
	// MaxSpillFill is the maxSpillFillBuffer given to every context: the
	// largest SpillFillBufferSize of the binaries.
	MaxSpillFill uint64
	// Order lists the binaries in creation order (the first one, which
	// starts the group, has the largest spill-fill size).
	Order []string
	// Reason says why no group was registered, when Registered is false.
	Reason string
}

// maxContexts bounds the binaries of one session.
const maxContexts = 32

// NewSession loads the context binaries of opts.ContextPath and
// opts.ContextPaths: it reads and checks every binary's metadata, creates
// the log, backend, device (when the backend supports one), profile (when
// asked for) and power vote, creates one context per binary and retrieves
// the graphs. With two or more binaries reporting a spill-fill size, the
// contexts are registered as one HTP spill-fill group: the binary with the
// largest size is created first with a NULL firstGroupHandle, every other
// one names that first context, and all get the largest size as
// maxSpillFillBuffer (SpillFillGroup reports it). Any failure undoes what
// was built; Close frees the contexts in reverse creation order.
func (l *Library) NewSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	if opts.ContextPath == "" && len(opts.ContextPaths) == 0 {
		return nil, errors.New("qnnrt: SessionOptions.ContextPath is empty and ContextPaths names no binary")
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
	paths := s.opts.ContextPaths
	if s.opts.ContextPath != "" {
		paths = append([]string{s.opts.ContextPath}, paths...)
	}
	if len(paths) > maxContexts {
		return fmt.Errorf("qnnrt: %d context binaries; a session loads at most %d", len(paths), maxContexts)
	}
	if s.scratch.mem, err = allocC(4096); err != nil {
		return err
	}
	owner := map[string]*loadedContext{} // graph name -> its binary
	for _, p := range paths {
		if p == "" {
			return errors.New("qnnrt: SessionOptions.ContextPaths has an empty path")
		}
		bin, err := mapContextBinary(p)
		if err != nil {
			return err
		}
		lc := &loadedContext{path: bin.path, binary: bin}
		s.contexts = append(s.contexts, lc)
		info, err := l.parseContextInfo(bin.data)
		if err != nil {
			return fmt.Errorf("%w (file %s)", err, bin.path)
		}
		info.Path, info.Format = bin.path, bin.format
		lc.info = info
		for _, g := range info.GraphNames() {
			if prev, dup := owner[g]; dup {
				return fmt.Errorf("qnnrt: graph %q is in both %s and %s; graph names must be unique in a session", g, prev.path, bin.path)
			}
			owner[g] = lc
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("qnnrt: load %s: %w", bin.path, err)
		}
	}
	names := s.opts.Graphs
	if len(names) == 0 {
		for _, lc := range s.contexts {
			names = append(names, lc.info.GraphNames()...)
		}
	}
	for _, n := range names {
		lc, ok := owner[n]
		if !ok {
			return fmt.Errorf("qnnrt: context binary %s has no graph %q; it has %q", strings.Join(paths, ", "), n, s.graphNames())
		}
		if !slices.Contains(lc.graphs, n) {
			lc.graphs = append(lc.graphs, n)
		}
	}
	// A binary none of whose graphs is asked for is not loaded: its
	// context would only take DSP memory.
	kept := s.contexts[:0]
	for _, lc := range s.contexts {
		if len(lc.graphs) > 0 {
			kept = append(kept, lc)
			continue
		}
		if err := lc.binary.unmap(); err != nil {
			return err
		}
		lc.binary = nil
	}
	s.contexts = kept
	if len(s.contexts) == 0 {
		return fmt.Errorf("qnnrt: context binary %s has no graph to retrieve", strings.Join(paths, ", "))
	}
	s.info = s.contexts[0].info
	for _, spec := range s.opts.Expect {
		lc, ok := owner[spec.Name]
		if !ok {
			return fmt.Errorf("qnnrt: expected graph %q is in no context binary of the session; they have %q", spec.Name, s.graphNames())
		}
		if err := lc.info.Check(spec); err != nil {
			return fmt.Errorf("%w (file %s)", err, lc.path)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("qnnrt: load: %w", err)
	}
	s.planGroup()

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
		return fmt.Errorf("qnnrt: load: %w", err)
	}

	for _, lc := range s.contexts {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("qnnrt: load %s: %w", lc.path, err)
		}
		if err := s.createContext(lc); err != nil {
			return err
		}
	}
	return nil
}

// planGroup decides the spill-fill group of several binaries: following
// onnxruntime's QNN execution provider, the binary with the largest
// spill-fill size is created first (it starts the group; the others keep
// their order) and every context is given that size as maxSpillFillBuffer.
// A group needs a size above 0: when no binary reports one, none is
// registered.
func (s *Session) planGroup() {
	g := &s.group
	switch {
	case len(s.contexts) < 2:
		g.Reason = "one context binary"
	case s.opts.NoSpillFillGroup:
		g.Reason = "SessionOptions.NoSpillFillGroup"
	default:
		first := 0
		for i, lc := range s.contexts {
			if lc.info.SpillFillBufferSize > s.contexts[first].info.SpillFillBufferSize {
				first = i
			}
		}
		g.MaxSpillFill = s.contexts[first].info.SpillFillBufferSize
		if g.MaxSpillFill == 0 {
			g.Reason = "no binary reports a spill-fill buffer size"
			break
		}
		g.Registered = true
		lc := s.contexts[first]
		s.contexts = append(s.contexts[:first], s.contexts[first+1:]...)
		s.contexts = append([]*loadedContext{lc}, s.contexts...)
	}
	for _, lc := range s.contexts {
		g.Order = append(g.Order, lc.path)
	}
}

// createContext creates lc's context from its binary, with the persistent
// binary and spill-fill group configs as planned, retrieves its graphs and
// unmaps the binary unless it must persist.
func (s *Session) createContext(lc *loadedContext) error {
	l := s.lib
	var cfgs []unsafe.Pointer
	if s.opts.PersistentBinary {
		cfg, err := s.scratch.alloc(int(unsafe.Sizeof(contextConfig{})), 8)
		if err != nil {
			return err
		}
		*(*contextConfig)(cfg) = contextConfig{Option: contextConfigPersist, Value: 1}
		cfgs = append(cfgs, cfg)
	}
	if s.group.Registered {
		custom, err := s.scratch.alloc(int(unsafe.Sizeof(htpContextCustomConfig{})), 8)
		if err != nil {
			return err
		}
		first := uintptr(0) // QNN_CONTEXT_NULL: this context starts the group
		if lc != s.contexts[0] {
			first = s.contexts[0].handle
		}
		*(*htpContextCustomConfig)(custom) = htpContextCustomConfig{
			Option: htpContextRegisterMultiContexts, FirstGroupHandle: first, MaxSpillFillBuffer: s.group.MaxSpillFill,
		}
		cfg, err := s.scratch.alloc(int(unsafe.Sizeof(contextConfig{})), 8)
		if err != nil {
			return err
		}
		*(*contextConfig)(cfg) = contextConfig{Option: contextConfigCustom, Value: uint64(uintptr(custom))}
		cfgs = append(cfgs, cfg)
	}
	var configs uintptr
	if len(cfgs) > 0 {
		list, err := s.scratch.alloc(8*(len(cfgs)+1), 8)
		if err != nil {
			return err
		}
		arr := unsafe.Slice((*unsafe.Pointer)(list), len(cfgs)+1)
		copy(arr, cfgs)
		arr[len(cfgs)] = nil
		configs = uintptr(list)
	}
	bin := lc.binary
	if err := l.call(fmt.Sprintf("contextCreateFromBinary %q", bin.path), l.core[fnContextCreateFromBinary], s.backend, s.device, configs,
		uintptr(unsafe.Pointer(&bin.data[0])), uintptr(len(bin.data)), uintptr(unsafe.Pointer(&lc.handle)), 0); err != nil {
		lc.handle = 0
		return err
	}
	if !s.opts.PersistentBinary {
		if err := bin.unmap(); err != nil {
			return err
		}
		lc.binary = nil
	}
	for _, n := range lc.graphs {
		g, err := s.retrieve(lc, n)
		if err != nil {
			return err
		}
		g.pos = len(s.graphs)
		s.graphs = append(s.graphs, g)
	}
	return nil
}

// graphNames lists the graphs of every binary of the session.
func (s *Session) graphNames() []string {
	var names []string
	for _, lc := range s.contexts {
		if lc.info != nil {
			names = append(names, lc.info.GraphNames()...)
		}
	}
	return names
}

// Info returns the metadata of the session's first context binary
// (SessionOptions.ContextPath, or the first of ContextPaths, that holds a
// retrieved graph).
func (s *Session) Info() *ContextInfo { return s.info }

// Infos returns the metadata of every context binary the session loaded
// (those holding a graph it retrieved), in the order the contexts were
// created.
func (s *Session) Infos() []*ContextInfo {
	out := make([]*ContextInfo, len(s.contexts))
	for i, lc := range s.contexts {
		out[i] = lc.info
	}
	return out
}

// SpillFillGroup reports the spill-fill group registration of the
// session's contexts.
func (s *Session) SpillFillGroup() SpillFillGroup {
	g := s.group
	g.Order = slices.Clone(g.Order)
	return g
}

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
	for i := len(s.contexts) - 1; i >= 0; i-- { // reverse creation order: the group's first context last
		call(&s.contexts[i].handle, fnContextFree, "contextFree", 0)
	}
	call(&s.profile, fnProfileFree, "profileFree")
	errs = append(errs, s.releasePerf())
	call(&s.device, fnDeviceFree, "deviceFree")
	call(&s.backend, fnBackendFree, "backendFree")
	call(&s.log, fnLogFree, "logFree")
	for _, g := range s.graphs {
		g.freeShared()
		errs = append(errs, g.freeMemory())
		g.mu.Unlock()
	}
	for _, lc := range s.contexts {
		if lc.binary != nil {
			errs = append(errs, lc.binary.unmap())
			lc.binary = nil
		}
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
