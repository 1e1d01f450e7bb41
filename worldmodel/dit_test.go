package worldmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/x448/float16"
	"gonum.org/v1/gonum/blas"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
)

// ditGoldenDir is where golden/make_dit_golden.py writes its files.
var ditGoldenDir = filepath.Join("..", "golden", "dit")

// ditGoldenKeys are the arrays of each case of the DiT golden.
var ditGoldenKeys = []string{"latent", "context", "state_norm", "proprio_row", "x0", "tm", "ctx_v", "keys", "values"}

// The tolerances of the comparison with the float64 reference (the DiT
// computes in float32, the reference in float64 on the same bf16 values).
const (
	ditMinCosine = 1 - 1e-9
	ditMaxRelErr = 1e-5 // max |Go − reference| / max |reference|, per array
)

// compareArray checks got against the reference's ref (cosine and max
// error relative to the reference's largest value) and returns the figures.
func compareArray(t *testing.T, name string, got []float32, ref golden.Array) string {
	t.Helper()
	r := ref.Data
	if len(got) != len(r) {
		t.Errorf("%s: %d values, reference %d (shape %v)", name, len(got), len(r), ref.Shape)
		return name + ": length mismatch"
	}
	cos, maxErr := expert.Cosine(got, r), expert.MaxAbsDiff(got, r)
	scale := expert.MaxAbsDiff(r, make([]float32, len(r)))
	if !(cos >= ditMinCosine) || !(maxErr <= ditMaxRelErr*scale) {
		t.Errorf("%s: cosine 1 − %.2e (want ≥ 1 − 1e-9), max|err| %.2e (want ≤ %.0e × max|ref| %.3g)", name, 1-cos, maxErr, ditMaxRelErr, scale)
	}
	return fmt.Sprintf("%-9s cos 1 − %.1e, max|err| %.1e (max|ref| %.2f)", name, 1-cos, maxErr, scale)
}

// ditCase is one golden case's arrays, and the DiT made for its sizes.
type ditCase struct {
	ref map[string]golden.Array
	d   *DiT
}

func loadDiTCase(t *testing.T, w *DiTWeights, gemm cpu.Gemm, name string) ditCase {
	t.Helper()
	ref := readNPZ(t, filepath.Join(ditGoldenDir, name), ditGoldenKeys...)
	ls, cs := ref["latent"].Shape, ref["context"].Shape
	d, err := NewDiT(w, gemm, DiTSize{LatentHeight: ls[1], LatentWidth: ls[2], ContextRows: cs[0]})
	if err != nil {
		t.Fatal(err)
	}
	return ditCase{ref, d}
}

// f32KV and f16KV make output buffers of the DiT's K/V length.
func f32KV(d *DiT) (k, v expert.TensorView) {
	return expert.TensorView{F32: make([]float32, d.KVLen())}, expert.TensorView{F32: make([]float32, d.KVLen())}
}

func f16KV(d *DiT) (k, v expert.TensorView) {
	return expert.TensorView{F16: make([]uint16, d.KVLen())}, expert.TensorView{F16: make([]uint16, d.KVLen())}
}

// runCase runs the prefill of a case on its latent and context with K/V in
// float32, comparing every stage with the reference, and returns the
// figures, K and V.
func runCase(t *testing.T, c ditCase, latent []float32) (lines []string, k, v []float32) {
	t.Helper()
	got := map[string][]float32{}
	c.d.trace = func(name string, x []float32) { got[name] = slices.Clone(x) }
	defer func() { c.d.trace = nil }()
	kb, vb := f32KV(c.d)
	if err := c.d.Prefill(t.Context(), latent, c.ref["context"].Data, kb, vb); err != nil {
		t.Fatal(err)
	}
	lines = append(lines,
		compareArray(t, "tm", c.d.w.TM, c.ref["tm"]),
		compareArray(t, "x0", got["x0"], c.ref["x0"]),
		compareArray(t, "ctx_v", got["ctx_v"], c.ref["ctx_v"]))
	n := c.d.sv * c.d.cfg.HiddenDim
	ks, vs := c.ref["keys"], c.ref["values"]
	if want := []int{c.d.cfg.NumLayers, 1, c.d.sv, c.d.cfg.HiddenDim}; !slices.Equal(ks.Shape, want) || !slices.Equal(vs.Shape, want) {
		t.Fatalf("reference K/V have shapes %v, %v; want %v", ks.Shape, vs.Shape, want)
	}
	for l := range c.d.cfg.NumLayers {
		lines = append(lines,
			compareArray(t, fmt.Sprintf("K layer %d", l), kb.F32[l*n:(l+1)*n], golden.Array{Shape: ks.Shape[2:], Data: ks.Data[l*n : (l+1)*n]}),
			compareArray(t, fmt.Sprintf("V layer %d", l), vb.F32[l*n:(l+1)*n], golden.Array{Shape: vs.Shape[2:], Data: vs.Data[l*n : (l+1)*n]}))
	}
	return lines, kb.F32, vb.F32
}

