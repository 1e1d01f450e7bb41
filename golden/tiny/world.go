package tiny

import (
	"embed"
	"io/fs"
)

// world holds the tiny world model's files (world/: the DiT, the VAE,
// dataset_stats.json and the text cache; see world/README.md), the
// defaults of fastwam policy and of the image-bag replay.
//
//go:embed world/*.safetensors world/*.json world/text/*.safetensors
var world embed.FS

// WorldFS returns the tiny world model's files under "world/"
// (world/dit.safetensors, world/vae.safetensors, world/dataset_stats.json,
// world/text/*.text.safetensors).
func WorldFS() fs.FS { return world }
