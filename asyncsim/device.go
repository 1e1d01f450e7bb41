package asyncsim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/graphs"
)

// This file is the device cycle model (issue 28, item 4): the latency of
// each stage of one observation-to-chunk cycle on the IQ-9075's NPU,
// estimated from first principles: the weight and activation bytes a
// graph streams, the FLOPs it computes (both counted from the models'
// configurations, as the specifications count them) and the board's
// effective streaming bandwidth and compute rates. A graph's latency is
// max(bytes/bandwidth, FLOPs/rate) plus a per-graph overhead.

// Precision is the storage of a graph's weights on the NPU (activations
// are 16-bit in every case: fp16, or a16 for the quantised ones).
type Precision int

// The precisions the model knows.
const (
	FP16 Precision = iota // 2 bytes a weight, the fp16 compute rate
	W8                    // 1 byte a weight (w8a16), the w8a16 compute rate
	W4                    // half a byte a weight (w4a16), the w8a16 rate (an assumption)
)

// Precisions lists the precisions in order.
func Precisions() []Precision { return []Precision{FP16, W8, W4} }

// String names the precision as the flags do.
func (p Precision) String() string {
	switch p {
	case FP16:
		return "fp16"
	case W8:
		return "w8"
	case W4:
		return "w4"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads fp16, w8 or w4.
func ParsePrecision(s string) (Precision, error) {
	for _, p := range Precisions() {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("asyncsim: precision %q; want fp16, w8 or w4", s)
}

// WeightBytes is the storage of n parameters at p. Per-channel or
// per-block quantisation scales are left out: at one fp16 scale per
// output channel of 1024 to 14336 inputs they add under 0.2 %.
func (p Precision) WeightBytes(n int64) int64 {
	switch p {
	case W8:
		return n
	case W4:
		return (n + 1) / 2
	}
	return 2 * n
}

// Board is what the model assumes of the device. DefaultBoard gives the
// figures and their sources.
type Board struct {
	// Bandwidth is the effective weight-streaming bandwidth of the NPU
	// from DRAM, bytes/s.
	Bandwidth float64
	// FP16Rate and W8Rate are the sustained matrix rates, FLOP/s, of an
	// fp16 graph and of a w8a16 graph (which W4 graphs are assumed to
	// share: the weights are widened to 8 bits before the multiply).
	FP16Rate, W8Rate float64
	// GraphOverhead is added to each graph execution: the host's
	// graphExecute call, the FastRPC round trip and the graph's start.
	GraphOverhead time.Duration
	// ActivationBytes is the size of one activation value read or
	// written through DRAM (2: fp16 or a16).
	ActivationBytes int
	// HandoffBandwidth is the host's copy rate, bytes/s, and
	// HandoffCopies the copies of the video K/V made, when the world
	// model and the expert run in two processes (the shared-memory
	// hand-off: the producer's write into the slot, the consumer's copy
	// into its NPU input buffers). HandoffFixed is added per hand-off.
	HandoffBandwidth float64
	HandoffCopies    int
	HandoffFixed     time.Duration
	// ContextLimit is the weight bytes of one context (a contiguous layer
	// range of the video DiT; the prefill chain has as many graphs as it
	// takes), ProcessLimit the context bytes one process may map.
	ContextLimit, ProcessLimit int64
	// Measured replace the model's latency of the stages they match (the
	// first that matches wins): figures measured on the board.
	Measured []Measured
}

// Measured is one stage's latency per run, measured on the board, for
// the deployments it matches.
type Measured struct {
	// Stage is StageVAE, StagePrefill, StageContext or StageStep.
	Stage string
	// Split, for StageStep: the step of a split deployment (true) or the
	// seed bundle's whole step (false). Ignored for the other stages.
	Split bool
	// Precision is the stage's weights; with AnyPrecision it matches
	// every precision.
	Precision    Precision
	AnyPrecision bool
	Latency      time.Duration
}

// String is the -measured flag's form: stage[:precision]=ms, the step of a
// split deployment named step-split.
func (m Measured) String() string {
	name := m.Stage
	switch {
	case m.Stage == StageContext:
		name = "context"
	case m.Stage == StageStep && m.Split:
		name = "step-split"
	case m.Stage == StageStep:
		name = "step"
	}
	if !m.AnyPrecision {
		name += ":" + m.Precision.String()
	}
	return fmt.Sprintf("%s=%g", name, m.Latency.Seconds()*1e3)
}

func (m Measured) matches(s *Stage, split bool) bool {
	return m.Stage == s.Name && (m.AnyPrecision || m.Precision == s.Precision) && (s.Name != StageStep || m.Split == split)
}

// Figures of DefaultBoard. Their sources are in docs/cycle.md.
const (
	// DefaultBandwidth is the low end of issue 28's 36-50 GB/s of
	// effective weight streaming.
	DefaultBandwidth = 36e9
	// DefaultFP16Rate and DefaultW8Rate are issue 28's ~3.3 TFLOP/s fp16
	// and ~10 TFLOP/s w8a16.
	DefaultFP16Rate = 3.3e12
	DefaultW8Rate   = 10e12
	// DefaultGraphOverhead is an assumption (no board measurement yet).
	DefaultGraphOverhead = time.Millisecond
	// DefaultHandoffBandwidth is an assumption: a host memcpy on the
	// A78 cores, not measured on the board.
	DefaultHandoffBandwidth = 10e9
	// DefaultContextLimit is the ~1.8 GB layer range of the public
	// bundles (issue 28), DefaultProcessLimit the budget tool's 6 GB
	// (issue 28 item 2; 6.5 GB was seen to map, 7.0 GB to fail).
	DefaultContextLimit = 1_800_000_000
	DefaultProcessLimit = 6_000_000_000
)

// DefaultBoard is the IQ-9075 as issue 28 describes it, with the
// assumptions named in the constants above.
func DefaultBoard() Board {
	return Board{Bandwidth: DefaultBandwidth, FP16Rate: DefaultFP16Rate, W8Rate: DefaultW8Rate,
		GraphOverhead: DefaultGraphOverhead, ActivationBytes: 2,
		HandoffBandwidth: DefaultHandoffBandwidth, HandoffCopies: 2,
		ContextLimit: DefaultContextLimit, ProcessLimit: DefaultProcessLimit}
}

// Validate refuses a board the model cannot use: a rate or bandwidth that
// is not a positive finite number, a negative overhead, a limit below
// one byte.
func (b Board) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"bandwidth", b.Bandwidth}, {"fp16 rate", b.FP16Rate}, {"w8 rate", b.W8Rate}, {"hand-off bandwidth", b.HandoffBandwidth}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("asyncsim: board %s %v; want a positive finite number", f.name, f.v)
		}
	}
	switch {
	case b.GraphOverhead < 0 || b.HandoffFixed < 0:
		return fmt.Errorf("asyncsim: board overheads %v and %v; want >= 0", b.GraphOverhead, b.HandoffFixed)
	case b.ActivationBytes < 1 || b.ActivationBytes > 8:
		return fmt.Errorf("asyncsim: board activation bytes %d; want 1 to 8", b.ActivationBytes)
	case b.HandoffCopies < 0 || b.HandoffCopies > 16:
		return fmt.Errorf("asyncsim: board hand-off copies %d; want 0 to 16", b.HandoffCopies)
	case b.ContextLimit < 1 || b.ProcessLimit < 1:
		return fmt.Errorf("asyncsim: board context limit %d and process limit %d bytes; want >= 1", b.ContextLimit, b.ProcessLimit)
	}
	for _, m := range b.Measured {
		switch m.Stage {
		case StageVAE, StagePrefill, StageContext, StageStep:
		default:
			return fmt.Errorf("asyncsim: measured stage %q; want %s, %s, %s or %s", m.Stage, StageVAE, StagePrefill, StageContext, StageStep)
		}
		if !m.AnyPrecision && (m.Precision < FP16 || m.Precision > W4) {
			return fmt.Errorf("asyncsim: measured %s: precision %v; want fp16, w8 or w4", m.Stage, m.Precision)
		}
		if m.Latency <= 0 || m.Latency > MaxCycle {
			return fmt.Errorf("asyncsim: measured %s: %v; want above 0 and at most %v", m.Stage, m.Latency, MaxCycle)
		}
	}
	return nil
}

