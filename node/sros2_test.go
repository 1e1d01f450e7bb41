package node

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/launchtest"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/node/rostime"
)

// policyFile is the SROS2 policy the package ships.
const policyFile = "../launch/security/policy.xml"

// namingTransport is a Bus that records the name of every topic the node
// subscribes to or advertises and every service it serves.
type namingTransport struct {
	*Bus
	mu   sync.Mutex
	used launchtest.Grants
}

func (n *namingTransport) add(list *[]string, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(*list, name) {
		*list = append(*list, name)
	}
}

func (n *namingTransport) Subscribe(t Topic, h Handler) error {
	n.add(&n.used.Subscribe, t.Name)
	return n.Bus.Subscribe(t, h)
}

func (n *namingTransport) SubscribeRecycled(t Topic, h Handler) error {
	n.add(&n.used.Subscribe, t.Name)
	return n.Bus.SubscribeRecycled(t, h)
}

func (n *namingTransport) Advertise(t Topic) (Publisher, error) {
	n.add(&n.used.Publish, t.Name)
	return n.Bus.Advertise(t)
}

func (n *namingTransport) Serve(name, srvType string, h ServiceHandler) error {
	n.add(&n.used.Reply, name)
	return n.Bus.Serve(name, srvType, h)
}

// TestSROS2PolicyCoversNode runs the managed node, as fastwam_node does,
// with the launch files' default names in every configuration that adds a
// topic (kv_transport shm, actions.* set, use_sim_time), and checks that
// the shipped SROS2 policy grants the /fastwam/action_expert enclave every
// topic and service it used (under ROS_SECURITY_STRATEGY=Enforce a
// missing grant stops the node from starting or configuring), the world
// model's producers every input, and the operator's tools every topic.
func TestSROS2PolicyCoversNode(t *testing.T) {
	shm := testParams()
	shm.KVTransport = params.KVTransportSHM
	post := testParams()
	post.Actions.Post.Gripper.Affine = true
	for _, c := range []struct {
		name string
		p    params.Params
	}{{"default", testParams()}, {"kv_transport shm", shm}, {"actions.gripper.affine", post}} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			p.SelfTest.Skip = true
			tr := &namingTransport{Bus: NewBus()}
			open := func(context.Context, params.Params) (expert.Backend, error) { return newTestBackend(tinyDims()), nil }
			m, err := NewManaged(ManagedConfig{Params: p, Open: open, Name: "/fastwam_action_expert"}, tr)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := m.Serve(ctx, tr, "/fastwam_action_expert"); err != nil {
				t.Fatal(err)
			}
			if err := SubscribeClock(tr, rostime.NewSim(), nil); err != nil {
				t.Fatal(err)
			}
			if err := m.Configure(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := m.Cleanup(); err != nil {
					t.Error(err)
				}
			}()
			if c.p.Actions.Post.Enabled() && !slices.Contains(tr.used.Publish, p.Actions.Topic) {
				t.Fatalf("the node with actions.* set did not advertise %s (published %v)", p.Actions.Topic, tr.used.Publish)
			}
			// rcl's own publisher, not the transport's.
			tr.used.Publish = append(tr.used.Publish, "/rosout")
			launchtest.CheckGrants(t, policyFile, "/fastwam/action_expert", "fastwam_action_expert", tr.used)
			// The world model's producers (kv_player, ros2 bag play) publish
			// the node's inputs; the operator's tools (topic echo, bag
			// record) read every topic of the node.
			var inputs, read []string
			for _, s := range tr.used.Subscribe {
				if s != rostime.ClockTopic {
					inputs = append(inputs, s)
				}
			}
			for _, s := range append(tr.used.Subscribe, tr.used.Publish...) {
				read = append(read, strings.Replace(s, "~/", "/fastwam_action_expert/", 1))
			}
			for _, producer := range []string{"kv_player", "rosbag2_player"} {
				launchtest.CheckGrants(t, policyFile, "/fastwam/world_model", producer, launchtest.Grants{Publish: inputs})
			}
			launchtest.CheckGrants(t, policyFile, "/fastwam/operator", "operator", launchtest.Grants{Subscribe: read})
		})
	}
}
