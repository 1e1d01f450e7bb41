package worldmodel

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// copyTime is the best of a few copies of n bytes, measured now: the
// yardstick the resize is compared with.
func copyTime(n int) time.Duration {
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	best := time.Duration(1 << 62)
	for range 20 {
		t0 := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t0))
	}
	runtime.KeepAlive(dst)
	return best
}

// processCPU is the process's user and system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTile480x640 is the crop-resize of one 480 × 640 camera image
// (flipped) to its 224 × 224 tile, in steady state, and reports it as a
// ratio to one copy of that camera image (921,600 bytes) measured in the
// same run ("x-copy"), and the CPU time per tile ("cpu-ms").
func BenchmarkTile480x640(b *testing.B) {
	const w, h = 640, 480
	img := Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7 >> 3)
	}
	p, err := NewPreprocessor(FrameConfig{TileWidth: TileSize, TileHeight: TileSize, Cameras: []Camera{{Name: "cam", Flip180: true}}})
	if err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, TileSize*TileSize*3)
	if err := p.Frame(frame, img); err != nil {
		b.Fatal(err)
	}
	base := copyTime(len(img.Pix))
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for b.Loop() {
		if err := p.Frame(frame, img); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(per/float64(base), "x-copy")
	b.ReportMetric(float64(base)/1e3, "copy-µs")
	// The process's CPU time per tile: on a shared machine the wall time
	// includes waiting for a core, this does not.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e6, "cpu-ms")
}
