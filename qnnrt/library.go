package qnnrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Default library names, resolved through the dynamic loader's search path
// (LD_LIBRARY_PATH, the system directories) when no path is given.
const (
	DefaultBackendLib = "libQnnHtp.so"
	DefaultSystemLib  = "libQnnSystem.so"
	DefaultRPCMemLib  = "libcdsprpc.so"
)

// Options configure how a Library is loaded.
type Options struct {
	// BackendPath is the QNN backend library, a file path or a bare name
	// for the loader to find. Default DefaultBackendLib.
	BackendPath string
	// SystemPath is the QNN system library (context-binary metadata).
	// Default DefaultSystemLib.
	SystemPath string
	// RPCMemPath is the library providing rpcmem_alloc/free/to_fd for shared
	// buffers, loaded the first time shared buffers are requested. Default
	// DefaultRPCMemLib.
	RPCMemPath string
	// ADSPLibraryPath, when set, is exported as ADSP_LIBRARY_PATH before the
	// backend is loaded (the DSP loader finds the HTP skel libraries
	// through it). When empty and the variable is unset, the directory of
	// BackendPath is used if BackendPath names one. The variable belongs to
	// the process: the last Library opened wins.
	ADSPLibraryPath string
	// BackendID restricts the provider choice to one backend (6 = HTP,
	// 3 = CPU). Zero accepts any backend, preferring HTP.
	BackendID uint32
	// Logf, when set, receives the runtime's warnings (each reported once
	// per Library), for example a fallback from shared to RAW buffers.
	Logf func(format string, args ...any)
	// LogSink, when set, receives the lines the QNN library logs through
	// the runtime's log callback (up to each session's LogLevel), at most
	// LogLinesPerSecond a second, then a line saying how many were
	// suppressed. It may be called from any thread, concurrently, while
	// the library is inside a QNN call: it must return quickly and must
	// not call back into the Library or its sessions. QNN's callback does
	// not say which handle logged a line, so with several Libraries open
	// every LogSink receives every line. Whether set or not, the last
	// ERROR line logged during a failed call is added to its *Error (Log).
	LogSink func(LogLine)
	// LogLinesPerSecond bounds the lines passed to LogSink per second: 0
	// means DefaultLogLinesPerSecond, a negative value no limit.
	LogLinesPerSecond int
}

// Version is a QNN API version.
type Version struct {
	Major, Minor, Patch uint32
}

// String formats the version as major.minor.patch.
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

func (v qnnVersion) version() Version { return Version(v) }

// Provider describes a QNN interface provider of a backend or system
// library.
type Provider struct {
	Name       string
	BackendID  uint32  // QNN_BACKEND_ID_* (core providers; 0 for system providers)
	API        Version // core API version, or system API version for a system provider
	BackendAPI Version // backend API version (core providers only)
	TableLen   int     // entries in the provider's function table
}

// String describes the provider: name, backend id and API versions.
func (p Provider) String() string {
	if p.BackendAPI != (Version{}) {
		return fmt.Sprintf("%q (backend %d, API %s, backend API %s)", p.Name, p.BackendID, p.API, p.BackendAPI)
	}
	return fmt.Sprintf("%q (API %s)", p.Name, p.API)
}

// Library is a loaded QNN backend and system library: the chosen providers
// and their function pointers. It is safe for concurrent use. Sessions are
// created from it; Close closes them and unloads the libraries.
type Library struct {
	opts Options

	backendHandle uintptr
	systemHandle  uintptr
	provider      Provider
	sysProvider   Provider
	core          [numCoreFns]uintptr
	sys           [numSystemFns]uintptr
	adspPath      string

	mu       sync.Mutex
	rpc      *rpcmemFns
	rpcErr   error
	rpcTried bool
	rpcLib   uintptr
	warned   map[string]bool
	warnings []string
	sessions map[*Session]struct{}
	closed   bool

	logs  *logSink // registered with the log router while the Library is open (nil for OpenSystem)
	logFn uintptr  // the QnnLog_Callback_t for logCreate, 0 = platform default logging
}

// Open loads the backend and system libraries, chooses their providers and
// reads the function tables. It refuses a core API older than 2.18 and a
// system API older than 1.1.
func Open(opts Options) (*Library, error) { return open(opts, true) }

