package params

import "fmt"

// Reliability is a ROS 2 QoS reliability policy.
type Reliability string

// Durability is a ROS 2 QoS durability policy.
type Durability string

// History is a ROS 2 QoS history policy.
type History string

// QoS policies, spelled as the qos.* parameters spell them.
const (
	ReliabilityReliable      Reliability = "reliable"
	ReliabilityBestEffort    Reliability = "best_effort"
	DurabilityVolatile       Durability  = "volatile"
	DurabilityTransientLocal Durability  = "transient_local"
	HistoryKeepLast          History     = "keep_last"
	HistoryKeepAll           History     = "keep_all"
)

// QoS is the quality of service of one topic, independent of the
// middleware; a Transport maps it to its own profile.
type QoS struct {
	Reliability Reliability
	Durability  Durability
	History     History
	Depth       int // queue depth of HistoryKeepLast
}

// String prints the profile as the parameters spell it.
func (q QoS) String() string {
	return fmt.Sprintf("%s/%s/%s(%d)", q.Reliability, q.Durability, q.History, q.Depth)
}

// DiagnosticsQoS is the profile of /diagnostics that diagnostic_aggregator
// and rqt_robot_monitor expect: reliable, volatile, keep last 10.
func DiagnosticsQoS() QoS {
	return QoS{Reliability: ReliabilityReliable, Durability: DurabilityVolatile, History: HistoryKeepLast, Depth: 10}
}

// ParseReliability reads "reliable" or "best_effort".
func ParseReliability(s string) (Reliability, error) {
	switch r := Reliability(s); r {
	case ReliabilityReliable, ReliabilityBestEffort:
		return r, nil
	}
	return "", fmt.Errorf("must be %q or %q, got %q", ReliabilityReliable, ReliabilityBestEffort, s)
}

// ParseDurability reads "volatile" or "transient_local".
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case DurabilityVolatile, DurabilityTransientLocal:
		return d, nil
	}
	return "", fmt.Errorf("must be %q or %q, got %q", DurabilityVolatile, DurabilityTransientLocal, s)
}

// ParseHistory reads "keep_last" or "keep_all".
func ParseHistory(s string) (History, error) {
	switch h := History(s); h {
	case HistoryKeepLast, HistoryKeepAll:
		return h, nil
	}
	return "", fmt.Errorf("must be %q or %q, got %q", HistoryKeepLast, HistoryKeepAll, s)
}