func (b Board) rate(p Precision) float64 {
	if p == FP16 {
		return b.FP16Rate
	}
	return b.W8Rate
}

// VideoDiTConfig is the video expert (Wan2.2-TI2V-5B's DiT) as the prefill
// runs it (world-model.md §5, §6.2).
type VideoDiTConfig struct {
	// The transformer's sizes, as the training configuration names them.
	HiddenDim, FFNDim, NumHeads, HeadDim, NumLayers, TextDim, FreqDim int

	InChannels int // latent channels z
	Patch      int // spatial patch side (1 x Patch x Patch)
	// VideoTokens and ContextTokens are the prefill's sizes: 98 video
	// tokens of the first latent frame and 129 context rows.
	VideoTokens, ContextTokens int
}

// FullVideoDiT is the LIBERO video expert: hidden 3072, FFN 14336, 24x128
// heads, 30 layers, 98 video and 129 context tokens.
func FullVideoDiT() VideoDiTConfig {
	return VideoDiTConfig{HiddenDim: 3072, FFNDim: 14336, NumHeads: 24, HeadDim: 128, NumLayers: 30,
		TextDim: 4096, FreqDim: 256, InChannels: 48, Patch: 2, VideoTokens: 98, ContextTokens: 129}
}

// VAEConfig is the Wan2.2 VAE encoder at T = 1 (world-model.md §4): base
// channels d (dims d, d, 2d, 4d, 4d), latent channels z, input image size.
type VAEConfig struct {
	BaseDim, ZDim int
	Height, Width int // the image (two 224x224 cameras side by side)
}

