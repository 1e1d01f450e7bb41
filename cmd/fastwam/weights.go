package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/internal/progress"
)

// weightsMakeUsage is the help text of `fastwam weights make`.
const weightsMakeUsage = "-o FILE [-model expert|world|vae|text] [flags]\n\n" +
	"Writes random test weights as a safetensors file. Same flags and -seed, same bytes.\n\n" +
	"-model expert (the default): every tensor of the action expert's state dict (spec §1) for the\n" +
	"configuration the flags give, drawn from a seeded generator (matrices uniform in ±sqrt(3/fan_in),\n" +
	"RMSNorm and LayerNorm gains 1±0.2, the rest ±0.1), stored as f32, f16 or bf16. The configuration\n" +
	"goes into the file's fastwam_config metadata, so the CPU backend needs no config.json beside it\n" +
	"(-weights FILE, cpu.weights:=FILE). The defaults are the full-size model's message widths (30\n" +
	"layers, 24x128 heads, text width 4096, 98 video and 129 context tokens, 32 actions x 7) with a\n" +
	"small hidden and FFN width (64), so that full-size inputs can be exercised without the checkpoint\n" +
	"in a file of about 195 MB; -hidden 1024 -ffn 4096 gives the full model (4.1 GB in f32).\n\n" +
	"-model world: the video DiT and the proprio encoder in the DiT weight file contract\n" +
	"(docs/world-model.md, \"The weight files\"): spec §6.2's keys without mixtures.video., the last\n" +
	"layer only what its K and V need (all of it and head.* with -keep-unused),\n" +
	"proprio_encoder.weight [text-dim, proprio-dim] and .bias, the configuration in the\n" +
	"fastwam_world_config metadata. Values as spec §7:\n" +
	"matrices N(0,1)/sqrt(fan_in), gains 1+0.2N, biases 0.1N, modulation 0.3N. The defaults are\n" +
	"golden/tiny/world's: 2 layers, 4x8 heads, hidden 32, ffn 64, text 32, freq 256, proprio 8, latent\n" +
	"48; the full model is -layers 30 -heads 24 -head-dim 128 -ffn 14336 -text-dim 4096 (20 GB in f32).\n\n" +
	"-model vae: the Wan2.2 VAE's 86 encoder-side tensors (spec §6.1: encoder.* with time_conv, and\n" +
	"conv1) in the released file's layout, base width -vae-dim (default 16, spec §9; released 160),\n" +
	"values as for world; worldmodel.LoadVAEWeights reads it.\n\n" +
	"-model text: one text cache entry for -task in the folder -o (docs/world-model.md, \"The text\n" +
	"cache\"): -rows x -text-dim (default 128 x 32), rows 0..tokens-1 N(0,1), the rest zero, bf16\n" +
	"unless -dtype f32, the encoder identity -encoder. Inputs for tests, not an encoder's output.\n\n" +
	"Use: fastwam weights make -o /tmp/w.safetensors, then cpu.weights:=/tmp/w.safetensors for the node\n" +
	"(--ros-args -p) or replay (-p), or -weights /tmp/w.safetensors for bag make (with a full-size\n" +
	"-golden), to run full-size messages through the CPU backend. golden/tiny/world/README.md has the\n" +
	"commands of the tiny world model's files."

