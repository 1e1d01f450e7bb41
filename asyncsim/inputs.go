package asyncsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
)

// Pair is one observation's inputs to the node: a VideoKVCache's tensors
// and a TextContext's, decoded to float32.
type Pair struct {
	KVShape      []uint32 // keys and values, [layers, 1, video tokens, attention width]
	Keys, Values []float32
	VisibleVideo uint32
	ContextShape []uint32 // [1, context tokens, text width]
	Context      []float32
	Mask         []bool
}

// maxRegressionPairs bounds the pairs LoadRegression keeps: the embedded
// bag has 8; a simulation cycles through them, so more add nothing.
const maxRegressionPairs = 1024

// LoadRegression reads the input pairs of the embedded regression bag
// (golden/regression), in stamp order: the VideoKVCache and TextContext
// messages with the same stamp. topics are the node's input topics as the
// bag names them (fully qualified).
func LoadRegression(ctx context.Context, kvTopic, ctxTopic string) ([]Pair, error) {
	tmp, err := os.MkdirTemp("", "fastwam-asyncsim-*")
	if err != nil {
		return nil, fmt.Errorf("asyncsim: embedded regression bag: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir, err := golden.ExtractRegressionBag(tmp)
	if err != nil {
		return nil, fmt.Errorf("asyncsim: %w", err)
	}
	return ReadPairs(ctx, dir, kvTopic, ctxTopic)
}

// ReadPairs reads the input pairs of the bag at path (a folder or an
// .mcap file): the VideoKVCache on kvTopic and the TextContext on ctxTopic
// with the same stamp, in the order the caches come. Every message is
// decoded and checked (shapes against the bytes present, finite values)
// before it is kept; an input without a partner is skipped.
func ReadPairs(ctx context.Context, path, kvTopic, ctxTopic string) ([]Pair, error) {
	r, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: []string{kvTopic, ctxTopic}})
	if err != nil {
		return nil, fmt.Errorf("asyncsim: open bag: %w", err)
	}
	defer r.Close()
	type half struct {
		kv  *msgs.VideoKVCache
		ctx *msgs.TextContext
	}
	byStamp := map[msgs.Time]*half{}
	var pairs []Pair
	for m, err := range r.Messages(ctx) {
		if err != nil {
			return nil, fmt.Errorf("asyncsim: read bag %s: %w", path, err)
		}
		var stamp msgs.Time
		h := &half{}
		switch m.Topic {
		case kvTopic:
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err != nil {
				return nil, fmt.Errorf("asyncsim: bag %s: %s at %s: %w", path, m.Topic, m.LogTime.UTC().Format(time.RFC3339Nano), err)
			}
			stamp, h.kv = kv.Header.Stamp, &kv
		case ctxTopic:
			var c msgs.TextContext
			if err := c.UnmarshalCDR(m.Data); err != nil {
				return nil, fmt.Errorf("asyncsim: bag %s: %s at %s: %w", path, m.Topic, m.LogTime.UTC().Format(time.RFC3339Nano), err)
			}
			stamp, h.ctx = c.Header.Stamp, &c
		default:
			continue
		}
		old, ok := byStamp[stamp]
		if !ok {
			if len(byStamp) >= 2*maxRegressionPairs {
				return nil, fmt.Errorf("asyncsim: bag %s: more than %d inputs without a partner of the same stamp", path, 2*maxRegressionPairs)
			}
			byStamp[stamp] = h
			continue
		}
		if h.kv != nil {
			old.kv = h.kv
		} else {
			old.ctx = h.ctx
		}
		if old.kv == nil || old.ctx == nil {
			continue
		}
		p, err := decodePair(old.kv, old.ctx)
		if err != nil {
			return nil, fmt.Errorf("asyncsim: bag %s: the pair stamped %d.%09d: %w", path, stamp.Sec, stamp.Nanosec, err)
		}
		delete(byStamp, stamp)
		pairs = append(pairs, p)
		if len(pairs) == maxRegressionPairs {
			break
		}
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("asyncsim: bag %s has no %s and %s messages with the same stamp; want at least one pair", path, kvTopic, ctxTopic)
	}
	for i, p := range pairs[1:] {
		if !slices.Equal(p.KVShape, pairs[0].KVShape) || !slices.Equal(p.ContextShape, pairs[0].ContextShape) {
			return nil, fmt.Errorf("asyncsim: bag %s: pair %d has shapes %v and %v, want those of pair 0, %v and %v",
				path, i+1, p.KVShape, p.ContextShape, pairs[0].KVShape, pairs[0].ContextShape)
		}
	}
	return pairs, nil
}

