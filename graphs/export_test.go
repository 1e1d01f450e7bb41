package graphs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/testenv"
)

// TestExportAndEquivalences runs golden/export/test_export.py: the ONNX
// export of every graph of a tiny checkpoint through the rank-4 linter
// (and the linter refusing a rank-5 tensor, a disallowed op and float64),
// the chained prefill graphs against the monolithic prefill and
// action_context + action_step_ctx against action_step bit for bit
// (torch.equal, fp32, CPU), and the monolithic modules against the
// independent goldens (golden/tiny, golden/vae). Its figures are logged.
func TestExportAndEquivalences(t *testing.T) {
	python := testenv.Python3With(t, "numpy, torch, onnx", "install python3-numpy python3-torch python3-onnx to check the ONNX export")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "golden", "export", "test_export.py"))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONWARNINGS=ignore")
	out, err := cmd.CombinedOutput()
	for line := range strings.Lines(string(out)) {
		if _, fig, ok := strings.Cut(line, "FIGURE "); ok { // unittest's progress dots may precede it
			t.Log(strings.TrimSpace(fig))
		}
	}
	if err != nil {
		t.Fatalf("golden/export/test_export.py: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("golden/export/test_export.py did not report OK:\n%s", out)
	}
}
