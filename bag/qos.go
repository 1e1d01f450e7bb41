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
)

// Durability is an rmw durability policy.
type Durability int

// Durability policies, numbered as rmw numbers them.
const (
	DurabilitySystemDefault  Durability = 0
	DurabilityTransientLocal Durability = 1
	DurabilityVolatile       Durability = 2
	DurabilityUnknown        Durability = 3
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

// EncodeQoSProfiles returns profiles as the YAML text rosbag2 stores in the
// "offered_qos_profiles" field of metadata.yaml and in the MCAP channel
// metadata of the same name: a block sequence of maps, as yaml-cpp emits it.
func EncodeQoSProfiles(profiles []QoS) string {
	if len(profiles) == 0 {
		return "[]"
	}
	var b strings.Builder
	duration := func(name string, d Duration) {
		fmt.Fprintf(&b, "  %s:\n    sec: %d\n    nsec: %d\n", name, d.Sec, d.Nsec)
	}
	for i, q := range profiles {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- history: %d\n  depth: %d\n  reliability: %d\n  durability: %d\n",
			q.History, q.Depth, q.Reliability, q.Durability)
		duration("deadline", q.Deadline)
		duration("lifespan", q.Lifespan)
		fmt.Fprintf(&b, "  liveliness: %d\n", q.Liveliness)
		duration("liveliness_lease_duration", q.LivelinessLeaseDuration)
		b.WriteString("  avoid_ros_namespace_conventions: " + strconv.FormatBool(q.AvoidROSNamespaceConventions))
	}
	return b.String()
}

// yamlDuration and yamlQoS mirror the YAML form of a profile.
type yamlDuration struct {
	Sec  *uint64 `yaml:"sec"`
	Nsec *uint64 `yaml:"nsec"`
}

type yamlQoS struct {
	History                      *int          `yaml:"history"`
	Depth                        *uint64       `yaml:"depth"`
	Reliability                  *int          `yaml:"reliability"`
	Durability                   *int          `yaml:"durability"`
	Deadline                     *yamlDuration `yaml:"deadline"`
	Lifespan                     *yamlDuration `yaml:"lifespan"`
	Liveliness                   *int          `yaml:"liveliness"`
	LivelinessLeaseDuration      *yamlDuration `yaml:"liveliness_lease_duration"`
	AvoidROSNamespaceConventions *bool         `yaml:"avoid_ros_namespace_conventions"`
}

// ParseQoSProfiles parses the offered_qos_profiles text of a rosbag2 topic.
// An empty text (older bags) gives no profiles. Every field must be present,
// as rosbag2's own parser requires.
func ParseQoSProfiles(text string) ([]QoS, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var raw []yamlQoS
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("bag: offered_qos_profiles is not a YAML list of profiles: %w", err)
	}
	out := make([]QoS, len(raw))
	for i, r := range raw {
		var missing []string
		intField := func(name string, p *int) int {
			if p == nil {
				missing = append(missing, name)
				return 0
			}
			return *p
		}
		durField := func(name string, p *yamlDuration) Duration {
			if p == nil || p.Sec == nil || p.Nsec == nil {
				missing = append(missing, name)
				return Duration{}
			}
			return Duration{Sec: *p.Sec, Nsec: *p.Nsec}
		}
		q := QoS{
			History:                 History(intField("history", r.History)),
			Reliability:             Reliability(intField("reliability", r.Reliability)),
			Durability:              Durability(intField("durability", r.Durability)),
			Deadline:                durField("deadline", r.Deadline),
			Lifespan:                durField("lifespan", r.Lifespan),
			Liveliness:              Liveliness(intField("liveliness", r.Liveliness)),
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
		out[i] = q
	}
	return out, nil
}
