package worldmodel

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/internal/strictjson"
)

// ProprioDim is the number of proprio values of LIBERO (spec §2.1): the
// end effector's position (3) and axis-angle (3), the two gripper joints.
const ProprioDim = 8

// Spec §2.2's constants.
const (
	// StateRangeTol: a statistics range below it (compared in float32)
	// is degenerate: the dimension is offset, not scaled.
	StateRangeTol = float32(1e-4)
	// ProprioClamp bounds the normalised proprio to [-ProprioClamp, ProprioClamp].
	ProprioClamp = float32(5)
)

// Quat2AxisAngle is robosuite's quat2axisangle for a quaternion in its
// (x, y, z, w) order, in float64 (spec §2.1): w is clipped to [-1, 1];
// with den = sqrt(1 − w²), the result is (0, 0, 0) when den is 0 and
// (x, y, z)·2·acos(w)/den otherwise. Unlike upstream it does not write
// the clipped w back into the caller's quaternion.
func Quat2AxisAngle(q [4]float64) [3]float64 {
	w := min(max(q[3], -1), 1)
	den := math.Sqrt(1 - float64(w*w)) // rounded product: no fused multiply-add (arm64)
	if den == 0 {
		return [3]float64{}
	}
	a := math.Acos(w)
	var aa [3]float64
	for i := range aa {
		aa[i] = float64(q[i]*2*a) / den
	}
	return aa
}

// State is the 8 raw proprio values of LIBERO (spec §2.1), float64 from
// the simulator cast to float32: the end effector's position, the
// axis-angle of its quaternion (x, y, z, w), the gripper's two joint
// positions.
func State(eefPos [3]float64, eefQuat [4]float64, gripperQpos [2]float64) [ProprioDim]float32 {
	aa := Quat2AxisAngle(eefQuat)
	return [ProprioDim]float32{
		float32(eefPos[0]), float32(eefPos[1]), float32(eefPos[2]),
		float32(aa[0]), float32(aa[1]), float32(aa[2]),
		float32(gripperQpos[0]), float32(gripperQpos[1]),
	}
}

// StateNormalizer is upstream's min/max normaliser of the state, from the
// global statistics of a dataset_stats.json, in float32 (spec §2.2):
// p = clamp(state·Scale + Offset, −5, 5).
type StateNormalizer struct {
	Scale, Offset []float32
}

// LoadStateNormalizer reads a dataset_stats.json (a regular file of at most
// actions.MaxStatsFile bytes) and returns the normaliser of its state key
// (LIBERO's is "default") for dim values.
func LoadStateNormalizer(path, key string, dim int) (*StateNormalizer, error) {
	data, err := regfile.ReadFile(path, "dataset_stats.json", actions.MaxStatsFile)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: %w", err)
	}
	n, err := ParseStateNormalizer(data, key, dim)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// ParseStateNormalizer builds the state normaliser from the bytes of a
// dataset_stats.json in upstream's layout,
//
//	{"state": {"<key>": {"global_min": [dim numbers], "global_max": [dim numbers], ...}}, "action": {...}}
//
// refusing invalid JSON, a key twice in any object, a missing section, key
// or statistic, a null, a string, a non-finite number (Python's json
// writes NaN and Infinity, which are not JSON), a number that overflows
// float32, a wrong count, and a max below its min. Statistics are rounded
// to float32 first, as upstream's loader does; a range below
// StateRangeTol is degenerate (scale 1, offset −min).
func ParseStateNormalizer(data []byte, key string, dim int) (*StateNormalizer, error) {
	if dim < 1 || dim > 1<<16 {
		return nil, fmt.Errorf("worldmodel: state of %d values: want 1..%d", dim, 1<<16)
	}
	if err := strictjson.NoDuplicates(data); err != nil {
		return nil, fmt.Errorf("worldmodel: dataset_stats.json: %w (NaN and Infinity, which Python's json writes for non-finite statistics, are not JSON and refused)", err)
	}
	state, err := member(data, "state", "the file")
	if err != nil {
		return nil, err
	}
	stats, err := member(state, key, `"state"`)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("state key %q", key)
	lo, err := statNumbers(stats, "global_min", where, dim)
	if err != nil {
		return nil, err
	}
	hi, err := statNumbers(stats, "global_max", where, dim)
	if err != nil {
		return nil, err
	}
	n := &StateNormalizer{Scale: make([]float32, dim), Offset: make([]float32, dim)}
	for i := range dim {
		r := hi[i] - lo[i]
		if !(r >= 0) || math.IsInf(float64(r), 0) {
			return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: global_min[%d] = %v, global_max[%d] = %v: want min ≤ max with a finite float32 range",
				where, i, lo[i], i, hi[i])
		}
		if r < StateRangeTol {
			n.Scale[i], n.Offset[i] = 1, 0-lo[i] // r is taken as 2: scale 2/2
			continue
		}
		n.Scale[i] = 2 / r
		// The conversion rounds the product: no fused multiply-add.
		n.Offset[i] = -1 - float32(n.Scale[i]*lo[i])
	}
	return n, nil
}

