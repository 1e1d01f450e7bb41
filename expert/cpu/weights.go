package cpu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden/tiny"
	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/internal/strictjson"
	"github.com/fastwam/actionexpert/safetensors"
)

// CheckpointPrefix is the prefix of the action expert's keys inside a
// Fast-WAM training checkpoint's mixture-of-transformers state dict.
const CheckpointPrefix = "mixtures.action."

// ConfigMetadataKey is the safetensors metadata entry holding the JSON
// configuration (written by golden/export_checkpoint.py).
const ConfigMetadataKey = "fastwam_config"

// layerWeights are one block's parameters. Self-attention q, k and v are
// stored fused as one [3A, D] matrix so one matrix product serves all three.
type layerWeights struct {
	mod             []float32 // [6, D]
	qkv, qkvB       []float32 // [3A, D], [3A]
	normQ, normK    []float32 // [A]
	selfO, selfOB   []float32 // [D, A], [D]
	crossQ, crossQB []float32
	crossNormQ      []float32
	crossK, crossKB []float32
	crossNormK      []float32
	crossV, crossVB []float32
	crossO, crossOB []float32
	norm3W, norm3B  []float32 // [D]
	ffn0, ffn0B     []float32 // [F, D], [F]
	ffn2, ffn2B     []float32 // [D, F], [D]
}

// Weights are the parameters of the action expert, upcast to float32.
type Weights struct {
	cfg                   Config
	actionEnc, actionEncB []float32 // [D, a], [D]
	text0, text0B         []float32 // [D, T]
	text2, text2B         []float32 // [D, D]
	time0, time0B         []float32 // [D, f]
	time2, time2B         []float32 // [D, D]
	timeProj, timeProjB   []float32 // [6D, D]
	head, headB           []float32 // [a, D]
	layers                []layerWeights
}

// Config returns the architecture the weights were loaded for.
func (w *Weights) Config() Config { return w.cfg }

