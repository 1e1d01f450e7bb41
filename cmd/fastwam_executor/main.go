//go:build rclgo

// Command fastwam_executor is the Fast-WAM chunk executor ROS 2 node: it
// subscribes to the action expert's ActionChunk messages and publishes one
// StampedAction per control period on its own timer (the system clock),
// choosing for each instant the newest chunk that covers it, with /diagnostics
// (see package node/executor).
//
// Parameters come from ROS arguments, as for any ROS 2 node:
//
//	fastwam_executor --ros-args -p aggregation:=weighted_average \
//	    --params-file executor.params.yaml -r action:=/arm/command
//
// `fastwam_executor --print-params` prints every parameter with its default
// as a params file. Build with `go build -tags rclgo` against a sourced ROS 2
// Humble; see the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tiiuae/rclgo/pkg/rclgo"

	"github.com/fastwam/actionexpert/internal/shutdown"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/executor"
	"github.com/fastwam/actionexpert/node/rosnode"
	"github.com/fastwam/actionexpert/node/rostime"
)

// nodeName is the node's default name; `-r __node:=...` renames it.
const nodeName = "fastwam_executor"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	rclArgs, rest, err := rclgo.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastwam_executor: ROS arguments: %s\n", rclMessage(err))
		return 2
	}
	for _, a := range rest {
		switch a {
		case "-h", "--help":
			fmt.Print(usage)
			return 0
		case "--print-params":
			p := executor.DefaultParams()
			os.Stdout.Write(p.ParamsYAML(nodeName))
			return 0
		default:
			fmt.Fprintf(os.Stderr, "fastwam_executor: unknown argument %q (ROS arguments go after --ros-args)\n%s", a, usage)
			return 2
		}
	}

	// The first SIGINT/SIGTERM cancels ctx and the executor stops in order
	// (exit status 0, as for any ROS node); a second signal, or the
	// shutdown_grace parameter's time passing first, exits at once with
	// 128 + the signal's number.
	sig := shutdown.Notify(context.Background(), shutdown.Options{Name: "fastwam_executor", Grace: executor.DefaultParams().ShutdownGrace})
	defer sig.Stop()
	ctx := sig.Context()

	if err := rclgo.Init(rclArgs); err != nil {
		fmt.Fprintf(os.Stderr, "fastwam_executor: rclgo init: %s\n", rclMessage(err))
		return 1
	}
	defer func() {
		if err := rclgo.Uninit(); err != nil {
			fmt.Fprintf(os.Stderr, "fastwam_executor: rclgo uninit: %s\n", rclMessage(err))
		}
	}()
	rn, err := rclgo.NewNode(nodeName, "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastwam_executor: create node: %s\n", rclMessage(err))
		return 1
	}
	defer rn.Close()
	log := rosnode.Logger{L: rn.Logger()}
	if err := serve(ctx, args, rn, log, sig.SetGrace); err != nil {
		log.Errorf("%v", err)
		return 1
	}
	return 0
}

// serve configures the executor, spins until ctx is done and shuts down in
// order: the executor's timer stops (a last STALE report is published),
// then spinning stops; the caller closes the ROS node and the context.
// setGrace receives the shutdown_grace parameter.
func serve(ctx context.Context, args []string, rn *rclgo.Node, log node.Logger, setGrace func(time.Duration)) error {
	p, err := executor.LoadParams(args, rn.FullyQualifiedName())
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
	e, err := executor.New(executor.Config{Params: p, Logger: log, Clock: clock}, tr)
	if err != nil {
		return err
	}
	log.Infof("%s: executing %s on %s", rn.FullyQualifiedName(), p.Topics.Chunks, p.Topics.Action)
	// The subscription exists now; rclgo's wait set is built when spinning starts.
	spinCtx, stopSpin := context.WithCancel(context.Background())
	spun := make(chan error, 1)
	go func() { spun <- rn.Spin(spinCtx) }()
	runErr := e.Run(ctx)
	stopSpin()
	spinErr := <-spun
	if errors.Is(spinErr, context.Canceled) {
		spinErr = nil
	} else if spinErr != nil {
		spinErr = fmt.Errorf("spin: %w", spinErr)
	}
	return errors.Join(runErr, spinErr)
}

// rclMessage is the text of an rclgo error without the Go stack trace
// rclgo appends to it.
func rclMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\ngoroutine "); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

const usage = `usage: fastwam_executor [--print-params] [--ros-args ROS_ARGS...]

The Fast-WAM chunk executor ROS 2 node: ActionChunk in, one StampedAction per
control period out. Parameters are set with --ros-args -p name:=value or
--params-file FILE; --print-params prints them all with their defaults as a
params file.
`
