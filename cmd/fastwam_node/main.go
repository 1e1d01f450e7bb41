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

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/shutdown"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/backends"
	"github.com/fastwam/actionexpert/node/rosnode"
	"github.com/fastwam/actionexpert/node/rostime"
)

// nodeName is the node's default name; `-r __node:=...` renames it.
const nodeName = "fastwam_action_expert"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	rclArgs, rest, err := rclgo.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastwam_node: ROS arguments: %s\n", rclMessage(err))
		return 2
	}
	for _, a := range rest {
		switch a {
		case "-h", "--help":
			fmt.Print(usage)
			return 0
		case "--print-params":
			p := node.DefaultParams()
			os.Stdout.Write(p.ParamsYAML(nodeName))
			return 0
		default:
			fmt.Fprintf(os.Stderr, "fastwam_node: unknown argument %q (ROS arguments go after --ros-args)\n%s", a, usage)
			return 2
		}
	}

	// The first SIGINT/SIGTERM cancels ctx and the node stops in order
	// (exit status 0, as for any ROS node); a second signal, or the
	// shutdown_grace parameter's time passing first, exits at once with
	// 128 + the signal's number. Until the parameters are read the grace
	// period is the default.
	sig := shutdown.Notify(context.Background(), shutdown.Options{Name: "fastwam_node", Grace: node.DefaultParams().ShutdownGrace})
	defer sig.Stop()
	ctx := sig.Context()

	if err := rclgo.Init(rclArgs); err != nil {
		fmt.Fprintf(os.Stderr, "fastwam_node: rclgo init: %s\n", rclMessage(err))
		return 1
	}
	defer func() {
		if err := rclgo.Uninit(); err != nil {
			fmt.Fprintf(os.Stderr, "fastwam_node: rclgo uninit: %s\n", rclMessage(err))
		}
	}()
	rn, err := rclgo.NewNode(nodeName, "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastwam_node: create node: %s\n", rclMessage(err))
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

// serve configures the managed node and spins until ctx is done: its
// topics, lifecycle and parameter services exist from the start; with
// autostart (the default) it runs configure (open the backend, self-test)
// and activate at once, otherwise it waits unconfigured for `ros2
// lifecycle set`. At the end the node shuts down in order: the worker
// stops using the backend, the backend is closed (the HTP backend
// down-votes), spinning stops, and the caller then closes the ROS node
// and the context. setGrace receives the shutdown_grace parameter.
func serve(ctx context.Context, args []string, rn *rclgo.Node, log node.Logger, setGrace func(time.Duration)) (err error) {
	fqn := rn.FullyQualifiedName()
	p, err := node.LoadParams(args, fqn)
	if err != nil {
		return err
	}
	setGrace(p.ShutdownGrace)
	tr := rosnode.NewTransport(rn, log)
	cfg := node.ManagedConfig{Params: p, Logger: log, Open: func(ctx context.Context, p node.Params) (expert.Backend, error) {
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
	// Subscriptions and services exist now; rclgo's wait set is built when
	// spinning starts.
	spinCtx, stopSpin := context.WithCancel(context.Background())
	spun := make(chan error, 1)
	go func() { spun <- rn.Spin(spinCtx) }()
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	if p.Autostart {
		if err := node.Autostart(ctx, mach); err != nil && ctx.Err() == nil {
			log.Errorf("%v; the node waits for `ros2 lifecycle set %s configure`", err, fqn)
		}
	} else {
		log.Infof("%s: unconfigured (autostart false): `ros2 lifecycle set %s configure`, then activate", fqn, fqn)
	}
	runErr := <-ran
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
// rclgo appends to it: the operator needs rcl's message, not our frames.
func rclMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\ngoroutine "); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

const usage = `usage: fastwam_node [--print-params] [--ros-args ROS_ARGS...]

The Fast-WAM action-expert ROS 2 node. Parameters are set with
--ros-args -p name:=value or --params-file FILE; --print-params prints them
all with their defaults as a params file.
`
