package prefill

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// BenchmarkKVHandOff measures the one copy between the chain's outputs
// and the caller's K/V buffers (qnnrt binds no output to caller memory):
// after one chain run, reading every range's video_keys and video_values
// (ReadOutput, the graph's type decoded to float32; ReadOutputBytes, F16
// graphs into F16 views, RunKV's path on the device), against a memcpy of
// the same bytes (the baselines, in the same run), and the two passes of
// an F32 graph into an F16 view. Sizes: 4 layers (2 + 2) of 98 video tokens × 3072,
// 4.8 MB of F32 keys and as much of values.
//
//	go test -run - -bench KVHandOff -benchtime 20x ./expert/htp/prefill
func BenchmarkKVHandOff(b *testing.B) {
	w := qnnfake.WorldDims{ImageHeight: 4, ImageWidth: 6, LatentChannels: 2, LatentHeight: 2, LatentWidth: 3,
		ContextRows: 5, TextDim: 7, VideoTokens: 98, Width: 3072, Layers: []int{2, 2}}
	for _, tc := range []struct {
		name string
		dt   uint32
	}{{"f32 graph", qnnfake.DataTypeFloat32}, {"f16 graph", qnnfake.DataTypeFloat16}} {
		fk := qnnfake.New(b, qnnfake.Variant{})
		var paths []string
		dir := b.TempDir()
		for _, g := range qnnfake.WorldModelGraphs(tc.dt, w) {
			p := filepath.Join(dir, g.Name+".bin")
			if err := os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
				b.Fatal(err)
			}
			paths = append(paths, p)
		}
		c, err := New(b.Context(), Options{ContextPaths: paths, BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path})
		if err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 1))
		image, text := fill(r, c.ImageLen()), fill(r, c.ContextLen())
		n := c.KVLen()
		keys, values := make([]float32, n), make([]float32, n)
		if err := c.Run(b.Context(), image, text, keys, values); err != nil {
			b.Fatal(err)
		}
		read := func() {
			off := 0
			for i, g := range c.ranges {
				m := c.layers[i] * c.kvLen
				if err := g.ReadOutput(c.keysIdx[i], keys[off:off+m]); err != nil {
					b.Fatal(err)
				}
				if err := g.ReadOutput(c.valsIdx[i], values[off:off+m]); err != nil {
					b.Fatal(err)
				}
				off += m
			}
		}
		b.Run(tc.name+"/ReadOutput", func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				read()
			}
		})
		k16, v16 := make([]uint16, n), make([]uint16, n)
		if tc.dt == qnnfake.DataTypeFloat32 {
			b.Run(tc.name+"/ReadOutput+F16 view", func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				for b.Loop() {
					read()
					for i := range keys {
						k16[i] = float16.Fromfloat32(keys[i]).Bits()
						v16[i] = float16.Fromfloat32(values[i]).Bits()
					}
				}
			})
		} else {
			asBytes := func(x []uint16) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 2*len(x)) }
			b.Run(tc.name+"/ReadOutputBytes to F16 view", func(b *testing.B) {
				b.SetBytes(int64(4 * n))
				for b.Loop() {
					off := 0
					for i, g := range c.ranges {
						m := c.layers[i] * c.kvLen
						if _, err := g.ReadOutputBytes(c.keysIdx[i], asBytes(k16[off:off+m])); err != nil {
							b.Fatal(err)
						}
						if _, err := g.ReadOutputBytes(c.valsIdx[i], asBytes(v16[off:off+m])); err != nil {
							b.Fatal(err)
						}
						off += m
					}
				}
			})
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	// The baselines: a memcpy of the bytes the caller receives, F32 and
	// F16.
	n := 4 * 98 * 3072
	src, dst := make([]float32, 2*n), make([]float32, 2*n)
	b.Run("memcpy F32", func(b *testing.B) {
		b.SetBytes(int64(8 * n))
		for b.Loop() {
			copy(dst, src)
		}
	})
	s16, d16 := make([]uint16, 2*n), make([]uint16, 2*n)
	b.Run("memcpy F16", func(b *testing.B) {
		b.SetBytes(int64(4 * n))
		for b.Loop() {
			copy(d16, s16)
		}
	})
}

// BenchmarkKVHandOffBound measures one cycle's hand-off of the world
// model's K/V to the action expert in one session, at the real sizes (30
// layers in two ranges of 15, 98 video tokens × 3072, F16: 18 MB of keys
// and as much of values): the expert's input views, then Chain.RunKV into
// them, with the double's executes emptied (SetEmptyExecute: the graphs
// write nothing, so what is left is the chain's own work). "copy" is
// today's path (ReadOutputBytes from each range's output into the views),
// "bound" the K/V written in place (BindKV: nothing to copy); "memcpy" is
// a copy of the same 36 MB, the baseline, in the same run.
//
//	go test -run - -bench KVHandOffBound -benchtime 20x ./expert/htp/prefill
func BenchmarkKVHandOffBound(b *testing.B) {
	w := qnnfake.WorldDims{ImageHeight: 4, ImageWidth: 6, LatentChannels: 2, LatentHeight: 2, LatentWidth: 3,
		ContextRows: 5, TextDim: 7, VideoTokens: 98, Width: 3072, Layers: []int{15, 15}}
	d := expert.Dims{Layers: 30, Heads: 24, HeadDim: 128, VideoTokens: 98, ContextTokens: 5, TextDim: 6, ActionTokens: 3, ActionDim: 2}
	kvBytes := int64(2 * 2 * d.KVLen())
	for _, bind := range []bool{false, true} {
		name := map[bool]string{false: "copy", true: "bound"}[bind]
		fk := qnnfake.New(b, qnnfake.Variant{})
		z := openZC(b, fk, w, d, qnnfake.DataTypeFloat16, qnnfake.DataTypeFloat16, bind)
		if bind && (len(z.log) != 1 || !strings.Contains(z.log[0], "written in place")) {
			b.Fatalf("not bound: %q", z.log)
		}
		fk.SetEmptyExecute(true)
		r := rand.New(rand.NewPCG(1, 1))
		image, text := fill(r, z.c.ImageLen()), fill(r, z.c.ContextLen())
		b.Run(name, func(b *testing.B) {
			b.SetBytes(kvBytes)
			for b.Loop() {
				v, err := z.b.Inputs()
				if err != nil {
					b.Fatal(err)
				}
				if err := z.c.RunKV(b.Context(), image, text, v.VideoKeys, v.VideoValues); err != nil {
					b.Fatal(err)
				}
			}
		})
		z.close(b)
	}
	src, dst := make([]byte, kvBytes), make([]byte, kvBytes)
	copy(dst, src) // fault the pages in, as the views' are
	b.Run("memcpy", func(b *testing.B) {
		b.SetBytes(kvBytes)
		for b.Loop() {
			copy(dst, src)
		}
	})
}
