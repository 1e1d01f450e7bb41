package shutdown_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/fastwam/actionexpert/internal/shutdown"
)

// work stands for a command: it returns when its context is cancelled, here
// after it has signalled its own process the way an operator would.
func work(ctx context.Context) int {
	p, _ := os.FindProcess(os.Getpid())
	p.Signal(syscall.SIGTERM)
	<-ctx.Done()
	fmt.Println("cleaning up:", context.Cause(ctx))
	return 0
}

// A main function: the work runs under the handler's context; after it
// returns, Stop and exit with ExitCode (os.Exit in a real program). Had the
// work not returned within 5 s of the SIGTERM, or had a second signal come,
// the handler would have ended the process itself.
func Example() {
	h := shutdown.Notify(context.Background(), shutdown.Options{Name: "example", Grace: 5 * time.Second})
	code := work(h.Context())
	h.Stop()
	fmt.Println("exit status", h.ExitCode(code))
	// Output:
	// cleaning up: interrupted by SIGTERM
	// exit status 143
}
