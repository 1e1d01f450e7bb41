//go:build rclgo

// Command fastwam_executor is the Fast-WAM chunk executor ROS 2 node: it
// subscribes to the action expert's ActionChunk messages and publishes one
// StampedAction per control period on its own timer (the system clock),
// choosing for each instant the newest chunk that covers it, with /diagnostics
// (see package executor).
//
// Parameters come from ROS arguments, as for any ROS 2 node:
//
//	fastwam_executor --ros-args -p aggregation:=weighted_average \
//	    --params-file executor.params.yaml -r action:=/arm/command
//
// `fastwam_executor --print-params` prints every parameter with its default
// as a params file. Build with `go build -tags rclgo` against a sourced ROS 2
// (Humble or Jazzy) through ros/rosgo.sh; see docs/ros2.md.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tiiuae/rclgo/pkg/rclgo"

	"github.com/fastwam/actionexpert/executor"
	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/rosnode"
	"github.com/fastwam/actionexpert/node/rostime"
)

func main() {
	p := executor.DefaultParams()
	os.Exit(rosnode.Main(rosnode.Program{
		Binary: "fastwam_executor", NodeName: "fastwam_executor", Usage: usage,
		ParamsYAML: p.ParamsYAML, Grace: p.ShutdownGrace, Serve: serve,
	}, os.Args[1:]))
}

// serve configures the executor, spins until ctx is done and shuts down in
// order: the executor's timer stops (a last STALE report is published),
// then spinning stops; the caller closes the ROS node and the context.
// setGrace receives the shutdown_grace parameter.
func serve(ctx context.Context, args []string, rn *rclgo.Node, log node.Logger, setGrace func(time.Duration)) error {
	p, err := executor.LoadParams(args, rn.FullyQualifiedName(), rosparam.LogIgnored(log.Infof))
	if err != nil {
		return err
	}
	setGrace(p.ShutdownGrace)
	tr := rosnode.NewTransport(rn, log)
	var clock executor.Clock = executor.WallClock{}
	if p.UseSimTime {
		sim := rostime.NewSim()
		if err := node.SubscribeClock(tr, sim, log); err != nil {
			return fmt.Errorf("use_sim_time: %w", err)
		}
		clock = executor.SimClock(sim)
		log.Infof("%s: use_sim_time: control instants follow %s", rn.FullyQualifiedName(), rostime.ClockTopic)
	}
	e, err := executor.New(executor.Config{Params: p, Logger: log, Clock: clock, Name: rn.FullyQualifiedName()}, tr)
	if err != nil {
		return err
	}
	log.Infof("%s: executing %s on %s (build %s)", rn.FullyQualifiedName(), p.Topics.Chunks, p.Topics.Action, node.Build())
	return rosnode.SpinWhile(rn, func() error { return e.Run(ctx) })
}

const usage = `usage: fastwam_executor [--print-params] [--ros-args ROS_ARGS...]

The Fast-WAM chunk executor ROS 2 node: ActionChunk in, one StampedAction per
control period out. Parameters are set with --ros-args -p name:=value or
--params-file FILE; --print-params prints them all with their defaults as a
params file.
`
