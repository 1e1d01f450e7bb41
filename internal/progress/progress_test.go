package progress

import (
	"strings"
	"testing"
	"time"
)

func TestMeter(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	m := newAt(&b, "bag make", "chunks", 10, 2*time.Second, func() time.Time { return now })
	m.Update(1) // no time has passed: no line
	now = now.Add(3 * time.Second)
	m.Update(3)
	now = now.Add(time.Second)
	m.Update(4) // within the interval: no line
	now = now.Add(3 * time.Second)
	m.Done(10)
	m.Done(10) // said already
	want := "bag make: 3/10 chunks (30%), 3.0 s elapsed, ETA 7.0 s\n" +
		"bag make: 10/10 chunks (100%), 7.0 s elapsed, ETA 0 s\n"
	if b.String() != want {
		t.Errorf("lines:\n%s\nwant:\n%s", b.String(), want)
	}
	var quiet *Meter
	quiet.Update(1) // a nil meter is silent
	New(nil, "x", "y", 1, 0).Done(1)
}

func TestMode(t *testing.T) {
	var b strings.Builder
	for _, c := range []struct {
		s     string
		long  bool
		lines bool
	}{{"auto", true, true}, {"auto", false, false}, {"on", false, true}, {"off", true, false}} {
		m, err := ParseMode(c.s)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Writer(&b, c.long) != nil; got != c.lines {
			t.Errorf("%s, long %v: lines %v, want %v", c.s, c.long, got, c.lines)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil || !strings.Contains(err.Error(), `got "sometimes"`) {
		t.Errorf("ParseMode(sometimes) = %v", err)
	}
}
