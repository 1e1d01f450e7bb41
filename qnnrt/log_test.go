package qnnrt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// logCapture collects the lines a Library passes to its LogSink.
type logCapture struct {
	mu    sync.Mutex
	lines []LogLine
}

func (c *logCapture) sink(l LogLine) {
	c.mu.Lock()
	c.lines = append(c.lines, l)
	c.mu.Unlock()
}

func (c *logCapture) take() []LogLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.lines
	c.lines = nil
	return out
}

// openLogged opens the double with a capturing LogSink and no rate limit.
func openLogged(t *testing.T, fk *qnnfake.Lib) (*Library, *logCapture) {
	t.Helper()
	c := &logCapture{}
	o := libOpts(fk)
	o.LogSink, o.LogLinesPerSecond = c.sink, -1
	l, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	if w := l.Warnings(); len(w) != 0 {
		t.Fatalf("no log callback: %q", w)
	}
	return l, c
}

// emitted is the text the double's EmitFormat gives for these values, the
// way C's printf formats them: %p is 0x and lowercase hex (glibc), %f six
// decimals.
func emitted(who, s string, d int32, u uint32, llu uint64, f float64, p uintptr) string {
	return fmt.Sprintf("%s: s=%s d=%d u=%d x=%x llu=%d f=%f g=%.3f p=%#x", who, s, d, u, u, llu, f, f, p)
}

// TestLogCallbackFormats proves the callback formats the library's
// printf-style lines (%s %d %u %x %llu %f %.3f %p) with the values the
// library passed, from the calling thread and from a thread the library
// created, and that the session's log level decides what arrives.
func TestLogCallbackFormats(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l, c := openLogged(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	b := actionBinary(g)
	path := writeBinary(t, b)
	s := newSession(t, l, SessionOptions{ContextPath: path, LogLevel: int(LogDebug), Profiling: true})

	size := len(b.Marshal())
	wantParts := map[LogLevel]string{
		LogInfo:    fmt.Sprintf("created from %d bytes: 1 graph(s), SoC %d, build %q", size, b.SocModel, b.BuildID),
		LogVerbose: fmt.Sprintf("deserializing context blob: %d bytes at 0x", size),
		LogWarn:    "deviceCreate: no device config given; using the default device 0",
	}
	lines := c.take()
	for lv, part := range wantParts {
		found := false
		for _, ln := range lines {
			found = found || (ln.Level == lv && strings.Contains(ln.Text, part))
		}
		if !found {
			t.Errorf("no %s line containing %q in %+v", lv, part, lines)
		}
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].Timestamp <= lines[i-1].Timestamp {
			t.Errorf("timestamps not passed through in order: %+v", lines)
		}
	}

	gr, _ := s.Graph("action_step")
	runGraph(t, gr, randomInputs(g, 3), outLens(g))
	want := fmt.Sprintf(`graphExecute "action_step": %d inputs, %d outputs, execute 1, %.3f ms (profile 0x`, len(g.Inputs), len(g.Outputs), 1.5)
	if got := c.take(); len(got) != 1 || got[0].Level != LogDebug || !strings.HasPrefix(got[0].Text, want) {
		t.Errorf("execute logged %+v, want one DEBUG line starting %q", got, want)
	}

	for _, tc := range []struct {
		s   string
		d   int32
		u   uint32
		llu uint64
		f   float64
		p   uintptr
	}{
		{"hello", -42, 4000000000, 1<<60 + 5, 3.14159, 0x7f12345678},
		{"", 0, 0, 0, -0.5, 1},
		{"ünïcödé and 100% literal", 2147483647, 1, 18446744073709551615, 1e-7, 0xdeadbeef},
	} {
		fk.EmitLog(uint32(LogWarn), tc.s, tc.d, tc.u, tc.llu, tc.f, tc.p)
		fk.EmitLogFromThread(uint32(LogInfo), tc.s, tc.d, tc.u, tc.llu, tc.f, tc.p)
		got := c.take()
		want := []LogLine{
			{Level: LogWarn, Text: emitted("fake_emit_log", tc.s, tc.d, tc.u, tc.llu, tc.f, tc.p)},
			{Level: LogInfo, Text: emitted("fake_emit_log thread", tc.s, tc.d, tc.u, tc.llu, tc.f, tc.p)},
		}
		if len(got) != 2 {
			t.Fatalf("got %d lines, want 2: %+v", len(got), got)
		}
		for i := range want {
			if got[i].Level != want[i].Level || got[i].Text != want[i].Text {
				t.Errorf("line %d: got %s %q\n               want %s %q", i, got[i].Level, got[i].Text, want[i].Level, want[i].Text)
			}
		}
	}

	// The level given to logCreate filters: a WARN session gets ERROR and
	// WARN only.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.take()
	s2 := newSession(t, l, SessionOptions{ContextPath: path})
	if got := c.take(); len(got) != 1 || got[0].Level != LogWarn {
		t.Errorf("WARN session's creation logged %+v, want only the WARN line", got)
	}
	for lv := LogError; lv <= LogDebug; lv++ {
		fk.EmitLog(uint32(lv), "lv", int32(lv), 0, 0, 0, 1)
	}
	if got := c.take(); len(got) != 2 || got[0].Level != LogError || got[1].Level != LogWarn {
		t.Errorf("WARN session got %+v, want one ERROR and one WARN line", got)
	}
	_ = s2
}

