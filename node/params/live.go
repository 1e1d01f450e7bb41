package params

import "slices"

// LiveParams lists, sorted, the parameters that may change while the node
// runs: each takes effect from the next chunk (the input checks of
// max_input_age and sync.timeout from the next message). The others need
// a reload: a managed node's cleanup, then configure.
func LiveParams() []string {
	return []string{"clip.max", "clip.min", "control_period", "dry_run", "max_input_age",
		"rtc.execution_horizon", "rtc.inference_delay", "rtc.max_guidance", "rtc.mode", "rtc.schedule",
		"shift", "steps", "sync.timeout"}
}

// IsLive reports whether the parameter name may change while the node runs.
func IsLive(name string) bool {
	_, ok := slices.BinarySearch(LiveParams(), name)
	return ok
}