// ForInputs returns the same weights (sharing their memory) sized for
// chunks of videoTokens cached video tokens and contextTokens context
// tokens, which the parameters do not fix; zero keeps the current size.
func (w *Weights) ForInputs(videoTokens, contextTokens int) (*Weights, error) {
	c := w.cfg
	if videoTokens != 0 {
		c.VideoTokens = videoTokens
	}
	if contextTokens != 0 {
		c.ContextTokens = contextTokens
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cp := *w
	cp.cfg = c
	return &cp, nil
}

// TinyWeights returns the embedded weights of the tiny golden model
// (golden/tiny/weights.safetensors, spec §11), sized for its inputs
// (8 video tokens, 5 context tokens).
func TinyWeights() (*Weights, error) {
	const name = "tiny/weights.safetensors"
	b, err := fs.ReadFile(tiny.FS(), "weights.safetensors")
	if err != nil {
		return nil, fmt.Errorf("cpu: embedded %s: %w", name, err)
	}
	w, err := ParseWeights(context.Background(), "embedded "+name, b, nil)
	if err != nil {
		return nil, err
	}
	return w.ForInputs(8, 5)
}

// param names one tensor of the state dict, its expected shape and where it
// goes. qkv entries fill a third of the fused matrix.
type param struct {
	name  string
	shape []int
	dst   []float32
}

// numel is the element count of the expected shape (bounded by Validate).
func (p param) numel() int {
	n := 1
	for _, s := range p.shape {
		n *= s
	}
	return n
}

// params lists every tensor of the state dict (spec §1) for configuration c,
// in a fixed order, with its expected shape. With w == nil it only describes
// (dst is nil; nothing proportional to the parameters is allocated); with w
// it allocates w's parameter slices for c and gives each tensor's
// destination in w. Entries with the same shape share one shape slice.
func params(c Config, w *Weights) []param {
	D, F, A, T, f, a := c.HiddenDim, c.FFNDim, c.attn(), c.TextDim, c.FreqDim, c.ActionDim
	var (
		shD, shA, shF, sh6D, sha = []int{D}, []int{A}, []int{F}, []int{6 * D}, []int{a}
		shDa, shDT, shDD, shDf   = []int{D, a}, []int{D, T}, []int{D, D}, []int{D, f}
		sh6DD, shaD, sh16D       = []int{6 * D, D}, []int{a, D}, []int{1, 6, D}
		shAD, shDA, shFD, shDF   = []int{A, D}, []int{D, A}, []int{F, D}, []int{D, F}
	)
	top := w
	if top == nil {
		top = &Weights{}
	}
	ps := make([]param, 0, 14+26*c.NumLayers)
	add := func(name string, dst *[]float32, shape []int) {
		if w != nil {
			*dst = make([]float32, param{shape: shape}.numel())
		}
		ps = append(ps, param{name, shape, *dst})
	}
	add("action_encoder.weight", &top.actionEnc, shDa)
	add("action_encoder.bias", &top.actionEncB, shD)
	add("text_embedding.0.weight", &top.text0, shDT)
	add("text_embedding.0.bias", &top.text0B, shD)
	add("text_embedding.2.weight", &top.text2, shDD)
	add("text_embedding.2.bias", &top.text2B, shD)
	add("time_embedding.0.weight", &top.time0, shDf)
	add("time_embedding.0.bias", &top.time0B, shD)
	add("time_embedding.2.weight", &top.time2, shDD)
	add("time_embedding.2.bias", &top.time2B, shD)
	add("time_projection.1.weight", &top.timeProj, sh6DD)
	add("time_projection.1.bias", &top.timeProjB, sh6D)
	add("head.weight", &top.head, shaD)
	add("head.bias", &top.headB, sha)
	if w != nil {
		w.layers = make([]layerWeights, c.NumLayers)
	}
	var scratch layerWeights
	for l := range c.NumLayers {
		L := &scratch
		if w != nil {
			L = &w.layers[l]
		}
		p := "blocks." + strconv.Itoa(l) + "."
		add(p+"modulation", &L.mod, sh16D)
		if w != nil {
			L.qkv, L.qkvB = make([]float32, 3*A*D), make([]float32, 3*A)
		}
		for i, n := range []string{"q", "k", "v"} {
			var wq, bq []float32
			if L.qkv != nil {
				wq, bq = L.qkv[i*A*D:(i+1)*A*D], L.qkvB[i*A:(i+1)*A]
			}
			ps = append(ps,
				param{p + "self_attn." + n + ".weight", shAD, wq},
				param{p + "self_attn." + n + ".bias", shA, bq})
		}
		add(p+"self_attn.o.weight", &L.selfO, shDA)
		add(p+"self_attn.o.bias", &L.selfOB, shD)
		add(p+"self_attn.norm_q.weight", &L.normQ, shA)
		add(p+"self_attn.norm_k.weight", &L.normK, shA)
		add(p+"cross_attn.q.weight", &L.crossQ, shAD)
		add(p+"cross_attn.q.bias", &L.crossQB, shA)
		add(p+"cross_attn.k.weight", &L.crossK, shAD)
		add(p+"cross_attn.k.bias", &L.crossKB, shA)
		add(p+"cross_attn.v.weight", &L.crossV, shAD)
		add(p+"cross_attn.v.bias", &L.crossVB, shA)
		add(p+"cross_attn.o.weight", &L.crossO, shDA)
		add(p+"cross_attn.o.bias", &L.crossOB, shD)
		add(p+"cross_attn.norm_q.weight", &L.crossNormQ, shA)
		add(p+"cross_attn.norm_k.weight", &L.crossNormK, shA)
		add(p+"norm3.weight", &L.norm3W, shD)
		add(p+"norm3.bias", &L.norm3B, shD)
		add(p+"ffn.0.weight", &L.ffn0, shFD)
		add(p+"ffn.0.bias", &L.ffn0B, shF)
		add(p+"ffn.2.weight", &L.ffn2, shDF)
		add(p+"ffn.2.bias", &L.ffn2B, shD)
	}
	return ps
}

// NumParams is the number of scalar parameters of the configuration.
func (w *Weights) NumParams() int {
	n, _ := w.cfg.numParams() // Validate bounded it when w was made
	return n
}

// ProblemKind classifies how a tensor of a weights file differs from what
// the configuration expects.
type ProblemKind int

// The kinds of problem, in the order MismatchError lists them.
const (
	Missing    ProblemKind = iota // the configuration needs a tensor the file lacks
	Misshaped                     // the tensor's shape differs from the configuration's
	WrongDType                    // the tensor is not stored as F32, F16 or BF16
	Unexpected                    // the file holds a tensor the configuration has no place for
)

// String names the kind as the error message does.
func (k ProblemKind) String() string {
	switch k {
	case Missing:
		return "missing"
	case Misshaped:
		return "misshaped"
	case WrongDType:
		return "wrong dtype"
	case Unexpected:
		return "unexpected"
	}
	return "ProblemKind(" + strconv.Itoa(int(k)) + ")"
}

// Problem is one tensor that does not fit the configuration.
type Problem struct {
	Kind ProblemKind
	Name string // the tensor's name in the file (with the checkpoint prefix, if any)
	Got  string // what the file holds: a shape or dtype ("" when missing)
	Want string // what the configuration expects ("" when unexpected)
}

// String is the problem as one line of the error message.
func (p Problem) String() string {
	switch p.Kind {
	case Missing:
		return "missing " + p.Name + " " + p.Want
	case Unexpected:
		return "unexpected tensor " + p.Name + " " + p.Got
	case WrongDType:
		return p.Name + " has dtype " + p.Got + ", want " + p.Want
	}
	return p.Name + " has shape " + p.Got + ", want " + p.Want
}

// MismatchError reports every tensor of a weights file that does not fit
// the configuration. It is found from the file's tensor table alone, before
// any parameter is allocated.
type MismatchError struct {
	Source   string    // the file's path or name
	Config   Config    // the configuration the file was checked against
	Problems []Problem // sorted by Kind, then Name (numbers in names compared as numbers)
}

// mismatchShow is how many problems of each kind the message lists.
const mismatchShow = 8

// Error lists the problems, up to mismatchShow of each kind, with counts.
func (e *MismatchError) Error() string {
	c := e.Config
	var b strings.Builder
	fmt.Fprintf(&b, "cpu: %s does not match the configuration (%d layers, hidden %d, %dx%d heads, ffn %d, text %d): ",
		e.Source, c.NumLayers, c.HiddenDim, c.NumHeads, c.HeadDim, c.FFNDim, c.TextDim)
	var counts [Unexpected + 1]int
	for _, p := range e.Problems {
		if p.Kind >= 0 && p.Kind <= Unexpected {
			counts[p.Kind]++
		}
	}
	sep := ""
	for k, n := range counts {
		if n > 0 {
			fmt.Fprintf(&b, "%s%d %s", sep, n, ProblemKind(k))
			sep = ", "
		}
	}
	for i := 0; i < len(e.Problems); {
		k := e.Problems[i].Kind
		j := i
		for j < len(e.Problems) && e.Problems[j].Kind == k {
			j++
		}
		for _, p := range e.Problems[i:min(j, i+mismatchShow)] {
			b.WriteString("\n  ")
			b.WriteString(p.String())
		}
		if j-i > mismatchShow {
			fmt.Fprintf(&b, "\n  ... and %d more %s", j-i-mismatchShow, k)
		}
		i = j
	}
	return b.String()
}

// floatDTypes are the storage types the loader upcasts to float32.
const floatDTypes = "F32, F16 or BF16"

func isFloat(dtype string) bool { return dtype == "F32" || dtype == "F16" || dtype == "BF16" }

// LoadWeights reads the action expert from a safetensors file. Keys may sit
// under CheckpointPrefix; F32, F16 and BF16 storage are upcast to float32.
// The configuration comes from cfg when it is non-nil, else from the file's
// fastwam_config metadata, else from a JSON file beside the weights
// (<name>.json, then config.json).
//
// The configuration is validated and checked against the file's tensor
// table (names, shapes, dtypes) before any parameter is allocated: missing,
// unexpected, misshaped and non-float tensors are all reported in one
// *MismatchError, and the memory a load takes is bounded by the file (at
// most twice its data section, for F16/BF16 upcast to float32). ctx is
// checked between tensors.
func LoadWeights(ctx context.Context, path string, cfg *Config) (*Weights, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fromFile(ctx, path, f, cfg)
}

// ParseWeights is LoadWeights for a safetensors image in memory; name is
// used in messages. The configuration comes from cfg or the metadata.
func ParseWeights(ctx context.Context, name string, data []byte, cfg *Config) (*Weights, error) {
	f, err := safetensors.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return fromFile(ctx, name, f, cfg)
}

func fromFile(ctx context.Context, path string, f *safetensors.File, cfg *Config) (*Weights, error) {
	var (
		c   Config
		err error
	)
	if cfg != nil {
		c = *cfg
	} else if c, err = findConfig(path, f); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	prefix, err := matchTable(path, f, c)
	if err != nil {
		return nil, err
	}
	// Every tensor now exists in the file with its expected shape and a
	// float dtype, and the file's byte ranges are disjoint and inside it:
	// the allocation below is at most twice the data section.
	w := &Weights{cfg: c}
	ps := params(c, w)
	for i, p := range ps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: loading %s stopped after %d of %d tensors: %w", path, i, len(ps), err)
		}
		if _, err := f.Float32(prefix+p.name, p.dst); err != nil {
			return nil, fmt.Errorf("cpu: %s: %w", path, err)
		}
		if k := expert.FirstNonFinite(p.dst); k >= 0 {
			return nil, fmt.Errorf("cpu: %s: weight %s[%d] is %v, want a finite number", path, prefix+p.name, k, p.dst[k])
		}
	}
	return w, nil
}

