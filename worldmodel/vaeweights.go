package worldmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/fastwam/actionexpert/safetensors"
)

// LatentChannels is z, the Wan2.2 VAE's latent channels (spec §0).
const LatentChannels = 48

// VAEWidth is the released VAE's base width d (spec §0); tests use a
// smaller one (spec §9).
const VAEWidth = 160

// MaxVAEWidth bounds the base width d a weight set may declare.
const MaxVAEWidth = 1024

// vaeLatentMean and vaeLatentStd are the latent normalisation constants
// hard-coded in upstream's WanVideoVAE38 (spec §4.9; not in the weight file).
// Only read.
var (
	vaeLatentMean = [LatentChannels]float32{
		-0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557,
		-0.1382, 0.0542, 0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825,
		-0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
		-0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230,
		-0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
		0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667}
	vaeLatentStd = [LatentChannels]float32{
		0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013,
		0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978,
		0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
		0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093,
		0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
		0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744}
)

// Conv is one 2-D convolution of the encoder at T = 1: the kernel W
// [Out, In, K, K] row-major (K = 3, or 1 for a 1×1 convolution) and the
// bias B [Out].
type Conv struct {
	Out, In, K int
	W, B       []float32
}

// ResBlock is one ResidualBlock (spec §4.3): RMSc gains, the two 3×3
// convolutions (the last temporal tap of their CausalConv3d) and, when the
// width changes, the 1×1 shortcut.
type ResBlock struct {
	Gamma0   []float32 // residual.0.gamma [In]
	Conv2    Conv      // residual.2, In → Out
	Gamma3   []float32 // residual.3.gamma [Out]
	Conv6    Conv      // residual.6, Out → Out
	Shortcut *Conv     // shortcut (1×1), nil when In == Out
}

// VAEStage is one Down_ResidualBlock (spec §4.6): two residual blocks and,
// in stages 0..2, the stride-2 down convolution (resample.1).
type VAEStage struct {
	Res  [2]ResBlock
	Down *Conv // nil in stage 3
}

// VAEWeights are the Wan2.2 VAE encoder's parameters used at T = 1 (spec
// §6.1), every 3×3×3 kernel reduced to its last temporal tap and every
// 1×1×1 one to a matrix. Dim is the base width d: the stages run at
// d, 2d, 4d, 4d channels.
type VAEWeights struct {
	Dim       int
	Conv1     Conv // encoder.conv1: 12 → d, 3×3
	Stages    [4]VAEStage
	Middle0   ResBlock
	AttnGamma []float32 // middle.1.norm.gamma [4d]
	QKV       Conv      // middle.1.to_qkv: 4d → 12d, 1×1
	Proj      Conv      // middle.1.proj: 4d → 4d, 1×1
	Middle2   ResBlock
	HeadGamma []float32 // head.0.gamma [4d]
	Head      Conv      // head.2: 4d → 96, 3×3
	Out       Conv      // conv1 rows 0..47 (the mean): 96 → 48, 1×1
}

// vaeDims are the channel counts d, d, 2d, 4d, 4d of spec §4.6.
func vaeDims(d int) [5]int { return [5]int{d, d, 2 * d, 4 * d, 4 * d} }

// TensorSource gives a checkpoint tensor by name: its shape and its values
// as float32. A missing tensor is an error wrapping ErrNoTensor.
type TensorSource func(name string) (shape []int, data []float32, err error)

// ErrNoTensor is wrapped by a TensorSource's error for a name it does not
// hold.
var ErrNoTensor = errors.New("no such tensor")

