package bag

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// History is an rmw history policy (rmw_qos_history_policy_e).
type History int

// History policies, numbered as rmw numbers them.
const (
	HistorySystemDefault History = 0
	HistoryKeepLast      History = 1
	HistoryKeepAll       History = 2
	HistoryUnknown       History = 3
)

// Reliability is an rmw reliability policy.
type Reliability int

// Reliability policies, numbered as rmw numbers them.
const (
	ReliabilitySystemDefault Reliability = 0
	ReliabilityReliable      Reliability = 1
	ReliabilityBestEffort    Reliability = 2
	ReliabilityUnknown       Reliability = 3
	ReliabilityBestAvailable Reliability = 4 // from Jazzy
)

// Durability is an rmw durability policy.
type Durability int

// Durability policies, numbered as rmw numbers them.
const (
	DurabilitySystemDefault  Durability = 0
	DurabilityTransientLocal Durability = 1
	DurabilityVolatile       Durability = 2
	DurabilityUnknown        Durability = 3
	DurabilityBestAvailable  Durability = 4 // from Jazzy
)

// Liveliness is an rmw liveliness policy.
type Liveliness int

// Liveliness policies, numbered as rmw numbers them (2, manual by node, is
// deprecated).
const (
	LivelinessSystemDefault Liveliness = 0
	LivelinessAutomatic     Liveliness = 1
	LivelinessManualByTopic Liveliness = 3
	LivelinessUnknown       Liveliness = 4
	LivelinessBestAvailable Liveliness = 5 // from Jazzy
)

// Duration is an rmw_time_t: seconds and nanoseconds.
type Duration struct {
	Sec  uint64
	Nsec uint64
}

// InfiniteDuration returns RMW_DURATION_INFINITE. The zero Duration is
// RMW_DURATION_UNSPECIFIED (the middleware's default).
func InfiniteDuration() Duration { return Duration{Sec: 9223372036, Nsec: 854775807} }

// QoS is the QoS profile a publisher offers (rmw_qos_profile_t), as rosbag2
// records it for each topic so that `ros2 bag play` publishes alike.
type QoS struct {
	History                      History
	Depth                        uint64
	Reliability                  Reliability
	Durability                   Durability
	Deadline                     Duration
	Lifespan                     Duration
	Liveliness                   Liveliness
	LivelinessLeaseDuration      Duration
	AvoidROSNamespaceConventions bool
}

// DefaultQoS is rmw_qos_profile_default: keep last 10, reliable, volatile,
// every duration and the liveliness left to the middleware.
func DefaultQoS() QoS {
	return QoS{History: HistoryKeepLast, Depth: 10, Reliability: ReliabilityReliable, Durability: DurabilityVolatile}
}

// LatchedQoS is the profile of a latched topic: keep last 1, reliable,
// transient local.
func LatchedQoS() QoS {
	return QoS{History: HistoryKeepLast, Depth: 1, Reliability: ReliabilityReliable, Durability: DurabilityTransientLocal}
}

// The names metadata version 9 gives the policies (rmw's
// qos_string_conversions, "unknown" for the unknown values); "" for a value
// without a name.
func historyName(v int) string {
	return pick(v, "system_default", "keep_last", "keep_all", "unknown")
}

func reliabilityName(v int) string {
	return pick(v, "system_default", "reliable", "best_effort", "unknown", "best_available")
}

func durabilityName(v int) string {
	return pick(v, "system_default", "transient_local", "volatile", "unknown", "best_available")
}

func livelinessName(v int) string {
	// 2, manual by node, is deprecated and has no name.
	return pick(v, "system_default", "automatic", "", "manual_by_topic", "unknown", "best_available")
}

// maxPolicy is the largest policy value with a name.
const maxPolicy = 5

func pick(v int, names ...string) string {
	if v < 0 || v >= len(names) {
		return ""
	}
	return names[v]
}

// EncodeQoSProfiles returns profiles as the YAML text rosbag2 stores in the
// "offered_qos_profiles" field of a version 5 (Humble) metadata.yaml and in
// the MCAP channel metadata of the same name: a block sequence of maps with
// numbered policies, as yaml-cpp emits it.
func EncodeQoSProfiles(profiles []QoS) string {
	return EncodeQoSProfilesFor(MetadataVersionHumble, profiles)
}

// EncodeQoSProfilesFor returns profiles as rosbag2 of metadata version
// version writes them: with numbered policies before version 9, with named
// ones (keep_last, reliable, ...) from version 9 (Jazzy), in MCAP channel
// metadata, in the sqlite3 topics table and, as a list, in metadata.yaml. A
// policy value without a name is written as "unknown".
func EncodeQoSProfilesFor(version int, profiles []QoS) string {
	if len(profiles) == 0 {
		return "[]"
	}
	var b strings.Builder
	duration := func(name string, d Duration) {
		fmt.Fprintf(&b, "  %s:\n    sec: %d\n    nsec: %d\n", name, d.Sec, d.Nsec)
	}
	policy := func(v int, name func(int) string) string {
		if version < 9 {
			return strconv.Itoa(v)
		}
		if n := name(v); n != "" {
			return n
		}
		return "unknown"
	}
	for i, q := range profiles {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- history: %s\n  depth: %d\n  reliability: %s\n  durability: %s\n",
			policy(int(q.History), historyName), q.Depth, policy(int(q.Reliability), reliabilityName), policy(int(q.Durability), durabilityName))
		duration("deadline", q.Deadline)
		duration("lifespan", q.Lifespan)
		fmt.Fprintf(&b, "  liveliness: %s\n", policy(int(q.Liveliness), livelinessName))
		duration("liveliness_lease_duration", q.LivelinessLeaseDuration)
		b.WriteString("  avoid_ros_namespace_conventions: " + strconv.FormatBool(q.AvoidROSNamespaceConventions))
	}
	return b.String()
}