func runWeightsMake(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("weights make", stdout, stderr, weightsMakeUsage)
	full := cpu.FullConfig()
	var (
		out, model string
		force      bool
		dtype      string
		seed       uint64
		c          = full
		w          = tinyWorldConfig
		keepUnused bool
		vaeDim     int
		text       = textEntrySpec{rows: 128, n: 16}
	)
	c.HiddenDim, c.FFNDim = 64, 64
	fs.StringVar(&model, "model", "expert", "what to write: expert (the action expert), world (the video DiT and proprio encoder), vae (the VAE encoder) or text (one text cache entry, -o a folder)")
	fs.StringVar(&out, "o", "", "safetensors file to write (must not exist, unless -force); with -model text, the cache folder")
	fs.BoolVar(&force, "force", false, "replace the file -o if it exists")
	fs.StringVar(&dtype, "dtype", "f32", "storage type of every tensor: f32, f16 or bf16 (-model text: bf16 unless f32 is given)")
	fs.Uint64Var(&seed, "seed", 1, "seed of the random values")
	fs.IntVar(&c.NumLayers, "layers", full.NumLayers, "num_layers: transformer blocks (world default 2)")
	fs.IntVar(&c.NumHeads, "heads", full.NumHeads, "num_heads: attention heads (world default 4)")
	fs.IntVar(&c.HeadDim, "head-dim", full.HeadDim, "attn_head_dim: width of a head (even; world: head_dim, default 8, ⌊Dh/3⌋ and Dh−2⌊Dh/3⌋ even); heads*head-dim is the KV cache's width")
	fs.IntVar(&c.TextDim, "text-dim", full.TextDim, "text_dim: width of the TextContext tensor (world and text default 32)")
	fs.IntVar(&c.HiddenDim, "hidden", c.HiddenDim, "hidden_dim: the model width (full model: 1024; world: heads*head-dim, full 3072)")
	fs.IntVar(&c.FFNDim, "ffn", c.FFNDim, "ffn_dim: the feed-forward width (full model: 4096; world default 64, full 14336)")
	fs.IntVar(&c.FreqDim, "freq-dim", full.FreqDim, "freq_dim: width of the sinusoidal timestep embedding (even)")
	fs.IntVar(&c.ActionDim, "action-dim", full.ActionDim, "action_dim: values per action (expert only)")
	fs.IntVar(&c.ActionSteps, "action-tokens", full.ActionSteps, "action_tokens: actions per chunk (expert only)")
	fs.IntVar(&c.VideoTokens, "video-tokens", full.VideoTokens, "video_tokens: cached video tokens the backend is sized for (expert only)")
	fs.IntVar(&c.ContextTokens, "context-tokens", full.ContextTokens, "context_tokens: context tokens the backend is sized for (expert only)")
	fs.Float64Var(&c.Eps, "eps", full.Eps, "eps of the norms (expert only)")
	fs.IntVar(&w.ProprioDim, "proprio-dim", w.ProprioDim, "world: proprio_dim, the proprio encoder's inputs")
	fs.IntVar(&w.LatentChannels, "latent-channels", w.LatentChannels, "world: latent_channels, the patch embedding's inputs (the VAE's z)")
	fs.BoolVar(&keepUnused, "keep-unused", false, "world: also write head.* and the last layer's tensors that K and V do not need")
	fs.IntVar(&vaeDim, "vae-dim", 16, "vae: base width d (stages d, d, 2d, 4d, 4d; the released VAE's is 160)")
	fs.StringVar(&text.task, "task", "", "text: the task's instruction (the prompt is upstream's prefix + it)")
	fs.IntVar(&text.rows, "rows", text.rows, "text: Lt, the rows of the entry")
	fs.IntVar(&text.n, "tokens", text.n, "text: n, the rows that hold values (1..rows); the others are zero")
	fs.StringVar(&text.encoder, "encoder", "random", "text: the encoder identity written into the entry")
	progressMode := progressFlag(fs, "for files of more than 256 MiB")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	if out == "" {
		fs.Usage()
		return usageError("weights make needs -o FILE")
	}
	set := map[string]string{} // the flags given, and their values
	fs.Visit(func(f *flag.Flag) { set[f.Name] = f.Value.String() })
	if err := checkModelFlags(model, set); err != nil {
		return err
	}
	if _, ok := set["dtype"]; model == "text" && !ok {
		dtype = "bf16"
	}
	st, ok := storageTypes[dtype]
	if !ok {
		return usageError("-dtype must be f32, f16 or bf16, got %q", dtype)
	}
	switch model {
	case "world", "vae", "text":
		return makeWorldSide(ctx, model, out, force, st, seed, *progressMode, stdout, stderr, set, c, w, keepUnused, vaeDim, text)
	}
	if err := c.Validate(); err != nil {
		return usageError("%v (set by the flag of the same name)", err)
	}
	if err := checkWeightsOutput(out, force); err != nil {
		return err
	}
	tensors := stateDict(c)
	var size int64
	for _, t := range tensors {
		size += t.numel() * int64(st.size)
	}
	progressTo, err := progressOut(*progressMode, stderr, size > 256<<20)
	if err != nil {
		return err
	}
	n, err := writeWeights(ctx, out, c, tensors, st, seed, progress.New(progressTo, "weights make", "tensors", len(tensors), progress.DefaultInterval))
	if err != nil {
		return err
	}
	var params int64
	for _, t := range tensors {
		params += t.numel()
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors, %d parameters in %s, %d bytes (seed %d)\n", out, len(tensors), params, st.name, n, seed)
	fmt.Fprintf(stdout, "config: %d layers, %dx%d heads, hidden %d, ffn %d, text %d, freq %d, %d actions x %d, %d video and %d context tokens\n",
		c.NumLayers, c.NumHeads, c.HeadDim, c.HiddenDim, c.FFNDim, c.TextDim, c.FreqDim, c.ActionSteps, c.ActionDim, c.VideoTokens, c.ContextTokens)
	return nil
}

// checkWeightsOutput checks -o before any work: a new file in an existing
// folder, or, with force, an existing regular file.
func checkWeightsOutput(path string, force bool) error {
	st, err := os.Stat(path)
	switch {
	case err == nil && !force:
		return usageError("-o %s already exists; want a new file (replace it with -force)", path)
	case err == nil && !st.Mode().IsRegular():
		return usageError("-o %s exists and is not a regular file; will not replace it", path)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return usageError("-o %s: %v", path, err)
	}
	return checkOutputFile("-o", path)
}

// storageType is a safetensors dtype and how to write a float32 as it.
type storageType struct {
	name, dtype string
	size        int
	put         func(b []byte, v float32)
}

var storageTypes = map[string]storageType{
	"f32":  {"f32", "F32", 4, func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }},
	"f16":  {"f16", "F16", 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, float16.Fromfloat32(v).Bits()) }},
	"bf16": {"bf16", "BF16", 2, func(b []byte, v float32) { binary.LittleEndian.PutUint16(b, bfloat16(v)) }},
}