// NewVAEWeights reads the encoder's tensors by their spec §6.1 names, in
// their checkpoint shapes, from src. The base width d is read from
// encoder.conv1.weight; every other tensor's shape must follow from it.
// The time_conv, decoder and conv2 tensors are not read. Errors name the
// tensor, the shape found and the one expected, or the first non-finite
// value.
func NewVAEWeights(src TensorSource) (*VAEWeights, error) {
	shape, _, err := src("encoder.conv1.weight")
	if err != nil {
		return nil, fmt.Errorf("worldmodel: VAE weights: %w", err)
	}
	if len(shape) != 5 || shape[0] < 1 || shape[0] > MaxVAEWidth {
		return nil, fmt.Errorf("worldmodel: VAE weights: encoder.conv1.weight has shape %v, want [d, 12, 3, 3, 3] with d in 1..%d", shape, MaxVAEWidth)
	}
	d := shape[0]
	r := vaeReader{src: src}
	w := &VAEWeights{Dim: d}
	dims := vaeDims(d)
	w.Conv1 = r.conv3("encoder.conv1", 12, d)
	for s := range 4 {
		p := fmt.Sprintf("encoder.downsamples.%d.downsamples", s)
		w.Stages[s].Res[0] = r.res(p+".0", dims[s], dims[s+1])
		w.Stages[s].Res[1] = r.res(p+".1", dims[s+1], dims[s+1])
		if s != 3 {
			c := r.conv(p+".2.resample.1", dims[s+1], dims[s+1], 3, []int{dims[s+1], dims[s+1], 3, 3}, -1)
			w.Stages[s].Down = &c
		}
	}
	c := dims[4]
	w.Middle0 = r.res("encoder.middle.0", c, c)
	w.AttnGamma = r.gamma("encoder.middle.1.norm.gamma", []int{c, 1, 1})
	w.QKV = r.conv("encoder.middle.1.to_qkv", c, 3*c, 1, []int{3 * c, c, 1, 1}, -1)
	w.Proj = r.conv("encoder.middle.1.proj", c, c, 1, []int{c, c, 1, 1}, -1)
	w.Middle2 = r.res("encoder.middle.2", c, c)
	w.HeadGamma = r.gamma("encoder.head.0.gamma", []int{c, 1, 1, 1})
	w.Head = r.conv3("encoder.head.2", c, 2*LatentChannels)
	out := r.conv("conv1", 2*LatentChannels, 2*LatentChannels, 1, []int{2 * LatentChannels, 2 * LatentChannels, 1, 1, 1}, 0)
	if r.err != nil {
		return nil, fmt.Errorf("worldmodel: VAE weights (d = %d): %w", d, r.err)
	}
	// Only the mean's rows are used (spec §4.8).
	w.Out = Conv{Out: LatentChannels, In: out.In, K: 1, W: out.W[:LatentChannels*out.In], B: out.B[:LatentChannels]}
	return w, nil
}

// LoadVAEWeights reads the encoder's tensors from a safetensors file in the
// released VAE's layout (keys without prefix, spec §6.1; F32, F16 or BF16,
// upcast exactly), through the project's strict reader.
func LoadVAEWeights(path string) (*VAEWeights, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: VAE weights: %w", err)
	}
	defer f.Close()
	w, err := NewVAEWeights(func(name string) ([]int, []float32, error) {
		info, ok := f.Info(name)
		if !ok {
			return nil, nil, fmt.Errorf("%s: %q: %w", path, name, ErrNoTensor)
		}
		data, err := f.Float32(name, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return info.Shape, data, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return w, nil
}

// vaeReader reads tensors from a TensorSource, keeping the first error.
type vaeReader struct {
	src TensorSource
	err error
}

// get returns the named tensor's values after checking its shape and that
// every value is finite.
func (r *vaeReader) get(name string, want []int) []float32 {
	if r.err != nil {
		return nil
	}
	shape, data, err := r.src(name)
	if err != nil {
		r.err = err
		return nil
	}
	n := 1
	for _, v := range want {
		n *= v
	}
	if !slices.Equal(shape, want) || len(data) != n {
		r.err = fmt.Errorf("%s has shape %v (%d values), want %v", name, shape, len(data), want)
		return nil
	}
	for i, v := range data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			r.err = fmt.Errorf("%s: value %d is %v, want a finite number", name, i, v)
			return nil
		}
	}
	return data
}

// gamma reads an RMSc gain stored as [C, 1, 1(, 1)].
func (r *vaeReader) gamma(name string, want []int) []float32 { return r.get(name, want) }

// conv reads prefix.weight (shape want) and prefix.bias [out] as a k×k
// convolution in → out. tap ≥ 0 selects that temporal tap of a rank-5
// kernel [out, in, kt, k, k]; tap < 0 means the kernel is already
// [out, in, k, k].
func (r *vaeReader) conv(prefix string, in, out, k int, want []int, tap int) Conv {
	w := r.get(prefix+".weight", want)
	b := r.get(prefix+".bias", []int{out})
	if r.err != nil {
		return Conv{}
	}
	if tap >= 0 {
		kt, kk := want[2], k*k
		t := make([]float32, out*in*kk)
		for oi := range out * in {
			copy(t[oi*kk:(oi+1)*kk], w[(oi*kt+tap)*kk:(oi*kt+tap+1)*kk])
		}
		w = t
	}
	return Conv{Out: out, In: in, K: k, W: w, B: b}
}