// FullVAE is the LIBERO VAE encoder: d 160, z 48, a 224x448 image.
func FullVAE() VAEConfig { return VAEConfig{BaseDim: 160, ZDim: 48, Height: 224, Width: 448} }

// Model is what the cycle runs: the VAE, the video DiT's prefill and the
// action expert.
type Model struct {
	VAE    VAEConfig
	Video  VideoDiTConfig
	Expert cpu.Config
}

// FullModel is the released LIBERO policy.
func FullModel() Model { return Model{VAE: FullVAE(), Video: FullVideoDiT(), Expert: cpu.FullConfig()} }

// maxDim bounds every width of the model's configurations so that no
// count below overflows an int64 (the largest product is a few widths).
const maxDim = 1 << 16

// Validate refuses a configuration whose sizes are not positive or above
// 65536, or whose image is not a multiple of 32 (the VAE's and the
// patch's rule), or an expert configuration cpu.Config.Validate refuses.
func (m Model) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vae base_dim", m.VAE.BaseDim}, {"vae z_dim", m.VAE.ZDim}, {"vae height", m.VAE.Height}, {"vae width", m.VAE.Width},
		{"video hidden_dim", m.Video.HiddenDim}, {"video ffn_dim", m.Video.FFNDim}, {"video num_heads", m.Video.NumHeads},
		{"video attn_head_dim", m.Video.HeadDim}, {"video num_layers", m.Video.NumLayers}, {"video text_dim", m.Video.TextDim},
		{"video freq_dim", m.Video.FreqDim}, {"video in_channels", m.Video.InChannels}, {"video patch", m.Video.Patch},
		{"video tokens", m.Video.VideoTokens}, {"video context tokens", m.Video.ContextTokens},
	} {
		if f.v < 1 || f.v > maxDim {
			return fmt.Errorf("asyncsim: model %s %d; want 1 to %d", f.name, f.v, maxDim)
		}
	}
	if m.VAE.Height%32 != 0 || m.VAE.Width%32 != 0 {
		return fmt.Errorf("asyncsim: VAE image %dx%d; want multiples of 32", m.VAE.Height, m.VAE.Width)
	}
	if err := m.Expert.Validate(); err != nil {
		return fmt.Errorf("asyncsim: expert: %w", err)
	}
	return nil
}