// OpenSystem loads only the system library: enough to read context-binary
// metadata (ReadContextInfo, Inspect) on a machine without the backend.
func OpenSystem(opts Options) (*Library, error) { return open(opts, false) }

func open(opts Options, withBackend bool) (*Library, error) {
	if opts.BackendPath == "" {
		opts.BackendPath = DefaultBackendLib
	}
	if opts.SystemPath == "" {
		opts.SystemPath = DefaultSystemLib
	}
	if opts.RPCMemPath == "" {
		opts.RPCMemPath = DefaultRPCMemLib
	}
	l := &Library{opts: opts, warned: map[string]bool{}, sessions: map[*Session]struct{}{}}
	if err := l.loadSystem(); err != nil {
		l.unload()
		return nil, err
	}
	if withBackend {
		l.setADSPPath()
		if err := l.loadBackend(); err != nil {
			l.unload()
			return nil, err
		}
		l.startLogging()
	}
	return l, nil
}

// startLogging registers the Library's log sink with the process's log
// router. Without a callback (an unsupported architecture, no libc
// vsnprintf, purego's callbacks used up) sessions log through QNN's
// platform default, which is said once as a warning.
func (l *Library) startLogging() {
	l.logs = newLogSink(l.opts.LogSink, l.opts.LogLinesPerSecond)
	fn, err := router.callback()
	if err != nil {
		l.warnOnce("log-callback", "qnnrt: QNN log lines are not captured (platform default logging instead): %v", err)
		return
	}
	l.logFn = fn
	router.register(l.logs)
}

// setADSPPath exports ADSP_LIBRARY_PATH as Options.ADSPLibraryPath describes.
func (l *Library) setADSPPath() {
	const key = "ADSP_LIBRARY_PATH"
	p := l.opts.ADSPLibraryPath
	if p == "" {
		if cur, ok := os.LookupEnv(key); ok {
			l.adspPath = cur
			return
		}
		if !strings.Contains(l.opts.BackendPath, "/") {
			return
		}
		if abs, err := filepath.Abs(filepath.Dir(l.opts.BackendPath)); err == nil {
			p = abs
		}
	}
	if p != "" {
		// os.Setenv reaches the C environment too (through cgo, or
		// purego's setenv hook without cgo).
		if err := os.Setenv(key, p); err == nil {
			l.adspPath = p
		}
	}
}

// ADSPLibraryPath returns the ADSP_LIBRARY_PATH in effect when the backend
// was loaded ("" when unset).
func (l *Library) ADSPLibraryPath() string { return l.adspPath }

// Provider returns the chosen core provider (zero for OpenSystem).
func (l *Library) Provider() Provider { return l.provider }

// SystemProvider returns the chosen system provider.
func (l *Library) SystemProvider() Provider { return l.sysProvider }

func dlopen(what, path string) (uintptr, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0, &LoadError{Library: what, Path: path, Err: err}
	}
	return h, nil
}

