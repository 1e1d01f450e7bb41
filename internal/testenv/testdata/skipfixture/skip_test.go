// Package skipfixture is run by testenv's TestSkipLineInGoTestOutput
// through go test, as a package whose one test lacks what it needs.
package skipfixture

import (
	"os"
	"testing"

	"github.com/fastwam/actionexpert/internal/testenv"
)

func TestNeedsTool(t *testing.T) {
	if os.Getenv("FASTWAM_TESTENV_FIXTURE") != "1" {
		t.Skip("run by internal/testenv's TestSkipLineInGoTestOutput")
	}
	testenv.Missing(t, "the tool is not installed")
}
