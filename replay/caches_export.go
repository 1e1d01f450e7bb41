package replay

import "fmt"

// jsonCaches is the cache comparison in WriteJSON's result.
type jsonCaches struct {
	Passed        bool        `json:"passed"`
	MaxAbsErr     float64     `json:"max_abs_err"` // the tolerance; 0 is bit for bit
	Recorded      int         `json:"recorded"`
	Contexts      int         `json:"contexts"`
	Observations  int         `json:"observations"`
	Compared      int         `json:"compared"`
	Failed        int         `json:"failed"`
	NotComparable int         `json:"not_comparable"`
	Undecoded     int         `json:"undecoded"`
	Rows          []jsonCache `json:"rows"`
}

type jsonCache struct {
	Stamp      string       `json:"stamp"`
	KVSeq      uint64       `json:"kv_seq"`
	ContextSeq *uint64      `json:"context_seq"` // null without a TextContext of its stamp
	Status     CacheStatus  `json:"status"`
	Tensors    []jsonTensor `json:"tensors"`
	Note       string       `json:"note,omitempty"`
}

type jsonTensor struct {
	Name      string   `json:"name"`
	N         int      `json:"n"`
	Differ    int      `json:"differ"`
	MaxAbsErr *float64 `json:"max_abs_err"`
	Cosine    *float64 `json:"cosine"` // null for the mask
}

// toJSON is the cache comparison as WriteJSON reports it.
func (r *CacheReport) toJSON() *jsonCaches {
	out := &jsonCaches{Passed: r.Err() == nil, MaxAbsErr: r.MaxAbsErr, Recorded: r.Caches, Contexts: r.Contexts,
		Observations: r.Observations, Compared: r.Compared(), Failed: len(r.Failures()), NotComparable: r.NotComparable(),
		Undecoded: r.Undecoded, Rows: []jsonCache{}}
	for _, row := range r.Rows {
		c := jsonCache{Stamp: fmtTime(row.Stamp), KVSeq: row.KVSeq, Status: row.Status, Note: row.Note, Tensors: []jsonTensor{}}
		if row.HasContext {
			seq := row.ContextSeq
			c.ContextSeq = &seq
		}
		for _, t := range row.Tensors {
			c.Tensors = append(c.Tensors, jsonTensor{Name: t.Name, N: t.N, Differ: t.Differ, MaxAbsErr: finite(t.MaxAbsErr), Cosine: finite(t.Cosine)})
		}
		out.Rows = append(out.Rows, c)
	}
	return out
}

// junitCases are the cache comparison's JUnit test cases: one per
// recorded cache, failed when it differs, skipped when not comparable;
// one more failed case for recorded messages that do not decode.
func (r *CacheReport) junitCases(class string) (cases []junitCase, failures, skipped int) {
	for _, row := range r.Rows {
		c := junitCase{Name: fmt.Sprintf("cache kv_seq %d stamp %s", row.KVSeq, fmtTime(row.Stamp)), ClassName: class, Time: "0"}
		switch row.Status {
		case CacheMismatch:
			c.Failure = &junitFailure{Type: "cache", Message: "differs from the world model's (" + r.toleranceText() + ")", Text: row.Note}
			failures++
		case CacheNotComparable:
			c.Skipped = &junitFailure{Message: "NOT COMPARABLE: " + row.Note}
			skipped++
		}
		cases = append(cases, c)
	}
	if r.Undecoded > 0 {
		cases = append(cases, junitCase{Name: "caches", ClassName: class, Time: "0",
			Failure: &junitFailure{Type: "undecodable", Message: fmt.Sprintf("%d recorded VideoKVCache or TextContext messages do not decode", r.Undecoded)}})
		failures++
	}
	return cases, failures, skipped
}
