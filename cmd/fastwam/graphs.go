package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/fastwam/actionexpert/graphs"
)

// graphsPlanUsage is the help text of `fastwam graphs plan`.
const graphsPlanUsage = "[flags]\n\n" +
	"Plans the NPU graph set of docs/graphs.md for the real model sizes: vae_encoder, the video DiT\n" +
	"prefill split into contiguous layer ranges prefill_<i>, action_context and action_step_ctx.\n" +
	"Sizes are computed from the configurations (weights and constant tables; activations and\n" +
	"spill-fill buffers are not counted). The ranges are the fewest whose graphs fit -context-limit,\n" +
	"split to make the largest as small as possible; the graphs are placed in one process, or with\n" +
	"-processes 2 the world model in process 0 and the action graphs in process 1, each under\n" +
	"-process-limit. Limits no plan meets are an error (exit 1) naming the graph or process.\n" +
	"Weight formats: fp16 (2 B/value); w8 (1 B/value + 8 B per output channel for a float32 scale\n" +
	"and int32 offset, vectors 4 B); w4 (0.5 B/value + 1 B per block of 64 inputs + 8 B per output\n" +
	"channel, vectors 4 B). The last line gives the ranges as golden/export/export.py's --ranges."

// byteLimit is a flag of a byte count: a number with an optional GB, MB,
// GiB or MiB suffix ("1.8GB", "1800000000").
type byteLimit struct{ v *int64 }

func (b byteLimit) String() string {
	if b.v == nil {
		return ""
	}
	return graphs.GB(*b.v)
}

func (b byteLimit) Set(s string) error {
	units := []struct {
		suffix string
		mul    float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"GB", 1e9}, {"MB", 1e6}, {"B", 1}}
	mul, num := 1.0, s
	for _, u := range units {
		if len(s) > len(u.suffix) && s[len(s)-len(u.suffix):] == u.suffix {
			mul, num = u.mul, s[:len(s)-len(u.suffix)]
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f*mul > 1e15 {
		return fmt.Errorf("%q: want a positive size such as 1.8GB, 1700MiB or 1800000000 (at most 1e15 bytes)", s)
	}
	*b.v = int64(f * mul)
	return nil
}

func runGraphsPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("graphs plan", stdout, stderr, graphsPlanUsage)
	o := graphs.DefaultOptions()
	weights := "fp16"
	fs.StringVar(&weights, "weights", weights, "weight format: fp16, w8 or w4")
	fs.Var(byteLimit{&o.ContextLimit}, "context-limit", "bytes of weights and constants per context (suffix GB, MB, GiB, MiB)")
	fs.Var(byteLimit{&o.ProcessLimit}, "process-limit", "bytes of contexts per process (suffix GB, MB, GiB, MiB)")
	fs.IntVar(&o.Processes, "processes", o.Processes, "1: every graph in one process; 2: the world model in one, the action expert in another")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	w, err := graphs.ParseWeights(weights)
	if err != nil {
		return usageError("-weights: %v", err)
	}
	o.Weights = w
	if o.Processes != 1 && o.Processes != 2 {
		return usageError("-processes %d: want 1 or 2", o.Processes)
	}
	p, err := graphs.MakePlan(o)
	if errors.Is(err, graphs.ErrImpossible) {
		return fmt.Errorf("%v weights, context limit %s, process limit %s, %d process(es): %w",
			w, graphs.GB(o.ContextLimit), graphs.GB(o.ProcessLimit), o.Processes, err)
	}
	if err != nil {
		return err
	}
	if err := p.Write(stdout); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "ranges %s\n", p.Ranges())
	return err
}
