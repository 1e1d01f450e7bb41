#!/usr/bin/env python3
"""The world-model node's self-test golden: the tiny world model (golden/tiny/world) run by the
independent references on one fixed observation, for self_test.golden (wmnode.RunSelfTest).

Nothing here runs the Go code. The stages are the repository's Python references, written from
../../shared/spec/world-model.md, composed in the order of spec §1-§6:
  - §1 the frame: golden/make_worldmodel_golden.frame (Pillow BILINEAR crop-resize, both cameras
    flipped 180°, LIBERO's 224 × 224 tiles side by side) and to_tensor;
  - §2 the proprio: make_worldmodel_golden.normalise_state with dataset_stats.json's state.default
    global_min/global_max, and linear_row (float64, rounded once) through the DiT file's
    proprio encoder;
  - §3 the context: the text cache entry of the instruction (sha256 of upstream's prompt prefix +
    the task, text_cache.py) then the proprio row, 129 rows;
  - §4 the VAE encoder: golden/make_vae_golden.encode in float64;
  - §5 the DiT prefill: golden/make_dit_golden.prefill in float64. The tiny DiT file trims its last
    layer to what K and V need; the missing tensors are given as zeros, which act only after the
    last layer's K and V (all this golden keeps).

Output (wmnode/testdata/selftest.npz): cam0, cam1 u8 [64, 96, 3] and [80, 80, 3]; state f32 [8];
instruction u8 (UTF-8 bytes); context f32 [129, 32]; keys, values f32 [2, 1, 98, 32].

Run once with Debian's python3 (numpy, Pillow 9.4, torch 1.13), from the repository root:
    /usr/bin/python3 wmnode/testdata/make_selftest_golden.py [--out FILE]
wmnode's TestSelfTestGoldenMatchesItsReference runs it again and requires the same arrays.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "golden")
WORLD = os.path.join(GOLDEN, "tiny", "world")
sys.path.insert(0, GOLDEN)

import make_dit_golden as dit  # noqa: E402
import make_vae_golden as vae  # noqa: E402
import make_worldmodel_golden as front  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

TASK = "put the bowl on the plate"
PROMPT_PREFIX = "A video recorded from a robot's point of view executing the following instruction: "


def camera(rng, h, w):
    """Smooth blocks plus noise, u8 [h, w, 3]."""
    base = rng.integers(0, 256, size=(h // 8 + 1, w // 8 + 1, 3))
    v = np.repeat(np.repeat(base, 8, axis=0), 8, axis=1)[:h, :w] + rng.integers(-20, 21, size=(h, w, 3))
    return np.clip(v, 0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "selftest.npz"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(2027)
    cams = [camera(rng, 64, 96), camera(rng, 80, 80)]
    rgb = front.frame(cams, [True, True], 224, 224, False)
    image = front.to_tensor(rgb)

    with open(os.path.join(WORLD, "dataset_stats.json")) as f:
        stats = json.load(f)["state"]["default"]
    lo, hi = np.asarray(stats["global_min"]), np.asarray(stats["global_max"])
    state = (lo + (hi - lo) * rng.uniform(0.1, 0.9, lo.shape)).astype(np.float32)
    norm = front.normalise_state(state, lo, hi)

    wd, meta = read_safetensors(os.path.join(WORLD, "dit.safetensors"))
    c = json.loads(meta["fastwam_world_config"])
    w64 = {k: v.to(torch.float64) for k, v in wd.items()}
    for name, shape in dit.weight_shapes(c):
        if name not in w64:
            assert name.startswith(f"blocks.{c['num_layers'] - 1}.") or name.startswith("head."), name
            w64[name] = torch.zeros(shape, dtype=torch.float64)
    row = front.linear_row(w64["proprio_encoder.weight"].numpy(), w64["proprio_encoder.bias"].numpy(), norm)

    prompt = PROMPT_PREFIX + TASK
    sha = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    wt, tmeta = read_safetensors(os.path.join(WORLD, "text", sha + ".text.safetensors"))
    assert tmeta["prompt"] == prompt, tmeta
    text = wt["context"].float().numpy()
    context = np.concatenate([text, row[None]], axis=0).astype(np.float32)

    wv, vmeta = read_safetensors(os.path.join(WORLD, "vae.safetensors"))
    wv64 = {k: v.to(torch.float64) for k, v in wv.items()}
    with torch.no_grad():
        latent, _ = vae.encode(torch.from_numpy(image).to(torch.float64), wv64, int(vmeta["dim"]))
        out = dit.prefill(c, w64, latent, torch.from_numpy(context).to(torch.float64)[None])
    arrays = {
        "cam0": cams[0], "cam1": cams[1], "state": state,
        "instruction": np.frombuffer(TASK.encode("utf-8"), dtype=np.uint8),
        "context": context,
        "keys": out["keys"].numpy().astype(np.float32),
        "values": out["values"].numpy().astype(np.float32),
    }
    front.write_npz(args.out, arrays)
    print({k: v.shape for k, v in arrays.items()})


if __name__ == "__main__":
    main()
