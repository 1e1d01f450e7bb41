//go:build rclgo

package rosnode

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
)

// Program is one of the package's node binaries, for Main.
type Program struct {
	Binary   string // the executable's name, the prefix of its own messages
	NodeName string // the node's default name; `-r __node:=...` renames it
	Usage    string // printed by -h and after an unknown argument
	// ParamsYAML renders the default parameters for --print-params.
	ParamsYAML func(nodeKey string) []byte
	// Grace is the shutdown grace period until Serve reads the
	// shutdown_grace parameter (and calls setGrace).
	Grace time.Duration
	// Serve runs the node until ctx is done (the first SIGINT or
	// SIGTERM). args are the process's arguments, for the parameters.
	Serve func(ctx context.Context, args []string, rn *rclgo.Node, log node.Logger, setGrace func(time.Duration)) error
}

// Main runs p as the process: it reads the arguments (ROS's, and -h or
// --print-params), installs the signal handling of internal/shutdown (the
// first signal cancels Serve's context and the node stops in order with
// status 0, as any ROS node; a second signal, or the grace period passing
// first, exits at once with 128 + the signal's number), initialises rcl,
// creates the node and runs Serve. It returns the exit status.
func Main(p Program, args []string) int {
	rclArgs, rest, err := rclgo.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: ROS arguments: %s\n", p.Binary, RCLMessage(err))
		return 2
	}
	for _, a := range rest {
		switch a {
		case "-h", "--help":
			fmt.Print(p.Usage)
			return 0
		case "--print-params":
			os.Stdout.Write(p.ParamsYAML(p.NodeName))
			return 0
		default:
			fmt.Fprintf(os.Stderr, "%s: unknown argument %q (ROS arguments go after --ros-args)\n%s", p.Binary, a, p.Usage)
			return 2
		}
	}
	sig := shutdown.Notify(context.Background(), shutdown.Options{Name: p.Binary, Grace: p.Grace})
	defer sig.Stop()

	if err := rclgo.Init(rclArgs); err != nil {
		fmt.Fprintf(os.Stderr, "%s: rclgo init: %s\n", p.Binary, RCLMessage(err))
		return 1
	}
	defer func() {
		if err := rclgo.Uninit(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: rclgo uninit: %s\n", p.Binary, RCLMessage(err))
		}
	}()
	rn, err := rclgo.NewNode(p.NodeName, "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: create node: %s\n", p.Binary, RCLMessage(err))
		return 1
	}
	defer rn.Close()
	log := Logger{L: rn.Logger()}
	if err := p.Serve(sig.Context(), args, rn, log, sig.SetGrace); err != nil {
		log.Errorf("%v", err)
		return 1
	}
	return 0
}

// SpinWhile spins rn while run runs and stops spinning when it returns.
// Every subscription, service and publisher must exist before: rclgo
// builds its wait set when spinning starts.
func SpinWhile(rn *rclgo.Node, run func() error) error {
	spinCtx, stopSpin := context.WithCancel(context.Background())
	spun := make(chan error, 1)
	go func() { spun <- rn.Spin(spinCtx) }()
	runErr := run()
	stopSpin()
	spinErr := <-spun
	if errors.Is(spinErr, context.Canceled) {
		spinErr = nil
	} else if spinErr != nil {
		spinErr = fmt.Errorf("spin: %w", spinErr)
	}
	return errors.Join(runErr, spinErr)
}

// RCLMessage is the text of an rclgo error without the Go stack trace
// rclgo appends to it: the operator needs rcl's message, not our frames.
func RCLMessage(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\ngoroutine "); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
