// Package golden reads the reference inputs and outputs of the action step
// from .npz files: the device bundle's golden/action_step_io.npz format
// (latents_action, timestep, video_keys, video_values, context,
// context_mask and the reference prediction) and our own tiny goldens, which
// add per-timestep predictions and a full Euler loop. The tiny goldens were
// produced by golden/make_golden.py from an independent PyTorch
// implementation of the specification, and are embedded so the command-line
// tool and the tests run without any file.
package golden

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden/tiny"
	"github.com/fastwam/actionexpert/internal/regfile"
)

//go:embed regression/metadata.yaml regression/*.mcap
var regression embed.FS

// Tiny is the embedded tiny golden set: case_all.npz (every video token
// visible), case_first4.npz (the first four visible), weights.safetensors
// (f32), weights_bf16.safetensors (bf16 under the checkpoint prefix),
// weights_f16.safetensors, config.json and rtc_chunks.npz (a chain of
// real-time chunking chunks from golden/make_rtc_golden.py, read with
// LoadTinyArrays), all under the directory "tiny". The files are package
// golden/tiny's.
func Tiny() fs.FS { return tinyDir{} }

// tinyDir serves package tiny's files under the directory "tiny", the names
// golden's callers and messages use ("tiny/case_all.npz"). Any other name,
// "." included, does not exist.
type tinyDir struct{}

// Open opens name, which must be "tiny" or a name under it.
func (tinyDir) Open(name string) (fs.File, error) {
	rest, ok := strings.CutPrefix(name, "tiny/")
	if name == "tiny" {
		rest, ok = ".", true
	}
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := tiny.FS().Open(rest)
	if pe, isPath := err.(*fs.PathError); isPath {
		pe.Path = name
	}
	return f, err
}

// RegressionBag is the embedded regression bag: the rosbag2 folder
// "regression" (metadata.yaml and regression_0.mcap) that
// `fastwam bag make -o golden/regression -chunks 8` writes from the tiny
// cases, holding the inputs and the CPU reference's chunks. `fastwam
// replay` replays it by default.
func RegressionBag() fs.FS { return regression }

// ExtractRegressionBag copies the embedded regression bag into a new folder
// "regression" under parent, which must exist, and returns that folder.
func ExtractRegressionBag(parent string) (string, error) {
	sub, err := fs.Sub(regression, "regression")
	if err != nil {
		return "", fmt.Errorf("golden: embedded regression bag: %w", err)
	}
	dir := filepath.Join(parent, "regression")
	if err := os.CopyFS(dir, sub); err != nil {
		return "", fmt.Errorf("golden: extract the regression bag: %w", err)
	}
	return dir, nil
}

// TinyCases names the embedded tiny cases.
func TinyCases() []string { return []string{"tiny/case_all.npz", "tiny/case_first4.npz"} }

// predKeys are the names the reference prediction may carry: the graph's
// output name (ours) and other names a bundle may use.
func predKeys() []string { return []string{"pred_noise", "pred", "reference", "expected"} }

// Case is one golden file.
type Case struct {
	Name string

	// The single-step check, in the device bundle's format.
	Latents  []float32 // [S*a]
	Timestep float32
	Chunk    expert.Chunk
	Pred     []float32 // reference prediction for Latents at Timestep

	// Shapes read from the file.
	Layers, VideoTokens, AttnWidth, ContextTokens, TextDim, ActionTokens, ActionDim int

	// Extras of our goldens; nil when the file has none.
	StepTimesteps []float32   // several timesteps
	StepLatents   [][]float32 // the latents fed at each
	StepPred      [][]float32 // the reference predictions
	LoopInit      []float32   // initial noise of the full loop
	LoopSigmas    []float32   // the schedule (N+1 values)
	LoopPred      [][]float32 // prediction at each Euler step
	LoopLatents   [][]float32 // latents after each update
	LoopActions   []float32   // final actions

	// Other numeric arrays of the file by key (for example
	// pred_noise_bf16), read as float32 while they hold no more elements
	// in all than the arrays above.
	Extra map[string][]float32
	// Skipped lists the other members not in Extra, each as
	// "name: reason" (too large for the extras' bound, not an .npy array,
	// an unsupported dtype, unreadable).
	Skipped []string
}

// Load reads a golden .npz file from disk. The file is read in place: only
// the members the case needs are inflated, each bounded by the size its
// header declares (see Parse).
func Load(ctx context.Context, path string) (*Case, error) {
	f, size, err := regfile.Open(path, "an .npz golden file")
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	defer f.Close()
	return read(ctx, path, f, size, false)
}

