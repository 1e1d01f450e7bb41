package qnnrt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

func TestProviderChoice(t *testing.T) {
	for _, tc := range []struct {
		name      string
		providers []qnnfake.Provider
		backendID uint32
		want      string // chosen provider name, or "" for a refusal
		wantLen   int
		errHas    []string
	}{
		{name: "default", want: "FAKE_HTP", wantLen: 71},
		{name: "2.18 table", providers: []qnnfake.Provider{{Name: "HTP_2_18", BackendID: 6, Major: 2, Minor: 18}}, want: "HTP_2_18", wantLen: 62},
		{name: "2.31 table", providers: []qnnfake.Provider{{Name: "HTP_2_31", BackendID: 6, Major: 2, Minor: 31}}, want: "HTP_2_31", wantLen: 62},
		{name: "newer than written for", providers: []qnnfake.Provider{{Name: "HTP_2_36", BackendID: 6, Major: 2, Minor: 36}}, want: "HTP_2_36", wantLen: 71},
		{name: "old one refused, newer chosen",
			providers: []qnnfake.Provider{{Name: "OLD", BackendID: 6, Major: 2, Minor: 7}, {Name: "NEW", BackendID: 6, Major: 2, Minor: 20}},
			want:      "NEW", wantLen: 62},
		{name: "HTP preferred over CPU",
			providers: []qnnfake.Provider{{Name: "CPU", BackendID: 3, Major: 2, Minor: 32}, {Name: "HTP", BackendID: 6, Major: 2, Minor: 25}},
			want:      "HTP", wantLen: 62},
		{name: "newest HTP",
			providers: []qnnfake.Provider{{Name: "HTP20", BackendID: 6, Major: 2, Minor: 20}, {Name: "HTP32", BackendID: 6, Major: 2, Minor: 32}},
			want:      "HTP32", wantLen: 71},
		{name: "backend id restricts",
			providers: []qnnfake.Provider{{Name: "CPU", BackendID: 3, Major: 2, Minor: 32}, {Name: "HTP", BackendID: 6, Major: 2, Minor: 32}},
			backendID: 3, want: "CPU", wantLen: 71},
		{name: "only old", providers: []qnnfake.Provider{{Name: "OLD", BackendID: 6, Major: 2, Minor: 17, Patch: 4}},
			errHas: []string{"no usable QNN provider", "need core API 2.18 or later", `"OLD" (backend 6, API 2.17.4`}},
		{name: "wrong major", providers: []qnnfake.Provider{{Name: "V3", BackendID: 6, Major: 3, Minor: 40}},
			errHas: []string{"need core API 2.18 or later", `"V3"`}},
		{name: "no such backend", providers: []qnnfake.Provider{{Name: "HTP", BackendID: 6, Major: 2, Minor: 32}}, backendID: 3,
			errHas: []string{"for backend 3"}},
		{name: "none", providers: []qnnfake.Provider{}, errHas: []string{"returned no providers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			if tc.providers != nil {
				fk.SetCoreProviders(tc.providers...)
			}
			opts := libOpts(fk)
			opts.BackendID = tc.backendID
			l, err := Open(opts)
			if tc.want == "" {
				if err == nil {
					l.Close()
					t.Fatal("Open accepted")
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if p := l.Provider(); p.Name != tc.want || p.TableLen != tc.wantLen {
				t.Errorf("chose %s with %d entries, want %q with %d", p, p.TableLen, tc.want, tc.wantLen)
			}
			// A session reads entries up to errorGetMessage (48): inside a
			// 62-entry table, past which the test double's guard page sits.
			checkSessionRuns(t, fk, l)
		})
	}
}

// checkSessionRuns loads a small action_step binary and executes it once.
func checkSessionRuns(t *testing.T, fk *qnnfake.Lib, l *Library) {
	t.Helper()
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g))})
	gr, err := s.Graph("action_step")
	if err != nil {
		t.Fatal(err)
	}
	in := randomInputs(g, 1)
	out := outputsFor(g)
	if _, err := gr.Run(t.Context(), in, out); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
}

func TestSystemProviderVersions(t *testing.T) {
	for _, tc := range []struct {
		minor uint32
		ok    bool
	}{{0, false}, {1, true}, {7, true}} {
		fk := fakeLib(t, qnnfake.Variant{})
		fk.SetSystemAPI(1, tc.minor, 0)
		l, err := Open(libOpts(fk))
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "need system API 1.1 or later") || !strings.Contains(err.Error(), "API 1.0.0") {
				t.Errorf("system API 1.%d: error %v", tc.minor, err)
			}
			if err == nil {
				l.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("system API 1.%d: %v", tc.minor, err)
		}
		if l.SystemProvider().API.Minor != tc.minor {
			t.Errorf("system provider %v", l.SystemProvider())
		}
		// The metadata path uses systemContextGetMetaData (index 2).
		g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
		if _, err := l.ReadContextInfo(writeBinary(t, actionBinary(g))); err != nil {
			t.Errorf("system API 1.%d: %v", tc.minor, err)
		}
		if fk.Calls("systemContextGetMetaData") != 1 || fk.Calls("systemContextGetBinaryInfo") != 0 {
			t.Errorf("getMetaData calls %d, getBinaryInfo calls %d", fk.Calls("systemContextGetMetaData"), fk.Calls("systemContextGetBinaryInfo"))
		}
		l.Close()
		checkClean(t, fk)
	}
}

