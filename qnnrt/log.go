package qnnrt

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// LogLevel is a QNN log level (QnnLog_Level_t): a line of level l is
// delivered when l is at most the level a session asked for.
type LogLevel int

// The QNN log levels (QNN_LOG_LEVEL_* of the layout table).
const (
	LogError   LogLevel = 1
	LogWarn    LogLevel = 2
	LogInfo    LogLevel = 3
	LogVerbose LogLevel = 4
	LogDebug   LogLevel = 5
)

// String returns the level's name: ERROR, WARN, INFO, VERBOSE, DEBUG, or
// LEVEL(n) for a value outside the enum (a library may send one).
func (l LogLevel) String() string {
	switch l {
	case LogError:
		return "ERROR"
	case LogWarn:
		return "WARN"
	case LogInfo:
		return "INFO"
	case LogVerbose:
		return "VERBOSE"
	case LogDebug:
		return "DEBUG"
	}
	return fmt.Sprintf("LEVEL(%d)", int(l))
}

// LogLine is one line a QNN library logged through the runtime's log
// callback, formatted.
type LogLine struct {
	Level     LogLevel
	Timestamp uint64 // the library's timestamp, in the library's units
	Text      string // the formatted line, trailing newlines removed, valid UTF-8
}

// DefaultLogLinesPerSecond is the log rate limit of a Library whose
// Options.LogLinesPerSecond is 0.
const DefaultLogLinesPerSecond = 200

const (
	// firstLogBuf is the buffer the first vsnprintf of a line gets.
	firstLogBuf = 512
	// maxLogLine bounds a formatted line; longer ones are truncated.
	maxLogLine = 16 << 10
)

// logRouter is the process's one QNN log callback and the sinks it feeds.
//
// QnnLog_Callback_t, `void cb(const char* fmt, QnnLog_Level_t level,
// uint64_t timestamp, va_list args)`, carries no user-data pointer, so the
// callback cannot tell which Library's session a line belongs to. And a
// purego callback can never be freed, and purego has a fixed number of
// them per process (2000), so making one per session or Library would leak
// them without bound. Hence one callback per process, made on first use,
// and one mutex-guarded registry of the sinks of open Libraries, to which
// every line goes: this package-level state is unavoidable.
type logRouter struct {
	once      sync.Once
	fn        uintptr // the QnnLog_Callback_t handed to logCreate
	vsnprintf uintptr // libc's vsnprintf
	vaList    int     // sizeof(va_list) on this architecture
	err       error   // why there is no callback

	mu    sync.Mutex
	sinks map[*logSink]struct{}
}

// router is the process-wide log router (see logRouter for why it exists).
var router = logRouter{sinks: map[*logSink]struct{}{}}

// vaListSize is sizeof(va_list) on the architectures the callback
// supports, 0 elsewhere. On linux/amd64 va_list is `__va_list_tag[1]`, a
// 24-byte struct in an array; on linux/arm64 (AAPCS64) it is the 32-byte
// struct __va_list.
func vaListSize(goarch string) int {
	switch goarch {
	case "amd64":
		return 24
	case "arm64":
		return 32
	}
	return 0
}

// callback returns the process's log callback, making it on first use, or
// the reason there is none.
func (r *logRouter) callback() (uintptr, error) {
	r.once.Do(r.init)
	return r.fn, r.err
}

func (r *logRouter) init() {
	r.vaList = vaListSize(runtime.GOARCH)
	if r.vaList == 0 {
		r.err = fmt.Errorf("qnnrt: QNN log callback: va_list forwarding is implemented for linux/amd64 and linux/arm64, not %s", runtime.GOARCH)
		return
	}
	var errs []error
	for _, name := range []string{"libc.so.6", "libc.so"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if r.vsnprintf, err = purego.Dlsym(h, "vsnprintf"); err == nil && r.vsnprintf != 0 {
			break
		}
		errs = append(errs, fmt.Errorf("%s has no vsnprintf: %v", name, err))
	}
	if r.vsnprintf == 0 {
		r.err = fmt.Errorf("qnnrt: QNN log callback: cannot load vsnprintf from libc: %w", errors.Join(errs...))
		return
	}
	r.fn, r.err = newLogCallback(r.dispatch)
}