// LoadInputs reads the inputs of a golden .npz file from disk, as Load
// does, for a file that holds only what a world model produces:
// video_keys, video_values, context and context_mask (visible_video
// optional). The action-side arrays (latents_action, timestep, the
// reference prediction) are read and checked when present and may be
// absent; the step_* and loop_* arrays are not read. Without
// latents_action the case has no action shape (ActionTokens 0), and Fits
// checks only its inputs.
func LoadInputs(ctx context.Context, path string) (*Case, error) {
	f, size, err := regfile.Open(path, "an .npz golden file")
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	defer f.Close()
	return read(ctx, path, f, size, true)
}

// LoadTiny reads one of the embedded tiny cases (see TinyCases).
func LoadTiny(ctx context.Context, name string) (*Case, error) {
	b, err := fs.ReadFile(Tiny(), name)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	return Parse(ctx, name, b)
}

// Parse reads a golden .npz image; name is used in messages.
//
// Every image is treated as hostile. Each .npy header is parsed as numpy
// reads it (a Python dict literal with the keys descr, fortran_order and
// shape in any order; format versions 1.0, 2.0 and 3.0), and the data it
// declares is checked against the zip entry's size, and the entry's size
// against the compressed bytes, before anything is allocated; a member is
// then inflated no further than that size, and refused if it holds more or
// fewer bytes or fails its CRC. An archive with two members for one array is
// refused. Only the arrays the case needs are read, after all their shapes
// have been checked; other float arrays go to Case.Extra while they hold no
// more elements in all than the needed arrays, and are listed in
// Case.Skipped otherwise or when they cannot be read. Errors name the file,
// the array and the reason; a missing array and a present but unreadable
// one are different errors. Loading stops when ctx is cancelled.
func Parse(ctx context.Context, name string, b []byte) (*Case, error) {
	return read(ctx, name, bytes.NewReader(b), int64(len(b)), false)
}

// knownKeys are the arrays the case reads by name; they are never extras.
func knownKeys() []string {
	return []string{"latents_action", "timestep", "video_keys", "video_values", "context", "context_mask",
		"visible_video", "step_timesteps", "step_latents", "step_pred", "loop_init_noise", "loop_sigmas", "loop_pred",
		"loop_latents", "loop_actions"}
}