// ExpertParams counts the action expert's parameters (action-step.md
// §1.3): all of them, and those the action_context graph takes out of the
// per-step graph (the text MLP, and every layer's cross-attention K and V
// projections and norm_k, §9).
type ExpertParams struct {
	Total   int64
	Context int64 // text_embedding + cross k, v, norm_k of every layer
	// CrossKV is the cross k, v and norm_k part of Context.
	CrossKV int64
}

// Step is the parameters the step reads when action_context is split
// off.
func (p ExpertParams) Step() int64 { return p.Total - p.Context }

// CountExpertParams counts the expert's parameters from its configuration.
func CountExpertParams(c cpu.Config) ExpertParams {
	D, F, A, T, f, a := int64(c.HiddenDim), int64(c.FFNDim), int64(c.NumHeads*c.HeadDim), int64(c.TextDim), int64(c.FreqDim), int64(c.ActionDim)
	text := T*D + D + D*D + D
	top := a*D + D + text + f*D + D + D*D + D + 6*D*D + 6*D + D*a + a
	attn := 3*(A*D+A) + D*A + D + 2*A
	layer := 6*D + 2*attn + 2*D + F*D + F + D*F + D
	cross := 2*(A*D+A) + A // k, v, norm_k
	N := int64(c.NumLayers)
	return ExpertParams{Total: top + N*layer, Context: text + N*cross, CrossKV: N * cross}
}

// ExpertFLOPs counts the expert's matrix FLOPs (2 per multiply-add;
// action-step.md §9): Step is one step with the per-chunk work done
// elsewhere (the 30 layers, the time MLP, the action encoder and head),
// Context the per-chunk work (the text MLP and the cross K, V
// projections). The seed bundle's action_step recomputes the per-chunk
// work every step: Step + Context.
type ExpertFLOPs struct{ Step, Context float64 }

// CountExpertFLOPs counts the expert's FLOPs from its configuration.
func CountExpertFLOPs(c cpu.Config) ExpertFLOPs {
	S, D, F, A := float64(c.ActionSteps), float64(c.HiddenDim), float64(c.FFNDim), float64(c.NumHeads*c.HeadDim)
	T, f, a, Sv, L := float64(c.TextDim), float64(c.FreqDim), float64(c.ActionDim), float64(c.VideoTokens), float64(c.ContextTokens)
	layer := 3*2*S*D*A + 2*2*S*(Sv+S)*A + 2*S*A*D + // self q, k, v; scores and AV over Sv+S keys; o
		2*S*D*A + 2*2*S*L*A + 2*S*A*D + // cross q; scores and AV over L keys; o
		2*2*S*D*F // FFN
	timeMLP := 2 * (f*D + D*D + D*6*D)
	io := 2*S*a*D + 2*S*D*a
	ctx := 2*L*(T*D+D*D) + float64(c.NumLayers)*2*2*L*D*A
	return ExpertFLOPs{Step: float64(c.NumLayers)*layer + timeMLP + io, Context: ctx}
}

// VideoParams counts the video DiT's parameters (world-model.md §6.2):
// the checkpoint's Total, and Prefill, those the trimmed prefill streams:
// without the head, the time MLP and projection (folded into constants
// at t = 0, §5.2) and the last layer's unused parts (§5.6).
type VideoParams struct{ Total, Prefill int64 }