// conv3 reads a CausalConv3d with a 3×3×3 kernel as the 3×3 convolution of
// its last temporal tap (spec §4.1: at T = 1 the frame meets tap 2, the two
// front zero frames the others).
func (r *vaeReader) conv3(prefix string, in, out int) Conv {
	return r.conv(prefix, in, out, 3, []int{out, in, 3, 3, 3}, 2)
}

// res reads one ResidualBlock in → out.
func (r *vaeReader) res(prefix string, in, out int) ResBlock {
	b := ResBlock{
		Gamma0: r.gamma(prefix+".residual.0.gamma", []int{in, 1, 1, 1}),
		Conv2:  r.conv3(prefix+".residual.2", in, out),
		Gamma3: r.gamma(prefix+".residual.3.gamma", []int{out, 1, 1, 1}),
		Conv6:  r.conv3(prefix+".residual.6", out, out),
	}
	if in != out {
		s := r.conv(prefix+".shortcut", in, out, 1, []int{out, in, 1, 1, 1}, 0)
		b.Shortcut = &s
	}
	return b
}

// Validate checks that every kernel, bias and gain of w has the length its
// place in the encoder of base width w.Dim requires (as NewVAEWeights
// makes them), so that a hand-built VAEWeights cannot make the encoder
// index outside a slice. Errors name the tensor by its spec §6.1 key.
func (w *VAEWeights) Validate() error {
	if w == nil {
		return errors.New("worldmodel: VAE weights: none")
	}
	if w.Dim < 1 || w.Dim > MaxVAEWidth {
		return fmt.Errorf("worldmodel: VAE weights: base width d = %d, want 1..%d", w.Dim, MaxVAEWidth)
	}
	var err error
	conv := func(name string, c *Conv, in, out, k int) {
		switch {
		case err != nil:
		case c == nil:
			err = fmt.Errorf("%s: missing", name)
		case c.In != in || c.Out != out || c.K != k:
			err = fmt.Errorf("%s is %d → %d, %d × %d; want %d → %d, %d × %d", name, c.In, c.Out, c.K, c.K, in, out, k, k)
		case len(c.W) != out*in*k*k || len(c.B) != out:
			err = fmt.Errorf("%s has %d weights and %d biases, want %d and %d", name, len(c.W), len(c.B), out*in*k*k, out)
		}
	}
	gain := func(name string, g []float32, n int) {
		if err == nil && len(g) != n {
			err = fmt.Errorf("%s has %d values, want %d", name, len(g), n)
		}
	}
	res := func(p string, r *ResBlock, in, out int) {
		gain(p+".residual.0.gamma", r.Gamma0, in)
		conv(p+".residual.2", &r.Conv2, in, out, 3)
		gain(p+".residual.3.gamma", r.Gamma3, out)
		conv(p+".residual.6", &r.Conv6, out, out, 3)
		if in != out {
			conv(p+".shortcut", r.Shortcut, in, out, 1)
		} else if err == nil && r.Shortcut != nil {
			err = fmt.Errorf("%s.shortcut: present, but the block keeps its width %d", p, in)
		}
	}
	dims := vaeDims(w.Dim)
	conv("encoder.conv1", &w.Conv1, 12, w.Dim, 3)
	for s := range w.Stages {
		p := fmt.Sprintf("encoder.downsamples.%d.downsamples", s)
		res(p+".0", &w.Stages[s].Res[0], dims[s], dims[s+1])
		res(p+".1", &w.Stages[s].Res[1], dims[s+1], dims[s+1])
		if s != 3 {
			conv(p+".2.resample.1", w.Stages[s].Down, dims[s+1], dims[s+1], 3)
		} else if err == nil && w.Stages[s].Down != nil {
			err = fmt.Errorf("%s.2: stage 3 has no down convolution", p)
		}
	}
	c := dims[4]
	res("encoder.middle.0", &w.Middle0, c, c)
	gain("encoder.middle.1.norm.gamma", w.AttnGamma, c)
	conv("encoder.middle.1.to_qkv", &w.QKV, c, 3*c, 1)
	conv("encoder.middle.1.proj", &w.Proj, c, c, 1)
	res("encoder.middle.2", &w.Middle2, c, c)
	gain("encoder.head.0.gamma", w.HeadGamma, c)
	conv("encoder.head.2", &w.Head, c, 2*LatentChannels, 3)
	conv("conv1 (rows 0..47)", &w.Out, 2*LatentChannels, LatentChannels, 1)
	if err != nil {
		return fmt.Errorf("worldmodel: VAE weights (d = %d): %w", w.Dim, err)
	}
	return nil
}
