// Package actions turns the action expert's output (the model's
// normalised action space) into actions a robot can execute: the
// un-normalisation of upstream Fast-WAM's normaliser (its backward pass,
// from the checkpoint's dataset_stats.json), the gripper post-processing of
// its LIBERO evaluation, and safety limits (bounds, the largest step
// between consecutive actions, non-finite values). It is backend-agnostic:
// the node, `fastwam replay` and `fastwam bag make` apply it to a denoised
// chunk before publishing. The formulas are those of
// docs/robot.md; tests compare them with an independent NumPy transcription.
package actions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/internal/strictjson"
)

// MaxStatsFile bounds the size of a dataset_stats.json: the statistics of
// a few keys at 32 x 7 stepwise fit in kilobytes; upstream's files with
// many keys and the state's statistics in well under a megabyte.
const MaxStatsFile = 16 << 20

// Upstream's constants (Fast-WAM's normaliser).
const (
	RangeTol = 1e-4 // a range below this is not scaled, only offset
	StdReg   = 1e-8 // added to std in z-score mode
)

// Kind is a normalisation mode of upstream's normaliser.
type Kind int

// Normalisation modes.
const (
	KindOff    Kind = iota // no un-normalisation: the rows stay in the model's space
	KindMinMax             // [min, max] -> [-1, 1]
	KindQ01Q99             // [q01, q99] -> [-1, 1]
	KindZScore             // (x - mean) / (std + StdReg)
	KindConst              // [a, b] -> [-1, 1], constants for every dimension
)

// Mode is a parsed norm_mode: a Kind, and the constants of KindConst.
type Mode struct {
	Kind Kind
	A, B float64 // KindConst's bounds
}

// ParseMode reads a norm_mode as upstream spells it: "off", "min/max",
// "q01/q99", "z-score", or two numbers "a/b" (for example "-1/1") with a < b.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return Mode{Kind: KindOff}, nil
	case "min/max":
		return Mode{Kind: KindMinMax}, nil
	case "q01/q99":
		return Mode{Kind: KindQ01Q99}, nil
	case "z-score":
		return Mode{Kind: KindZScore}, nil
	}
	as, bs, ok := strings.Cut(s, "/")
	if ok {
		a, errA := strconv.ParseFloat(strings.TrimSpace(as), 64)
		b, errB := strconv.ParseFloat(strings.TrimSpace(bs), 64)
		if errA == nil && errB == nil && isFinite(a) && isFinite(b) && a < b {
			return Mode{Kind: KindConst, A: a, B: b}, nil
		}
	}
	return Mode{}, fmt.Errorf(`want off, min/max, q01/q99, z-score or two finite numbers "a/b" with a < b, got %q`, s)
}

// String spells m as ParseMode reads it.
func (m Mode) String() string {
	switch m.Kind {
	case KindOff:
		return "off"
	case KindMinMax:
		return "min/max"
	case KindQ01Q99:
		return "q01/q99"
	case KindZScore:
		return "z-score"
	case KindConst:
		return strconv.FormatFloat(m.A, 'g', -1, 64) + "/" + strconv.FormatFloat(m.B, 'g', -1, 64)
	}
	return fmt.Sprintf("mode(%d)", int(m.Kind))
}

// NeedsStats reports whether the mode reads a statistics file.
func (m Mode) NeedsStats() bool {
	return m.Kind == KindMinMax || m.Kind == KindQ01Q99 || m.Kind == KindZScore
}

// stats names the two statistics a mode reads.
func (m Mode) stats() (lo, hi string) {
	switch m.Kind {
	case KindMinMax:
		return "min", "max"
	case KindQ01Q99:
		return "q01", "q99"
	case KindZScore:
		return "mean", "std"
	}
	return "", ""
}

// Normalizer is upstream's normaliser for one key, reduced to its affine
// map: forward y = x*scale + offset, backward x = (y - offset)/scale.
// Scale and Offset have Rows x Dim values, row-major; Rows is 1 for global
// statistics (every chunk row uses the same) and the chunk length for
// stepwise ones.
type Normalizer struct {
	Mode          Mode
	Rows, Dim     int
	Scale, Offset []float64
}

// StatsSpec says what to read from a dataset_stats.json.
type StatsSpec struct {
	Key      string // the action key ("default" for LIBERO)
	Mode     Mode   // must need statistics
	Stepwise bool   // the stepwise_ set (one row of statistics per chunk row) instead of global_
}

