package main

import (
	"bytes"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/safetensors"
	"github.com/fastwam/actionexpert/worldmodel"
)

// tinyWorldDir is the tiny world model's folder (golden/tiny/world).
const tinyWorldDir = "../../golden/tiny/world"

// tinyWorldEncoder is the encoder identity of its text cache entries.
const tinyWorldEncoder = "random (fastwam weights make -model text)"

// shellWords splits a command line of words and double-quoted strings.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			end := strings.IndexByte(line[1:], '"')
			if end < 0 {
				t.Fatalf("unterminated quote in %q", line)
			}
			words = append(words, line[1:1+end])
			line = line[2+end:]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		words = append(words, line[:end])
		line = line[end:]
	}
	return words
}

// readmeCommands returns the `fastwam weights make` commands of the
// folder's README.md (its code block), as argument lists without "fastwam".
func readmeCommands(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyWorldDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "fastwam weights make "); ok {
			cmds = append(cmds, append([]string{"weights", "make"}, shellWords(t, rest)...))
		}
	}
	if len(cmds) != 5 {
		t.Fatalf("README.md has %d weights make commands, want 5 (DiT, VAE, three text entries)", len(cmds))
	}
	return cmds
}

// TestTinyWorldAssets writes golden/tiny/world's files again with the
// commands of its README.md and requires the same bytes (and no file the
// commands do not write, but the statistics and the README), keeps the
// folder under 1 MB, and reads each file with the product's readers: the
// DiT file against the contract, the VAE with worldmodel.LoadVAEWeights,
// the statistics' state and action parts, and each text cache entry.
func TestTinyWorldAssets(t *testing.T) {
	tmp := t.TempDir()
	if err := os.Mkdir(filepath.Join(tmp, "text"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range readmeCommands(t) {
		for i := range args {
			if args[i] == "-o" && i+1 < len(args) {
				args[i+1] = filepath.Join(tmp, args[i+1])
			}
		}
		mustRun(t, args...)
	}
	var size int64
	written := map[string]bool{}
	err := filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tmp, path)
		written[rel] = true
		want, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(tinyWorldDir, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("golden/tiny/world/%s differs from what its README's command writes (regenerate it)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(tinyWorldDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		rel, _ := filepath.Rel(tinyWorldDir, path)
		if !written[rel] && rel != "README.md" && rel != "dataset_stats.json" {
			t.Errorf("golden/tiny/world/%s: not written by the README's commands", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if size >= 1<<20 {
		t.Errorf("golden/tiny/world holds %d bytes, want under 1 MiB", size)
	}

	checkWorldWeightsFile(t, filepath.Join(tinyWorldDir, "dit.safetensors"), tinyWorldConfig, false, "BF16")
	vae, err := worldmodel.LoadVAEWeights(filepath.Join(tinyWorldDir, "vae.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if vae.Dim != 4 {
		t.Errorf("VAE d = %d, want 4", vae.Dim)
	}
	// The random VAE keeps a 224 × 448 frame's latent finite and spread
	// (spec §7's scales: no activation blows up or dies out).
	enc, err := worldmodel.NewVAEEncoder(vae, 224, 448, nil)
	if err != nil {
		t.Fatal(err)
	}
	img := make([]float32, 3*224*448)
	for i := range img {
		img[i] = float32((i*7919)%255)*(2.0/255) - 1
	}
	latent := make([]float32, worldmodel.LatentChannels*14*28)
	if err := enc.Encode(latent, img); err != nil {
		t.Fatal(err)
	}
	if _, std := valueStats(latent); !(std > 0.01 && std < 100) {
		t.Errorf("latent std %v: want a finite spread", std)
	}

	stats := filepath.Join(tinyWorldDir, "dataset_stats.json")
	n, err := worldmodel.LoadStateNormalizer(stats, "default", worldmodel.ProprioDim)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range n.Scale {
		if degenerate := s == 1 && n.Offset[i] == -0.1; degenerate != (i == 5) {
			t.Errorf("state dim %d: scale %v, offset %v; want only dim 5 degenerate (scale 1, offset -min)", i, s, n.Offset[i])
		}
	}
	for _, mode := range []string{"min/max", "q01/q99", "z-score"} {
		m, err := actions.ParseMode(mode)
		if err != nil {
			t.Fatal(err)
		}
		for _, stepwise := range []bool{false, true} {
			if _, err := actions.LoadNormalizer(stats, actions.StatsSpec{Key: "default", Mode: m, Stepwise: stepwise}, 32, 7); err != nil {
				t.Errorf("actions %s (stepwise %v): %v", mode, stepwise, err)
			}
		}
	}

	// The proprio token of a state: the DiT file's proprio encoder on the
	// state normalised with these statistics.
	f, err := safetensors.Open(filepath.Join(tinyWorldDir, "dit.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pw, err := f.Float32("proprio_encoder.weight", nil)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := f.Float32("proprio_encoder.bias", nil)
	if err != nil {
		t.Fatal(err)
	}
	state := worldmodel.State([3]float64{-0.1, 0.05, 1.1}, [4]float64{0.99, 0.05, 0.02, 0.1}, [2]float64{0.03, -0.03})
	p := make([]float32, worldmodel.ProprioDim)
	if err := n.Normalize(p, state[:]); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, tinyWorldConfig.TextDim)
	if err := worldmodel.ProprioToken(row, pw, pb, p); err != nil {
		t.Fatal(err)
	}
	if _, std := valueStats(row); !(std > 0.01 && std < 100) {
		t.Errorf("proprio token std %v: want a finite spread", std)
	}

	cache := worldmodel.TextCache{Dir: filepath.Join(tinyWorldDir, "text"), Rows: 128, Dim: tinyWorldConfig.TextDim, Encoder: tinyWorldEncoder}
	for task, tokens := range map[string]int{"put the bowl on the plate": 14, "open the top drawer of the cabinet": 17, "turn on the stove": 11} {
		e, err := cache.Lookup(task)
		if err != nil {
			t.Fatal(err)
		}
		if e.Tokens != tokens {
			t.Errorf("%q: %d tokens, want %d", task, e.Tokens, tokens)
		}
	}
}

// valueStats returns the mean and standard deviation of v (NaN if any
// value is not finite).
func valueStats(v []float32) (mean, std float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}