// read reads a case; with inputsOnly, the action-side arrays may be absent
// (see LoadInputs).
func read(ctx context.Context, name string, r io.ReaderAt, size int64, inputsOnly bool) (*Case, error) {
	a, err := openArchive(name, r, size)
	if err != nil {
		return nil, err
	}
	l := &loader{ctx: ctx, a: a}
	c := &Case{Name: name, Extra: map[string][]float32{}}

	// The headers of every array the case needs, and their shapes, are
	// checked before any data is read.
	need := l.need
	if inputsOnly {
		need = l.optional
	}
	lat := need("latents_action")
	ts := need("timestep")
	vk := l.need("video_keys")
	vv := l.need("video_values")
	cx := l.need("context")
	mk := l.need("context_mask")
	vis := l.optional("visible_video")
	var pred *array
	for _, k := range predKeys() {
		if a.member(k) != nil {
			pred = l.need(k)
			break
		}
	}
	if l.err == nil && pred == nil && !inputsOnly {
		l.fail("no reference prediction (one of %s)", strings.Join(predKeys(), ", "))
	}
	var stepTs, stepLat, stepPred, loopInit, loopSig, loopPred, loopLat, loopAct *array
	if a.member("step_timesteps") != nil && !inputsOnly {
		stepTs, stepLat, stepPred = l.need("step_timesteps"), l.need("step_latents"), l.need("step_pred")
	}
	if a.member("loop_init_noise") != nil && !inputsOnly {
		loopInit, loopSig = l.need("loop_init_noise"), l.need("loop_sigmas")
		loopPred, loopLat, loopAct = l.need("loop_pred"), l.need("loop_latents"), l.need("loop_actions")
	}
	if l.err != nil {
		return nil, l.err
	}

	var n int64
	if lat != nil {
		shape := lat.header.shape
		if len(shape) < 2 || len(shape) > 3 || (len(shape) == 3 && shape[0] != 1) || slices.Contains(shape, 0) {
			return nil, l.errorf("latents_action has shape %v, want [1,S,a] or [S,a] with S, a > 0", shape)
		}
		c.ActionTokens, c.ActionDim = shape[len(shape)-2], shape[len(shape)-1]
		n = lat.header.count
	}
	if ts != nil && ts.header.count != 1 {
		return nil, l.errorf("timestep has %d elements, want 1", ts.header.count)
	}
	shape := vk.header.shape
	if len(shape) != 4 || shape[1] != 1 || slices.Contains(shape, 0) {
		return nil, l.errorf("video_keys has shape %v, want [layers,1,Sv,A] with every size > 0", shape)
	}
	c.Layers, c.VideoTokens, c.AttnWidth = shape[0], shape[2], shape[3]
	if !slices.Equal(shape, vv.header.shape) {
		return nil, l.errorf("video_values has shape %v, video_keys %v: they must match", vv.header.shape, shape)
	}
	shape = cx.header.shape
	if len(shape) != 3 || shape[0] != 1 || slices.Contains(shape, 0) {
		return nil, l.errorf("context has shape %v, want [1,L,T] with L, T > 0", shape)
	}
	c.ContextTokens, c.TextDim = shape[1], shape[2]
	if mk.header.count != int64(c.ContextTokens) {
		return nil, l.errorf("context_mask has shape %v, want [1,%d]", mk.header.shape, c.ContextTokens)
	}
	if vis != nil && vis.header.count != 1 {
		return nil, l.errorf("visible_video has %d elements, want 1", vis.header.count)
	}
	if pred != nil && lat == nil {
		return nil, l.errorf("reference prediction %q without latents_action", pred.key)
	}
	if pred != nil && pred.header.count != n {
		return nil, l.errorf("reference prediction %q has %d elements, latents %d", pred.key, pred.header.count, n)
	}
	if stepTs != nil {
		steps := stepTs.header.count
		if err := l.rows(stepLat, n, steps); err != nil {
			return nil, err
		}
		if err := l.rows(stepPred, n, steps); err != nil {
			return nil, err
		}
	}
	if loopInit != nil {
		steps := loopSig.header.count - 1
		if steps < 1 {
			return nil, l.errorf("loop_sigmas has %d values, want at least 2", loopSig.header.count)
		}
		for _, x := range []*array{loopInit, loopAct} {
			if err := l.rows(x, n, 1); err != nil {
				return nil, err
			}
		}
		for _, x := range []*array{loopPred, loopLat} {
			if err := l.rows(x, n, steps); err != nil {
				return nil, err
			}
		}
	}

	// The data, in the order of the checks above.
	if lat != nil {
		c.Latents = l.floats(lat)
	}
	if ts != nil {
		if v := l.floats(ts); v != nil {
			c.Timestep = v[0]
		}
	}
	c.Chunk.VideoKeys = l.floats(vk)
	c.Chunk.VideoValues = l.floats(vv)
	c.Chunk.Context = l.floats(cx)
	if mask := l.floats(mk); mask != nil {
		c.Chunk.ContextMask = make([]bool, len(mask))
		for i, m := range mask {
			c.Chunk.ContextMask[i] = m != 0
		}
	}
	if vis != nil {
		if v := l.floats(vis); v != nil {
			if v[0] != float32(math.Trunc(float64(v[0]))) || v[0] < 0 || v[0] > float32(c.VideoTokens) {
				l.fail("visible_video is %v, want a whole number of tokens in [0,%d]", v[0], c.VideoTokens)
			}
			c.Chunk.VisibleVideo = int(v[0])
		}
	}
	if pred != nil {
		c.Pred = l.floats(pred)
	}
	if stepTs != nil {
		c.StepTimesteps = l.floats(stepTs)
		c.StepLatents = split(l.floats(stepLat), int(n))
		c.StepPred = split(l.floats(stepPred), int(n))
	}
	if loopInit != nil {
		c.LoopInit = l.floats(loopInit)
		c.LoopSigmas = l.floats(loopSig)
		c.LoopPred = split(l.floats(loopPred), int(n))
		c.LoopLatents = split(l.floats(loopLat), int(n))
		c.LoopActions = l.floats(loopAct)
	}
	if l.err != nil {
		return nil, l.err
	}
	l.extras(c)
	if l.err != nil {
		return nil, l.err
	}
	return c, nil
}

// Dims is the contract the case was recorded for; the head split of the
// attention width is not in the file, so heads × head dim is given as
// 1 × AttnWidth.
func (c *Case) Dims() expert.Dims {
	return expert.Dims{Layers: c.Layers, Heads: 1, HeadDim: c.AttnWidth, VideoTokens: c.VideoTokens,
		ContextTokens: c.ContextTokens, TextDim: c.TextDim, ActionTokens: c.ActionTokens, ActionDim: c.ActionDim}
}

// Fits reports whether the case's tensors have the sizes of contract d; a
// case without latents (from LoadInputs) is checked on its inputs only.
func (c *Case) Fits(d expert.Dims) error {
	got := c.Dims()
	if c.ActionTokens == 0 {
		got.ActionTokens, got.ActionDim = d.ActionTokens, d.ActionDim
	}
	if got.Layers != d.Layers || got.VideoTokens != d.VideoTokens || c.AttnWidth != d.AttnWidth() ||
		got.ContextTokens != d.ContextTokens || got.TextDim != d.TextDim ||
		got.ActionTokens != d.ActionTokens || got.ActionDim != d.ActionDim {
		return fmt.Errorf("golden: %s holds %s, the backend expects %s", c.Name, got, d)
	}
	return nil
}

