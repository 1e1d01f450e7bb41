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
	"archive/zip"
	"bytes"
	"embed"
	"fmt"
	"io"

	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"codeberg.org/sbinet/npyio/npz"

	"github.com/fastwam/actionexpert/expert"
)

//go:embed tiny/*.npz tiny/*.safetensors tiny/config.json
var tiny embed.FS

//go:embed regression/metadata.yaml regression/*.mcap
var regression embed.FS

// Tiny is the embedded tiny golden set: case_all.npz (every video token
// visible), case_first4.npz (the first four visible), weights.safetensors
// (f32), weights_bf16.safetensors (bf16 under the checkpoint prefix),
// weights_f16.safetensors and config.json, all under the directory "tiny".
func Tiny() fs.FS { return tiny }

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

	// Other float arrays of the file by key (for example pred_noise_bf16).
	Extra map[string][]float32
}

// Load reads a golden .npz file from disk.
func Load(path string) (*Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	return Parse(path, b)
}

// LoadTiny reads one of the embedded tiny cases (see TinyCases).
func LoadTiny(name string) (*Case, error) {
	b, err := fs.ReadFile(tiny, name)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	return Parse(name, b)
}

// Parse reads a golden .npz image; name is used in messages.
func Parse(name string, b []byte) (*Case, error) {
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("golden: %s is not a readable .npz archive: %w", name, err)
	}
	if err := verifyZip(z); err != nil {
		return nil, fmt.Errorf("golden: %s is damaged: %w", name, err)
	}
	r, err := npz.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("golden: %s is not a readable .npz archive: %w", name, err)
	}
	defer r.Close()
	f := &file{r: r, name: name}
	c := &Case{Name: name, Extra: map[string][]float32{}}

	var shape []int
	c.Latents, shape = f.floats("latents_action")
	if f.err == nil && (len(shape) < 2 || len(shape) > 3 || (len(shape) == 3 && shape[0] != 1)) {
		f.fail("latents_action has shape %v, want [1,S,a]", shape)
	}
	if f.err == nil {
		c.ActionTokens, c.ActionDim = shape[len(shape)-2], shape[len(shape)-1]
	}
	ts, _ := f.floats("timestep")
	if f.err == nil && len(ts) != 1 {
		f.fail("timestep has %d elements, want 1", len(ts))
	}
	if f.err == nil {
		c.Timestep = ts[0]
	}
	c.Chunk.VideoKeys, shape = f.floats("video_keys")
	if f.err == nil && (len(shape) != 4 || shape[1] != 1) {
		f.fail("video_keys has shape %v, want [layers,1,Sv,A]", shape)
	}
	if f.err == nil {
		c.Layers, c.VideoTokens, c.AttnWidth = shape[0], shape[2], shape[3]
	}
	var vshape []int
	c.Chunk.VideoValues, vshape = f.floats("video_values")
	if f.err == nil && !slices.Equal(shape, vshape) {
		f.fail("video_values has shape %v, video_keys %v: they must match", vshape, shape)
	}
	c.Chunk.Context, shape = f.floats("context")
	if f.err == nil && (len(shape) != 3 || shape[0] != 1) {
		f.fail("context has shape %v, want [1,L,T]", shape)
	}
	if f.err == nil {
		c.ContextTokens, c.TextDim = shape[1], shape[2]
	}
	mask, shape := f.floats("context_mask")
	if f.err == nil && len(mask) != c.ContextTokens {
		f.fail("context_mask has shape %v, want [1,%d]", shape, c.ContextTokens)
	}
	c.Chunk.ContextMask = make([]bool, len(mask))
	for i, m := range mask {
		c.Chunk.ContextMask[i] = m != 0
	}
	if f.has("visible_video") {
		v, _ := f.floats("visible_video")
		if f.err == nil && len(v) != 1 {
			f.fail("visible_video has %d elements, want 1", len(v))
		}
		if f.err == nil {
			c.Chunk.VisibleVideo = int(v[0])
		}
	}
	for _, k := range predKeys() {
		if f.has(k) {
			c.Pred, _ = f.floats(k)
			break
		}
	}
	if f.err == nil && c.Pred == nil {
		f.fail("no reference prediction (one of %s)", strings.Join(predKeys(), ", "))
	}
	if f.err == nil && len(c.Pred) != len(c.Latents) {
		f.fail("reference prediction has %d elements, latents %d", len(c.Pred), len(c.Latents))
	}

	n := len(c.Latents)
	if f.has("step_timesteps") {
		c.StepTimesteps, _ = f.floats("step_timesteps")
		c.StepLatents = f.rows("step_latents", n, len(c.StepTimesteps))
		c.StepPred = f.rows("step_pred", n, len(c.StepTimesteps))
	}
	if f.has("loop_init_noise") {
		c.LoopInit = f.vector("loop_init_noise", n)
		c.LoopSigmas, _ = f.floats("loop_sigmas")
		steps := len(c.LoopSigmas) - 1
		if f.err == nil && steps < 1 {
			f.fail("loop_sigmas has %d values, want at least 2", len(c.LoopSigmas))
		}
		c.LoopPred = f.rows("loop_pred", n, steps)
		c.LoopLatents = f.rows("loop_latents", n, steps)
		c.LoopActions = f.vector("loop_actions", n)
	}
	known := map[string]bool{"latents_action": true, "timestep": true, "video_keys": true, "video_values": true,
		"context": true, "context_mask": true, "visible_video": true, "step_timesteps": true, "step_latents": true,
		"step_pred": true, "loop_init_noise": true, "loop_sigmas": true, "loop_pred": true, "loop_latents": true,
		"loop_actions": true}
	for _, k := range predKeys() {
		known[k] = true
	}
	for _, k := range r.Keys() {
		k = strings.TrimSuffix(k, ".npy")
		if !known[k] && f.err == nil {
			if v, _ := f.floats(k); v != nil {
				c.Extra[k] = v
			}
		}
	}
	if f.err != nil {
		return nil, f.err
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

// Fits reports whether the case's tensors have the sizes of contract d.
func (c *Case) Fits(d expert.Dims) error {
	got := c.Dims()
	if got.Layers != d.Layers || got.VideoTokens != d.VideoTokens || c.AttnWidth != d.AttnWidth() ||
		got.ContextTokens != d.ContextTokens || got.TextDim != d.TextDim ||
		got.ActionTokens != d.ActionTokens || got.ActionDim != d.ActionDim {
		return fmt.Errorf("golden: %s holds %s, the backend expects %s", c.Name, got, d)
	}
	return nil
}

// verifyZip reads every member of the archive to its end, which is where
// archive/zip checks the CRC: the npy reader stops after the last element
// and would not notice a damaged byte.
func verifyZip(z *zip.Reader) error {
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}

// file reads arrays from an npz archive and keeps the first error.
type file struct {
	r    *npz.Reader
	name string
	err  error
}

func (f *file) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("golden: %s: "+format, append([]any{f.name}, args...)...)
	}
}