// CountVideoParams counts the video DiT's parameters from its
// configuration.
func CountVideoParams(c VideoDiTConfig) VideoParams {
	D, F, A, T, f := int64(c.HiddenDim), int64(c.FFNDim), int64(c.NumHeads*c.HeadDim), int64(c.TextDim), int64(c.FreqDim)
	patchIn := int64(c.InChannels * c.Patch * c.Patch)
	patch := D*patchIn + D
	text := T*D + D + D*D + D
	timeMLP := f*D + D + D*D + D + 6*D*D + 6*D
	head := patchIn*D + patchIn + 2*D
	attn := 3*(A*D+A) + D*A + D + 2*A
	layer := 6*D + 2*attn + 2*D + F*D + F + D*F + D
	last := 6*D + 2*(A*D+A) + A // modulation, self k, v, norm_k
	N := int64(c.NumLayers)
	total := patch + text + timeMLP + head + N*layer
	return VideoParams{Total: total, Prefill: patch + text + (N-1)*layer + last}
}

// VideoPrefillFLOPs counts the trimmed prefill's matrix FLOPs: the patch
// embedding, the video text MLP, N-1 full layers over the video tokens and
// the last layer's K and V projections.
func VideoPrefillFLOPs(c VideoDiTConfig) float64 {
	n, L, D, F, A, T := float64(c.VideoTokens), float64(c.ContextTokens), float64(c.HiddenDim), float64(c.FFNDim), float64(c.NumHeads*c.HeadDim), float64(c.TextDim)
	layer := 3*2*n*D*A + 2*2*n*n*A + 2*n*A*D + // self q, k, v; scores and AV; o
		2*n*D*A + 2*2*L*D*A + 2*2*n*L*A + 2*n*A*D + // cross q; k, v over the context; scores and AV; o
		2*2*n*D*F // FFN
	patch := 2 * n * float64(c.InChannels*c.Patch*c.Patch) * D
	text := 2 * L * (T*D + D*D)
	return patch + text + float64(c.NumLayers-1)*layer + 2*2*n*D*A
}

// VAEParams counts the values vae_encoder streams on the device: those of
// the rank-4 graph at T = 1 that `fastwam graphs plan` sizes
// (graphs.VAETensors: the last temporal tap of every 3x3x3 kernel, no
// time_conv, conv1's first ZDim rows, and the graph's constant tables),
// 54,291,936 at d = 160 (docs/graphs.md). One function counts it for both.
func VAEParams(c VAEConfig) int64 { return graphs.VAETensors(c.graph()).Params() }

// graph is c as package graphs spells it.
func (c VAEConfig) graph() graphs.VAEConfig {
	return graphs.VAEConfig{Dim: c.BaseDim, ZDim: c.ZDim, ImageH: c.Height, ImageW: c.Width}
}

// VAEFLOPs counts one encode's useful FLOPs at T = 1 (world-model.md
// §4.10: the last temporal tap only, 2 per multiply-add).
func VAEFLOPs(c VAEConfig) float64 {
	d, z := float64(c.BaseDim), float64(c.ZDim)
	dims := [5]float64{d, d, 2 * d, 4 * d, 4 * d}
	px := float64(c.Height/2) * float64(c.Width/2)
	conv := func(in, out, k, px float64) float64 { return 2 * in * out * k * k * px }
	res := func(in, out, px float64) float64 {
		f := conv(in, out, 3, px) + conv(out, out, 3, px)
		if in != out {
			f += conv(in, out, 1, px)
		}
		return f
	}
	f := conv(12, d, 3, px)
	for s := range 4 {
		f += res(dims[s], dims[s+1], px) + res(dims[s+1], dims[s+1], px)
		if s != 3 {
			px /= 4
			f += conv(dims[s+1], dims[s+1], 3, px)
		}
	}
	c4 := dims[4]
	f += 2*res(c4, c4, px) + conv(c4, 3*c4, 1, px) + 2*2*px*px*c4 + conv(c4, c4, 1, px)
	return f + conv(c4, 2*z, 3, px) + conv(2*z, z, 1, px)
}

