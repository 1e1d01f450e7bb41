package wmnode

import (
	"testing"
	"time"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// BenchmarkCycle measures a whole cycle through the node on the tiny world
// model (two raw bgr8 frames of 128 × 128 and 64 × 64 and a state in, the
// TextContext and VideoKVCache published on the in-process bus) against
// the baseline of worldmodel.Model.Run on the same inputs, measured in the
// same run: node-ratio is the node's cycle over the model's run (the
// decode, pairing, copies, encoding and publishing on top of the model).
func BenchmarkCycle(b *testing.B) {
	p := tinyParams()
	stamp := time.Unix(1_700_000_000, 0)
	model, err := LoadModel(b.Context(), p)
	if err != nil {
		b.Fatal(err)
	}
	images := []worldmodel.Image{testImage(128, 128, 1), testImage(64, 64, 2)}
	state := make([]float32, len(testState))
	for i, v := range testState {
		state[i] = float32(v)
	}
	// The node, its ROS clock fixed at the frames' stamp (the state is
	// stamped on receipt).
	r := newRig(b, p, model, false, func(c *Config) { c.Now, c.Mono = func() time.Time { return stamp }, time.Now })
	var frames [][]byte
	for _, img := range images {
		m, err := camera.EncodeImage(img, "bgr8", 0)
		if err != nil {
			b.Fatal(err)
		}
		m.Header = stampOf(stamp)
		buf, err := m.MarshalCDR()
		if err != nil {
			b.Fatal(err)
		}
		frames = append(frames, buf)
	}
	st, err := (&msgs.Float64MultiArray{Data: testState}).MarshalCDR()
	if err != nil {
		b.Fatal(err)
	}
	r.send(p.Topics.Instruction, &msgs.String{Data: tinyTask})
	b.ResetTimer()
	for b.Loop() {
		r.sendRaw(p.Topics.Proprio, st)
		for i, c := range p.Topics.Cameras {
			r.sendRaw(c, frames[i])
		}
		<-r.cap.ch[p.Topics.KVCache]
	}
	b.StopTimer()
	nodeNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	// The baseline, in the same run: the model alone, as many times, on
	// the same inputs (testing.Benchmark cannot run inside a benchmark).
	out := model.NewOutput(false)
	obs := worldmodel.Observation{Images: images, State: state, Instruction: tinyTask}
	t0 := time.Now()
	for range b.N {
		if err := model.Run(b.Context(), obs, out); err != nil {
			b.Fatal(err)
		}
	}
	baseNs := float64(time.Since(t0).Nanoseconds()) / float64(b.N)
	b.ReportMetric(baseNs/1e6, "model-ms")
	b.ReportMetric(nodeNs/1e6, "cycle-ms")
	b.ReportMetric(nodeNs/baseNs, "node-ratio")
}