// TestLogLongLines checks lines longer than the first buffer are formatted
// in full and lines beyond the bound are truncated, not overrun.
func TestLogLongLines(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l, c := openLogged(t, fk)
	newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())))})
	c.take()
	long := strings.Repeat("abcdefghij", 100) // 1000 bytes: more than the first 512-byte buffer
	fk.EmitLog(1, long, 1, 2, 3, 4, 5)
	if got := c.take(); len(got) != 1 || got[0].Text != emitted("fake_emit_log", long, 1, 2, 3, 4, 5) {
		t.Errorf("1000-byte argument: got %d bytes", len(got[0].Text))
	}
	huge := strings.Repeat("x", 3*maxLogLine)
	fk.EmitLogFromThread(1, huge, 1, 2, 3, 4, 5)
	full := emitted("fake_emit_log thread", huge, 1, 2, 3, 4, 5)
	want := full[:maxLogLine-1] + " [truncated]"
	if got := c.take(); len(got) != 1 || got[0].Text != want {
		t.Errorf("oversized line: got %d bytes, want the first %d and a mark", len(got[0].Text), maxLogLine-1)
	}
}

// TestLogErrorInError checks a failing call's error carries the last ERROR
// line the library logged during it, and that a line logged before the
// call is not taken for its reason.
func TestLogErrorInError(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l, _ := openLogged(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	path := writeBinary(t, actionBinary(g))
	s := newSession(t, l, SessionOptions{ContextPath: path, LogLevel: int(LogError)})
	gr, _ := s.Graph("action_step")
	in := randomInputs(g, 1)
	fk.EmitLog(uint32(LogError), "stale", 0, 0, 0, 0, 1) // an ERROR line outside any call
	fk.FailCall("graphExecute", 1007, 1)
	_, err := gr.Run(t.Context(), in, outputsFor(g))
	want := "; QNN log: graphExecute: injected failure (call 1, code 1007) (error 1007)"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v, want it to end with %q", err, want)
	}
	fk.EmitLog(uint32(LogError), "stale", 0, 0, 0, 0, 1)
	fk.FailCall("graphExecute", 1011, 1)
	fk.FailCall("errorGetMessage", 1000, 1) // its own failure logs an ERROR after graphExecute's
	_, err = gr.Run(t.Context(), in, outputsFor(g))
	var qe *Error
	if !errors.As(err, &qe) || qe.Log != "graphExecute: injected failure (call 2, code 1011) (error 1011)" || qe.Message != "" {
		t.Errorf("error %#v: Log should be graphExecute's reason", qe)
	}
	// A failure that logs nothing (the stale line is older) carries none.
	fk.EmitLog(uint32(LogError), "stale", 0, 0, 0, 0, 1)
	if _, err := gr.Run(t.Context(), in[:1], outputsFor(g)); err == nil || strings.Contains(err.Error(), "QNN log") {
		t.Errorf("runtime-side error %v carries a QNN log line", err)
	}
}