// Deployment is one configuration of the cycle on the board.
type Deployment struct {
	VAE, WorldModel, Expert Precision // the VAE's, the video DiT's and the expert's weights
	Steps                   int       // denoising steps per chunk
	// Split runs the per-chunk work in an action_context graph once per
	// chunk; without it the step graph recomputes it every step (the
	// seed bundle's action_step).
	Split bool
	// Processes is 1 (world model and expert in one process) or 2 (the
	// shared-memory hand-off between them).
	Processes int
}

// String is a short name: "expert fp16, 10 steps, split, 1 process".
func (d Deployment) String() string {
	split := "no split"
	if d.Split {
		split = "split"
	}
	return fmt.Sprintf("vae %v, wm %v, expert %v, %d steps, %s, %d process(es)", d.VAE, d.WorldModel, d.Expert, d.Steps, split, d.Processes)
}

// MaxSteps bounds Deployment.Steps.
const MaxSteps = 1000

func (d Deployment) validate() error {
	for _, p := range []Precision{d.VAE, d.WorldModel, d.Expert} {
		if p < FP16 || p > W4 {
			return fmt.Errorf("asyncsim: deployment precision %v; want fp16, w8 or w4", p)
		}
	}
	if d.Steps < 1 || d.Steps > MaxSteps {
		return fmt.Errorf("asyncsim: deployment %d steps; want 1 to %d", d.Steps, MaxSteps)
	}
	if d.Processes != 1 && d.Processes != 2 {
		return fmt.Errorf("asyncsim: deployment %d processes; want 1 or 2", d.Processes)
	}
	return nil
}

// Stage is one graph of the cycle (or a chain of them) and its estimate.
type Stage struct {
	Name      string
	Precision Precision
	Params    int64   // weights streamed per run
	Weights   int64   // their bytes
	Acts      int64   // activation bytes read or written through DRAM per run
	FLOPs     float64 // per run
	Graphs    int     // graph executions per run (a prefill chain's contexts)
	Runs      int     // runs per cycle
	// Latency is one run's: max((Weights+Acts)/bandwidth, FLOPs/rate)
	// plus Graphs overheads. ComputeBound says which term won. Measured
	// says that a Board.Measured figure replaced the estimate.
	Latency      time.Duration
	ComputeBound bool
	Measured     bool
}

// Total is the stage's time per cycle.
func (s *Stage) Total() time.Duration { return time.Duration(s.Runs) * s.Latency }

// Cycle is a deployment's estimate: its stages, the hand-off, the total
// from an observation to its chunk, and the weights each process maps.
type Cycle struct {
	Deployment Deployment
	Stages     []Stage // vae, prefill, [action_context], action_step
	Handoff    time.Duration
	Total      time.Duration
	// ProcessBytes are the weight bytes of each process's contexts; Fits
	// says whether every one is within the board's ProcessLimit.
	ProcessBytes []int64
	Fits         bool
}

// Stage returns the stage named name, or nil.
func (c *Cycle) Stage(name string) *Stage {
	for i := range c.Stages {
		if c.Stages[i].Name == name {
			return &c.Stages[i]
		}
	}
	return nil
}

// The stages' names.
const (
	StageVAE     = "vae"
	StagePrefill = "prefill"
	StageContext = "action_context"
	StageStep    = "action_step"
)

// MaxCycle bounds a cycle's estimate: a longer one is refused (and no
// duration overflows).
const MaxCycle = 24 * time.Hour