// newLogCallback makes the C function pointer of f. purego.NewCallback
// panics when its fixed table of callbacks is full (other code in the
// process may have used it up); that panic is turned into an error here,
// and the runtime then logs with QNN's platform default.
func newLogCallback(f func(format unsafe.Pointer, level uint32, timestamp uint64, args unsafe.Pointer)) (fn uintptr, err error) {
	defer func() {
		if p := recover(); p != nil {
			fn, err = 0, fmt.Errorf("qnnrt: QNN log callback: purego.NewCallback: %v", p)
		}
	}()
	return purego.NewCallback(f), nil
}

// dispatch is the QnnLog_Callback_t. It may run on any thread, a thread
// the library created included, while the library is inside one of its
// calls.
func (r *logRouter) dispatch(format unsafe.Pointer, level uint32, timestamp uint64, args unsafe.Pointer) {
	line := LogLine{Level: LogLevel(level), Timestamp: timestamp, Text: r.format(format, args)}
	r.mu.Lock()
	sinks := make([]*logSink, 0, len(r.sinks))
	for s := range r.sinks {
		sinks = append(sinks, s)
	}
	r.mu.Unlock()
	for _, s := range sinks {
		s.deliver(line)
	}
}

// format formats a line with libc's vsnprintf.
//
// How the va_list is passed on: the callback's fourth argument arrives as
// a pointer on both supported ABIs. On amd64 va_list is an array type
// (`__va_list_tag[1]`), which decays to a pointer to its 24-byte struct
// when passed. On arm64 AAPCS64 passes the 32-byte struct __va_list, a
// composite larger than 16 bytes, by invisible reference: the caller makes
// a copy and passes its address. vsnprintf takes its va_list parameter the
// same way, so the same kind of pointer is passed on. vsnprintf consumes
// the list it is given (it advances the offsets in the struct), so each
// call gets a fresh copy: on both ABIs va_copy is a plain copy of the
// struct, whose pointers (register save area, stack arguments) point into
// the caller's frame, alive for the duration of the callback.
func (r *logRouter) format(format, args unsafe.Pointer) string {
	if format == nil {
		return ""
	}
	if args == nil {
		return clean(goString(format))
	}
	var ap [4]uint64 // the va_copy, 8-aligned, at least 32 bytes
	buf := make([]byte, firstLogBuf)
	for {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&ap[0])), r.vaList), unsafe.Slice((*byte)(args), r.vaList))
		// vsnprintf returns an int: only the low 32 bits of the register are defined.
		n := int(int32(uint32(ccall(r.vsnprintf, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(format),
			uintptr(unsafe.Pointer(&ap[0]))))))
		switch {
		case n < 0:
			return clean("qnnrt: unformattable QNN log line: " + goString(format))
		case n < len(buf):
			return clean(string(buf[:n]))
		case len(buf) < maxLogLine:
			buf = make([]byte, min(n+1, maxLogLine))
		default:
			return clean(string(buf[:len(buf)-1])) + " [truncated]"
		}
	}
}

// clean drops trailing line breaks and replaces invalid UTF-8.
func clean(s string) string {
	return strings.ToValidUTF8(strings.TrimRight(s, "\r\n"), "\uFFFD")
}

func (r *logRouter) register(s *logSink) {
	r.mu.Lock()
	r.sinks[s] = struct{}{}
	r.mu.Unlock()
}

func (r *logRouter) unregister(s *logSink) {
	r.mu.Lock()
	delete(r.sinks, s)
	r.mu.Unlock()
}

// logSink is one Library's end of the log router: it keeps the last ERROR
// lines (for error messages) and passes lines on to Options.LogSink. ERROR
// lines always pass: in a flood they are the root cause a user needs. The
// other levels of the enum each have a budget of limit lines a second of
// their own, so a flood of DEBUG lines cannot crowd out a WARN; every raw
// value outside the enum shares one budget (budgetOf), so a library cannot
// multiply the limit by sending each line at a level of its own.
type logSink struct {
	out   func(LogLine) // nil: lines are only kept for errors
	limit int           // lines per second and level; negative = unlimited
	now   func() time.Time

	errors atomic.Uint64 // ERROR lines seen

	mu         sync.Mutex
	recent     [errorRing]string // the last ERROR lines; line n (1-based) at recent[n%errorRing]
	window     time.Time         // start of the current one-second window
	inWindow   map[LogLevel]int  // lines delivered in it, per budget (budgetOf)
	suppressed map[LogLevel]int  // lines dropped in it, per budget (budgetOf)
}

