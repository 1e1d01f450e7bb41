package node

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// qosOverridePrefix starts the standard QoS override parameters of ROS 2
// (rclcpp's QosOverridingOptions, as ros2/demos uses them):
// qos_overrides.<fully qualified topic>.<publisher|subscription>.<policy>.
const qosOverridePrefix = "qos_overrides."

// qosOverridePolicies are the policies this node lets a qos_overrides
// parameter change: those its QoS profiles have (an rclcpp publisher, too,
// allows only the policies it declares overridable).
func qosOverridePolicies() []string { return []string{"reliability", "durability", "history", "depth"} }

// QoSOverride is one qos_overrides parameter as given.
type QoSOverride struct {
	Topic  string // as written: fully qualified, or relative to the node's namespace
	Entity string // "publisher" or "subscription"
	Policy string // reliability, durability, history or depth
	Text   string // the value (reliability, durability, history)
	Depth  int    // the value of depth
}

// Name is the parameter's name.
func (o QoSOverride) Name() string {
	return qosOverridePrefix + o.Topic + "." + o.Entity + "." + o.Policy
}

// setQoSOverride stores one qos_overrides parameter, checked: its entity,
// its policy and its value. Which topic it names is checked when the
// overrides are applied (ApplyQoSOverrides), where the node's namespace is
// known; one for a topic the node does not have is ignored there, as
// rclcpp ignores overrides for entities it never creates, so that a
// shared bringup file may hold every node's overrides.
func (p *Params) setQoSOverride(name string, v value) error {
	rest := strings.TrimPrefix(name, qosOverridePrefix)
	parts := strings.Split(rest, ".")
	if len(parts) < 3 || parts[0] == "" {
		return fmt.Errorf("parameter %q: want qos_overrides.<topic>.<publisher|subscription>.<policy>", name)
	}
	o := QoSOverride{Topic: strings.Join(parts[:len(parts)-2], "."), Entity: parts[len(parts)-2], Policy: parts[len(parts)-1]}
	if o.Entity != "publisher" && o.Entity != "subscription" {
		return fmt.Errorf("parameter %q: %q is not publisher or subscription", name, o.Entity)
	}
	switch o.Policy {
	case "reliability", "durability", "history":
		cv, err := v.convert(kindString)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		var perr error
		switch o.Policy {
		case "reliability":
			_, perr = ParseReliability(cv.s)
		case "durability":
			_, perr = ParseDurability(cv.s)
		default:
			_, perr = ParseHistory(cv.s)
		}
		if perr != nil {
			return fmt.Errorf("parameter %q: %w", name, perr)
		}
		o.Text = cv.s
	case "depth":
		cv, err := v.convert(kindInt)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", name, err)
		}
		if cv.i < 1 || cv.i > 1000 {
			return fmt.Errorf("parameter %q: must be in [1, 1000], got %d", name, cv.i)
		}
		o.Depth = int(cv.i)
	default:
		return fmt.Errorf("parameter %q: policy %q cannot be overridden on this node; the overridable ones are %s",
			name, o.Policy, strings.Join(qosOverridePolicies(), ", "))
	}
	for i := range p.QoSOverrides {
		if p.QoSOverrides[i].Name() == o.Name() {
			p.QoSOverrides[i] = o
			return nil
		}
	}
	p.QoSOverrides = append(p.QoSOverrides, o)
	sort.Slice(p.QoSOverrides, func(i, j int) bool { return p.QoSOverrides[i].Name() < p.QoSOverrides[j].Name() })
	return nil
}

// ApplyQoSOverrides sets the QoS of the node's topics from its
// qos_overrides parameters, for a node in namespace ("/" or "/arm"): an
// override applies to the entity whose topic, resolved in namespace, is
// the override's (resolved the same way). The overrides win over the
// qos.* parameters, their older aliases. It returns the names of the
// overrides that match none of the node's entities (ignored).
func (p *Params) ApplyQoSOverrides(namespace string) []string {
	resolve := func(t string) string {
		if strings.HasPrefix(t, "/") {
			return path.Clean(t)
		}
		return path.Join("/", namespace, t)
	}
	entities := []struct {
		topic, entity string
		qos           *QoS
	}{
		{p.KVInputTopic(), "subscription", &p.QoS.KVCache},
		{p.Topics.Context, "subscription", &p.QoS.Context},
		{p.Topics.Actions, "publisher", &p.QoS.Actions},
	}
	var ignored []string
	for _, o := range p.QoSOverrides {
		matched := false
		for _, e := range entities {
			if e.entity != o.Entity || resolve(e.topic) != resolve(o.Topic) {
				continue
			}
			matched = true
			switch o.Policy {
			case "reliability":
				e.qos.Reliability, _ = ParseReliability(o.Text)
			case "durability":
				e.qos.Durability, _ = ParseDurability(o.Text)
			case "history":
				e.qos.History, _ = ParseHistory(o.Text)
			case "depth":
				e.qos.Depth = o.Depth
			}
		}
		if !matched {
			ignored = append(ignored, o.Name())
		}
	}
	return ignored
}

// namespaceOf is the namespace of a fully qualified node name ("/" for
// "/fastwam_action_expert", "/arm" for "/arm/fastwam_action_expert").
func namespaceOf(fqn string) string {
	if fqn == "" || !strings.HasPrefix(fqn, "/") {
		return "/"
	}
	return path.Dir(fqn)
}
