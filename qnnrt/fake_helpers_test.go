package qnnrt

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// smallDims is a contract small enough for fast tests, with every size
// distinct so that a shape mix-up cannot go unnoticed.
func smallDims() expert.Dims {
	return expert.Dims{Layers: 2, Heads: 2, HeadDim: 4, VideoTokens: 3, ContextTokens: 5, TextDim: 6, ActionTokens: 4, ActionDim: 3}
}

func fakeLib(t testing.TB, v qnnfake.Variant) *qnnfake.Lib {
	t.Helper()
	return qnnfake.New(t, v)
}

// libOpts points all three libraries at the test double.
func libOpts(fk *qnnfake.Lib) Options {
	return Options{BackendPath: fk.Path, SystemPath: fk.Path, RPCMemPath: fk.Path}
}

func openFake(t testing.TB, fk *qnnfake.Lib) *Library {
	t.Helper()
	l, err := Open(libOpts(fk))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func writeBinary(t testing.TB, b qnnfake.Binary) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ctx.bin")
	if err := os.WriteFile(p, b.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func actionBinary(g qnnfake.Graph) qnnfake.Binary {
	return qnnfake.Binary{SocModel: 69, Arch: 79, BuildID: "v2.43.0.fake", Graphs: []qnnfake.Graph{g}}
}

// randomInputs returns one slice per graph input with values in [-1, 1),
// different for every input.
func randomInputs(g qnnfake.Graph, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	in := make([][]float32, len(g.Inputs))
	for m, t := range g.Inputs {
		in[m] = make([]float32, t.Elements())
		for i := range in[m] {
			in[m][i] = float32(r.Float64()*2 - 1)
		}
	}
	return in
}

func newSession(t testing.TB, l *Library, opts SessionOptions) *Session {
	t.Helper()
	s, err := l.NewSession(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func outputsFor(g qnnfake.Graph) [][]float32 {
	out := make([][]float32, len(g.Outputs))
	for j, t := range g.Outputs {
		out[j] = make([]float32, t.Elements())
	}
	return out
}

// checkClean asserts the test double holds no live handle and saw no
// double free.
func checkClean(t testing.TB, fk *qnnfake.Lib) {
	t.Helper()
	if n := fk.LiveHandles(); n != 0 {
		t.Errorf("%d handles still live after teardown", n)
	}
	if n := fk.DoubleFrees(); n != 0 {
		t.Errorf("%d double frees", n)
	}
}