// bfloat16 rounds a finite float32 to the nearest bfloat16 (ties to even),
// as PyTorch's .to(torch.bfloat16) does.
func bfloat16(v float32) uint16 {
	u := math.Float32bits(v)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// tensor is one entry of the state dict: its name, shape and how its
// random values are drawn: base + scale*U(-1, 1), or base + scale*N(0, 1)
// when normal.
type tensor struct {
	name        string
	shape       []int
	base, scale float32
	normal      bool
}

// value draws one value of t from r.
func (t tensor) value(r *rand.Rand) float32 {
	if t.normal {
		return t.base + t.scale*float32(r.NormFloat64())
	}
	return t.base + t.scale*(2*r.Float32()-1)
}

func (t tensor) numel() int64 {
	n := int64(1)
	for _, s := range t.shape {
		n *= int64(s)
	}
	return n
}

// stateDict lists the action expert's tensors for c, with the names and
// shapes of the specification's state dict (§1, dims substituted as §9
// says), in its order. It is written from the specification, not from the
// CPU backend's table, so that loading the file checks the two agree.
func stateDict(c cpu.Config) []tensor {
	D, F, A, T, f, a := c.HiddenDim, c.FFNDim, c.NumHeads*c.HeadDim, c.TextDim, c.FreqDim, c.ActionDim
	var ts []tensor
	linear := func(name string, out, in int) {
		ts = append(ts,
			tensor{name + ".weight", []int{out, in}, 0, float32(math.Sqrt(3 / float64(in))), false},
			tensor{name + ".bias", []int{out}, 0, 0.1, false})
	}
	gain := func(name string, n int) { ts = append(ts, tensor{name, []int{n}, 1, 0.2, false}) }
	linear("action_encoder", D, a)
	linear("text_embedding.0", D, T)
	linear("text_embedding.2", D, D)
	linear("time_embedding.0", D, f)
	linear("time_embedding.2", D, D)
	linear("time_projection.1", 6*D, D)
	linear("head", a, D)
	for l := range c.NumLayers {
		p := "blocks." + strconv.Itoa(l) + "."
		ts = append(ts, tensor{p + "modulation", []int{1, 6, D}, 0, 0.1, false})
		for _, attn := range []string{"self_attn", "cross_attn"} {
			for _, proj := range []string{"q", "k", "v"} {
				linear(p+attn+"."+proj, A, D)
			}
			linear(p+attn+".o", D, A)
			gain(p+attn+".norm_q.weight", A)
			gain(p+attn+".norm_k.weight", A)
		}
		gain(p+"norm3.weight", D)
		ts = append(ts, tensor{p + "norm3.bias", []int{D}, 0, 0.1, false})
		linear(p+"ffn.0", F, D)
		linear(p+"ffn.2", D, F)
	}
	return ts
}

// safetensorsEntry is one tensor of the header.
type safetensorsEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// weightsHeadSplit is the fastwam_head_split metadata `fastwam parity`
// reads: the head split is the flags'.
type weightsHeadSplit struct {
	NumHeads int    `json:"num_heads"`
	HeadDim  int    `json:"attn_head_dim"`
	Source   string `json:"source"`
	Note     string `json:"note"`
}

// writeWeights writes the action expert's tensors ts for c to path (see
// writeTensors), with the configuration and head split as metadata.
func writeWeights(ctx context.Context, path string, c cpu.Config, ts []tensor, st storageType, seed uint64, prog *progress.Meter) (int64, error) {
	cfgJSON, err := json.Marshal(c)
	if err != nil {
		return 0, fmt.Errorf("weights: configuration: %w", err)
	}
	split, err := json.Marshal(weightsHeadSplit{NumHeads: c.NumHeads, HeadDim: c.HeadDim, Source: "flags",
		Note: "random test weights written by fastwam weights make, seed " + strconv.FormatUint(seed, 10)})
	if err != nil {
		return 0, fmt.Errorf("weights: head split: %w", err)
	}
	return writeTensors(ctx, path, map[string]string{
		cpu.ConfigMetadataKey: string(cfgJSON), headSplitMetadataKey: string(split), "format": "pt",
	}, ts, st, seed, prog)
}

// writeTensors writes the tensors' random values to path, with meta as
// the header's __metadata__, through a temporary file in the same folder,
// renamed into place when complete, and returns the file's size. Values
// are generated and written one tensor at a time: memory does not grow
// with the model.
func writeTensors(ctx context.Context, path string, meta map[string]string, ts []tensor, st storageType, seed uint64, prog *progress.Meter) (int64, error) {
	header := map[string]any{"__metadata__": meta}
	var off int64
	for _, t := range ts {
		n := t.numel() * int64(st.size)
		header[t.name] = safetensorsEntry{DType: st.dtype, Shape: t.shape, Offsets: []int64{off, off + n}}
		off += n
	}
	hb, err := json.Marshal(header)
	if err != nil {
		return 0, fmt.Errorf("weights: header: %w", err)
	}
	// The data section starts 8-byte aligned: the header is padded with
	// spaces, as the safetensors format allows.
	if pad := (8 - len(hb)%8) % 8; pad > 0 {
		hb = append(hb, strings.Repeat(" ", pad)...)
	}

	err = writeFile(path, func(w io.Writer) error {
		var n8 [8]byte
		binary.LittleEndian.PutUint64(n8[:], uint64(len(hb)))
		if _, err := w.Write(n8[:]); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if _, err := w.Write(hb); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		r := rand.New(rand.NewPCG(seed, 0x5afe_7e45))
		buf := make([]byte, 64<<10)
		for i, t := range ts {
			prog.Update(i)
			left := t.numel()
			for left > 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("writing %s stopped at tensor %d of %d (%s): %w", path, i+1, len(ts), t.name, err)
				}
				k := min(left, int64(len(buf)/st.size))
				for j := range k {
					st.put(buf[j*int64(st.size):], t.value(r))
				}
				if _, err := w.Write(buf[:k*int64(st.size)]); err != nil {
					return fmt.Errorf("write %s: %w", path, err)
				}
				left -= k
			}
		}
		prog.Done(len(ts))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("weights: %w", err)
	}
	return int64(8+len(hb)) + off, nil
}
