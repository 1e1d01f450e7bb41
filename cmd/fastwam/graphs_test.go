package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestGraphsPlan(t *testing.T) {
	for _, c := range []struct {
		args     []string
		code     int
		stdout   []string
		stderrIn []string
	}{
		{[]string{"-weights", "w8"}, 0, []string{"prefill_2 (last layer trimmed)", "ranges 0:9,9:19,19:30", "action_step_ctx"}, nil},
		{[]string{"-weights", "w4", "-processes", "2"}, 0, []string{"ranges 0:14,14:30", "process 1 (action expert)"}, nil},
		{[]string{"-weights", "w8", "-context-limit", "1000MB"}, 0, []string{"ranges 0:4,4:9,9:14,14:19,19:24,24:30"}, nil},
		{nil, 1, nil, []string{"no plan meets the limits", "process 0 (world model and action expert) needs 11.729 GB"}},
		{[]string{"-weights", "w8", "-context-limit", "100MB"}, 1, nil, []string{"prefill layer 0 with the patch embedding and text MLP alone needs"}},
		{[]string{"-weights", "w9"}, 2, nil, []string{"want fp16, w8 or w4"}},
		{[]string{"-processes", "3"}, 2, nil, []string{"want 1 or 2"}},
		{[]string{"-context-limit", "-1GB"}, 2, nil, []string{"want a positive size"}},
		{[]string{"extra"}, 2, nil, []string{"unexpected argument"}},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"graphs", "plan"}, c.args...), &out, &errOut)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d; stderr: %s", c.args, code, c.code, errOut.String())
			continue
		}
		for _, w := range c.stdout {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: stdout lacks %q:\n%s", c.args, w, out.String())
			}
		}
		for _, w := range c.stderrIn {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errOut.String())
			}
		}
	}
}
