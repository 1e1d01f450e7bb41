package executor

import (
	"slices"
	"testing"

	"github.com/fastwam/actionexpert/internal/launchtest"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/rostime"
)

// namingTransport is a node.Bus that records the name of every topic the
// executor subscribes to or advertises.
type namingTransport struct {
	*node.Bus
	used launchtest.Grants
}

func (n *namingTransport) Subscribe(t node.Topic, h node.Handler) error {
	if !slices.Contains(n.used.Subscribe, t.Name) {
		n.used.Subscribe = append(n.used.Subscribe, t.Name)
	}
	return n.Bus.Subscribe(t, h)
}

func (n *namingTransport) Advertise(t node.Topic) (node.Publisher, error) {
	if !slices.Contains(n.used.Publish, t.Name) {
		n.used.Publish = append(n.used.Publish, t.Name)
	}
	return n.Bus.Advertise(t)
}

// TestSROS2PolicyCoversExecutor creates the executor, as fastwam_executor
// does, on the action expert's two chunk topics (topics.action_chunk
// action_chunk, and the node's actions.topic, the post-processed chunks a
// robot executes) with use_sim_time, and checks that the shipped SROS2
// policy grants the /fastwam/executor enclave every topic it used: under
// ROS_SECURITY_STRATEGY=Enforce a missing grant makes it exit 1.
func TestSROS2PolicyCoversExecutor(t *testing.T) {
	for _, chunks := range []string{DefaultParams().Topics.Chunks, params.Default().Actions.Topic} {
		t.Run(chunks, func(t *testing.T) {
			p := DefaultParams()
			p.Topics.Chunks = chunks
			tr := &namingTransport{Bus: node.NewBus()}
			if err := node.SubscribeClock(tr, rostime.NewSim(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := New(Config{Params: p, Name: "/fastwam_executor"}, tr); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(tr.used.Subscribe, chunks) {
				t.Fatalf("the executor did not subscribe to %s (subscribed %v)", chunks, tr.used.Subscribe)
			}
			tr.used.Publish = append(tr.used.Publish, "/rosout")
			launchtest.CheckGrants(t, "../launch/security/policy.xml", "/fastwam/executor", "fastwam_executor", tr.used)
		})
	}
}
