package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/internal/strictjson"
	"github.com/fastwam/actionexpert/safetensors"
)

// headSplitMetadataKey is the safetensors metadata entry in which
// golden/export_checkpoint.py records where the head split came from: a
// JSON object {"num_heads", "attn_head_dim", "source", "note"}; source is
// "checkpoint" when the checkpoint's own configuration gave it, "flags"
// when the exporter's flags or --config file did, "assumed" otherwise.
const headSplitMetadataKey = "fastwam_head_split"

// embeddedWeightsFile is the embedded tiny weights' name in golden.Tiny().
const embeddedWeightsFile = "tiny/weights.safetensors"

// modelInfo says where a backend's head split and number of action tokens
// come from, for parity's header and its hints.
type modelInfo struct {
	split         string // where the head split comes from
	splitAssumed  bool   // it is not the model's own record
	tokens        string // where the number of action tokens comes from
	tokensDefault bool   // it is the default, not recorded anywhere
}

// headSplit is the exporter's record of the head split.
type headSplit struct {
	NumHeads   int    `json:"num_heads"`
	HeadDim    int    `json:"attn_head_dim"`
	Source     string `json:"source"`
	Note       string `json:"note"`
	present    bool   // the metadata entry exists
	unreadable error  // it is not the JSON above
}

// weightsConfig is what a weights file says about its configuration.
type weightsConfig struct {
	found  bool            // a configuration was found (else the loader reports it)
	source string          // where: "the weights' fastwam_config metadata", a file name
	cfg    cpu.Config      // as written (no defaults filled in)
	keys   map[string]bool // the keys it has
	split  headSplit       // the exporter's record, when present
}

// readWeightsConfig finds the configuration of the weights at path (data,
// when not nil, is the file's image) the way the CPU backend's loader does:
// the fastwam_config metadata, else <name>.json, else config.json beside
// it. It only describes: what it cannot read, the loader reports.
func readWeightsConfig(path string, data []byte) weightsConfig {
	var (
		f   *safetensors.File
		err error
	)
	if data != nil {
		f, err = safetensors.Parse(data)
	} else {
		f, err = safetensors.Open(path)
	}
	if err != nil {
		return weightsConfig{}
	}
	defer f.Close()
	var wc weightsConfig
	if js, ok := f.Metadata()[headSplitMetadataKey]; ok {
		wc.split.present = true
		if err := json.Unmarshal([]byte(js), &wc.split); err != nil {
			wc.split.unreadable = err
		}
	}
	if js, ok := f.Metadata()[cpu.ConfigMetadataKey]; ok {
		wc.source = "the weights' " + cpu.ConfigMetadataKey + " metadata"
		wc.found = wc.parse([]byte(js))
		return wc
	}
	if data != nil {
		return wc
	}
	base := strings.TrimSuffix(path, filepath.Ext(path))
	for _, p := range []string{base + ".json", filepath.Join(filepath.Dir(path), "config.json")} {
		b, err := regfile.ReadFile(p, "a configuration JSON file", cpu.MaxConfigBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			wc.source = p
			wc.found = wc.parse(b)
		}
		return wc
	}
	return wc
}

func (wc *weightsConfig) parse(b []byte) bool {
	var keys map[string]json.RawMessage
	if strictjson.NoDuplicates(b) != nil || json.Unmarshal(b, &keys) != nil || json.Unmarshal(b, &wc.cfg) != nil {
		return false
	}
	wc.keys = map[string]bool{}
	for k := range keys {
		wc.keys[k] = true
	}
	return true
}

// describe fills in where d's head split and action tokens come from;
// tokensFlag is -action-tokens (0: not given).
func (wc weightsConfig) describe(d expert.Dims, tokensFlag int) modelInfo {
	var m modelInfo
	split := fmt.Sprintf("%dx%d (attention width %d)", d.Heads, d.HeadDim, d.AttnWidth())
	sp := wc.split
	switch {
	case sp.present && sp.unreadable != nil:
		m.split = fmt.Sprintf("%s from %s; its %s metadata is unreadable (%v)", split, wc.source, headSplitMetadataKey, sp.unreadable)
		m.splitAssumed = true
	case sp.present && (sp.NumHeads != d.Heads || sp.HeadDim != d.HeadDim):
		m.split = fmt.Sprintf("%s from %s, but the exporter recorded %dx%d (%s)", split, wc.source, sp.NumHeads, sp.HeadDim, sp.Note)
		m.splitAssumed = true
	case sp.present:
		m.split = fmt.Sprintf("%s from %s; the exporter recorded: %s", split, wc.source, sp.Note)
		m.splitAssumed = sp.Source != "checkpoint"
	case wc.found:
		m.split = fmt.Sprintf("%s from %s", split, wc.source)
	default:
		m.split = split
	}
	switch {
	case tokensFlag > 0:
		m.tokens = fmt.Sprintf("%d from -action-tokens", d.ActionTokens)
	case wc.keys["action_tokens"]:
		m.tokens = fmt.Sprintf("%d from %s", d.ActionTokens, wc.source)
	default:
		m.tokens = fmt.Sprintf("%d, the default: the weights do not record action_tokens (-action-tokens sets it)", d.ActionTokens)
		m.tokensDefault = true
	}
	return m
}

// open loads the CPU backend sized for inputs of videoTokens cached video
// tokens and contextTokens context tokens; embedded selects the embedded
// tiny weights when no weights file is given. f.actionTokens, when set,
// gives the number of action tokens the weights' configuration does not
// record (and must agree with it when it does). It records in f.model
// where the head split and the action tokens come from.
func (f *cpuFlags) open(ctx context.Context, videoTokens, contextTokens int, embedded bool) (expert.Backend, string, error) {
	var (
		data []byte
		name = f.weights
		err  error
	)
	switch {
	case f.weights != "":
	case embedded:
		name = "embedded " + embeddedWeightsFile
		if data, err = fs.ReadFile(golden.Tiny(), embeddedWeightsFile); err != nil {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
	default:
		return nil, "", usageError("-backend cpu with -golden needs -weights (the action expert's .safetensors)")
	}
	wc := readWeightsConfig(name, data)
	var cfg *cpu.Config
	if f.actionTokens > 0 && wc.found {
		if wc.keys["action_tokens"] && wc.cfg.ActionSteps != f.actionTokens {
			return nil, "", usageError("-action-tokens %d contradicts action_tokens %d in %s", f.actionTokens, wc.cfg.ActionSteps, wc.source)
		}
		c := wc.cfg
		c.ActionSteps = f.actionTokens
		cfg = &c
	}
	var w *cpu.Weights
	if data != nil {
		w, err = cpu.ParseWeights(ctx, name, data, cfg)
	} else {
		w, err = cpu.LoadWeights(ctx, name, cfg)
	}
	if err != nil {
		return nil, "", err
	}
	if w, err = w.ForInputs(videoTokens, contextTokens); err != nil {
		return nil, "", err
	}
	b, err := cpu.New(w, cpu.Options{BLAS: f.blas, Threads: f.threads})
	if err != nil {
		return nil, "", err
	}
	f.model = wc.describe(b.Dims(), f.actionTokens)
	return b, "cpu, " + b.BLAS(), nil
}
