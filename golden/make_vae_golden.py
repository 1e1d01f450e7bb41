#!/usr/bin/env python3
"""Independent float64 reference of the Wan2.2 VAE encoder at T = 1 (world-model spec §4, §6, §9).

Written from ../shared/spec/world-model.md, not from the Go code. It runs the encoder the way
upstream's rank-5 code does: every activation is [B, C, T, h, w] with T = 1, each CausalConv3d is
a torch Conv3d on the input padded with two zero frames in front (its _padding (1, 1, 1, 1, 2, 0)),
AvgDown3D pads the time axis in front and folds (t, row, column) into channels with views and a
permute, patchify is the einops pattern "b c f (h q) (w r) -> b (c r q) f h w" written as a
permute. The Go code computes the same thing as rank-3 (rank-4 with the batch) operations; a
mistake in that rewrite (the wrong temporal tap, a patchify or AvgDown order, the zero frame of
AvgDown) shows up as a mismatch here.

Weights are random (seeded; gains 1 + 0.2·N, biases 0.1·N, every other weight N/sqrt(fan-in),
the attention proj included), rounded to bf16 and written as a safetensors file keyed by the
spec §6 names in their checkpoint shapes (rank 5, all three temporal taps, the unused time_conv
too); the computation is float64 on those values. The input is a [1, 3, H, W] image of §1.4
values (fl32(fl32(v·fl32(2/255)) − 1) of random bytes).

Writes to --out (default golden/vae/):
  weights.safetensors  the encoder's tensors (and conv1), BF16
  vae.npz              image [1, 3, H, W] f32; the activations at each stage boundary (§4.10),
                       float64: conv1, stage0..stage3, middle, head, mu, each [C, h, w];
                       latent [1, 48, 1, h, w] float64

Usage: /usr/bin/python3 golden/make_vae_golden.py [--out DIR] [--dim 4] [--height 64] [--width 128] [--threads 1]
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402

Z = 48

# §4.9: the latent normalisation constants of WanVideoVAE38 (not in the weight file).
MEAN = [-0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557,
        -0.1382, 0.0542, 0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825,
        -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
        -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230,
        -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
        0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667]
STD = [0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013,
       0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978,
       0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
       0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093,
       0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
       0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744]


def weight_shapes(d):
    """The §6.1 encoder-side keys and their checkpoint shapes, in order; kind is gain, bias or weight."""
    dims = [d, d, 2 * d, 4 * d, 4 * d]
    out = [("encoder.conv1.weight", (d, 12, 3, 3, 3)), ("encoder.conv1.bias", (d,))]

    def res(prefix, cin, cout):
        out.extend([
            (prefix + ".residual.0.gamma", (cin, 1, 1, 1)),
            (prefix + ".residual.2.weight", (cout, cin, 3, 3, 3)),
            (prefix + ".residual.2.bias", (cout,)),
            (prefix + ".residual.3.gamma", (cout, 1, 1, 1)),
            (prefix + ".residual.6.weight", (cout, cout, 3, 3, 3)),
            (prefix + ".residual.6.bias", (cout,)),
        ])
        if cin != cout:
            out.extend([(prefix + ".shortcut.weight", (cout, cin, 1, 1, 1)), (prefix + ".shortcut.bias", (cout,))])

    for s in range(4):
        cin, cout = dims[s], dims[s + 1]
        res(f"encoder.downsamples.{s}.downsamples.0", cin, cout)
        res(f"encoder.downsamples.{s}.downsamples.1", cout, cout)
        if s != 3:
            p = f"encoder.downsamples.{s}.downsamples.2"
            out.extend([(p + ".resample.1.weight", (cout, cout, 3, 3)), (p + ".resample.1.bias", (cout,))])
            if s in (1, 2):
                out.extend([(p + ".time_conv.weight", (cout, cout, 3, 1, 1)), (p + ".time_conv.bias", (cout,))])
    c = dims[4]
    res("encoder.middle.0", c, c)
    out.extend([
        ("encoder.middle.1.norm.gamma", (c, 1, 1)),
        ("encoder.middle.1.to_qkv.weight", (3 * c, c, 1, 1)),
        ("encoder.middle.1.to_qkv.bias", (3 * c,)),
        ("encoder.middle.1.proj.weight", (c, c, 1, 1)),
        ("encoder.middle.1.proj.bias", (c,)),
    ])
    res("encoder.middle.2", c, c)
    out.extend([
        ("encoder.head.0.gamma", (c, 1, 1, 1)),
        ("encoder.head.2.weight", (2 * Z, c, 3, 3, 3)),
        ("encoder.head.2.bias", (2 * Z,)),
        ("conv1.weight", (2 * Z, 2 * Z, 1, 1, 1)),
        ("conv1.bias", (2 * Z,)),
    ])
    return out


def random_weights(d, rng):
    """Random bf16 tensors for every key of weight_shapes(d)."""
    w = {}
    for name, shape in weight_shapes(d):
        n = rng.standard_normal(shape)
        if name.endswith(".gamma"):
            v = 1 + 0.2 * n
        elif name.endswith(".bias"):
            v = 0.1 * n
        else:
            v = n / math.sqrt(int(np.prod(shape[1:])))
        w[name] = torch.from_numpy(v).to(torch.bfloat16)
    return w


def causal_conv3d(x, w, b):
    """CausalConv3d: zero-pad (w: 1, 1; h: 1, 1; t: 2, 0) when the kernel is 3-wide, then Conv3d."""
    if w.shape[2] == 3:
        x = F.pad(x, (1, 1, 1, 1, 2, 0))
    return F.conv3d(x, w, b)


def rms_norm(x, gamma):
    """RMS_norm over the channel axis (dim 1): F.normalize (L2 floor 1e-12) · sqrt(C) · gamma."""
    c = x.shape[1]
    return F.normalize(x, dim=1) * math.sqrt(c) * gamma


def resblock(x, w, p):
    h = x
    if p + ".shortcut.weight" in w:
        h = causal_conv3d(x, w[p + ".shortcut.weight"], w[p + ".shortcut.bias"])
    y = causal_conv3d(F.silu(rms_norm(x, w[p + ".residual.0.gamma"])), w[p + ".residual.2.weight"], w[p + ".residual.2.bias"])
    y = causal_conv3d(F.silu(rms_norm(y, w[p + ".residual.3.gamma"])), w[p + ".residual.6.weight"], w[p + ".residual.6.bias"])
    return y + h


def resample_down(x, w, p):
    """Resample38 downsample2d / downsample3d at chunk 0 (time_conv skipped): per frame, ZeroPad2d((0, 1, 0, 1)),
    then a 3×3 Conv2d with stride 2."""
    b, c, t, h, wd = x.shape
    y = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, wd)
    y = F.conv2d(F.pad(y, (0, 1, 0, 1)), w[p + ".resample.1.weight"], w[p + ".resample.1.bias"], stride=2)
    return y.reshape(b, t, c, h // 2, wd // 2).permute(0, 2, 1, 3, 4)


def avg_down(x, cout, ft, fs):
    """AvgDown3D: pad time in front to a multiple of ft, fold (t, row, column) into channels, average groups."""
    pad_t = (ft - x.shape[2] % ft) % ft
    x = F.pad(x, (0, 0, 0, 0, pad_t, 0))
    b, c, t, h, wd = x.shape
    x = x.view(b, c, t // ft, ft, h // fs, fs, wd // fs, fs)
    x = x.permute(0, 1, 3, 5, 7, 2, 4, 6).contiguous()
    x = x.view(b, c * ft * fs * fs, t // ft, h // fs, wd // fs)
    g = c * ft * fs * fs // cout
    return x.view(b, cout, g, t // ft, h // fs, wd // fs).mean(dim=2)


def attention(x, w):
    """AttentionBlock: per frame, RMS_norm, 1×1 to_qkv, one head over the h·w tokens, 1×1 proj, residual."""
    b, c, t, h, wd = x.shape
    y = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, wd)
    n = F.normalize(y, dim=1) * math.sqrt(c) * w["encoder.middle.1.norm.gamma"]
    qkv = F.conv2d(n, w["encoder.middle.1.to_qkv.weight"], w["encoder.middle.1.to_qkv.bias"])
    qkv = qkv.reshape(b * t, 3 * c, h * wd).permute(0, 2, 1)  # [bt, n, 3c], token i·w + j
    q, k, v = qkv[..., :c], qkv[..., c:2 * c], qkv[..., 2 * c:]
    a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(c), dim=-1)
    o = (a @ v).permute(0, 2, 1).reshape(b * t, c, h, wd)
    o = F.conv2d(o, w["encoder.middle.1.proj.weight"], w["encoder.middle.1.proj.bias"])
    return x + o.reshape(b, t, c, h, wd).permute(0, 2, 1, 3, 4)


def encode(image, w, d):
    """The encoder of §4 on image [1, 3, H, W]: returns the latent [1, 48, 1, H/16, W/16] and the stage trace."""
    dims = [d, d, 2 * d, 4 * d, 4 * d]
    trace = {}
    x = image.unsqueeze(2)  # [1, 3, 1, H, W]: the one-frame video
    b, c, f, hh, ww = x.shape
    x = x.view(b, c, f, hh // 2, 2, ww // 2, 2).permute(0, 1, 6, 4, 2, 3, 5).reshape(b, c * 4, f, hh // 2, ww // 2)
    x = causal_conv3d(x, w["encoder.conv1.weight"], w["encoder.conv1.bias"])
    trace["conv1"] = x
    for s in range(4):
        p = f"encoder.downsamples.{s}.downsamples"
        x0 = x
        x = resblock(x, w, p + ".0")
        x = resblock(x, w, p + ".1")
        if s != 3:
            x = resample_down(x, w, p + ".2")
        x = x + avg_down(x0, dims[s + 1], 2 if s in (1, 2) else 1, 2 if s != 3 else 1)
        trace[f"stage{s}"] = x
    x = resblock(x, w, "encoder.middle.0")
    x = attention(x, w)
    x = resblock(x, w, "encoder.middle.2")
    trace["middle"] = x
    x = causal_conv3d(F.silu(rms_norm(x, w["encoder.head.0.gamma"])), w["encoder.head.2.weight"], w["encoder.head.2.bias"])
    trace["head"] = x
    g = causal_conv3d(x, w["conv1.weight"], w["conv1.bias"])
    mu = g[:, :Z]
    trace["mu"] = mu
    mean = torch.tensor(MEAN, dtype=torch.float64).view(1, Z, 1, 1, 1)
    inv_std = torch.tensor(STD, dtype=torch.float32).reciprocal().to(torch.float64).view(1, Z, 1, 1, 1)
    latent = (mu - mean) * inv_std
    return latent, {k: v[0, :, 0].numpy() for k, v in trace.items()}


def image_tensor(rng, h, w):
    """A [1, 3, h, w] float32 image of §1.4 values from random bytes, smooth blocks plus noise."""
    base = rng.integers(0, 256, size=(3, h // 8, w // 8))
    v = np.repeat(np.repeat(base, 8, axis=1), 8, axis=2) + rng.integers(-24, 25, size=(3, h, w))
    v = np.clip(v, 0, 255).astype(np.float32)
    x = (v * np.float32(2 / 255)).astype(np.float32) - np.float32(1)
    return x.astype(np.float32)[None]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "vae"))
    ap.add_argument("--dim", type=int, default=4, help="VAE base width d (160 real)")
    ap.add_argument("--height", type=int, default=64)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: the same sums on every machine)")
    args = ap.parse_args()
    if args.height % 16 or args.width % 16 or args.height <= 0 or args.width <= 0:
        sys.exit(f"--height and --width must be positive multiples of 16, got {args.height} × {args.width}")
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    wb = random_weights(args.dim, rng)
    image = image_tensor(rng, args.height, args.width)
    w64 = {k: v.to(torch.float64) for k, v in wb.items()}
    with torch.no_grad():
        latent, trace = encode(torch.from_numpy(image).to(torch.float64), w64, args.dim)
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "weights.safetensors"), wb,
                      {"format": "fastwam-vae-golden/1", "dim": str(args.dim)})
    arrays = {"image": image, "latent": latent.numpy()}
    arrays.update(trace)
    np.savez_compressed(os.path.join(args.out, "vae.npz"), **arrays)


if __name__ == "__main__":
    main()