// otherLevels is the one budget of every level outside QNN's enum; it is
// not itself a level a library can send (the enum starts at 1).
const otherLevels LogLevel = -1 << 31

// budgetOf returns the budget a line of level l counts against: its own
// level within QNN's enum, otherLevels for any other value.
func budgetOf(l LogLevel) LogLevel {
	if l < LogError || l > LogDebug {
		return otherLevels
	}
	return l
}

func newLogSink(out func(LogLine), perSecond int) *logSink {
	if perSecond == 0 {
		perSecond = DefaultLogLinesPerSecond
	}
	return &logSink{out: out, limit: perSecond, now: time.Now,
		inWindow: map[LogLevel]int{}, suppressed: map[LogLevel]int{}}
}

// deliver records line and passes it on: always when it is an ERROR line,
// else unless this second's budget of its level is spent; the first line
// of a new window is preceded by a summary of the lines the last one
// suppressed.
func (s *logSink) deliver(line LogLine) {
	s.mu.Lock()
	if line.Level == LogError {
		n := s.errors.Load() + 1
		s.recent[n%errorRing] = line.Text
		s.errors.Store(n) // under s.mu: the only writer
	}
	if s.out == nil {
		s.mu.Unlock()
		return
	}
	var summary *LogLine
	if now := s.now(); now.Sub(s.window) >= time.Second {
		summary = s.summaryLocked()
		s.window = now
		clear(s.inWindow)
	}
	b := budgetOf(line.Level)
	pass := line.Level == LogError || s.limit < 0 || s.inWindow[b] < s.limit
	if pass {
		s.inWindow[b]++
	} else {
		s.suppressed[b]++
	}
	s.mu.Unlock()
	if summary != nil {
		s.out(*summary)
	}
	if pass {
		s.out(line)
	}
}

// summaryLocked returns the "suppressed" line for the current window,
// with the count of each level, and resets the counts, or nil when nothing
// was suppressed; s.mu is held.
func (s *logSink) summaryLocked() *LogLine {
	var parts []string
	total := 0
	for _, b := range []LogLevel{LogWarn, LogInfo, LogVerbose, LogDebug, otherLevels} {
		n := s.suppressed[b]
		if n == 0 {
			continue
		}
		name := b.String()
		if b == otherLevels {
			name = "other-level"
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, name))
		total += n
	}
	if total == 0 {
		return nil
	}
	clear(s.suppressed)
	return &LogLine{Level: LogWarn, Text: fmt.Sprintf("qnnrt: suppressed %d QNN log lines (%s; more than %d of a level in one second; ERROR lines are never suppressed)",
		total, strings.Join(parts, ", "), s.limit)}
}

// flush delivers the summary of lines suppressed and not yet reported.
func (s *logSink) flush() {
	if s == nil {
		return
	}
	s.mu.Lock()
	summary := s.summaryLocked()
	s.mu.Unlock()
	if summary != nil && s.out != nil {
		s.out(*summary)
	}
}

// mark returns a token for errorSince, taken before a QNN call.
func (s *logSink) mark() uint64 {
	if s == nil {
		return 0
	}
	return s.errors.Load()
}

// errorRing is how many recent ERROR lines a sink keeps.
const errorRing = 64

// callErrors are the ERROR lines logged during one call.
type callErrors struct {
	first, last string
	n           uint64 // how many
}

// errorSince returns the ERROR lines logged since mark was taken: a real
// backend logs the root cause first and the outermost failure last (the
// x86 HTP emulator, failing contextCreateFromBinary: "Serializer failed to
// get context blob." first, "Failed to create context from binary with
// err 0x753a" last). With more lines than the sink keeps, first is the
// oldest one kept. With calls running concurrently in several sessions the
// lines may belong to another session's call: QNN's callback does not say
// who logged them.
func (s *logSink) errorSince(mark uint64) callErrors {
	if s == nil {
		return callErrors{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.errors.Load()
	if n <= mark {
		return callErrors{}
	}
	first := mark + 1
	if n-mark > errorRing {
		first = n - errorRing + 1
	}
	return callErrors{first: s.recent[first%errorRing], last: s.recent[n%errorRing], n: n - mark}
}