// latency fills s.Latency from the board; an error is a run longer than
// MaxCycle.
func (b Board) latency(s *Stage) error {
	stream := float64(s.Weights+s.Acts) / b.Bandwidth
	compute := s.FLOPs / b.rate(s.Precision)
	s.ComputeBound = compute > stream
	sec := max(stream, compute) + float64(s.Graphs)*b.GraphOverhead.Seconds()
	if !(sec <= MaxCycle.Seconds()) {
		return fmt.Errorf("asyncsim: %s takes %.3g s a run; want at most %v (check the board's rates and limits)", s.Name, sec, MaxCycle)
	}
	s.Latency = time.Duration(math.Round(sec * 1e9))
	return nil
}

// Estimate computes deployment d's cycle for model m on board b. An error
// is a board, model or deployment the model refuses.
func (b Board) Estimate(m Model, d Deployment) (Cycle, error) {
	if err := b.Validate(); err != nil {
		return Cycle{}, err
	}
	if err := m.Validate(); err != nil {
		return Cycle{}, err
	}
	if err := d.validate(); err != nil {
		return Cycle{}, err
	}
	ab := int64(b.ActivationBytes)
	e, v := m.Expert, m.Video
	eA := int64(e.NumHeads * e.HeadDim)
	vA := int64(v.NumHeads * v.HeadDim)
	// The video K/V the prefill writes and each step reads.
	kv := int64(e.NumLayers) * 2 * int64(e.VideoTokens) * eA * ab
	ctxIn := int64(e.ContextTokens) * int64(e.TextDim) * ab
	crossKV := int64(e.NumLayers) * 2 * int64(e.ContextTokens) * eA * ab

	vae := Stage{Name: StageVAE, Precision: d.VAE, Params: VAEParams(m.VAE), FLOPs: VAEFLOPs(m.VAE), Graphs: 1, Runs: 1,
		Acts: int64(3*m.VAE.Height*m.VAE.Width)*ab + int64(m.VAE.ZDim*(m.VAE.Height/16)*(m.VAE.Width/16))*ab}
	vp := CountVideoParams(v).Prefill
	prefill := Stage{Name: StagePrefill, Precision: d.WorldModel, Params: vp, FLOPs: VideoPrefillFLOPs(v), Runs: 1,
		Acts: kv + ctxIn + int64(v.VideoTokens)*vA*ab}
	ep := CountExpertParams(e)
	ef := CountExpertFLOPs(e)
	step := Stage{Name: StageStep, Precision: d.Expert, Graphs: 1, Runs: d.Steps}
	stages := []Stage{vae, prefill}
	if d.Split {
		stages = append(stages, Stage{Name: StageContext, Precision: d.Expert, Params: ep.Context, FLOPs: ef.Context,
			Acts: ctxIn + crossKV, Graphs: 1, Runs: 1})
		step.Params, step.FLOPs, step.Acts = ep.Step(), ef.Step, kv+crossKV
	} else {
		step.Params, step.FLOPs, step.Acts = ep.Total, ef.Step+ef.Context, kv+ctxIn
	}
	stages = append(stages, step)
	c := Cycle{Deployment: d}
	for i := range stages {
		s := &stages[i]
		s.Weights = s.Precision.WeightBytes(s.Params)
		if s.Name == StagePrefill {
			s.Graphs = int((s.Weights + b.ContextLimit - 1) / b.ContextLimit)
		}
		if err := b.latency(s); err != nil {
			return Cycle{}, err
		}
		for _, me := range b.Measured {
			if me.matches(s, d.Split) {
				s.Latency, s.Measured = me.Latency, true
				break
			}
		}
		c.Total += s.Total()
		if c.Total > MaxCycle {
			return Cycle{}, fmt.Errorf("asyncsim: %v: a cycle of more than %v; want at most that", d, MaxCycle)
		}
	}
	c.Stages = stages
	wm := stages[0].Weights + stages[1].Weights
	ex := d.Expert.WeightBytes(ep.Total)
	if d.Processes == 2 {
		sec := b.HandoffFixed.Seconds() + float64(int64(b.HandoffCopies)*kv)/b.HandoffBandwidth
		if !(sec <= MaxCycle.Seconds()) {
			return Cycle{}, fmt.Errorf("asyncsim: the hand-off takes %.3g s; want at most %v", sec, MaxCycle)
		}
		c.Handoff = time.Duration(math.Round(sec * 1e9))
		c.ProcessBytes = []int64{wm, ex}
	} else {
		c.ProcessBytes = []int64{wm + ex}
	}
	if c.Total += c.Handoff; c.Total > MaxCycle {
		return Cycle{}, fmt.Errorf("asyncsim: %v: a cycle of more than %v; want at most that", d, MaxCycle)
	}
	c.Fits = true
	for _, pb := range c.ProcessBytes {
		c.Fits = c.Fits && pb <= b.ProcessLimit
	}
	return c, nil
}

