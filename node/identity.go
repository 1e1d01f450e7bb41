package node

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/buildinfo"
	"github.com/fastwam/actionexpert/node/params"
)

// StatusName is the diagnostic status name of the action expert whose
// fully qualified name is fqn (for example "/arm_left/fastwam_action_expert:
// action expert"), so that two instances publish distinct statuses on
// /diagnostics; an empty fqn is DefaultNodeName.
func StatusName(fqn string) string {
	if fqn == "" {
		fqn = params.DefaultNodeName
	}
	return fqn + ": action expert"
}

// Build is the running binary's revision and version for a log line and
// the diagnostics' "build" value (see buildinfo.Info.Short).
func Build() string {
	in := buildinfo.Read()
	v := in.Version
	if v == "" {
		v = "(devel)"
	}
	return in.Short() + " " + v
}

// hardwareID names the device behind backend b (named name) for the
// diagnostics' hardware_id: what the backend reports (the HTP backend: the
// SoC model and DSP architecture of its context binary), else for the CPU
// backend the CPU model.
func hardwareID(b expert.Backend, name string) string {
	if h, ok := b.(interface{ HardwareID() string }); ok {
		if id := h.HardwareID(); id != "" {
			return id
		}
	}
	if name == params.BackendCPU {
		return "cpu: " + CPUModel()
	}
	return name
}

// CPUModel is the "model name" of /proc/cpuinfo's first processor, or
// GOOS/GOARCH where there is none (another OS, or an ARM kernel that
// lists only implementer and part numbers).
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err == nil {
		defer f.Close()
		if m := cpuModelFrom(io.LimitReader(f, 1<<20)); m != "" {
			return m
		}
	}
	return fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH)
}

// cpuModelFrom reads the first "model name" (x86, some ARM kernels) or
// "Hardware"/"Model" line (ARM boards) of a /proc/cpuinfo text.
func cpuModelFrom(r io.Reader) string {
	sc := bufio.NewScanner(r)
	var fallback string
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case v == "":
		case k == "model name":
			return v
		case (k == "Hardware" || k == "Model") && fallback == "":
			fallback = v
		}
	}
	return fallback
}