// decodeTensor checks t (its shape against the bytes it holds) and decodes
// it, rejecting a non-finite value.
func decodeTensor(name string, t *msgs.Tensor) ([]float32, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n, err := t.NumElements()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := make([]float32, n) // n is backed by the bytes present (Validate)
	i, v, err := t.DecodeF32Checked(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if i >= 0 {
		return nil, fmt.Errorf("%s: value %d is %v; want a finite number", name, i, v)
	}
	return out, nil
}

func decodePair(kv *msgs.VideoKVCache, c *msgs.TextContext) (Pair, error) {
	p := Pair{
		KVShape: slices.Clone(kv.Keys.Shape), VisibleVideo: kv.VisibleVideoTokens,
		ContextShape: slices.Clone(c.Context.Shape), Mask: slices.Clone(c.AttentionMask),
	}
	if !slices.Equal(kv.Keys.Shape, kv.Values.Shape) {
		return Pair{}, fmt.Errorf("video keys have shape %v and values %v; want the same", kv.Keys.Shape, kv.Values.Shape)
	}
	var err error
	if p.Keys, err = decodeTensor("keys", &kv.Keys); err != nil {
		return Pair{}, err
	}
	if p.Values, err = decodeTensor("values", &kv.Values); err != nil {
		return Pair{}, err
	}
	if p.Context, err = decodeTensor("context", &c.Context); err != nil {
		return Pair{}, err
	}
	return p, nil
}

// messages builds the observation's messages, stamped t with seq.
func (p *Pair) messages(t time.Time, seq uint64) (msgs.TextContext, msgs.VideoKVCache) {
	h := msgs.Header{Stamp: msgs.Time{Sec: int32(t.Unix()), Nanosec: uint32(t.Nanosecond())}, FrameID: "camera"}
	return msgs.TextContext{
			Header: h, Seq: seq, Instruction: fmt.Sprintf("asyncsim observation %d", seq),
			Context: msgs.NewTensorF32(p.ContextShape, p.Context), AttentionMask: p.Mask,
		}, msgs.VideoKVCache{
			Header: h, Seq: seq, VisibleVideoTokens: p.VisibleVideo,
			Keys:   msgs.NewTensorF32(p.KVShape, p.Keys),
			Values: msgs.NewTensorF32(p.KVShape, p.Values),
		}
}

// Drift parameters: each value of the base observation moves along its
// own sine of relative amplitude DriftAmplitude (of its tensor's RMS),
// with a period drawn uniformly in [driftMinPeriod, driftMaxPeriod]
// control periods and a random phase.
const (
	// DriftAmplitude is the drift's amplitude relative to the RMS of the
	// tensor it perturbs.
	DriftAmplitude = 0.05
	driftMinPeriod = 50
	driftMaxPeriod = 200
)

// drift makes observation k of a seeded drift of one base pair: small
// smooth perturbations, so that consecutive observations differ a little.
type drift struct {
	base  Pair
	waves [3]wave // keys, values, context
	obs   Pair    // observation k, reused
}

// wave is one tensor's perturbation: value i at period k is
// amp * sin(omega[i]*k + phase[i]).
type wave struct {
	amp          float64
	omega, phase []float64
}

func newWave(rng *rand.Rand, x []float32) wave {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	w := wave{amp: DriftAmplitude * math.Sqrt(ss/float64(max(len(x), 1))), omega: make([]float64, len(x)), phase: make([]float64, len(x))}
	for i := range x {
		period := driftMinPeriod + rng.Float64()*(driftMaxPeriod-driftMinPeriod)
		w.omega[i], w.phase[i] = 2*math.Pi/period, 2*math.Pi*rng.Float64()
	}
	return w
}

func (w *wave) apply(dst, base []float32, k int) {
	for i, v := range base {
		dst[i] = v + float32(w.amp*math.Sin(w.omega[i]*float64(k)+w.phase[i]))
	}
}

func newDrift(base Pair, seed uint64) *drift {
	rng := rand.New(rand.NewPCG(seed, 0xa5a5_d41f7))
	d := &drift{base: base, obs: base}
	d.obs.Keys, d.obs.Values, d.obs.Context = slices.Clone(base.Keys), slices.Clone(base.Values), slices.Clone(base.Context)
	d.waves = [3]wave{newWave(rng, base.Keys), newWave(rng, base.Values), newWave(rng, base.Context)}
	return d
}

// at returns observation k; it is valid until the next call.
func (d *drift) at(k int) *Pair {
	d.waves[0].apply(d.obs.Keys, d.base.Keys, k)
	d.waves[1].apply(d.obs.Values, d.base.Values, k)
	d.waves[2].apply(d.obs.Context, d.base.Context, k)
	return &d.obs
}

// errNoPairs is returned by Run without inputs.
var errNoPairs = errors.New("asyncsim: no input pairs (see LoadRegression)")