// yamlDuration and yamlQoS mirror the YAML form of a profile. A policy is a
// number (before metadata version 9) or a name (from version 9).
type yamlDuration struct {
	Sec  *uint64 `yaml:"sec"`
	Nsec *uint64 `yaml:"nsec"`
}

type yamlQoS struct {
	History                      yaml.Node     `yaml:"history"`
	Depth                        *uint64       `yaml:"depth"`
	Reliability                  yaml.Node     `yaml:"reliability"`
	Durability                   yaml.Node     `yaml:"durability"`
	Deadline                     *yamlDuration `yaml:"deadline"`
	Lifespan                     *yamlDuration `yaml:"lifespan"`
	Liveliness                   yaml.Node     `yaml:"liveliness"`
	LivelinessLeaseDuration      *yamlDuration `yaml:"liveliness_lease_duration"`
	AvoidROSNamespaceConventions *bool         `yaml:"avoid_ros_namespace_conventions"`
}

// ParseQoSProfiles parses the offered_qos_profiles text of a rosbag2 topic,
// with numbered policies (Humble) or named ones (Jazzy): the text does not
// say which metadata version wrote it. An empty text (older bags) gives no
// profiles. Every field must be present, as rosbag2's own parser requires.
func ParseQoSProfiles(text string) ([]QoS, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		return nil, fmt.Errorf("bag: offered_qos_profiles is not a YAML list of profiles: %w", err)
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return decodeQoSProfiles(n.Content[0])
	}
	return decodeQoSProfiles(&n)
}

// decodeQoSProfiles decodes a YAML list of profiles.
func decodeQoSProfiles(n *yaml.Node) ([]QoS, error) {
	var raw []yamlQoS
	if err := n.Decode(&raw); err != nil {
		return nil, fmt.Errorf("bag: offered_qos_profiles is not a YAML list of profiles: %w", err)
	}
	out := make([]QoS, len(raw))
	for i, r := range raw {
		var missing, bad []string
		policyField := func(name string, n *yaml.Node, names func(int) string) int {
			if n.Kind == 0 {
				missing = append(missing, name)
				return 0
			}
			v, err := parsePolicy(n, names)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s %v", name, err))
			}
			return v
		}
		durField := func(name string, p *yamlDuration) Duration {
			if p == nil || p.Sec == nil || p.Nsec == nil {
				missing = append(missing, name)
				return Duration{}
			}
			return Duration{Sec: *p.Sec, Nsec: *p.Nsec}
		}
		q := QoS{
			History:                 History(policyField("history", &r.History, historyName)),
			Reliability:             Reliability(policyField("reliability", &r.Reliability, reliabilityName)),
			Durability:              Durability(policyField("durability", &r.Durability, durabilityName)),
			Deadline:                durField("deadline", r.Deadline),
			Lifespan:                durField("lifespan", r.Lifespan),
			Liveliness:              Liveliness(policyField("liveliness", &r.Liveliness, livelinessName)),
			LivelinessLeaseDuration: durField("liveliness_lease_duration", r.LivelinessLeaseDuration),
		}
		if r.Depth == nil {
			missing = append(missing, "depth")
		} else {
			q.Depth = *r.Depth
		}
		if r.AvoidROSNamespaceConventions == nil {
			missing = append(missing, "avoid_ros_namespace_conventions")
		} else {
			q.AvoidROSNamespaceConventions = *r.AvoidROSNamespaceConventions
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("bag: offered QoS profile %d lacks %s", i, strings.Join(missing, ", "))
		}
		if len(bad) > 0 {
			return nil, fmt.Errorf("bag: offered QoS profile %d: %s", i, strings.Join(bad, "; "))
		}
		out[i] = q
	}
	return out, nil
}

// parsePolicy reads a policy given as a number or as its name.
func parsePolicy(n *yaml.Node, names func(int) string) (int, error) {
	if n.Kind == yaml.ScalarNode {
		if v, err := strconv.ParseUint(n.Value, 10, 8); err == nil && n.Tag == "!!int" {
			return int(v), nil
		}
		for v := 0; v <= maxPolicy; v++ {
			if names(v) != "" && names(v) == n.Value {
				return v, nil
			}
		}
	}
	var known []string
	for v := 0; v <= maxPolicy; v++ {
		if names(v) != "" {
			known = append(known, names(v))
		}
	}
	return 0, fmt.Errorf("%q (line %d) is neither a policy number nor one of %s", n.Value, n.Line, strings.Join(known, ", "))
}
