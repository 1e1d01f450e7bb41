package main

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert/cpu"
)

// TestBenchReport feeds printGoBench made-up timings of the full model at
// 2 layers and checks what it derives: the dominant shape (self q,k,v
// fused, 604 MFLOP per layer, above the two output projections' 403), the
// per-round rates over that round's calls only, and the median ratio.
func TestBenchReport(t *testing.T) {
	cfg := cpu.FullConfig()
	cfg.NumLayers = 2
	flops := cfg.StepFlops() // 3.694 GFLOP (spec §9: 1.847 per layer)
	var ps []productTimes
	for _, p := range cfg.StepProducts() {
		pt := productTimes{Product: p}
		for range 3 * p.PerStep { // three rounds
			pt.secs = append(pt.secs, p.Flops()/100e9) // 100 GFLOP/s
		}
		ps = append(ps, pt)
	}
	d := dominant(ps)
	if ps[d].Name != "self q,k,v" || ps[d].N != 9216 || ps[d].K != 1024 {
		t.Fatalf("dominant shape %+v, want self q,k,v [32x1024]x[1024x9216]", ps[d].Product)
	}
	// Round 1's two calls take 2 and 6 ms: 2·0.604 GFLOP in 8 ms, 151 GFLOP/s,
	// whatever the other rounds did.
	ps[d].secs[2], ps[d].secs[3] = 0.002, 0.006
	// Steps at 100, 200 and 400 GFLOP/s.
	stepMs := []float64{flops / 100e9 * 1e3, flops / 200e9 * 1e3, flops / 400e9 * 1e3}
	step, sgemm, ratio := roundRatios(flops, stepMs, ps[d])
	wantSgemm := []float64{100, 2 * ps[d].Flops() / 0.008 / 1e9, 100}
	wantRatio := []float64{1, 200 / wantSgemm[1], 4}
	for i := range ratio {
		if math.Abs(step[i]-[]float64{100, 200, 400}[i]) > 1e-9 || math.Abs(sgemm[i]-wantSgemm[i]) > 1e-9 || math.Abs(ratio[i]-wantRatio[i]) > 1e-12 {
			t.Errorf("round %d: step %.3f, sgemm %.3f, ratio %.4f GFLOP/s; want %.3f, %.3f, %.4f",
				i, step[i], sgemm[i], ratio[i], []float64{100, 200, 400}[i], wantSgemm[i], wantRatio[i])
		}
	}
	var out bytes.Buffer
	printGoBench(&out, cfg, goBench{stepMs: stepMs, desc: "test BLAS", refDesc: "test Sgemm", products: ps, arenaMiB: 128})
	for _, want := range []string{
		"[32x1024]x[1024x9216]    self q,k,v                2       1.208   32.7%",
		"(self q,k,v, 32.7% of the step): 1.325 (median of 3 rounds; min 1.000, max 4.000)",
		"200.0/151.0=1.325",
		"per-head attention       (not timed)                       0.204    5.5%", // 2·(51.1 + 50.7) MFLOP
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchFlagBounds: flags that would size an allocation or a thread
// pool beyond reason are refused, with exit code 2, before any weights
// are made.
func TestBenchFlagBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-layers", "0"}, "-layers 0: want an integer from 1 to 30"},
		{[]string{"-iters", "-1"}, "-iters -1: want an integer from 1 to 1000"},
		{[]string{"-layers", "31"}, "-layers 31: want an integer from 1 to 30 (the model's)"},
		{[]string{"-layers", "100000"}, "-layers 100000: want an integer from 1 to 30"},
		{[]string{"-iters", "1001"}, "-iters 1001: want an integer from 1 to 1000"},
		{[]string{"-threads", "65"}, "-threads 65: want an integer from 1 to 64"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"bench", "-no-torch"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("bench %v printed %q before refusing", tc.args, stdout.String())
		}
	}
}

// TestBenchObeysContext: a cancelled bench stops while it makes its random
// weights (the full model's take seconds: a SIGTERM waited for the 5 s
// grace period there), not after.
func TestBenchObeysContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"bench", "-layers", "1", "-iters", "1", "-no-torch"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "random weights: context canceled") {
		t.Errorf("exit %d, stderr %q; want the weights' making stopped by the context", code, stderr.String())
	}
}
