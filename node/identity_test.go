package node

import (
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
)

// Two instances in one launch (two arms) publish distinct status names,
// from their fully qualified names.
func TestStatusNameFromFullyQualifiedName(t *testing.T) {
	names := map[string]bool{}
	for _, fqn := range []string{"/arm_left/fastwam_action_expert", "/arm_right/fastwam_action_expert"} {
		h := newHarness(t, testParams(), newTestBackend(tinyDims()), func(c *Config) { c.Name = fqn })
		st := h.diag()
		if want := fqn + ": action expert"; st.Name != want {
			t.Errorf("status name %q, want %q", st.Name, want)
		}
		names[st.Name] = true
	}
	if len(names) != 2 {
		t.Errorf("the two instances share a status name: %v", names)
	}
	if StatusName("") != DiagnosticName || DiagnosticName != "/fastwam_action_expert: action expert" {
		t.Errorf("default status name %q", StatusName(""))
	}
}

// hardwareBackend reports its device, as the HTP backend does.
type hardwareBackend struct{ expert.Backend }

func (hardwareBackend) HardwareID() string { return "htp: SoC model 57, DSP arch v75" }

func TestHardwareID(t *testing.T) {
	b := newTestBackend(tinyDims())
	if got := hardwareID(hardwareBackend{b}, params.BackendHTP); got != "htp: SoC model 57, DSP arch v75" {
		t.Errorf("reported device: %q", got)
	}
	if got := hardwareID(b, params.BackendCPU); got != "cpu: "+CPUModel() || got == "cpu: " {
		t.Errorf("cpu device: %q", got)
	}
	for _, c := range []struct{ text, want string }{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n", "AMD EPYC 7B13 64-Core Processor"},
		{"processor\t: 0\nBogoMIPS\t: 38.40\nCPU implementer\t: 0x51\n\nHardware\t: Qualcomm Technologies, Inc SM8650\n", "Qualcomm Technologies, Inc SM8650"},
		{"processor\t: 0\nCPU part\t: 0xd05\n", ""},
	} {
		if got := cpuModelFrom(strings.NewReader(c.text)); got != c.want {
			t.Errorf("cpuModelFrom(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