// matchTable compares the file's tensor table with what c expects and
// returns the key prefix in use (CheckpointPrefix or ""), or a
// *MismatchError listing every problem. It allocates only the expected
// tensor list (bounded by Validate) and the problem list.
func matchTable(path string, f *safetensors.File, c Config) (string, error) {
	names := f.Names()
	prefix := ""
	for _, n := range names {
		if strings.HasPrefix(n, CheckpointPrefix) {
			prefix = CheckpointPrefix
			break
		}
	}
	ps := params(c, nil)
	want := make(map[string]bool, len(ps))
	var problems []Problem
	for _, p := range ps {
		name := prefix + p.name
		want[name] = true
		info, ok := f.Info(name)
		switch {
		case !ok:
			problems = append(problems, Problem{Kind: Missing, Name: name, Want: fmt.Sprint(p.shape)})
		case !slices.Equal(info.Shape, p.shape):
			problems = append(problems, Problem{Kind: Misshaped, Name: name, Got: fmt.Sprint(info.Shape), Want: fmt.Sprint(p.shape)})
		case !isFloat(info.DType):
			problems = append(problems, Problem{Kind: WrongDType, Name: name, Got: info.DType, Want: floatDTypes})
		}
	}
	for _, n := range names {
		if !want[n] {
			info, _ := f.Info(n)
			problems = append(problems, Problem{Kind: Unexpected, Name: n, Got: info.DType + fmt.Sprint(info.Shape)})
		}
	}
	if len(problems) == 0 {
		return prefix, nil
	}
	slices.SortFunc(problems, func(a, b Problem) int {
		if a.Kind != b.Kind {
			return cmp.Compare(a.Kind, b.Kind)
		}
		return compareNames(a.Name, b.Name)
	})
	return "", &MismatchError{Source: path, Config: c, Problems: problems}
}