func TestOpenFailures(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "libnot.so")
	if err := os.WriteFile(notLib, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	fk := fakeLib(t, qnnfake.Variant{})
	noCore := fakeLib(t, qnnfake.Variant{NoCoreProviders: true})
	noSys := fakeLib(t, qnnfake.Variant{NoSystemProviders: true})
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"missing backend", Options{BackendPath: filepath.Join(dir, "libQnnHtp.so"), SystemPath: fk.Path}, []string{"load backend library", "libQnnHtp.so"}},
		{"missing system", Options{BackendPath: fk.Path, SystemPath: filepath.Join(dir, "nope.so")}, []string{"load system library", "nope.so"}},
		{"not a library", Options{BackendPath: notLib, SystemPath: fk.Path}, []string{"load backend library", "libnot.so"}},
		{"no core providers", Options{BackendPath: noCore.Path, SystemPath: fk.Path}, []string{"does not export QnnInterface_getProviders"}},
		{"no system providers", Options{BackendPath: fk.Path, SystemPath: noSys.Path}, []string{"does not export QnnSystemInterface_getProviders"}},
	} {
		l, err := Open(tc.opts)
		if err == nil {
			l.Close()
			t.Errorf("%s: Open accepted", tc.name)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, s)
			}
		}
		var le *LoadError
		if strings.HasPrefix(tc.want[0], "load ") && (!errors.As(err, &le) || "load "+le.Library+" library" != tc.want[0] || le.Path != tc.opts.BackendPath && le.Path != tc.opts.SystemPath) {
			t.Errorf("%s: error %q is not a *LoadError naming the library and its path (%+v)", tc.name, err, le)
		}
	}
	fk.FailCall("QnnInterface_getProviders", 1002, 1)
	if _, err := Open(libOpts(fk)); err == nil || !strings.Contains(err.Error(), "QNN_COMMON_ERROR_MEM_ALLOC (1002)") {
		t.Errorf("getProviders failure: %v", err)
	}
	// OpenSystem needs no backend and runs no sessions.
	l, err := OpenSystem(Options{SystemPath: fk.Path, BackendPath: filepath.Join(dir, "absent.so")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.NewSession(t.Context(), SessionOptions{ContextPath: notLib}); err == nil || !strings.Contains(err.Error(), "OpenSystem") {
		t.Errorf("session on a system-only library: %v", err)
	}
}

func TestADSPLibraryPath(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	t.Setenv("ADSP_LIBRARY_PATH", "")
	os.Unsetenv("ADSP_LIBRARY_PATH")
	l := openFake(t, fk)
	if want := filepath.Dir(fk.Path); l.ADSPLibraryPath() != want || os.Getenv("ADSP_LIBRARY_PATH") != want {
		t.Errorf("derived ADSP_LIBRARY_PATH %q (env %q), want the backend's directory %q", l.ADSPLibraryPath(), os.Getenv("ADSP_LIBRARY_PATH"), want)
	}
	opts := libOpts(fk)
	opts.ADSPLibraryPath = "/opt/qnn/dsp;/usr/lib/rfsa/adsp"
	l2, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if os.Getenv("ADSP_LIBRARY_PATH") != opts.ADSPLibraryPath || l2.ADSPLibraryPath() != opts.ADSPLibraryPath {
		t.Errorf("explicit ADSP_LIBRARY_PATH not exported: %q", os.Getenv("ADSP_LIBRARY_PATH"))
	}
	// An existing value is kept when none is given.
	l3 := openFake(t, fk)
	if l3.ADSPLibraryPath() != opts.ADSPLibraryPath {
		t.Errorf("existing ADSP_LIBRARY_PATH replaced by %q", l3.ADSPLibraryPath())
	}
}

func TestLibraryCloseClosesSessions(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l, err := Open(libOpts(fk))
	if err != nil {
		t.Fatal(err)
	}
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	path := writeBinary(t, actionBinary(g))
	s1, err := l.NewSession(t.Context(), SessionOptions{ContextPath: path, PerfMode: PerfBurst, Profiling: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.NewSession(t.Context(), SessionOptions{ContextPath: path}); err != nil {
		t.Fatal(err)
	}
	if fk.LiveHandles() == 0 {
		t.Fatal("no live handles with two sessions open")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
	if err := s1.Close(); err != nil || l.Close() != nil {
		t.Errorf("second close: %v", err)
	}
	checkClean(t, fk)
	if _, err := l.NewSession(t.Context(), SessionOptions{ContextPath: path}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("session on a closed library: %v", err)
	}
	if _, err := l.ReadContextInfo(path); err == nil || !errors.Is(err, err) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("metadata on a closed library: %v", err)
	}
}