// TestLogRateLimitOtherLevels checks that levels outside QNN's enum share
// one budget: a library sending each line at a raw level of its own (0,
// 6, 7, …, negative) gets limit lines a second in all, not limit per value.
func TestLogRateLimitOtherLevels(t *testing.T) {
	var got []LogLine
	s := newLogSink(func(l LogLine) { got = append(got, l) }, 3)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	levels := []LogLevel{0, -1, 6, 7, 1 << 20, -1 << 31, 1<<31 - 1}
	for i := range 100 {
		l := LogLevel(6 + i)
		if i < len(levels) {
			l = levels[i]
		}
		s.deliver(LogLine{Level: l, Text: fmt.Sprint(i)})
	}
	s.deliver(LogLine{Level: LogDebug, Text: "debug"}) // the enum's levels keep their own budgets
	if len(got) != 4 || got[0].Text != "0" || got[2].Text != "2" || got[3].Text != "debug" {
		texts := make([]string, 0, 8)
		for _, l := range got[:min(len(got), 8)] {
			texts = append(texts, l.Text)
		}
		t.Fatalf("delivered %d lines %q…, want lines 0, 1, 2 (one budget of 3 for every level outside the enum) and the DEBUG line", len(got), texts)
	}
	if len(s.inWindow) != 2 || len(s.suppressed) != 1 {
		t.Errorf("%d budgets in use and %d with drops, want 2 and 1: the maps grow with the raw levels sent", len(s.inWindow), len(s.suppressed))
	}
	got = nil
	s.flush()
	if len(got) != 1 || !strings.HasPrefix(got[0].Text, "qnnrt: suppressed 97 QNN log lines (97 other-level;") {
		t.Errorf("flush delivered %+v, want one summary of 97 other-level lines", got)
	}
}

// TestLogRateLimit checks the per-second budget of each level, that ERROR
// lines are never suppressed, and the summary of what was, with a
// controlled clock.
func TestLogRateLimit(t *testing.T) {
	var got []LogLine
	s := newLogSink(func(l LogLine) { got = append(got, l) }, 3)
	t0 := time.Unix(1000, 0)
	now := t0
	s.now = func() time.Time { return now }
	for i := range 10 {
		s.deliver(LogLine{Level: LogInfo, Text: fmt.Sprint(i)})
	}
	s.deliver(LogLine{Level: LogError, Text: "boom"})
	s.deliver(LogLine{Level: LogWarn, Text: "warn"}) // a budget of its own
	if s.errorSince(0).last != "boom" {
		t.Error("the ERROR line was not kept for errors")
	}
	now = t0.Add(999 * time.Millisecond)
	s.deliver(LogLine{Level: LogInfo, Text: "late"})
	now = t0.Add(time.Second)
	s.deliver(LogLine{Level: LogInfo, Text: "next"})
	want := []string{"0", "1", "2", "boom", "warn",
		"qnnrt: suppressed 8 QNN log lines (8 INFO; more than 3 of a level in one second; ERROR lines are never suppressed)", "next"}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %q", got, want)
	}
	for i, w := range want {
		if got[i].Text != w {
			t.Errorf("line %d %q, want %q", i, got[i].Text, w)
		}
	}
	if got[5].Level != LogWarn {
		t.Errorf("summary at %s, want WARN", got[5].Level)
	}
	for range 5 {
		s.deliver(LogLine{Text: "more"})
	}
	got = nil
	s.flush()
	if len(got) != 1 || !strings.HasPrefix(got[0].Text, "qnnrt: suppressed 2 QNN log lines (2 other-level;") {
		t.Errorf("flush delivered %+v", got)
	}
	got = nil
	s.flush()
	if len(got) != 0 {
		t.Errorf("second flush delivered %+v", got)
	}
	got = nil
	for i := range 10 { // ERROR lines have no budget at all
		s.deliver(LogLine{Level: LogError, Text: fmt.Sprint("e", i)})
	}
	if len(got) != 10 {
		t.Errorf("%d of 10 ERROR lines in one second delivered with a budget of 3", len(got))
	}
	if d := newLogSink(nil, 0); d.limit != DefaultLogLinesPerSecond {
		t.Errorf("default limit %d", d.limit)
	}
}

