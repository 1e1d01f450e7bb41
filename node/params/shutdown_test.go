package params

import (
	"strings"
	"testing"
	"time"
)

func TestShutdownGraceParameter(t *testing.T) {
	if d := Default().ShutdownGrace; d != 5*time.Second {
		t.Errorf("default shutdown_grace %v, want 5s", d)
	}
	for _, c := range []struct {
		value string
		want  time.Duration
	}{{"2.5", 2500 * time.Millisecond}, {"12", 12 * time.Second}, {"0.01", 10 * time.Millisecond}, {"3600", time.Hour}} {
		p, err := Load(ros("-p", "htp.context_binary:=/m.bin", "-p", "shutdown_grace:="+c.value), fqn)
		if err != nil || p.ShutdownGrace != c.want {
			t.Errorf("shutdown_grace:=%s: %v, %v; want %v", c.value, p.ShutdownGrace, err, c.want)
		}
	}
	for _, v := range []string{"0", "0.001", "-1", "3601", ".nan", ".inf", "five", "true"} {
		_, err := Load(ros("-p", "htp.context_binary:=/m.bin", "-p", "shutdown_grace:="+v), fqn)
		if err == nil || !strings.Contains(err.Error(), `parameter "shutdown_grace"`) {
			t.Errorf("shutdown_grace:=%s: error %v, want one naming the parameter", v, err)
		} else if !strings.Contains(err.Error(), "[0.01, 3600]") && !strings.Contains(err.Error(), "expected double") {
			t.Errorf("shutdown_grace:=%s: error %q states neither the range nor the type", v, err)
		}
	}
	p := Default()
	if err := p.ApplyParamsYAML([]byte("/**:\n  ros__parameters:\n    shutdown_grace: 7\n"), fqn); err != nil || p.ShutdownGrace != 7*time.Second {
		t.Errorf("params file shutdown_grace: 7: %v, %v; want 7s", p.ShutdownGrace, err)
	}
}
