//go:build rclgo

// Command fastwam_world_model is the Fast-WAM world-model ROS 2 node: it
// subscribes to the robot's camera, proprio and instruction topics, runs
// the world model on the CPU and publishes the TextContext and the video
// K/V cache (VideoKVCache over DDS, or a KVHandoff whose tensors are in a
// shared-memory slot) that the action-expert node (fastwam_node) turns
// into action chunks, with /diagnostics (see package wmnode).
//
// Parameters come from ROS arguments, as for any ROS 2 node:
//
//	fastwam_world_model --ros-args --params-file world_model.params.yaml \
//	    -p model.dit_weights:=/models/dit.safetensors -r __ns:=/arm2
//
// `fastwam_world_model --print-params` prints every parameter with its
// default as a params file. Build with `go build -tags rclgo` against a
// sourced ROS 2 (Humble or Jazzy) through ros/rosgo.sh; see
// docs/world-model-node.md.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tiiuae/rclgo/pkg/rclgo"

	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/rosnode"
	"github.com/fastwam/actionexpert/node/rostime"
	"github.com/fastwam/actionexpert/wmnode"
)

func main() {
	p := wmnode.DefaultParams()
	os.Exit(rosnode.Main(rosnode.Program{
		Binary: "fastwam_world_model", NodeName: "fastwam_world_model", Usage: usage,
		ParamsYAML: p.ParamsYAML, Grace: p.ShutdownGrace, Serve: serve,
	}, os.Args[1:]))
}

// serve loads the parameters and the world model, creates the node with
// its lifecycle services, configures and activates it, and spins until
// ctx is done; then the worker stops (a last STALE report is
// published), the shared-memory segment is removed and spinning stops.
// setGrace receives the shutdown_grace parameter.
func serve(ctx context.Context, args []string, rn *rclgo.Node, log node.Logger, setGrace func(time.Duration)) error {
	fqn := rn.FullyQualifiedName()
	p, err := wmnode.LoadParams(args, fqn, rosparam.LogIgnored(log.Infof))
	if err != nil {
		return err
	}
	setGrace(p.ShutdownGrace)
	t0 := time.Now()
	model, err := wmnode.LoadModel(ctx, p)
	if err != nil {
		return err
	}
	d := model.Dims()
	log.Infof("%s: fastwam_world_model build %s: world model loaded in %v (K/V [%d, 1, %d, %d], context [%d, %d])",
		fqn, node.Build(), time.Since(t0).Round(time.Millisecond), d.Layers, d.VideoTokens, d.Width, d.ContextRows, d.TextDim)
	tr := rosnode.NewTransport(rn, log)
	cfg := wmnode.Config{Params: p, Model: model, Logger: log, Name: fqn, StartInactive: true}
	if p.UseSimTime {
		sim := rostime.NewSim()
		if err := node.SubscribeClock(tr, sim, log); err != nil {
			return fmt.Errorf("use_sim_time: %w", err)
		}
		cfg.Now, cfg.Mono = sim.Now, time.Now
		log.Infof("%s: use_sim_time: the node's clock is %s", fqn, rostime.ClockTopic)
	}
	n, err := wmnode.New(cfg, tr)
	if err != nil {
		return err
	}
	defer n.Close()
	mach, err := n.ServeLifecycle(ctx, tr)
	if err != nil {
		return err
	}
	if err := n.ServeParameters(ctx, tr); err != nil {
		return err
	}
	// A managed node, configured (the self-test) and activated at once
	// with autostart: `ros2 lifecycle set` deactivates it. Without
	// autostart it waits unconfigured; a failed autostart ends the process.
	return rosnode.SpinWhile(rn, func() error { return n.RunAutostarted(ctx, mach, p.Autostart) })
}

const usage = `usage: fastwam_world_model [--print-params] [--ros-args ROS_ARGS...]

The Fast-WAM world-model ROS 2 node: camera frames, proprio state and the
instruction in; the TextContext and the video K/V cache out. Parameters are
set with --ros-args -p name:=value or --params-file FILE; --print-params
prints them all with their defaults as a params file.
`
