package replay

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
)

// TestWriteJSON reads the JSON back as a CI script would: the verdict,
// the counts and the failing chunks by kv_seq, with null where nothing
// was compared.
func TestWriteJSON(t *testing.T) {
	for _, failures := range []bool{false, true} {
		r := syntheticReport(200, failures)
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Version int
			Passed  bool
			Error   string
			Gate    struct {
				MinCosine float64 `json:"min_cosine"`
			}
			Counts map[string]int
			Chunks []struct {
				KVSeq     uint64 `json:"kv_seq"`
				Status    string
				Cosine    *float64
				DenoiseMs *float64 `json:"denoise_ms"`
			}
		}
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, b.String())
		}
		if got.Version != ResultVersion || got.Passed == failures || got.Gate.MinCosine != 0.9999 || len(got.Chunks) != 200 {
			t.Fatalf("failures=%v: version %d passed %v gate %v chunks %d", failures, got.Version, got.Passed, got.Gate, len(got.Chunks))
		}
		if !failures {
			if got.Counts["compared"] != 200 || got.Counts["failed"] != 0 || got.Error != "" {
				t.Errorf("passing replay: counts %v error %q", got.Counts, got.Error)
			}
			continue
		}
		if got.Counts["failed"] != 4 || got.Counts["compared"] != 197 || !strings.Contains(got.Error, "kv_seq 41") {
			t.Errorf("counts %v error %q, want 4 failed (41, 90, 91, 150) of 197 compared", got.Counts, got.Error)
		}
		want := map[uint64]string{41: "FAIL", 90: "MISSING", 150: "FAIL", 199: "new", 0: "ok"}
		for _, c := range got.Chunks {
			if s, ok := want[c.KVSeq]; ok && c.Status != s {
				t.Errorf("kv_seq %d: status %q, want %q", c.KVSeq, c.Status, s)
			}
			if c.KVSeq == 90 && (c.Cosine != nil || c.DenoiseMs != nil) {
				t.Errorf("missing chunk 90: cosine %v denoise %v, want null", c.Cosine, c.DenoiseMs)
			}
		}
	}
}

// TestWriteJUnit: one testcase per chunk, the failing and missing ones
// with a failure element, the unrecorded one skipped.
func TestWriteJUnit(t *testing.T) {
	r := syntheticReport(200, true)
	var b bytes.Buffer
	if err := r.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if len(got.Suites) != 1 {
		t.Fatalf("%d test suites, want 1", len(got.Suites))
	}
	s := got.Suites[0]
	if s.Tests != 200 || s.Failures != 4 || s.Skipped != 1 || s.Errors != 0 || s.Name != "fastwam replay synthetic_bag" {
		t.Errorf("suite %q: tests %d failures %d skipped %d errors %d, want 200, 4, 1, 0", s.Name, s.Tests, s.Failures, s.Skipped, s.Errors)
	}
	var failed []string
	for _, c := range s.Cases {
		if c.Failure != nil {
			failed = append(failed, c.Name[:strings.Index(c.Name, " stamp")]+"/"+c.Failure.Type)
		}
	}
	if strings.Join(failed, ",") != "kv_seq 41/gate,kv_seq 90/missing,kv_seq 91/missing,kv_seq 150/gate" {
		t.Errorf("failed cases %v", failed)
	}
	r.Interrupted, r.NotReached = true, 3
	b.Reset()
	if err := r.WriteJUnit(&b); err != nil || !strings.Contains(b.String(), `<error message="interrupted: 3 of`) {
		t.Errorf("interrupted replay: %v\n%s", err, b.String()[len(b.String())-400:])
	}
}