// Normalize writes the normalised state into dst (spec §2.2): for each
// value, clamp(fl32(state·scale) + offset, −5, 5), in float32. It refuses a
// state of the wrong length or with a non-finite value, before writing.
func (n *StateNormalizer) Normalize(dst, state []float32) error {
	if len(state) != len(n.Scale) {
		return fmt.Errorf("worldmodel: state of %d values: want %d", len(state), len(n.Scale))
	}
	if len(dst) != len(state) {
		return fmt.Errorf("worldmodel: normalised state buffer of %d values: want %d", len(dst), len(state))
	}
	for i, v := range state {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("worldmodel: state value %d is %v: want a finite number", i, v)
		}
	}
	for i, v := range state {
		dst[i] = min(max(float32(v*n.Scale[i])+n.Offset[i], -ProprioClamp), ProprioClamp)
	}
	return nil
}

// ProprioToken writes the proprio token row = W·p + b (spec §2.3) into
// dst: W is [len(dst), len(p)] row-major (upstream's
// proprio_encoder.weight), b is [len(dst)]. Each value is accumulated in
// float64, product by product in input order, then the bias, and rounded
// once to float32 (every product of two float32 is exact in float64; the
// sum is as close to exact as upstream's float32 matmul is, and fixed).
func ProprioToken(dst, w, b, p []float32) error {
	if len(p) < 1 {
		return fmt.Errorf("worldmodel: empty proprio")
	}
	if len(w) != len(dst)*len(p) || len(b) != len(dst) {
		return fmt.Errorf("worldmodel: proprio Linear with W of %d and b of %d values for %d outputs of %d inputs: want W [%d, %d] (%d values) and b [%d]",
			len(w), len(b), len(dst), len(p), len(dst), len(p), len(dst)*len(p), len(dst))
	}
	for j := range dst {
		row := w[j*len(p) : (j+1)*len(p)]
		acc := 0.0
		for i, x := range p {
			acc += float64(row[i]) * float64(x)
		}
		dst[j] = float32(acc + float64(b[j]))
	}
	return nil
}

// member returns the raw value of key in the JSON object raw.
func member(raw []byte, key, where string) ([]byte, error) {
	var found []byte
	var keys []string
	err := strictjson.Object(raw, func(k string, v []byte) error {
		keys = append(keys, strconv.Quote(k))
		if k == key {
			found = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: %w", where, err)
	}
	if found == nil {
		return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s has no %q (it has %s)", where, key, listOrNone(keys))
	}
	return found, nil
}

func listOrNone(keys []string) string {
	if len(keys) == 0 {
		return "no keys"
	}
	if len(keys) > 12 {
		keys = append(keys[:12:12], "…")
	}
	s := keys[0]
	for _, k := range keys[1:] {
		s += ", " + k
	}
	return s
}

// statNumbers reads the statistic name of an object of statistics: a list
// of dim finite numbers, rounded to float32.
func statNumbers(stats []byte, name, where string, dim int) ([]float32, error) {
	raw, err := member(stats, name, where)
	if err != nil {
		return nil, err
	}
	if kind := strictjson.Kind(raw); kind != "array" {
		return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: %s is a JSON %s: want a list of %d numbers", where, name, kind, dim)
	}
	var vals []json.RawMessage
	if err := json.Unmarshal(raw, &vals); err != nil {
		return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: %s: %w", where, name, err)
	}
	if len(vals) != dim {
		return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: %s has %d values: want %d (the state's dimension)", where, name, len(vals), dim)
	}
	out := make([]float32, dim)
	for i, v := range vals {
		if kind := strictjson.Kind(v); kind != "number" {
			return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: %s[%d] is a JSON %s: want a finite number", where, name, i, kind)
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsInf(float64(float32(f)), 0) {
			return nil, fmt.Errorf("worldmodel: dataset_stats.json: %s: %s[%d] is %s: want a finite number within float32's range", where, name, i, v)
		}
		out[i] = float32(f)
	}
	return out, nil
}
