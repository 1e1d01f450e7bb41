package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
)

// qosRecorder is a Bus that records the QoS each topic is created with.
type qosRecorder struct {
	*Bus
	mu  sync.Mutex
	qos map[string]params.QoS
}

func (r *qosRecorder) note(t Topic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.qos[t.Name] = t.QoS
}

func (r *qosRecorder) Subscribe(t Topic, h Handler) error { r.note(t); return r.Bus.Subscribe(t, h) }

func (r *qosRecorder) SubscribeRecycled(t Topic, h Handler) error {
	r.note(t)
	return r.Bus.SubscribeRecycled(t, h)
}

func (r *qosRecorder) Advertise(t Topic) (Publisher, error) { r.note(t); return r.Bus.Advertise(t) }

// managedQoS creates a managed node named fqn from ROS arguments and
// returns the QoS of each topic it created.
func managedQoS(t *testing.T, fqn string, args ...string) map[string]params.QoS {
	t.Helper()
	p := params.Default()
	p.Backend, p.CPU.Weights = params.BackendCPU, "unused.safetensors"
	if err := p.ApplyROSArgs(append([]string{"--ros-args"}, args...), "fastwam_action_expert"); err != nil {
		t.Fatal(err)
	}
	rec := &qosRecorder{Bus: NewBus(), qos: map[string]params.QoS{}}
	open := func(context.Context, params.Params) (expert.Backend, error) {
		return nil, errors.New("not opened in this test")
	}
	if _, err := NewManaged(ManagedConfig{Params: p, Name: fqn, Open: open}, rec); err != nil {
		t.Fatal(err)
	}
	return rec.qos
}

// TestQoSOverrides: the standard qos_overrides parameters set the QoS of
// the entity whose resolved topic they name, over the qos.* aliases; one
// for a topic the node does not have is ignored; a wrong entity, policy or
// value is refused by name.
func TestQoSOverrides(t *testing.T) {
	q := managedQoS(t, "/fastwam_action_expert",
		"-p", "qos_overrides./video_kv_cache.subscription.depth:=2",
		"-p", "qos.kv_cache.depth:=5", // the alias loses
		"-p", "qos_overrides./action_chunk.publisher.reliability:=best_effort",
		"-p", "qos_overrides./someone_elses_topic.subscription.depth:=7")
	def := params.Default().QoS
	if got := q["video_kv_cache"]; got.Depth != 2 || got.Reliability != def.KVCache.Reliability {
		t.Errorf("video_kv_cache subscription params.QoS %v, want depth 2 and the rest the default %v", got, def.KVCache)
	}
	if got := q["action_chunk"]; got.Reliability != params.ReliabilityBestEffort || got.Depth != def.Actions.Depth {
		t.Errorf("action_chunk publisher params.QoS %v, want best_effort", got)
	}
	if got := q["text_context"]; got != def.Context {
		t.Errorf("text_context params.QoS %v, want the default %v", got, def.Context)
	}
	// In a namespace, the override names the resolved topic.
	q = managedQoS(t, "/arm/fastwam_action_expert",
		"-p", "qos_overrides./arm/video_kv_cache.subscription.depth:=3",
		"-p", "qos_overrides./text_context.subscription.depth:=9") // not this node's: /arm/text_context
	if q["video_kv_cache"].Depth != 3 || q["text_context"].Depth != def.Context.Depth {
		t.Errorf("in /arm: video_kv_cache depth %d (want 3), text_context depth %d (want the default %d)",
			q["video_kv_cache"].Depth, q["text_context"].Depth, def.Context.Depth)
	}
	// The override is for the subscription, not a publisher of the same topic.
	q = managedQoS(t, "/fastwam_action_expert", "-p", "qos_overrides./video_kv_cache.publisher.depth:=4")
	if q["video_kv_cache"].Depth != def.KVCache.Depth {
		t.Errorf("a publisher override changed the subscription: depth %d", q["video_kv_cache"].Depth)
	}
	for _, c := range []struct{ arg, want string }{
		{"qos_overrides./video_kv_cache.subscriber.depth:=2", `"subscriber" is not publisher or subscription`},
		{"qos_overrides./video_kv_cache.subscription.deadline:=1.0", `policy "deadline" cannot be overridden on this node; the overridable ones are reliability, durability, history, depth`},
		{"qos_overrides./video_kv_cache.subscription.depth:=0", `must be in [1, 1000], got 0`},
		{"qos_overrides./video_kv_cache.subscription.reliability:=sometimes", `qos_overrides./video_kv_cache.subscription.reliability`},
		{"qos_overrides.depth:=2", `want qos_overrides.<topic>.<publisher|subscription>.<policy>`},
	} {
		p := params.Default()
		err := p.ApplyROSArgs([]string{"--ros-args", "-p", c.arg}, "fastwam_action_expert")
		if err == nil {
			_, err = p.ApplyQoSOverrides("/")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-p %s: %v, want an error containing %q", c.arg, err, c.want)
		}
	}
}