// getProviders calls a Qnn*Interface_getProviders entry point and returns
// the provider pointers.
func getProviders(handle uintptr, lib, symbol string) ([]unsafe.Pointer, error) {
	fn, err := purego.Dlsym(handle, symbol)
	if err != nil || fn == 0 {
		return nil, fmt.Errorf("qnnrt: %q does not export %s: not a QNN library of that kind", lib, symbol)
	}
	var arr unsafe.Pointer
	var n uint32
	ret := ccall(fn, uintptr(unsafe.Pointer(&arr)), uintptr(unsafe.Pointer(&n)))
	if ret != 0 {
		return nil, &Error{Op: fmt.Sprintf("%s (%s)", symbol, lib), Code: errorCode(ret), Name: ErrorName(errorCode(ret))}
	}
	if n == 0 || arr == nil {
		return nil, fmt.Errorf("qnnrt: %s in %q returned no providers", symbol, lib)
	}
	if n > maxProviders {
		return nil, fmt.Errorf("qnnrt: %s in %q returned %d providers (more than %d: corrupt answer)", symbol, lib, n, maxProviders)
	}
	out := make([]unsafe.Pointer, 0, n)
	for i := range int(n) {
		if p := loadPtr(arr, uintptr(i)*8); p != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// coreTableLen is the number of entries of a core function table of the
// given API minor version (major 2), or 0 when the version is refused.
func coreTableLen(minor uint32) int {
	switch {
	case minor >= 32:
		return coreTableLen2_32
	case minor >= minCoreAPIMinor:
		return coreTableLen2_18
	}
	return 0
}

func (l *Library) loadBackend() error {
	h, err := dlopen("backend", l.opts.BackendPath)
	if err != nil {
		return err
	}
	l.backendHandle = h
	ptrs, err := getProviders(h, l.opts.BackendPath, "QnnInterface_getProviders")
	if err != nil {
		return err
	}
	best := -1
	var found []string
	var chosen Provider
	for i, p := range ptrs {
		hdr := (*interfaceHeader)(p)
		pr := Provider{
			Name:       goString(hdr.ProviderName),
			BackendID:  hdr.BackendID,
			API:        hdr.APIVersion.Core.version(),
			BackendAPI: hdr.APIVersion.Backend.version(),
		}
		found = append(found, pr.String())
		if pr.API.Major != coreAPIMajor || coreTableLen(pr.API.Minor) == 0 {
			continue
		}
		if l.opts.BackendID != 0 && pr.BackendID != l.opts.BackendID {
			continue
		}
		pr.TableLen = coreTableLen(pr.API.Minor)
		if best < 0 || betterProvider(pr, chosen) {
			best, chosen = i, pr
		}
	}
	if best < 0 {
		want := "core API 2.18 or later"
		if l.opts.BackendID != 0 {
			want += fmt.Sprintf(" for backend %d", l.opts.BackendID)
		}
		return fmt.Errorf("qnnrt: %q offers no usable QNN provider (need %s); found %s",
			l.opts.BackendPath, want, strings.Join(found, ", "))
	}
	l.provider = chosen
	table := unsafe.Add(ptrs[best], coreTableOffset)
	for i := 0; i < numCoreFns && i < chosen.TableLen; i++ {
		l.core[i] = loadUintptr(table, uintptr(i)*tableEntrySize)
	}
	for _, need := range []struct {
		idx  int
		name string
	}{
		{fnBackendCreate, "backendCreate"}, {fnBackendFree, "backendFree"},
		{fnContextCreateFromBinary, "contextCreateFromBinary"}, {fnContextFree, "contextFree"},
		{fnGraphRetrieve, "graphRetrieve"}, {fnGraphExecute, "graphExecute"},
		{fnLogCreate, "logCreate"}, {fnLogFree, "logFree"},
	} {
		if l.core[need.idx] == 0 {
			return fmt.Errorf("qnnrt: provider %s of %q has no %s", chosen, l.opts.BackendPath, need.name)
		}
	}
	return nil
}

// betterProvider orders eligible providers: HTP first, then the newest API.
func betterProvider(a, b Provider) bool {
	if (a.BackendID == backendIDHTP) != (b.BackendID == backendIDHTP) {
		return a.BackendID == backendIDHTP
	}
	return a.API.Minor > b.API.Minor
}

func (l *Library) loadSystem() error {
	h, err := dlopen("system", l.opts.SystemPath)
	if err != nil {
		return err
	}
	l.systemHandle = h
	ptrs, err := getProviders(h, l.opts.SystemPath, "QnnSystemInterface_getProviders")
	if err != nil {
		return err
	}
	best := -1
	var found []string
	for i, p := range ptrs {
		hdr := (*systemInterfaceHeader)(p)
		pr := Provider{Name: goString(hdr.ProviderName), API: hdr.SystemAPIVersion.version()}
		found = append(found, pr.String())
		if pr.API.Major != systemAPIMajor || pr.API.Minor < minSystemAPIMinor {
			continue
		}
		if best < 0 || pr.API.Minor > l.sysProvider.API.Minor {
			best = i
			pr.TableLen = systemTableLen1_1
			l.sysProvider = pr
		}
	}
	if best < 0 {
		return fmt.Errorf("qnnrt: %q offers no usable QNN system provider (need system API 1.1 or later); found %s",
			l.opts.SystemPath, strings.Join(found, ", "))
	}
	table := unsafe.Add(ptrs[best], systemTableOffset)
	for i := 0; i < numSystemFns; i++ {
		l.sys[i] = loadUintptr(table, uintptr(i)*tableEntrySize)
	}
	for _, need := range []struct {
		idx  int
		name string
	}{
		{fnSystemContextCreate, "systemContextCreate"}, {fnSystemContextGetMetaData, "systemContextGetMetaData"},
		{fnSystemContextFree, "systemContextFree"},
	} {
		if l.sys[need.idx] == 0 {
			return fmt.Errorf("qnnrt: system provider %s of %q has no %s", l.sysProvider, l.opts.SystemPath, need.name)
		}
	}
	return nil
}

// call runs the QNN function fn and returns nil when it succeeds, else the
// *Error for op carrying the last ERROR line the library logged during the
// call.
//
//go:uintptrescapes
func (l *Library) call(op string, fn uintptr, args ...uintptr) error {
	mark := l.logs.mark()
	if ret := ccall(fn, args...); ret != 0 {
		return l.failed(op, ret, mark)
	}
	return nil
}

// failed builds the *Error of a call of op that returned ret, with the
// last ERROR line logged since mark (read before errorGetMessage, which
// may log too).
func (l *Library) failed(op string, ret uint64, mark uint64) *Error {
	logged := l.logs.errorSince(mark)
	e := l.qnnError(op, ret)
	e.Log, e.LogLines = logged.last, int(logged.n)
	if logged.n > 1 {
		e.LogFirst = logged.first
	}
	return e
}

// qnnError builds the Error for a failed call of op, with the backend's
// message for the code when the backend offers one.
func (l *Library) qnnError(op string, ret uint64) *Error {
	code := errorCode(ret)
	e := &Error{Op: op, Code: code, Name: ErrorName(code)}
	if fn := l.core[fnErrorGetMessage]; fn != 0 {
		var msg unsafe.Pointer
		if ccall(fn, uintptr(ret), uintptr(unsafe.Pointer(&msg))) == 0 {
			e.Message = goString(msg)
		}
	}
	return e
}

// warnOnce records a warning and passes it to Options.Logf, once per key.
func (l *Library) warnOnce(key, format string, args ...any) {
	l.mu.Lock()
	if l.warned[key] {
		l.mu.Unlock()
		return
	}
	l.warned[key] = true
	msg := fmt.Sprintf(format, args...)
	l.warnings = append(l.warnings, msg)
	logf := l.opts.Logf
	l.mu.Unlock()
	if logf != nil {
		logf("%s", msg)
	}
}

// Warnings returns the warnings reported so far, oldest first.
func (l *Library) Warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.warnings...)
}