// TestDiTMatchesReference compares the prefill with the committed goldens
// of golden/make_dit_golden.py (the tiny configuration of world-model.md §9;
// the LIBERO grid, Sv = 98, and a 224 × 224 image's, Sv = 49) stage by
// stage, with gonum's sgemm and OpenBLAS's; then the F16 output against
// the F32 output rounded to half, and the proprio row against the
// reference's.
func TestDiTMatchesReference(t *testing.T) {
	w, err := LoadDiTWeights(filepath.Join(ditGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for gname, g := range vaeGemms(t) {
		for _, cname := range []string{"dit_98.npz", "dit_49.npz"} {
			t.Run(gname+"/"+cname, func(t *testing.T) {
				c := loadDiTCase(t, w, g, cname)
				lines, k, v := runCase(t, c, c.ref["latent"].Data)
				for _, l := range lines {
					t.Log(l)
				}
				kh, vh := f16KV(c.d)
				if err := c.d.Prefill(t.Context(), c.ref["latent"].Data, c.ref["context"].Data, kh, vh); err != nil {
					t.Fatal(err)
				}
				for i := range k {
					if kh.F16[i] != float16.Fromfloat32(k[i]).Bits() || vh.F16[i] != float16.Fromfloat32(v[i]).Bits() {
						t.Fatalf("F16 output %d: K %#04x, V %#04x; want the F32 output %v, %v rounded to half", i, kh.F16[i], vh.F16[i], k[i], v[i])
					}
				}
				row := make([]float32, w.Config.TextDim)
				if err := ProprioToken(row, w.ProprioW, w.ProprioB, c.ref["state_norm"].Data); err != nil {
					t.Fatal(err)
				}
				t.Log(compareArray(t, "proprio", row, c.ref["proprio_row"]))
			})
		}
	}
}

// TestDiTChain runs the tiny VAE golden's image through the VAE encoder
// and the DiT, against golden/dit/chain.npz: the reference's VAE
// (make_vae_golden.encode, float64) feeding the reference DiT.
func TestDiTChain(t *testing.T) {
	w, err := LoadDiTWeights(filepath.Join(ditGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	vw, err := LoadVAEWeights(filepath.Join(vaeGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	img := readNPZ(t, filepath.Join(vaeGoldenDir, "vae.npz"), "image")["image"]
	for gname, g := range vaeGemms(t) {
		t.Run(gname, func(t *testing.T) {
			e, err := NewVAEEncoder(vw, img.Shape[2], img.Shape[3], g)
			if err != nil {
				t.Fatal(err)
			}
			s := e.LatentShape()
			latent := make([]float32, s[0]*s[1]*s[2])
			if err := e.Encode(latent, img.Data); err != nil {
				t.Fatal(err)
			}
			c := loadDiTCase(t, w, g, "chain.npz")
			t.Log(compareArray(t, "latent", latent, c.ref["latent"]))
			lines, _, _ := runCase(t, c, latent)
			for _, l := range lines {
				t.Log(l)
			}
		})
	}
}

// TestDiTGoldensMatchTheirReference regenerates golden/dit with its
// generator into a temporary directory and requires the same arrays and
// the same weight file.
func TestDiTGoldensMatchTheirReference(t *testing.T) {
	python := python3With(t, "numpy, torch", "install python3-numpy python3-torch to check golden/dit against its generator")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "golden", "make_dit_golden.py"), "--out", out)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_dit_golden.py: %v\n%s", err, b)
	}
	a, err := os.ReadFile(filepath.Join(ditGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Errorf("golden/dit/weights.safetensors differs from what the reference writes now: regenerate with golden/make_dit_golden.py")
	}
	for _, name := range []string{"dit_98.npz", "dit_49.npz", "chain.npz"} {
		x := readNPZ(t, filepath.Join(ditGoldenDir, name), ditGoldenKeys...)
		y := readNPZ(t, filepath.Join(out, name), ditGoldenKeys...)
		for _, k := range ditGoldenKeys {
			if !slices.Equal(x[k].Shape, y[k].Shape) || !slices.Equal(x[k].Data, y[k].Data) {
				t.Errorf("%s: array %q differs from what the reference writes now: regenerate with golden/make_dit_golden.py", name, k)
			}
		}
	}
}

// cancelAfter is a context whose Err turns to context.Canceled after n
// calls: a cancellation in the middle of a prefill, deterministically.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestDiTRefuses: wrong lengths, non-finite inputs, mixed or double views
// are refused before anything is written; a cancelled context stops the
// prefill with ctx.Err().
func TestDiTRefuses(t *testing.T) {
	w, err := LoadDiTWeights(filepath.Join(ditGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	c := loadDiTCase(t, w, nil, "dit_49.npz")
	lat, cond := c.ref["latent"].Data, c.ref["context"].Data
	k, v := f32KV(c.d)
	k16, v16 := f16KV(c.d)
	nan := func(x []float32, i int) []float32 {
		y := slices.Clone(x)
		y[i] = float32(math.NaN())
		return y
	}
	for _, tc := range []struct {
		name       string
		lat, cond  []float32
		keys, vals expert.TensorView
	}{
		{"short latent", lat[1:], cond, k, v},
		{"long context", lat, append(slices.Clone(cond), 0), k, v},
		{"NaN latent", nan(lat, 77), cond, k, v},
		{"NaN context", lat, nan(cond, len(cond)-1), k, v},
		{"short keys", lat, cond, expert.TensorView{F32: k.F32[1:]}, v},
		{"mixed views", lat, cond, k, v16},
		{"both set", lat, cond, expert.TensorView{F32: k.F32, F16: k16.F16}, v},
		{"none set", lat, cond, expert.TensorView{}, v},
	} {
		for i := range k.F32 {
			k.F32[i] = 7
		}
		if err := c.d.Prefill(t.Context(), tc.lat, tc.cond, tc.keys, tc.vals); err == nil {
			t.Errorf("%s: accepted", tc.name)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		if slices.ContainsFunc(k.F32, func(x float32) bool { return x != 7 }) {
			t.Errorf("%s: refused, but the keys were written", tc.name)
		}
	}
	for _, n := range []int{0, 1, 2, 3, 4} {
		ctx := &cancelAfter{Context: t.Context(), n: n}
		if err := c.d.Prefill(ctx, lat, cond, k, v); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %d checks: err %v, want context.Canceled", n, err)
		}
	}
	// The DiT works again after a cancelled run.
	lines, _, _ := runCase(t, c, lat)
	t.Log(lines[len(lines)-1])
}

// naiveGemm is a plain row-major sgemm (float32 sums in index order):
// slow, but it allocates nothing, so an allocation test sees the DiT's own.
type naiveGemm struct{}

func (naiveGemm) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := range m {
		for j := range n {
			var s float32
			for p := range k {
				var x, y float32
				if tA == blas.NoTrans {
					x = a[i*lda+p]
				} else {
					x = a[p*lda+i]
				}
				if tB == blas.NoTrans {
					y = b[p*ldb+j]
				} else {
					y = b[j*ldb+p]
				}
				s += x * y
			}
			if beta == 0 {
				c[i*ldc+j] = alpha * s
			} else {
				c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
			}
		}
	}
}

// TestDiTSteadyStateAllocatesNothing: after the first prefill, a prefill
// allocates nothing, with a sgemm that allocates nothing of its own and
// with OpenBLAS (whose binding allocates nothing a call) where it loads.
func TestDiTSteadyStateAllocatesNothing(t *testing.T) {
	w, err := LoadDiTWeights(filepath.Join(ditGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	gemms := map[string]cpu.Gemm{"naive": naiveGemm{}}
	if g, _, err := cpu.PickGemm("openblas", "", 0); err == nil {
		gemms["openblas"] = g
	}
	for name, g := range gemms {
		c := loadDiTCase(t, w, g, "dit_49.npz")
		k, v := f16KV(c.d)
		ctx := context.Background()
		run := func() {
			if err := c.d.Prefill(ctx, c.ref["latent"].Data, c.ref["context"].Data, k, v); err != nil {
				t.Fatal(err)
			}
		}
		run()
		n := testing.AllocsPerRun(3, run)
		t.Logf("%s: %v allocations per prefill", name, n)
		wantNoAllocs(t, name == "openblas", "prefill", n)
	}
}

// TestDiTConfigValidate checks the 3-D RoPE head-dim rule and the limits.
func TestDiTConfigValidate(t *testing.T) {
	if err := FullDiTConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if n := FullDiTConfig().NumParams(); n != 4_999_787_712-596_160+4096*8+4096 {
		t.Errorf("full config: %d parameters, want 4,999,787,712 − the head's 596,160 + the proprio encoder's 36,864", n)
	}
	tiny := DiTConfig{HiddenDim: 48, FFNDim: 96, NumHeads: 2, HeadDim: 24, NumLayers: 2, TextDim: 64, FreqDim: 256, ProprioDim: 8, LatentChannels: 48}
	if err := tiny.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*DiTConfig)
	}{
		{"head dim 16 (RoPE split 6 + 5 + 5)", func(c *DiTConfig) { c.HeadDim, c.NumHeads, c.HiddenDim = 16, 3, 48 }},
		{"heads do not tile the width", func(c *DiTConfig) { c.NumHeads = 3 }},
		{"zero layers", func(c *DiTConfig) { c.NumLayers = 0 }},
		{"odd freq dim", func(c *DiTConfig) { c.FreqDim = 255 }},
		{"huge", func(c *DiTConfig) {
			c.HiddenDim, c.NumHeads, c.HeadDim, c.FFNDim, c.NumLayers = 1<<15, 256, 128, 1<<16, 1024
		}},
		{"negative", func(c *DiTConfig) { c.TextDim = -1 }},
	} {
		c := tiny
		tc.edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// TestDiTTextRowsCache: a prefill whose context's text rows changed gives
// what a fresh DiT gives, bit for bit, and so does one whose text rows
// did not (only the proprio row changed).
func TestDiTTextRowsCache(t *testing.T) {
	w, err := LoadDiTWeights(filepath.Join(ditGoldenDir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	c := loadDiTCase(t, w, nil, "dit_49.npz")
	lat, cond := c.ref["latent"].Data, slices.Clone(c.ref["context"].Data)
	T := w.Config.TextDim
	k, v := f32KV(c.d)
	for i, edit := range []func(){
		func() {},
		func() { cond[5*T+3] += 0.5 },        // a text row
		func() { cond[len(cond)-1] -= 0.25 }, // the proprio row only
		func() { cond[127*T] = 1 },           // a padding row
		func() { cond[127*T] = float32(0) },  // back
		func() { cond[0] = -cond[0] + 1e-3 }, // the first value
	} {
		edit()
		if err := c.d.Prefill(t.Context(), lat, cond, k, v); err != nil {
			t.Fatal(err)
		}
		fresh, err := NewDiT(w, nil, c.d.size)
		if err != nil {
			t.Fatal(err)
		}
		fk, fv := f32KV(fresh)
		if err := fresh.Prefill(t.Context(), lat, cond, fk, fv); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(k.F32, fk.F32) || !slices.Equal(v.F32, fv.F32) {
			t.Errorf("edit %d: K/V differ from a fresh DiT's", i)
		}
	}
}
