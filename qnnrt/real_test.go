package qnnrt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// realLib returns the path of a real Qualcomm x86_64 library (QNN 2.25,
// not redistributable) in $QNNRT_REAL_LIBS, or skips.
func realLib(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("QNNRT_REAL_LIBS")
	if dir == "" {
		t.Skip("QNNRT_REAL_LIBS is not set (a directory with Qualcomm's x86_64 QNN 2.25 libQnnSaver.so and libQnnHtpQemu.so)")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s: %v", name, err)
	}
	return p
}

// openReal opens a real backend with the test double as system and rpcmem
// library (it parses the double's binaries) and a capturing log sink.
func openReal(t *testing.T, backend string) (*Library, *logCapture) {
	t.Helper()
	fk := fakeLib(t, qnnfake.Variant{})
	c := &logCapture{}
	l, err := Open(Options{BackendPath: backend, SystemPath: fk.Path, RPCMemPath: fk.Path, LogSink: c.sink, LogLinesPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, c
}

// TestRealSaverProfiling: Qualcomm's Saver backend answers profileGetEvents
// with 4950 after every execute; the executes must still succeed.
func TestRealSaverProfiling(t *testing.T) {
	path := realLib(t, "libQnnSaver.so")
	t.Chdir(t.TempDir()) // the Saver writes saver_output/ into the working directory: never into the repository
	l, _ := openReal(t, path)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g)), Profiling: true, PerfMode: PerfBurst})
	gr, _ := s.Graph("action_step")
	for range 2 {
		tm, err := gr.Run(t.Context(), randomInputs(g, 1), outputsFor(g))
		if err != nil || tm.Profiled {
			t.Fatalf("execute on the Saver: %+v %v", tm, err)
		}
	}
	w := strings.Join(l.Warnings(), "\n")
	for _, want := range []string{"profileGetEvents: QNN_SAVER_ERROR_DUMMY_RETVALUE (4950)", "the backend reports no device capability"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q lack %q", w, want)
		}
	}
}

// TestRealHtpQemuLogging: Qualcomm's x86 HTP emulator backend logs through
// the callback, its failure reasons reach the error, and the vote does not
// crash it. The emulator refuses the DCVS part of the vote (13003) and
// crashes inside setPowerConfig on the RPC part, so: by default (the RPC
// part is opt-in, SessionOptions.RPCVote) the only warning is the refused
// DCVS part and the RPC part is off; asked for, the RPC part is still not
// sent after the refused DCVS part, and the warning says so. TestPerfVoteParts
// checks the same outcomes against the test double.
func TestRealHtpQemuLogging(t *testing.T) {
	path := realLib(t, "libQnnHtpQemu.so")
	t.Setenv("QNN_HTP_QEMU_ARGS", "-none") // without it deviceCreate forks an emulator and waits for it
	t.Chdir(t.TempDir())
	const dcvsRefused = "performance mode burst: the DCVS part of the vote (power mode, voltage corners, sleep latency) was not applied"
	for _, tc := range []struct {
		name     string
		rpcVote  bool
		want     []string // in the warnings
		mustNot  string   // not in the warnings
		checkLog bool
	}{
		{"default: RPC part off", false, []string{dcvsRefused}, "RPC part", true},
		{"RPC vote asked for", true, []string{dcvsRefused, "; the RPC part is not sent after it"}, "the RPC part of the vote", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c := openReal(t, path)
			g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
			_, err := l.NewSession(t.Context(), SessionOptions{ContextPath: writeBinary(t, actionBinary(g)),
				PerfMode: PerfBurst, RPCVote: tc.rpcVote, LogLevel: int(LogDebug)})
			if err == nil {
				t.Fatal("the emulator loaded the test double's binary")
			}
			if !strings.Contains(err.Error(), "QNN log: QnnDsp <E> Serializer failed to get context blob.") {
				t.Errorf("error %q lacks the logged root cause", err)
			}
			if tc.checkLog {
				levels := map[LogLevel]int{}
				for _, ln := range c.take() {
					levels[ln.Level]++
				}
				for _, lv := range []LogLevel{LogError, LogWarn, LogInfo, LogVerbose, LogDebug} {
					if levels[lv] == 0 {
						t.Errorf("no %s line from the emulator (%v)", lv, levels)
					}
				}
			}
			w := strings.Join(l.Warnings(), "\n")
			for _, want := range tc.want {
				if !strings.Contains(w, want) {
					t.Errorf("warnings %q lack %q", w, want)
				}
			}
			if strings.Contains(w, tc.mustNot) {
				t.Errorf("warnings %q mention %q", w, tc.mustNot)
			}
		})
	}
}

// TestRealSaverGroupRegistration loads two binaries on Qualcomm's Saver
// backend, which records the calls it receives in saver_output.c. The
// Saver of QNN 2.25 does not decode HTP custom context configs (asked to,
// with QnnSaver_initialize and backend id 6, its contextCreateFromBinary
// answers 5000 "Custom context config parsing not supported for chosen
// backend ID"), so it records the config lists as empty; what it shows is
// that Qualcomm's code takes our group's config lists, the creation order
// (the larger spill-fill size first) and the release in reverse order.
func TestRealSaverGroupRegistration(t *testing.T) {
	path := realLib(t, "libQnnSaver.so")
	t.Chdir(t.TempDir())
	l, _ := openReal(t, path)
	gs := chainGraphs()
	s := newSession(t, l, SessionOptions{ContextPaths: writeBinaries(t, gs[:2])})
	if g := s.SpillFillGroup(); !g.Registered {
		t.Fatalf("group %+v", g)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join("saver_output", "saver_output.c"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	at := -1
	for _, want := range []string{
		`interface.graphRetrieve(context_0, "stage_1"`,
		`interface.graphRetrieve(context_1, "stage_0"`,
		`interface.contextFree(context_1, NULL)`,
		`interface.contextFree(context_0, NULL)`,
	} {
		i := strings.Index(text, want)
		if i < 0 || i < at {
			t.Fatalf("saver_output.c lacks %q after the previous call:\n%s", want, text)
		}
		at = i
	}
}
