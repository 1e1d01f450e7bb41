package replay

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
)

// ResultVersion is the version of the JSON layout WriteJSON writes; it
// changes only when a field changes meaning or goes away.
const ResultVersion = 1

// jsonResult is the machine-readable form of a Report (WriteJSON).
type jsonResult struct {
	Version     int         `json:"version"`
	Bag         string      `json:"bag"`
	Backend     string      `json:"backend"`
	Passed      bool        `json:"passed"`
	Error       string      `json:"error,omitempty"`
	Gate        jsonGate    `json:"gate"`
	Counts      jsonCounts  `json:"counts"`
	Interrupted bool        `json:"interrupted"`
	ElapsedS    float64     `json:"elapsed_s"`
	Notes       []string    `json:"notes,omitempty"`
	Chunks      []jsonChunk `json:"chunks"`
	// Caches is the cache comparison of a whole-policy recording; absent
	// when there was none.
	Caches *jsonCaches `json:"caches,omitempty"`
}

type jsonGate struct {
	MinCosine float64 `json:"min_cosine"`
	MaxAbsErr float64 `json:"max_abs_err"` // 0: not checked
}

type jsonCounts struct {
	Inputs, TotalInputs, Recorded, Produced, Compared, Failed, NotReached, Timeouts int
	NotComparable, Refused                                                          int
}

// MarshalJSON writes the counts with snake_case names.
func (c jsonCounts) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int{
		"inputs": c.Inputs, "total_inputs": c.TotalInputs, "recorded": c.Recorded, "produced": c.Produced,
		"compared": c.Compared, "failed": c.Failed, "not_reached": c.NotReached, "timeouts": c.Timeouts,
		"not_comparable": c.NotComparable, "refused": c.Refused,
	})
}

type jsonChunk struct {
	Stamp  string `json:"stamp"` // seconds.nanoseconds, as the table prints it
	KVSeq  uint64 `json:"kv_seq"`
	Status Status `json:"status"`
	// Cosine and MaxAbsErr are null when nothing was compared.
	Cosine            *float64 `json:"cosine"`
	MaxAbsErr         *float64 `json:"max_abs_err"`
	DenoiseMs         *float64 `json:"denoise_ms"`          // the replay's; null when not produced
	RecordedDenoiseMs *float64 `json:"recorded_denoise_ms"` // null when nothing was recorded
	Note              string   `json:"note,omitempty"`
	// Refused names why the actions.* limits refused the replayed chunk.
	Refused string `json:"refused,omitempty"`
}

// finite is v as a JSON number, or null when v is NaN or infinite (JSON
// has neither).
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// reportedRows are the rows WriteJSON and WriteJUnit report: those with
// a chunk, recorded or produced, and those whose chunk was refused.
func reportedRows(r *Report) []Row {
	var rows []Row
	for _, row := range r.Rows {
		if row.Recorded != nil || row.Produced != nil || row.Refused != "" {
			rows = append(rows, row)
		}
	}
	return rows
}

// WriteJSON writes the report as one JSON object for a CI system: the
// verdict (passed), the gate, the counts, and one entry per stamp with a
// chunk (recorded, produced or refused) in stamp order.
func (r *Report) WriteJSON(w io.Writer) error {
	out := jsonResult{
		Version: ResultVersion, Bag: r.Bag, Backend: r.BackendInfo, Passed: r.Err() == nil && !r.Interrupted,
		Gate: jsonGate{MinCosine: r.MinCosine, MaxAbsErr: r.MaxAbsErr},
		Counts: jsonCounts{Inputs: r.Inputs, TotalInputs: r.TotalInputs, Recorded: r.Recorded, Produced: r.Produced(),
			Compared: r.Compared(), Failed: len(r.Failures()), NotReached: r.NotReached, Timeouts: r.Timeouts,
			NotComparable: r.NotComparable, Refused: r.refused()},
		Interrupted: r.Interrupted, ElapsedS: r.Elapsed.Seconds(), Notes: r.Notes, Chunks: []jsonChunk{},
	}
	if err := r.Err(); err != nil {
		out.Error = err.Error()
	}
	for _, row := range reportedRows(r) {
		c := jsonChunk{Stamp: fmtTime(row.Stamp), KVSeq: row.KVSeq, Status: row.Status, Note: row.Note, Refused: row.Refused}
		if row.Recorded != nil && row.Produced != nil {
			c.Cosine, c.MaxAbsErr = finite(row.Cosine), finite(row.MaxAbsErr)
		}
		if row.Produced != nil {
			c.DenoiseMs = finite(float64(row.Produced.DenoiseMs))
		}
		if row.Recorded != nil {
			c.RecordedDenoiseMs = finite(float64(row.Recorded.Chunk.DenoiseMs))
		}
		out.Chunks = append(out.Chunks, c)
	}
	if r.Caches != nil {
		out.Caches = r.Caches.toJSON()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("replay: write JSON: %w", err)
	}
	return nil
}

