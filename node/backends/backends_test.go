package backends

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/node"
)

func TestOpenCPU(t *testing.T) {
	p := node.DefaultParams()
	p.Backend = node.BackendCPU
	p.CPU.Weights = filepath.Join("..", "..", "golden", "tiny", "weights.safetensors")
	p.CPU.VideoTokens, p.CPU.ContextTokens = 8, 5
	b, err := Open(context.Background(), p, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := expert.Dims{Layers: 2, Heads: 2, HeadDim: 16, VideoTokens: 8, ContextTokens: 5, TextDim: 32, ActionTokens: 32, ActionDim: 7}
	if b.Dims() != want {
		t.Errorf("dims %v, want %v", b.Dims(), want)
	}
	p.CPU.Weights = filepath.Join(t.TempDir(), "missing.safetensors")
	if _, err := Open(context.Background(), p, t.Logf); err == nil || !strings.Contains(err.Error(), "missing.safetensors") {
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
	p := node.DefaultParams()
	p.HTP.ContextBinary = path
	p.HTP.BackendLibrary, p.HTP.SystemLibrary, p.HTP.RPCMemLibrary = lib.Path, lib.Path, lib.Path
	p.HTP.PerformanceMode = "high_performance"
	b, err := Open(context.Background(), p, t.Logf)
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
	if _, err := Open(context.Background(), p, t.Logf); err == nil || !strings.Contains(err.Error(), "htp.performance_mode") {
		t.Errorf("unknown performance mode: %v", err)
	}
	p.HTP.PerformanceMode = "burst"
	p.HTP.ContextBinary = filepath.Join(t.TempDir(), "missing.bin")
	if _, err := Open(context.Background(), p, t.Logf); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Errorf("missing context binary: %v", err)
	}
	p.Backend = "tpu"
	if _, err := Open(context.Background(), p, t.Logf); err == nil {
		t.Error("unknown backend accepted")
	}
}
