package main

import (
	"strings"
	"testing"
)

// flagRefusal is a command line a subcommand refuses: exit status 2,
// nothing on stdout and want on stderr.
type flagRefusal struct {
	args []string
	want string
}

// checkRefused runs the subcommand cmd with each case's arguments and
// checks that it is refused as the case says.
func checkRefused(t *testing.T, cmd string, cases []flagRefusal) {
	t.Helper()
	for _, c := range cases {
		code, out, stderr := runCmd(t, append([]string{cmd}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", cmd, c.args, code, out, stderr, c.want)
		}
	}
}

// TestSimFlagsShared: async-sim and cycle declare the simulation's flags
// alike and refuse the same bad values alike.
func TestSimFlagsShared(t *testing.T) {
	for _, cmd := range []string{"async-sim", "cycle"} {
		checkRefused(t, cmd, []flagRefusal{
			{[]string{"-blas", "mkl"}, `-blas "mkl": want auto, openblas or gonum`},
			{[]string{"-threads", "-3"}, "-threads -3: want an integer from 0 to 1024 (0: one per CPU)"},
			{[]string{"-seed", "-1"}, `invalid value "-1" for flag -seed`},
			{[]string{"-drift", "x"}, `invalid value "x" for flag -drift`},
		})
		code, out, _ := runCmd(t, "help", cmd)
		for _, want := range []string{"-seed", "noise_seed: chunk noise is Noise(seed + observation seq)", "-drift", "-blas", "-threads", "-v"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("help %s: exit %d, lacks %q", cmd, code, want)
			}
		}
	}
}
