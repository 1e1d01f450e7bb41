package params

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
	Entity string // "publisher" or "subscription" when valid
	Policy string // reliability, durability, history or depth when valid
	Text   string // the value (reliability, durability, history), or its source text when invalid
	Depth  int    // the value of depth
	// Invalid says why this node could not take the override ("" when it
	// can): an entity other than publisher or subscription, a policy it
	// does not override, a bad value. It is an error only for an override
	// that names one of the node's own topics (ApplyQoSOverrides): the
	// others belong to other nodes, which judge them by their own rules.
	Invalid string
}

// Name is the parameter's name.
func (o QoSOverride) Name() string {
	return qosOverridePrefix + o.Topic + "." + o.Entity + "." + o.Policy
}

// setQoSOverride stores one qos_overrides parameter. Only its name's
// structure is checked here: which topic it names is known when the
// overrides are applied (ApplyQoSOverrides), where the node's namespace
// and its final topic parameters are known, so its entity, policy and
// value are checked then, and only when the topic is one of the node's.
// One for another topic is ignored there, as rclcpp ignores overrides for
// entities it never creates, so that a shared bringup file may hold every
// node's overrides, with policies and values this node does not take
// (deadline, system_default, a depth over 1000).
func (p *Params) setQoSOverride(name string, v value) error {
	rest := strings.TrimPrefix(name, qosOverridePrefix)
	parts := strings.Split(rest, ".")
	if len(parts) < 3 || parts[0] == "" {
		return fmt.Errorf("parameter %q: want qos_overrides.<topic>.<publisher|subscription>.<policy>", name)
	}
	o := QoSOverride{Topic: strings.Join(parts[:len(parts)-2], "."), Entity: parts[len(parts)-2], Policy: parts[len(parts)-1]}
	if err := o.check(v); err != nil {
		o.Invalid, o.Text = err.Error(), v.text
	}
	// A copy, never the slice p shares: params files are applied to a
	// shallow copy of p (rosparam.SetFunc).
	out := make([]QoSOverride, 0, len(p.QoSOverrides)+1)
	for _, x := range p.QoSOverrides {
		if x.Name() != o.Name() {
			out = append(out, x)
		}
	}
	out = append(out, o)
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	p.QoSOverrides = out
	return nil
}

// check checks the entity, the policy and the value v of o as this node
// takes them, and stores the value in o.
func (o *QoSOverride) check(v value) error {
	if o.Entity != "publisher" && o.Entity != "subscription" {
		return fmt.Errorf("%q is not publisher or subscription", o.Entity)
	}
	switch o.Policy {
	case "reliability", "durability", "history":
		cv, err := v.convert(kindString)
		if err != nil {
			return err
		}
		switch o.Policy {
		case "reliability":
			_, err = ParseReliability(cv.s)
		case "durability":
			_, err = ParseDurability(cv.s)
		default:
			_, err = ParseHistory(cv.s)
		}
		if err != nil {
			return err
		}
		o.Text = cv.s
	case "depth":
		cv, err := v.convert(kindInt)
		if err != nil {
			return err
		}
		if cv.i < 1 || cv.i > 1000 {
			return fmt.Errorf("must be in [1, 1000], got %d", cv.i)
		}
		o.Depth = int(cv.i)
	default:
		return fmt.Errorf("policy %q cannot be overridden on this node; the overridable ones are %s",
			o.Policy, strings.Join(qosOverridePolicies(), ", "))
	}
	return nil
}

// ApplyQoSOverrides sets the QoS of the node's topics from its
// qos_overrides parameters, for a node in namespace ("/" or "/arm"): an
// override applies to the entity whose topic, resolved in namespace, is
// the override's (resolved the same way). The overrides win over the
// qos.* parameters, their older aliases. An override that names one of
// these topics is checked strictly: a bad entity, policy or value is an
// error naming it, and p is left unchanged. It returns the names of the
// overrides that match none of the node's entities (ignored unchecked:
// another node's, in a shared bringup file).
func (p *Params) ApplyQoSOverrides(namespace string) ([]string, error) {
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
	ours := func(o QoSOverride) bool {
		for _, e := range entities {
			if resolve(e.topic) == resolve(o.Topic) {
				return true
			}
		}
		return false
	}
	for _, o := range p.QoSOverrides {
		if o.Invalid != "" && ours(o) {
			return nil, fmt.Errorf("parameter %q: %s", o.Name(), o.Invalid)
		}
	}
	var ignored []string
	for _, o := range p.QoSOverrides {
		matched := false
		for _, e := range entities {
			if o.Invalid != "" || e.entity != o.Entity || resolve(e.topic) != resolve(o.Topic) {
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
	return ignored, nil
}

// namespaceOf is the namespace of a fully qualified node name ("/" for
// "/fastwam_action_expert", "/arm" for "/arm/fastwam_action_expert").
func namespaceOf(fqn string) string {
	if fqn == "" || !strings.HasPrefix(fqn, "/") {
		return "/"
	}
	return path.Dir(fqn)
}