// TestLogFloodKeepsErrors: the double logs a flood of DEBUG lines, far
// over the budget, with two ERROR lines in it (the root cause and the
// failure, as a real backend does); both ERROR lines reach the sink, and
// a summary counts the DEBUG lines dropped. Qualcomm's x86 HTP emulator
// lost both root-cause lines this way when the budget was shared.
func TestLogFloodKeepsErrors(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	c := &logCapture{}
	o := libOpts(fk)
	o.LogSink, o.LogLinesPerSecond = c.sink, 50
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims()))), LogLevel: 5})
	c.take()
	const flood = 2000
	for i := range flood {
		switch i {
		case 700:
			fk.EmitLog(1, "root cause", int32(i), 0, 0, 0, 1)
		case 1400:
			fk.EmitLog(1, "failure", int32(i), 0, 0, 0, 1)
		default:
			fk.EmitLog(5, "debug", int32(i), 0, 0, 0, 1)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var errs []string
	debug, summaries := 0, 0
	for _, line := range c.take() {
		switch {
		case line.Level == LogError:
			errs = append(errs, line.Text)
		case line.Level == LogDebug:
			debug++
		case strings.HasPrefix(line.Text, "qnnrt: suppressed "):
			summaries++
			if !strings.Contains(line.Text, "DEBUG") {
				t.Errorf("summary %q does not count the DEBUG lines", line.Text)
			}
		}
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "root cause") || !strings.Contains(errs[1], "failure") {
		t.Errorf("ERROR lines delivered %q, want the root cause and the failure", errs)
	}
	if debug >= flood-2 || summaries == 0 {
		t.Errorf("%d DEBUG lines delivered and %d summaries: the flood was not limited", debug, summaries)
	}
}

// TestLogSinkUnregistered checks a closed Library gets no more lines and
// its suppressed-lines summary is delivered on Close.
func TestLogSinkUnregistered(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	c := &logCapture{}
	o := libOpts(fk)
	o.LogSink, o.LogLinesPerSecond = c.sink, 1
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims()))), LogLevel: 5})
	_ = s
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := c.take()
	if len(got) < 2 || !strings.HasPrefix(got[len(got)-1].Text, "qnnrt: suppressed ") {
		t.Errorf("lines %+v, want the first line and a closing summary", got)
	}
	fk.EmitLog(1, "after", 0, 0, 0, 0, 1)
	if got := c.take(); len(got) != 0 {
		t.Errorf("closed Library got %+v", got)
	}
}

func TestLogLevelString(t *testing.T) {
	for lv, want := range map[LogLevel]string{LogError: "ERROR", LogWarn: "WARN", LogInfo: "INFO", LogVerbose: "VERBOSE", LogDebug: "DEBUG", 9: "LEVEL(9)"} {
		if lv.String() != want {
			t.Errorf("%d: %q, want %q", int(lv), lv, want)
		}
	}
}

// TestLogCallbackWithoutCgo runs TestLogCallbackFormats (lines from the
// library's own pthread included) in a test binary built with
// CGO_ENABLED=0, as the fastwam tool is: purego then calls back through
// its own runtime/cgo replacement, which must accept non-Go threads too.
func TestLogCallbackWithoutCgo(t *testing.T) {
	if os.Getenv("QNNRT_NOCGO_CHILD") != "" || !cgoBuild {
		t.Skip("this is the CGO_ENABLED=0 run")
	}
	if testing.Short() {
		t.Skip("builds the package's tests again without cgo")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goTool, "test", "-count=1", "-v", "-run", "^(TestLogCallbackFormats|TestLogLongLines)$", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "QNNRT_NOCGO_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("CGO_ENABLED=0 run: %v\n%s", err, out)
	}
	for _, name := range []string{"TestLogCallbackFormats", "TestLogLongLines"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Errorf("CGO_ENABLED=0 run did not pass %s:\n%s", name, out)
		}
	}
}

