//go:build rclgo

// Command fastwam_node is the Fast-WAM action-expert ROS 2 node: it pairs
// the world model's VideoKVCache and TextContext messages, denoises an
// action chunk on the Hexagon NPU (or the CPU reference) and publishes
// ActionChunk messages and /diagnostics.
//
// Parameters come from ROS arguments, as for any ROS 2 node:
//
//	fastwam_node --ros-args -p htp.context_binary:=/models/action_step.bin \
//	    --params-file params.yaml -r __node:=expert -r action_chunk:=/arm/chunk
//
// `fastwam_node --print-params` prints every parameter with its default as
// a params file. Build with `go build -tags rclgo` against a sourced ROS 2
// (Humble or Jazzy) through ros/rosgo.sh; see docs/ros2.md.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tiiuae/rclgo/pkg/rclgo"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/backends"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/rosnode"
	"github.com/fastwam/actionexpert/node/rostime"
)

func main() {
	p := params.Default()
	os.Exit(rosnode.Main(rosnode.Program{
		Binary: "fastwam_node", NodeName: "fastwam_action_expert", Usage: usage,
		ParamsYAML: p.ParamsYAML, Grace: p.ShutdownGrace, Serve: serve,
	}, os.Args[1:]))
}

// serve configures the managed node and spins until ctx is done: its
// topics, lifecycle and parameter services exist from the start; with
// autostart (the default) it runs configure (open the backend, self-test)
// and activate at once, and returns the error if either fails (the node
// exits non-zero); otherwise it waits unconfigured for `ros2 lifecycle
// set`. At the end the node shuts down in order: the worker
// stops using the backend, the backend is closed (the HTP backend
// down-votes), spinning stops, and the caller then closes the ROS node
// and the context. setGrace receives the shutdown_grace parameter.
func serve(ctx context.Context, args []string, rn *rclgo.Node, log node.Logger, setGrace func(time.Duration)) (err error) {
	fqn := rn.FullyQualifiedName()
	p, err := params.Load(args, fqn, rosparam.LogIgnored(log.Infof))
	if err != nil {
		return err
	}
	setGrace(p.ShutdownGrace)
	tr := rosnode.NewTransport(rn, log)
	log.Infof("%s: fastwam_node build %s, %s backend", fqn, node.Build(), p.Backend)
	cfg := node.ManagedConfig{Params: p, Logger: log, Name: fqn, Open: func(ctx context.Context, p params.Params) (expert.Backend, error) {
		return backends.Open(ctx, p, log)
	}}
	if p.UseSimTime {
		sim := rostime.NewSim()
		if err := node.SubscribeClock(tr, sim, log); err != nil {
			return fmt.Errorf("use_sim_time: %w", err)
		}
		cfg.Now, cfg.Mono = sim.Now, time.Now
		log.Infof("%s: use_sim_time: the node's clock is %s", fqn, rostime.ClockTopic)
	}
	m, err := node.NewManaged(cfg, tr)
	if err != nil {
		return err
	}
	mach, err := m.Serve(ctx, tr, fqn)
	if err != nil {
		return err
	}
	if !p.Autostart {
		log.Infof("%s: unconfigured (autostart false): `ros2 lifecycle set %s configure`, then activate", fqn, fqn)
	}
	return rosnode.SpinWhile(rn, func() error { return m.RunAutostarted(ctx, mach, p.Autostart) })
}

const usage = `usage: fastwam_node [--print-params] [--ros-args ROS_ARGS...]

The Fast-WAM action-expert ROS 2 node. Parameters are set with
--ros-args -p name:=value or --params-file FILE; --print-params prints them
all with their defaults as a params file.
`