// Grid lists the deployments of every combination of the given choices,
// in order (expert precision outermost, then steps, split, processes),
// with the VAE at vae and the video DiT at wm.
func Grid(vae, wm Precision, experts []Precision, steps []int, splits []bool, processes []int) []Deployment {
	var ds []Deployment
	for _, e := range experts {
		for _, n := range steps {
			for _, sp := range splits {
				for _, p := range processes {
					ds = append(ds, Deployment{VAE: vae, WorldModel: wm, Expert: e, Steps: n, Split: sp, Processes: p})
				}
			}
		}
	}
	return ds
}

// errNoDeployments is returned by RunCycles without deployments.
var errNoDeployments = errors.New("asyncsim: no deployments to estimate")

// MaxMeasured bounds the figures ParseMeasured reads.
const MaxMeasured = 32

// ParseMeasured reads a list of measured stage latencies,
// "stage[:precision]=ms,...": stage vae, prefill, context (action_context),
// step (the seed bundle's whole step) or step-split (the step of a split
// deployment); precision fp16, w8 or w4, or left out for every precision;
// ms a finite number above 0 and at most MaxCycle. "" is none.
func ParseMeasured(s string) ([]Measured, error) {
	if s == "" {
		return nil, nil
	}
	items := strings.Split(s, ",")
	if len(items) > MaxMeasured {
		return nil, fmt.Errorf("asyncsim: %d measured figures; want at most %d", len(items), MaxMeasured)
	}
	var out []Measured
	for _, it := range items {
		key, val, ok := strings.Cut(strings.TrimSpace(it), "=")
		if !ok {
			return nil, fmt.Errorf("asyncsim: measured %q: want stage[:precision]=ms", it)
		}
		name, prec, hasPrec := strings.Cut(key, ":")
		m := Measured{AnyPrecision: !hasPrec}
		switch name {
		case "vae":
			m.Stage = StageVAE
		case "prefill":
			m.Stage = StagePrefill
		case "context":
			m.Stage = StageContext
		case "step":
			m.Stage = StageStep
		case "step-split":
			m.Stage, m.Split = StageStep, true
		default:
			return nil, fmt.Errorf("asyncsim: measured %q: stage %q; want vae, prefill, context, step or step-split", it, name)
		}
		if hasPrec {
			p, err := ParsePrecision(prec)
			if err != nil {
				return nil, fmt.Errorf("asyncsim: measured %q: %w", it, err)
			}
			m.Precision = p
		}
		ms, err := strconv.ParseFloat(val, 64)
		if err != nil || !(ms > 0) || ms > MaxCycle.Seconds()*1e3 {
			return nil, fmt.Errorf("asyncsim: measured %q: %q ms; want a number above 0 and at most %v", it, val, MaxCycle)
		}
		m.Latency = time.Duration(math.Round(ms * 1e6))
		if m.Latency <= 0 {
			return nil, fmt.Errorf("asyncsim: measured %q: %q ms is below a nanosecond; want more", it, val)
		}
		out = append(out, m)
	}
	return out, nil
}