// TestCallErrors checks the first and last ERROR lines since a mark, the
// ring's bound, and how an *Error shows them.
func TestCallErrors(t *testing.T) {
	s := newLogSink(nil, 0)
	s.deliver(LogLine{Level: LogError, Text: "before"})
	m := s.mark()
	if got := s.errorSince(m); got != (callErrors{}) {
		t.Errorf("no line since the mark: %+v", got)
	}
	s.deliver(LogLine{Level: LogError, Text: "Serializer failed to get context blob."})
	s.deliver(LogLine{Level: LogInfo, Text: "not an error"})
	s.deliver(LogLine{Level: LogError, Text: "Failed to create context from binary with err 0x753a"})
	got := s.errorSince(m)
	if got != (callErrors{first: "Serializer failed to get context blob.", last: "Failed to create context from binary with err 0x753a", n: 2}) {
		t.Errorf("errorSince %+v", got)
	}
	m = s.mark()
	for i := range errorRing + 10 {
		s.deliver(LogLine{Level: LogError, Text: fmt.Sprint(i)})
	}
	if got := s.errorSince(m); got.n != errorRing+10 || got.first != "10" || got.last != fmt.Sprint(errorRing+9) {
		t.Errorf("past the ring: %+v, want the oldest kept line first", got)
	}
	e := &Error{Op: "contextCreateFromBinary", Code: 30010, Name: ErrorName(30010), Log: "last one", LogFirst: "root cause", LogLines: 4}
	if want := "qnnrt: contextCreateFromBinary: QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY (30010); QNN log: root cause (first of 4 ERROR lines; last: last one)"; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	e.LogFirst, e.LogLines = "", 1
	if want := "qnnrt: contextCreateFromBinary: QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY (30010); QNN log: last one"; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
}

// BenchmarkLogLine measures one library log line through the callback:
// vsnprintf, routing and a discarding sink.
func BenchmarkLogLine(b *testing.B) {
	fk := qnnfake.New(b, qnnfake.Variant{})
	o := libOpts(fk)
	o.LogSink, o.LogLinesPerSecond = func(LogLine) {}, -1
	l, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	newSession(b, l, SessionOptions{ContextPath: writeBinary(b, actionBinary(qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims()))), LogLevel: 5})
	b.ReportAllocs()
	for b.Loop() {
		fk.EmitLog(2, "benchmark", -1, 2, 3, 4.5, 0x1234)
	}
}

// TestLogHostileLines checks what a library can throw at the callback: a
// NULL format or va_list, invalid UTF-8, a level outside the enum.
func TestLogHostileLines(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l, c := openLogged(t, fk)
	newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims()))), LogLevel: 5})
	c.take()
	fk.EmitLog(2, "bad \xff\xfe bytes", 1, 2, 3, 4, 5)
	fk.EmitLog(0, "level zero", 1, 2, 3, 4, 5)
	got := c.take()
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	if want := strings.ToValidUTF8(emitted("fake_emit_log", "bad \xff\xfe bytes", 1, 2, 3, 4, 5), "\uFFFD"); got[0].Text != want {
		t.Errorf("invalid UTF-8: %q, want %q", got[0].Text, want)
	}
	if got[1].Level.String() != "LEVEL(0)" || !strings.Contains(got[1].Text, "level zero") {
		t.Errorf("level 0 line %+v", got[1])
	}
	if _, err := router.callback(); err != nil {
		t.Fatal(err)
	}
	if s := router.format(nil, nil); s != "" {
		t.Errorf("NULL format gave %q", s)
	}
	f := []byte("no va_list: %d %s\n\x00")
	if s := router.format(unsafe.Pointer(&f[0]), nil); s != "no va_list: %d %s" {
		t.Errorf("NULL va_list gave %q, want the format unformatted", s)
	}
}
