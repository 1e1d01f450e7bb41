package replay

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// BaseParams returns the node parameters a replay starts from: the node's
// defaults with the given backend ("cpu" or "htp"), the start-up self-test
// skipped (the replay is the test) and no input age limit (a replay runs at
// the backend's pace, not the recording's, so ages say nothing about the
// robot). The caller still names the weights or the context binary, which
// params.Params.Validate requires.
func BaseParams(backend string) params.Params {
	p := params.Default()
	p.Backend = backend
	p.SelfTest.Skip = true
	p.MaxInputAge = 0
	return p
}

// ResolveTopics turns the node's relative topic names into fully qualified
// ones in namespace ("/" or "/robot"), as ROS resolves them for a node in
// that namespace; bags record fully qualified names. Names that are already
// absolute are kept. Private names ("~/x") are refused: a replay has no
// node name to expand them with.
func ResolveTopics(p *params.Params, namespace string) error {
	if namespace == "" || namespace[0] != '/' || strings.ContainsAny(namespace, " \t\n~") {
		return fmt.Errorf("replay: namespace %q is not a fully qualified ROS namespace (like / or /robot)", namespace)
	}
	ns := strings.TrimSuffix(namespace, "/")
	for _, t := range []struct {
		param string
		name  *string
	}{
		{"topics.kv_cache", &p.Topics.KVCache},
		{"topics.context", &p.Topics.Context},
		{"topics.actions", &p.Topics.Actions},
		{"topics.diagnostics", &p.Topics.Diagnostics},
		{"actions.topic", &p.Actions.Topic},
	} {
		switch name := *t.name; {
		case name == "":
			return fmt.Errorf("replay: parameter %q is empty; want a topic name", t.param)
		case name[0] == '~':
			return fmt.Errorf("replay: parameter %q is the private name %q; give the fully qualified name the bag records", t.param, name)
		case name[0] != '/':
			*t.name = ns + "/" + name
		}
	}
	if _, err := p.ApplyQoSOverrides(namespace); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// CheckTransport refuses parameters a replay cannot run with: the
// shared-memory KV hand-off (kv_transport shm). A replay, and bag make,
// feed the node's pipeline the VideoKVCache messages of the bag (DDS); with
// shm the node would wait for KVHandoff descriptors naming a segment that
// no producer wrote, and produce nothing.
func CheckTransport(p params.Params) error {
	if p.KVTransport == params.KVTransportSHM {
		return fmt.Errorf("replay: kv_transport %q is not replayable: the replay feeds the node the bag's VideoKVCache messages on %s (kv_transport %q); the shared-memory hand-off has no segment to read here. Leave kv_transport at %q: pairing, denoising and the published chunks are the same",
			p.KVTransport, p.Topics.KVCache, params.KVTransportDDS, params.KVTransportDDS)
	}
	return nil
}

// bagQoS maps a node QoS profile to the rmw profile a bag records.
func bagQoS(q params.QoS) bag.QoS {
	out := bag.DefaultQoS()
	out.Depth = uint64(q.Depth)
	switch q.History {
	case params.HistoryKeepLast:
		out.History = bag.HistoryKeepLast
	case params.HistoryKeepAll:
		out.History = bag.HistoryKeepAll
	}
	switch q.Reliability {
	case params.ReliabilityReliable:
		out.Reliability = bag.ReliabilityReliable
	case params.ReliabilityBestEffort:
		out.Reliability = bag.ReliabilityBestEffort
	}
	switch q.Durability {
	case params.DurabilityVolatile:
		out.Durability = bag.DurabilityVolatile
	case params.DurabilityTransientLocal:
		out.Durability = bag.DurabilityTransientLocal
	}
	return out
}

// writerLogger writes the node's log lines to a writer.
type writerLogger struct {
	mu      sync.Mutex
	w       io.Writer
	verbose bool
}

// NewLogger returns a node.Logger writing "node: LEVEL message" lines to w:
// warnings and errors always, information and debug lines when verbose.
// It is safe for concurrent use.
func NewLogger(w io.Writer, verbose bool) node.Logger {
	return &writerLogger{w: w, verbose: verbose}
}

func (l *writerLogger) line(level, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "node: %s %s\n", level, fmt.Sprintf(format, args...))
}

func (l *writerLogger) Debugf(format string, args ...any) {
	if l.verbose {
		l.line("DEBUG", format, args...)
	}
}

func (l *writerLogger) Infof(format string, args ...any) {
	if l.verbose {
		l.line("INFO", format, args...)
	}
}

func (l *writerLogger) Warnf(format string, args ...any) { l.line("WARN", format, args...) }

func (l *writerLogger) Errorf(format string, args ...any) { l.line("ERROR", format, args...) }
