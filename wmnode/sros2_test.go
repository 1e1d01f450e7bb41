package wmnode

import (
	"slices"
	"testing"

	"github.com/fastwam/actionexpert/internal/launchtest"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/rostime"
)

// namingTransport is a node.Bus that records the name of every topic the
// node subscribes to or advertises.
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

func (n *namingTransport) Serve(name, srvType string, h node.ServiceHandler) error {
	n.used.Reply = append(n.used.Reply, name)
	return n.Bus.Serve(name, srvType, h)
}

func (n *namingTransport) Advertise(t node.Topic) (node.Publisher, error) {
	if !slices.Contains(n.used.Publish, t.Name) {
		n.used.Publish = append(n.used.Publish, t.Name)
	}
	return n.Bus.Advertise(t)
}

// TestSROS2PolicyCoversWorldModel creates the node as fastwam_world_model
// does, over DDS and over shared memory, with use_sim_time, and checks
// that the shipped SROS2 policy grants the /fastwam/world_model enclave's
// fastwam_world_model profile every topic, lifecycle and parameter service it used: under
// ROS_SECURITY_STRATEGY=Enforce a missing grant makes it fail to start.
func TestSROS2PolicyCoversWorldModel(t *testing.T) {
	for _, kv := range []string{params.KVTransportDDS, params.KVTransportSHM} {
		t.Run(kv, func(t *testing.T) {
			p := tinyParams()
			p.KVTransport, p.SHM.Dir = kv, t.TempDir()
			tr := &namingTransport{Bus: node.NewBus()}
			if err := node.SubscribeClock(tr, rostime.NewSim(), nil); err != nil {
				t.Fatal(err)
			}
			n, err := New(Config{Params: p, Model: tinyModel(t, p), Name: DefaultNodeName}, tr)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			if _, err := n.ServeLifecycle(t.Context(), tr); err != nil {
				t.Fatal(err)
			}
			if len(tr.used.Reply) != 5 {
				t.Fatalf("lifecycle services served: %v", tr.used.Reply)
			}
			// fastwam_world_model serves its parameter services too: without their
			// grants it failed at start under Enforce (check_sros2.sh, world phase).
			if err := n.ServeParameters(t.Context(), tr); err != nil {
				t.Fatal(err)
			}
			if len(tr.used.Reply) != 11 {
				t.Fatalf("lifecycle and parameter services served: %v", tr.used.Reply)
			}
			tr.used.Publish = append(tr.used.Publish, "/rosout")
			launchtest.CheckGrants(t, "../launch/security/policy.xml", "/fastwam/world_model", "fastwam_world_model", tr.used)
		})
	}
}
