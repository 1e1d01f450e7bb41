// Package tiny embeds the files of the tiny golden model (spec §11):
// its weights (weights.safetensors in f32, weights_bf16.safetensors in bf16
// under the checkpoint prefix, weights_f16.safetensors), config.json, the
// two cases case_all.npz and case_first4.npz (golden/make_golden.py) and
// rtc_chunks.npz (golden/make_rtc_golden.py).
//
// It imports nothing of this module, so that the CPU backend (expert/cpu,
// whose TinyWeights are the command-line tool's default) and package golden
// (which parses the cases, and serves these files under "tiny/") can both
// stand above it.
package tiny

import (
	"embed"
	"io/fs"
)

//go:embed *.npz *.safetensors config.json
var files embed.FS

// FS returns the embedded files, at its root ("weights.safetensors", …).
func FS() fs.FS { return files }