// LoadNormalizer reads path (a regular file of at most MaxStatsFile bytes)
// and builds the normaliser of spec for chunks of tokens x dim actions.
func LoadNormalizer(path string, spec StatsSpec, tokens, dim int) (*Normalizer, error) {
	data, err := regfile.ReadFile(path, "dataset_stats.json", MaxStatsFile)
	if err != nil {
		return nil, err
	}
	n, err := ParseNormalizer(data, spec, tokens, dim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// ParseNormalizer builds the normaliser of spec from the bytes of a
// dataset_stats.json in upstream's layout:
//
//	{"action": {"<key>": {"global_min": [D numbers], "stepwise_min": [T lists of D numbers], ...}}, "state": {...}}
//
// The whole file is refused when one of its objects, at any depth, holds a
// key twice (encoding/json would keep the last silently). Only the two
// statistics the mode needs are read, and checked: present, of the right
// shape (D = dim; T = tokens when stepwise), finite numbers (a null is
// refused by name); a range's upper statistic below its lower one is
// refused, a range below RangeTol is handled as upstream does (not
// scaled), a std that is not positive is refused.
func ParseNormalizer(data []byte, spec StatsSpec, tokens, dim int) (*Normalizer, error) {
	if !spec.Mode.NeedsStats() {
		return nil, fmt.Errorf("norm mode %s reads no statistics", spec.Mode)
	}
	if tokens < 1 || dim < 1 {
		return nil, fmt.Errorf("chunk of %d x %d actions: want at least 1 x 1", tokens, dim)
	}
	data = quoteNonFinite(data)
	var top map[string]json.RawMessage
	if err := decodeStrict(data, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if top == nil {
		return nil, errors.New("is null; want a JSON object")
	}
	if err := strictjson.NoDuplicates(data); err != nil {
		return nil, err
	}
	rawAction, ok := top["action"]
	if !ok {
		return nil, fmt.Errorf(`no "action" section (the file has %s)`, keyList(top))
	}
	var keys map[string]json.RawMessage
	if err := decodeStrict(rawAction, &keys); err != nil || keys == nil {
		return nil, fmt.Errorf(`"action": not an object of keys: %w`, orNull(err))
	}
	rawKey, ok := keys[spec.Key]
	if !ok {
		return nil, fmt.Errorf(`action key %q: not in the file (it has %s)`, spec.Key, keyList(keys))
	}
	var stats map[string]json.RawMessage
	if err := decodeStrict(rawKey, &stats); err != nil || stats == nil {
		return nil, fmt.Errorf("action key %q: not an object of statistics: %w", spec.Key, orNull(err))
	}
	prefix, rows := "global_", 1
	if spec.Stepwise {
		prefix, rows = "stepwise_", tokens
	}
	loName, hiName := spec.Mode.stats()
	lo, err := readStat(stats, spec.Key, prefix+loName, spec.Stepwise, tokens, dim)
	if err != nil {
		return nil, err
	}
	hi, err := readStat(stats, spec.Key, prefix+hiName, spec.Stepwise, tokens, dim)
	if err != nil {
		return nil, err
	}
	n := &Normalizer{Mode: spec.Mode, Rows: rows, Dim: dim, Scale: make([]float64, rows*dim), Offset: make([]float64, rows*dim)}
	for i := range lo {
		if spec.Mode.Kind == KindZScore {
			std := hi[i]
			if !(std > 0) {
				return nil, fmt.Errorf("action key %q: %s%s[%s] is %v: z-score needs a positive std (a zero std would scale by 1/%g)",
					spec.Key, prefix, hiName, index(i, dim, spec.Stepwise), std, StdReg)
			}
			n.Scale[i], n.Offset[i] = zscore(lo[i], std)
			continue
		}
		if hi[i] < lo[i] {
			at := index(i, dim, spec.Stepwise)
			return nil, fmt.Errorf("action key %q: %s%s[%s] is %v, below %s%s[%s] %v: want the upper statistic of a range at or above its lower one",
				spec.Key, prefix, hiName, at, hi[i], prefix, loName, at, lo[i])
		}
		n.Scale[i], n.Offset[i] = rangeMap(lo[i], hi[i])
	}
	if err := n.checkFinite(spec.Key); err != nil {
		return nil, err
	}
	return n, nil
}

// ConstNormalizer is the normaliser of a constant a/b mode: every
// dimension of every row maps [a, b] to [-1, 1].
func ConstNormalizer(m Mode, dim int) (*Normalizer, error) {
	if m.Kind != KindConst {
		return nil, fmt.Errorf("norm mode %s is not a constant a/b mode", m)
	}
	if dim < 1 {
		return nil, fmt.Errorf("action dimension %d: want at least 1", dim)
	}
	n := &Normalizer{Mode: m, Rows: 1, Dim: dim, Scale: make([]float64, dim), Offset: make([]float64, dim)}
	for i := range dim {
		n.Scale[i], n.Offset[i] = rangeMap(m.A, m.B)
	}
	return n, n.checkFinite("")
}

// rangeMap is the scale and offset of the range modes. The explicit
// float64 conversion keeps the compiler from fusing the multiply and the
// subtraction (arm64 FMA): the reference rounds both.
func rangeMap(lo, hi float64) (scale, offset float64) {
	if hi-lo < RangeTol {
		// The range is taken as 2 (scale 1) and the offset moves lo to
		// the output's middle, 0.
		return 1, 0 - lo
	}
	scale = 2 / (hi - lo)
	return scale, -1 - float64(scale*lo)
}

func zscore(mean, std float64) (scale, offset float64) {
	return 1 / (std + StdReg), -mean / (std + StdReg)
}

func (n *Normalizer) checkFinite(key string) error {
	for i := range n.Scale {
		if !isFinite(n.Scale[i]) || !isFinite(n.Offset[i]) || n.Scale[i] == 0 {
			return fmt.Errorf("action key %q: %s: value %d gives scale %v, offset %v: not a usable affine map",
				key, n.Mode, i, n.Scale[i], n.Offset[i])
		}
	}
	return nil
}

// Backward un-normalises a chunk: dst[r*Dim+j] = (src[r*Dim+j] - offset)/scale
// in float64, rounded to float32, row r using statistics row r (or the one
// row of global statistics). src and dst have tokens*Dim values and may be
// the same slice.
func (n *Normalizer) Backward(dst, src []float32) {
	for i, y := range src {
		k := i % n.Dim
		if n.Rows > 1 {
			k = i % (n.Rows * n.Dim)
		}
		dst[i] = float32((float64(y) - n.Offset[k]) / n.Scale[k])
	}
}

// readStat reads one statistic of a key: D numbers, or T lists of D.
func readStat(stats map[string]json.RawMessage, key, name string, stepwise bool, tokens, dim int) ([]float64, error) {
	raw, ok := stats[name]
	if !ok {
		return nil, fmt.Errorf("action key %q: no %q (the key has %s)", key, name, keyList(stats))
	}
	var out []float64
	if stepwise {
		var rows []json.RawMessage
		if err := decodeStrict(raw, &rows); err != nil || rows == nil {
			return nil, fmt.Errorf("action key %q: %s: want a list of %d lists of %d numbers: %w", key, name, tokens, dim, orNull(err))
		}
		if len(rows) != tokens {
			return nil, fmt.Errorf("action key %q: %s has %d rows; want %d (the chunk length)", key, name, len(rows), tokens)
		}
		for r, row := range rows {
			v, err := numbers(row, fmt.Sprintf("%s[%d]", name, r), dim)
			if err != nil {
				return nil, fmt.Errorf("action key %q: %w", key, err)
			}
			out = append(out, v...)
		}
		return out, nil
	}
	v, err := numbers(raw, name, dim)
	if err != nil {
		return nil, fmt.Errorf("action key %q: %w", key, err)
	}
	return v, nil
}

// numbers reads a list of exactly dim finite numbers.
func numbers(raw json.RawMessage, name string, dim int) ([]float64, error) {
	var vals []json.RawMessage
	if err := decodeStrict(raw, &vals); err != nil || vals == nil {
		return nil, fmt.Errorf("%s: want a list of %d numbers: %w", name, dim, orNull(err))
	}
	if len(vals) != dim {
		return nil, fmt.Errorf("%s has %d values; want %d (the action dimension)", name, len(vals), dim)
	}
	out := make([]float64, dim)
	for i, s := range vals {
		if isNull(s) {
			return nil, fmt.Errorf("%s[%d] is null: want a finite number", name, i)
		}
		var str string
		if json.Unmarshal(s, &str) == nil {
			// A quoted NaN or Infinity (see quoteNonFinite), or a string.
			return nil, fmt.Errorf("%s[%d] is %s: want a finite number", name, i, str)
		}
		f, err := strconv.ParseFloat(string(s), 64)
		if err != nil || !isFinite(f) {
			return nil, fmt.Errorf("%s[%d] is %s: want a finite number", name, i, s)
		}
		out[i] = f
	}
	return out, nil
}

// quoteNonFinite puts quotes around the NaN, Infinity and -Infinity that
// Python's json module writes for non-finite floats (they are not JSON),
// outside strings, so that the file decodes and the value is refused by
// name instead of the whole file failing at a byte offset.
func quoteNonFinite(data []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			out = append(out, c)
			continue
		}
		if c == '"' {
			inString = true
			out = append(out, c)
			continue
		}
		matched := false
		for _, tok := range [...]string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(data[i:], []byte(tok)) {
				out = append(out, '"')
				out = append(out, tok...)
				out = append(out, '"')
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, c)
		}
	}
	return out
}

// decodeStrict decodes one JSON value into v. NaN and Infinity, which
// Python's json writes for non-finite floats, are not JSON and fail here
// with the decoder's error.
func decodeStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// isNull reports whether raw is the JSON null, which encoding/json decodes
// into any value without an error, leaving it as it was.
func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// orNull is err, or for a value that decoded without one into nothing, the
// error of a JSON null (the only such value): decodeStrict succeeded on
// null and left the map or slice nil.
func orNull(err error) error {
	if err != nil {
		return err
	}
	return errors.New("got null")
}

func keyList(m map[string]json.RawMessage) string {
	if len(m) == 0 {
		return "no keys"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, strconv.Quote(k))
	}
	sort.Strings(ks)
	if len(ks) > 12 {
		ks = append(ks[:12], "…")
	}
	return strings.Join(ks, ", ")
}

func index(i, dim int, stepwise bool) string {
	if stepwise {
		return fmt.Sprintf("%d][%d", i/dim, i%dim)
	}
	return strconv.Itoa(i)
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