// compareNames orders tensor names with runs of digits compared as numbers
// (blocks.2 before blocks.10), then bytewise, so the order is total.
func compareNames(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			i0, j0 := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			x, y := strings.TrimLeft(a[i0:i], "0"), strings.TrimLeft(b[j0:j], "0")
			if c := cmp.Compare(len(x), len(y)); c != 0 {
				return c
			}
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
			continue
		}
		if c := cmp.Compare(a[i], b[j]); c != 0 {
			return c
		}
		i++
		j++
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 { // a prefix comes first
		return c
	}
	return strings.Compare(a, b) // equal but for leading zeros
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// MaxConfigBytes bounds a configuration JSON read from beside the weights;
// the one carried in the weights' metadata has the same bound
// (safetensors.MaxMetadataValue).
const MaxConfigBytes = safetensors.MaxMetadataValue

func findConfig(path string, f *safetensors.File) (Config, error) {
	if js, ok := f.Metadata()[ConfigMetadataKey]; ok {
		c, err := readConfig([]byte(js))
		if err != nil {
			return Config{}, fmt.Errorf("%s: metadata %s: %w", path, ConfigMetadataKey, err)
		}
		return c, nil
	}
	base := strings.TrimSuffix(path, filepath.Ext(path))
	for _, p := range []string{base + ".json", filepath.Join(filepath.Dir(path), "config.json")} {
		b, err := regfile.ReadFile(p, "a configuration JSON file", MaxConfigBytes)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Config{}, fmt.Errorf("cpu: configuration: %w", err)
		}
		c, err := readConfig(b)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", p, err)
		}
		return c, nil
	}
	return Config{}, fmt.Errorf("cpu: %s has no %q metadata and no %s.json or config.json beside it: the configuration is unknown",
		path, ConfigMetadataKey, filepath.Base(base))
}

// readConfig is parseConfig for a configuration that must not name a key
// twice: a JSON decoder keeps the last copy silently, where another tool
// may keep the first.
func readConfig(b []byte) (Config, error) {
	if err := strictjson.NoDuplicates(b); err != nil {
		return Config{}, fmt.Errorf("cpu: configuration JSON: %w", err)
	}
	return parseConfig(b)
}

// RandomWeights makes weights of the given configuration with a fixed
// pseudo-random initialisation (uniform, scaled by 1/sqrt(fan_in) for
// matrices, gains near 1), for benchmarks and tests that need a model of a
// given size but not a trained one.
func RandomWeights(cfg Config, seed uint64) (*Weights, error) {
	return RandomWeightsContext(context.Background(), cfg, seed)
}

// RandomWeightsContext is RandomWeights that stops, with ctx's error,
// when ctx is done: the full model's 4 GB take seconds to fill. It looks
// at ctx before every tensor.
func RandomWeightsContext(ctx context.Context, cfg Config, seed uint64) (*Weights, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{cfg: cfg}
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range params(cfg, w) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cpu: random weights: %w", err)
		}
		var scale, base float32
		switch {
		case len(p.shape) == 2:
			scale = float32(math.Sqrt(3 / float64(p.shape[1])))
		case strings.Contains(p.name, "norm"):
			scale, base = 0.2, 1
		default:
			scale = 0.1
		}
		for i := range p.dst {
			p.dst[i] = base + scale*(2*r.Float32()-1)
		}
	}
	return w, nil
}