// JUnit XML, the subset CI systems read (Jenkins, GitLab, GitHub actions'
// test reporters): one testsuite, a testcase per recorded chunk, a
// failure element for a chunk outside the gate or not produced.
type junitSuites struct {
	XMLName xml.Name   `xml:"testsuites"`
	Suites  []junitSet `xml:"testsuite"`
}

type junitSet struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Props    []junitProp `xml:"properties>property,omitempty"`
	Cases    []junitCase `xml:"testcase"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
	Skipped   *junitFailure `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the report as JUnit XML: a testcase per recorded
// chunk (named by kv_seq and stamp, its time the replay's denoise time),
// failed when outside the gate or not produced; a produced chunk with no
// recording is a skipped case; an interrupted replay adds one error case.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junitSet{Name: "fastwam replay " + filepath.Base(r.Bag), Time: secs(r.Elapsed.Seconds()),
		Props: []junitProp{{"bag", r.Bag}, {"backend", r.BackendInfo},
			{"min_cosine", strconv.FormatFloat(r.MinCosine, 'g', -1, 64)}, {"max_abs_err", strconv.FormatFloat(r.MaxAbsErr, 'g', -1, 64)}}}
	class := "replay." + filepath.Base(r.Bag)
	if r.Caches != nil {
		cases, failures, skipped := r.Caches.junitCases(class)
		suite.Cases, suite.Failures, suite.Skipped = append(suite.Cases, cases...), suite.Failures+failures, suite.Skipped+skipped
	}
	for _, row := range reportedRows(r) {
		c := junitCase{Name: fmt.Sprintf("kv_seq %d stamp %s", row.KVSeq, fmtTime(row.Stamp)), ClassName: class, Time: "0"}
		if row.Produced != nil {
			c.Time = secs(float64(row.Produced.DenoiseMs) / 1000)
		}
		switch {
		case row.Status == StatusMismatch:
			c.Failure = &junitFailure{Type: "gate", Message: fmt.Sprintf("outside the gate: cosine %s, max |error| %s", num(row.Cosine), num(row.MaxAbsErr)), Text: row.Note}
			suite.Failures++
		case row.Status == StatusMissing:
			c.Failure = &junitFailure{Type: "missing", Message: "recorded chunk not produced by the replay", Text: row.Note}
			suite.Failures++
		case row.Status == StatusRefused:
			c.Failure = &junitFailure{Type: "refused", Message: "recorded chunk " + refusedNote(row.Refused) + " in the replay", Text: row.Note}
			suite.Failures++
		case row.Status == StatusNotComparable:
			c.Skipped = &junitFailure{Message: "NOT COMPARABLE: " + row.Note}
			suite.Skipped++
		case row.Status == StatusRefusedNew:
			c.Skipped = &junitFailure{Message: refusedNote(row.Refused) + ", and nothing was recorded to compare with"}
			suite.Skipped++
		case row.Recorded == nil:
			c.Skipped = &junitFailure{Message: "produced, but nothing was recorded to compare with"}
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, c)
	}
	if err := r.Err(); err != nil && r.comparable() == 0 && !r.Interrupted {
		// Nothing was compared: the suite must not pass with skips alone.
		suite.Cases = append(suite.Cases, junitCase{Name: "replay", ClassName: class, Time: "0",
			Failure: &junitFailure{Type: "nothing comparable", Message: r.nothingComparable()}})
		suite.Failures++
	}
	if r.Interrupted {
		suite.Cases = append(suite.Cases, junitCase{Name: "replay", ClassName: class, Time: "0",
			Error: &junitFailure{Type: "interrupted", Message: fmt.Sprintf("interrupted: %d of %d recorded chunks not reached", r.NotReached, r.Recorded)}})
		suite.Errors++
	}
	suite.Tests = len(suite.Cases)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("replay: write JUnit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSet{suite}}); err != nil {
		return fmt.Errorf("replay: write JUnit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func secs(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