// loader reads the arrays of an archive for one case and keeps the first
// error.
type loader struct {
	ctx  context.Context
	a    *archive
	err  error
	used int64 // elements of the needed arrays
}

func (l *loader) errorf(format string, args ...any) error {
	return fmt.Errorf("golden: %s: "+format, append([]any{l.a.name}, args...)...)
}

func (l *loader) fail(format string, args ...any) {
	if l.err == nil {
		l.err = l.errorf(format, args...)
	}
}

// stopped records the cancellation of ctx, if it happened, before array
// key, and reports whether it did.
func (l *loader) stopped(key string) bool {
	if err := l.ctx.Err(); err != nil {
		if l.err == nil {
			l.err = fmt.Errorf("golden: %s: loading stopped before array %q: %w", l.a.name, key, err)
		}
		return true
	}
	return false
}

// need opens the header of array key, which must be present.
func (l *loader) need(key string) *array {
	if l.err != nil {
		return nil
	}
	f := l.a.member(key)
	if f == nil {
		l.fail("array %q is missing", key)
		return nil
	}
	x, err := l.a.open(l.ctx, key)
	if l.stopped(key) {
		return nil
	}
	if err != nil {
		l.fail("array %q (member %q) is present but unreadable: %v", key, f.Name, err)
		return nil
	}
	if err := fortran(x.header); err != nil {
		l.fail("array %q (member %q) %v", key, f.Name, err)
		return nil
	}
	l.used += x.header.count
	return x
}

// optional is need for an array that may be absent.
func (l *loader) optional(key string) *array {
	if l.a.member(key) == nil {
		return nil
	}
	return l.need(key)
}

// fortran refuses a Fortran-ordered array unless its layout is C order's
// (at most one dimension longer than 1).
func fortran(h *npyHeader) error {
	long := 0
	for _, d := range h.shape {
		if d > 1 {
			long++
		}
	}
	if h.fortran && long > 1 {
		return fmt.Errorf("is Fortran-ordered with shape %v; write it C-ordered", h.shape)
	}
	return nil
}

// rows checks that x holds count rows of n elements.
func (l *loader) rows(x *array, n, count int64) error {
	got := x.header.count
	if (count == 0 && got == 0) || (count > 0 && got%count == 0 && got/count == n) {
		return nil
	}
	if count == 1 {
		return l.errorf("array %q has shape %v, want %d elements", x.key, x.header.shape, n)
	}
	return l.errorf("array %q has shape %v, want %d rows of %d", x.key, x.header.shape, count, n)
}

// floats reads the data of x and checks that it is finite.
func (l *loader) floats(x *array) []float32 {
	if l.err != nil || l.stopped(x.key) {
		return nil
	}
	v, err := x.read(l.ctx)
	if l.stopped(x.key) {
		return nil
	}
	if err != nil {
		l.fail("array %q (member %q) is present but unreadable: %v", x.key, x.f.Name, err)
		return nil
	}
	if i := expert.FirstNonFinite(v); i >= 0 {
		l.fail("array %q element %d is %v", x.key, i, v[i])
		return nil
	}
	return v
}

// extras reads the arrays of the archive the case does not need into
// c.Extra, in archive order, while they hold no more elements in all than
// the needed arrays; the others are listed in c.Skipped with the reason.
func (l *loader) extras(c *Case) {
	skip := map[string]bool{}
	for _, k := range append(knownKeys(), predKeys()...) {
		skip[k] = true
	}
	budget := l.used
	for _, key := range l.a.order {
		if skip[key] {
			continue
		}
		if l.stopped(key) {
			return
		}
		x, err := l.a.open(l.ctx, key)
		if err == nil {
			err = fortran(x.header)
		}
		if err == nil && x.header.count > budget {
			err = fmt.Errorf("holds %d elements, more than the %d left for extras (at most as many as the arrays the case needs)",
				x.header.count, budget)
		}
		var v []float32
		if err == nil {
			v, err = x.read(l.ctx)
		}
		if l.stopped(key) {
			return
		}
		if err == nil {
			if i := expert.FirstNonFinite(v); i >= 0 {
				err = fmt.Errorf("element %d is %v", i, v[i])
			}
		}
		if err != nil {
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		budget -= x.header.count
		c.Extra[key] = v
	}
}

// split cuts v into rows of n elements (rows shares v).
func split(v []float32, n int) [][]float32 {
	if v == nil {
		return nil
	}
	if n == 0 {
		return [][]float32{}
	}
	out := make([][]float32, len(v)/n)
	for i := range out {
		out[i] = v[i*n : (i+1)*n : (i+1)*n]
	}
	return out
}