// TestQoSOverridesInSharedParamsFile: a bringup file's qos_overrides
// under /**, for this node's topics and for other nodes', is accepted.
func TestQoSOverridesInSharedParamsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "bringup.yaml")
	if err := os.WriteFile(f, []byte(`/**:
  ros__parameters:
    use_sim_time: true
    qos_overrides:
      /video_kv_cache:
        subscription:
          depth: 2
          reliability: reliable
      /scan:
        subscription:
          depth: 10
`), 0o600); err != nil {
		t.Fatal(err)
	}
	q := managedQoS(t, "/fastwam_action_expert", "--params-file", f)
	if q["video_kv_cache"].Depth != 2 {
		t.Errorf("video_kv_cache depth %d, want 2 from the shared file", q["video_kv_cache"].Depth)
	}
}

// TestSharedParamsFileWithOtherNodesQoSOverrides: a /** bringup file
// holding other nodes' overrides, with policies (deadline, liveliness,
// lifespan), values (system_default) and depths (5000) this node does not
// take, leaves the node to start with its own overrides applied; the same
// entries for one of the node's own topics are refused by name.
func TestSharedParamsFileWithOtherNodesQoSOverrides(t *testing.T) {
	shared := `/**:
  ros__parameters:
    use_sim_time: true
    qos_overrides:
      /camera:
        subscription:
          deadline: 100000000
          liveliness: automatic
          liveliness_lease_duration: 1000000000
          reliability: system_default
          depth: 5000
      /cmd_vel:
        publisher:
          lifespan: 500000000
          history: system_default
      /tf:
        subscription_rviz:
          depth: 100
      /video_kv_cache:
        subscription:
          depth: 3
`
	dir := t.TempDir()
	f := filepath.Join(dir, "bringup.yaml")
	if err := os.WriteFile(f, []byte(shared), 0o600); err != nil {
		t.Fatal(err)
	}
	q := managedQoS(t, "/fastwam_action_expert", "--params-file", f)
	if q["video_kv_cache"].Depth != 3 {
		t.Errorf("video_kv_cache depth %d, want 3 from the shared file", q["video_kv_cache"].Depth)
	}
	p := params.Default()
	if err := p.ApplyROSArgs([]string{"--ros-args", "--params-file", f}, "/fastwam_action_expert"); err != nil {
		t.Fatal(err)
	}
	ignored, err := p.ApplyQoSOverrides("/")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ignored, " "); !strings.Contains(got, "qos_overrides./camera.subscription.deadline") ||
		!strings.Contains(got, "qos_overrides./cmd_vel.publisher.history") || len(ignored) != 8 {
		t.Errorf("ignored %q, want the 8 overrides of /camera, /cmd_vel and /tf", ignored)
	}
	// The same entries for the node's own topics (also after remapping
	// topics.context to /camera) are checked strictly.
	for _, c := range []struct{ entry, want string }{
		{"/video_kv_cache:\n        subscription:\n          deadline: 100000000", `parameter "qos_overrides./video_kv_cache.subscription.deadline": policy "deadline" cannot be overridden on this node`},
		{"/action_chunk:\n        publisher:\n          reliability: system_default", `parameter "qos_overrides./action_chunk.publisher.reliability"`},
		{"/video_kv_cache:\n        subscription:\n          depth: 5000", `parameter "qos_overrides./video_kv_cache.subscription.depth": must be in [1, 1000], got 5000`},
		{"/video_kv_cache:\n        publisher_x:\n          depth: 2", `"publisher_x" is not publisher or subscription`},
		{"/camera:\n        subscription:\n          depth: 5000\n    topics:\n      context: /camera", `parameter "qos_overrides./camera.subscription.depth": must be in [1, 1000], got 5000`},
	} {
		f := filepath.Join(dir, "own.yaml")
		body := "/**:\n  ros__parameters:\n    qos_overrides:\n      " + c.entry + "\n"
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		p := params.Default()
		p.Backend, p.CPU.Weights = params.BackendCPU, "unused.safetensors"
		err := p.ApplyROSArgs([]string{"--ros-args", "--params-file", f}, "/fastwam_action_expert")
		if err == nil {
			_, err = NewManaged(ManagedConfig{Params: p, Name: "/fastwam_action_expert", Open: func(context.Context, params.Params) (expert.Backend, error) {
				return nil, errors.New("not opened in this test")
			}}, NewBus())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v, want an error containing %q", body, err, c.want)
		}
	}
}