func (f *file) has(key string) bool { return f.r.Header(f.member(key)) != nil }

// member is the archive member of array key: numpy.savez names it key.npy,
// other writers may store the bare key.
func (f *file) member(key string) string {
	for _, k := range f.r.Keys() {
		if k == key {
			return key
		}
	}
	return key + ".npy"
}

// floats reads the array key as float32, converting f8, bool and integer
// storage, and returns it with its shape.
func (f *file) floats(key string) ([]float32, []int) {
	if f.err != nil {
		return nil, nil
	}
	h := f.r.Header(f.member(key))
	if h == nil {
		f.fail("array %q is missing", key)
		return nil, nil
	}
	if h.Descr.Fortran {
		f.fail("array %q is Fortran-ordered; write it C-ordered", key)
		return nil, nil
	}
	shape := h.Descr.Shape
	n := 1
	for _, d := range shape {
		n *= d
	}
	var out []float32
	var err error
	switch strings.Trim(h.Descr.Type, "'\"") {
	case "<f4":
		v := make([]float32, n)
		err = f.r.Read(f.member(key), &v)
		out = v
	case "<f8":
		v := make([]float64, n)
		if err = f.r.Read(f.member(key), &v); err == nil {
			out = make([]float32, n)
			for i, x := range v {
				out[i] = float32(x)
			}
		}
	case "|b1":
		v := make([]bool, n)
		if err = f.r.Read(f.member(key), &v); err == nil {
			out = make([]float32, n)
			for i, x := range v {
				if x {
					out[i] = 1
				}
			}
		}
	case "<i8":
		v := make([]int64, n)
		if err = f.r.Read(f.member(key), &v); err == nil {
			out = make([]float32, n)
			for i, x := range v {
				out[i] = float32(x)
			}
		}
	case "<i4":
		v := make([]int32, n)
		if err = f.r.Read(f.member(key), &v); err == nil {
			out = make([]float32, n)
			for i, x := range v {
				out[i] = float32(x)
			}
		}
	default:
		f.fail("array %q has dtype %s, want float32, float64, bool or int", key, h.Descr.Type)
		return nil, nil
	}
	if err != nil {
		f.fail("array %q: %v", key, err)
		return nil, nil
	}
	if i := expert.FirstNonFinite(out); i >= 0 {
		f.fail("array %q element %d is %v", key, i, out[i])
		return nil, nil
	}
	return out, shape
}

// vector reads key and checks it has n elements.
func (f *file) vector(key string, n int) []float32 {
	v, shape := f.floats(key)
	if f.err == nil && len(v) != n {
		f.fail("array %q has shape %v, want %d elements", key, shape, n)
	}
	return v
}

// rows reads key as count rows of n elements.
func (f *file) rows(key string, n, count int) [][]float32 {
	v, shape := f.floats(key)
	if f.err == nil && len(v) != n*count {
		f.fail("array %q has shape %v, want %d rows of %d", key, shape, count, n)
	}
	if f.err != nil {
		return nil
	}
	out := make([][]float32, count)
	for i := range out {
		out[i] = v[i*n : (i+1)*n]
	}
	return out
}