// Close closes every session still open, then unloads the libraries. It is
// safe to call more than once.
func (l *Library) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	sessions := make([]*Session, 0, len(l.sessions))
	for s := range l.sessions {
		sessions = append(sessions, s)
	}
	l.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		errs = append(errs, s.Close())
	}
	if l.logs != nil {
		router.unregister(l.logs)
		l.logs.flush()
	}
	errs = append(errs, l.unload())
	return errors.Join(errs...)
}

func (l *Library) unload() error {
	var errs []error
	for _, h := range []*uintptr{&l.rpcLib, &l.backendHandle, &l.systemHandle} {
		if *h != 0 {
			if err := purego.Dlclose(*h); err != nil {
				errs = append(errs, fmt.Errorf("qnnrt: dlclose: %w", err))
			}
			*h = 0
		}
	}
	l.core = [numCoreFns]uintptr{}
	l.sys = [numSystemFns]uintptr{}
	l.rpc = nil
	return errors.Join(errs...)
}

func (l *Library) addSession(s *Session) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("qnnrt: library is closed")
	}
	if l.backendHandle == 0 {
		return errors.New("qnnrt: library was opened with OpenSystem: no backend to run sessions on")
	}
	l.sessions[s] = struct{}{}
	return nil
}

func (l *Library) removeSession(s *Session) {
	l.mu.Lock()
	delete(l.sessions, s)
	l.mu.Unlock()
}
