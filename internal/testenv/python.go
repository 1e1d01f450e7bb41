package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// DebianPython3 is the interpreter whose modules the Debian packages
// (python3-numpy, python3-torch, python3-onnx, python3-pil) install.
const DebianPython3 = "/usr/bin/python3"

// Python3With returns a python3 that imports modules (a Python import
// list, such as "numpy, torch"): Debian's DebianPython3 first, since a
// pyenv shim or virtualenv earlier on PATH often lacks Debian's packages,
// then the python3 on PATH. When none does, the test is Missing (skipped,
// or failed under CI) with a reason naming the modules, the interpreters
// tried and hint (what to install).
func Python3With(t testing.TB, modules, hint string) string {
	t.Helper()
	candidates := python3Candidates()
	if p := firstImporting(candidates, modules); p != "" {
		return p
	}
	Missing(t, "no python3 that imports %s (tried %v); %s", modules, candidates, hint)
	return ""
}

// python3Candidates lists the interpreters Python3With tries, in order.
func python3Candidates() []string {
	var c []string
	if _, err := os.Stat(DebianPython3); err == nil {
		c = append(c, DebianPython3)
	}
	if p, err := exec.LookPath("python3"); err == nil {
		c = append(c, p)
	}
	return c
}

// firstImporting returns the first of candidates that imports modules, or
// "".
func firstImporting(candidates []string, modules string) string {
	for _, p := range candidates {
		if exec.Command(p, "-c", "import "+modules).Run() == nil {
			return p
		}
	}
	return ""
}
