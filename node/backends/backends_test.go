package backends

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/node/params"
)

type testLogger struct{ t *testing.T }

func (l testLogger) Debugf(f string, a ...any) { l.t.Logf("DEBUG "+f, a...) }
func (l testLogger) Infof(f string, a ...any)  { l.t.Logf("INFO "+f, a...) }
func (l testLogger) Warnf(f string, a ...any)  { l.t.Logf("WARN "+f, a...) }
func (l testLogger) Errorf(f string, a ...any) { l.t.Logf("ERROR "+f, a...) }

// recordLogger keeps every line with its level.
type recordLogger struct{ lines []string }

func (l *recordLogger) add(lv, f string, a ...any) {
	l.lines = append(l.lines, lv+" "+fmt.Sprintf(f, a...))
}
func (l *recordLogger) Debugf(f string, a ...any) { l.add("DEBUG", f, a...) }
func (l *recordLogger) Infof(f string, a ...any)  { l.add("INFO", f, a...) }
func (l *recordLogger) Warnf(f string, a ...any)  { l.add("WARN", f, a...) }
func (l *recordLogger) Errorf(f string, a ...any) { l.add("ERROR", f, a...) }

func TestOpenCPU(t *testing.T) {
	p := params.Default()
	p.Backend = params.BackendCPU
	p.CPU.Weights = filepath.Join("..", "..", "golden", "tiny", "weights.safetensors")
	p.CPU.VideoTokens, p.CPU.ContextTokens = 8, 5
	b, err := Open(context.Background(), p, testLogger{t})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := expert.Dims{Layers: 2, Heads: 2, HeadDim: 16, VideoTokens: 8, ContextTokens: 5, TextDim: 32, ActionTokens: 32, ActionDim: 7}
	if b.Dims() != want {
		t.Errorf("dims %v, want %v", b.Dims(), want)
	}
	p.CPU.Weights = filepath.Join(t.TempDir(), "missing.safetensors")
	if _, err := Open(context.Background(), p, testLogger{t}); err == nil || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Errorf("missing weights: %v", err)
	}
}

func TestOpenHTP(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	d := expert.Dims{Layers: 2, Heads: 2, HeadDim: 128, VideoTokens: 8, ContextTokens: 5, TextDim: 32, ActionTokens: 32, ActionDim: 7}
	path := filepath.Join(t.TempDir(), "action_step.bin")
	bin := qnnfake.Binary{SocModel: 60, Arch: 73, BuildID: "backends-test",
		Graphs: []qnnfake.Graph{qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)}}
	if err := os.WriteFile(path, bin.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := params.Default()
	p.HTP.ContextBinary = path
	p.HTP.BackendLibrary, p.HTP.SystemLibrary, p.HTP.RPCMemLibrary = lib.Path, lib.Path, lib.Path
	p.HTP.PerformanceMode = "high_performance"
	b, err := Open(context.Background(), p, testLogger{t})
	if err != nil {
		t.Fatal(err)
	}
	if b.Dims() != d {
		t.Errorf("dims %v, want %v", b.Dims(), d)
	}
	votes := len(lib.PowerVotes())
	if votes == 0 {
		t.Error("no performance vote")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(lib.PowerVotes()) <= votes || lib.LiveHandles() != 0 {
		t.Errorf("after Close: %d votes (had %d), %d live handles", len(lib.PowerVotes()), votes, lib.LiveHandles())
	}

	p.HTP.PerformanceMode = "turbo"
	if _, err := Open(context.Background(), p, testLogger{t}); err == nil || !strings.Contains(err.Error(), "htp.performance_mode") {
		t.Errorf("unknown performance mode: %v", err)
	}
	p.HTP.PerformanceMode = "burst"
	p.HTP.ContextBinary = filepath.Join(t.TempDir(), "missing.bin")
	if _, err := Open(context.Background(), p, testLogger{t}); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("missing context binary: %v", err)
	}
	p.Backend = "tpu"
	if _, err := Open(context.Background(), p, testLogger{t}); err == nil {
		t.Error("unknown backend accepted")
	}
}

// TestOpenHTPLogging checks htp.log_level reaches the QNN library and its
// lines reach the node's logger at their level, and htp.rpc_vote false
// sends the DCVS part of the vote alone.
func TestOpenHTPLogging(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	d := expert.Dims{Layers: 2, Heads: 2, HeadDim: 128, VideoTokens: 8, ContextTokens: 5, TextDim: 32, ActionTokens: 32, ActionDim: 7}
	path := filepath.Join(t.TempDir(), "action_step.bin")
	bin := qnnfake.Binary{SocModel: 60, Arch: 73, BuildID: "backends-test",
		Graphs: []qnnfake.Graph{qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)}}
	if err := os.WriteFile(path, bin.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := params.Default()
	p.HTP.ContextBinary = path
	p.HTP.BackendLibrary, p.HTP.SystemLibrary, p.HTP.RPCMemLibrary = lib.Path, lib.Path, lib.Path
	p.HTP.LogLevel = 3 // htp.rpc_vote: its default, false
	log := &recordLogger{}
	b, err := Open(context.Background(), p, log)
	if err != nil {
		t.Fatal(err)
	}
	lib.EmitLog(1, "e", 1, 2, 3, 4, 5)
	lib.EmitLog(4, "v", 1, 2, 3, 4, 5) // above the level: not sent
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		`INFO qnn: context 0x`:                                                     false,
		`WARN qnn: deviceCreate: no device config given`:                           false,
		`ERROR qnn: fake_emit_log: s=e d=1 u=2 x=2 llu=3 f=4.000000 g=4.000 p=0x5`: false,
	}
	for _, l := range log.lines {
		for w := range want {
			if strings.HasPrefix(l, w) {
				want[w] = true
			}
		}
		if strings.Contains(l, "s=v") || strings.HasPrefix(l, "DEBUG") {
			t.Errorf("line above htp.log_level 3: %q", l)
		}
	}
	for w, ok := range want {
		if !ok {
			t.Errorf("no line starting %q in %q", w, log.lines)
		}
	}
	for _, v := range lib.PowerVotes() {
		if v.Option != 1 {
			t.Errorf("RPC option %d sent with htp.rpc_vote at its default", v.Option)
		}
	}
	p.HTP.LogLevel = 0
	if _, err := Open(context.Background(), p, nil); err == nil || !strings.Contains(err.Error(), "htp.log_level") {
		t.Errorf("log level 0: %v", err)
	}
}
