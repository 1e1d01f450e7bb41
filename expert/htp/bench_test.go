package htp

import (
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// BenchmarkStepEmptyExecute measures the host overhead of one denoise step
// with the chunk bound, on the released contract (expert.FullDims) against
// the test double in empty-execute mode (validation only, no compute). It
// reports the bytes the host converts per step (hostB/step) and the bytes
// the backend library takes from RAW client buffers per step (rawB/step),
// which a real HTP copies to the DSP: with shared buffers only the latents
// and the timestep, with the RAW fallback every input. The split modes run
// action_step_ctx (action_context ran at BindChunk): with shared links the
// cross keys and values are read in place (sharedB/step), with RAW links
// they are copied at every step.
func BenchmarkStepEmptyExecute(b *testing.B) {
	for _, mode := range []struct {
		name   string
		shared bool
		split  bool
	}{{"shared", true, false}, {"raw_fallback", false, false}, {"split_shared", true, true}, {"split_raw", false, true}} {
		b.Run(mode.name, func(b *testing.B) {
			d := expert.FullDims()
			fk := qnnfake.New(b, qnnfake.Variant{})
			fk.SetEmptyExecute(true)
			var o Options
			if mode.split {
				_, _, paths := splitBundle(b, qnnfake.DataTypeFloat32, d, false)
				o = options(fk, paths[0])
				o.ContextPaths = paths[1:]
			} else {
				o = options(fk, writeBinary(b, qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)))
			}
			o.SharedBuffers, o.Dims = mode.shared, &d
			be := newBackend(b, o)
			if be.SharedBuffers() != mode.shared {
				b.Fatalf("shared buffers %v, want %v", be.SharedBuffers(), mode.shared)
			}
			if err := be.BindChunk(b.Context(), randomChunk(d, 1)); err != nil {
				b.Fatal(err)
			}
			lat := expert.Noise(1, d.LatentLen())
			pred := make([]float32, len(lat))
			raw0, mem0, host0 := fk.RawBytesRead(), fk.MemHandleBytesRead(), be.Stats().BytesWritten
			n := 0
			for b.Loop() {
				if err := be.Step(b.Context(), lat, 500, pred); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(be.Stats().BytesWritten-host0)/float64(n), "hostB/step")
			b.ReportMetric(float64(fk.RawBytesRead()-raw0)/float64(n), "rawB/step")
			b.ReportMetric(float64(fk.MemHandleBytesRead()-mem0)/float64(n), "sharedB/step")
		})
	}
}

// BenchmarkStepBaselineCopy is the floor a step cannot go below: copying
// the latents and the timestep once.
func BenchmarkStepBaselineCopy(b *testing.B) {
	d := expert.FullDims()
	lat := expert.Noise(1, d.LatentLen())
	dst := make([]float32, len(lat)+1)
	for b.Loop() {
		copy(dst, lat)
		dst[len(lat)] = 500
	}
	b.ReportMetric(float64(4*len(dst)), "hostB/step")
}
