#!/usr/bin/env python3
"""Independent float64 reference of the video DiT prefill at t = 0 (world-model spec §5, §6.2, §6.3, §9).

Written from ../shared/spec/world-model.md and action-step.md §3–§4, not from the Go code. It runs
the prefill the way upstream's code does, not the way the Go code does:
  - the patch embedding is a rank-5 torch Conv3d (kernel = stride = (1, 2, 2)) on the latent
    [1, z, 1, h, w], flattened to tokens (f, y, x);
  - the time conditioning is computed per token (all 98 timesteps 0), through the sinusoid, the
    time MLP and the projection, then added to each block's modulation, [1, Sv, 6, D] — the Go code
    folds it into one [6, D] at load time;
  - the 3-D RoPE table is built with torch.polar (complex128) per axis for 1024 positions and the
    rotation is a complex multiplication in float64 (view_as_complex), as rope_apply does;
  - attention is scaled_dot_product_attention's maths (softmax(q·kᵀ/√d)·v) on [b, heads, s, d];
  - every layer runs in full, the last one included (its q, attention, cross-attention and FFN are
    computed although the action expert reads only its K and V); only K and V are compared.

Weights are random (seeded; RMS/LayerNorm gains 1 + 0.2·N, biases 0.1·N, modulation 0.3·N, every
other matrix N/sqrt(fan-in)), rounded to bf16 and written in the DiT weight file contract
(docs/world-model.md): the spec §6.2 keys without "mixtures.video.", head.* too, the proprio
encoder, and the configuration as the "fastwam_world_config" metadata. The computation is float64
on those values.

Cases (one .npz each):
  dit_98.npz    the LIBERO frame's latent grid 14 × 28 (Sv = 98)
  dit_49.npz    a 224 × 224 image's grid 14 × 14 (Sv = 49): sizes are configuration
  chain.npz     the tiny VAE golden (golden/vae) run through make_vae_golden.encode in float64,
                its latent fed to the DiT (only with --chain, the default for the golden set)
Each holds: latent [z, h, w] f32 (the input; in chain.npz the float64 reference latent), context
[L, T] f32 (text rows with zero padding, then the proprio row), state_norm [P] f32 (the normalised
proprio the context's last row was made from), proprio_row [T] f64, x0 [Sv, D] f64 (patch
embedding), tm [6, D] f64 (the per-token time modulation, row 0: all rows equal), ctx_v [L, D] f64,
keys / values [N, 1, Sv, D] f64.

Usage: /usr/bin/python3 golden/make_dit_golden.py [--out DIR] [--config tiny|real] [--layers N]
       [--cases 98,49,chain] [--threads 1]
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

CONFIGS = {
    # world-model.md §9: the small test configuration.
    "tiny": dict(hidden_dim=48, ffn_dim=96, num_heads=2, head_dim=24, num_layers=2, text_dim=64,
                 freq_dim=256, proprio_dim=8, latent_channels=48),
    # §0: the released widths (layers set by --layers).
    "real": dict(hidden_dim=3072, ffn_dim=14336, num_heads=24, head_dim=128, num_layers=2, text_dim=4096,
                 freq_dim=256, proprio_dim=8, latent_channels=48),
}
EPS = 1e-6
TEXT_ROWS = 128


def weight_shapes(c):
    """Every key of the contract (spec §6.2 without the prefix, §6.3) with its checkpoint shape."""
    D, F_, T, f, P, z = c["hidden_dim"], c["ffn_dim"], c["text_dim"], c["freq_dim"], c["proprio_dim"], c["latent_channels"]
    s = [("patch_embedding.weight", (D, z, 1, 2, 2)), ("patch_embedding.bias", (D,)),
         ("text_embedding.0.weight", (D, T)), ("text_embedding.0.bias", (D,)),
         ("text_embedding.2.weight", (D, D)), ("text_embedding.2.bias", (D,)),
         ("time_embedding.0.weight", (D, f)), ("time_embedding.0.bias", (D,)),
         ("time_embedding.2.weight", (D, D)), ("time_embedding.2.bias", (D,)),
         ("time_projection.1.weight", (6 * D, D)), ("time_projection.1.bias", (6 * D,)),
         ("head.head.weight", (4 * z, D)), ("head.head.bias", (4 * z,)), ("head.modulation", (1, 2, D))]
    for l in range(c["num_layers"]):
        p = f"blocks.{l}."
        s.append((p + "modulation", (1, 6, D)))
        for a in ("self_attn", "cross_attn"):
            for n in "qkvo":
                s += [(p + f"{a}.{n}.weight", (D, D)), (p + f"{a}.{n}.bias", (D,))]
            s += [(p + f"{a}.norm_q.weight", (D,)), (p + f"{a}.norm_k.weight", (D,))]
        s += [(p + "norm3.weight", (D,)), (p + "norm3.bias", (D,)),
              (p + "ffn.0.weight", (F_, D)), (p + "ffn.0.bias", (F_,)),
              (p + "ffn.2.weight", (D, F_)), (p + "ffn.2.bias", (D,))]
    s += [("proprio_encoder.weight", (T, P)), ("proprio_encoder.bias", (T,))]
    return s


def random_weights(c, rng):
    w = {}
    for name, shape in weight_shapes(c):
        n = rng.standard_normal(shape, dtype=np.float32)
        if name.endswith("modulation"):
            v = 0.3 * n
        elif "norm" in name and name.endswith(".weight"):
            v = 1 + 0.2 * n
        elif name.endswith(".bias"):
            v = 0.1 * n
        else:
            v = n / np.float32(math.sqrt(int(np.prod(shape[1:]))))
        w[name] = torch.from_numpy(np.ascontiguousarray(v)).to(torch.bfloat16)
    return w


def sinusoidal_embedding_1d(dim, position):
    """action-step.md §3.9: cos first, then sin, float64."""
    half = dim // 2
    freqs = torch.pow(10000.0, -torch.arange(half, dtype=torch.float64).div(half))
    sinusoid = torch.outer(position.to(torch.float64), freqs)
    return torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)


def precompute_freqs_cis(dim, end=1024, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    freqs = torch.outer(torch.arange(end, device=freqs.device), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex128


def precompute_freqs_cis_3d(dim, end=1024):
    """§5.4: temporal dim − 2⌊dim/3⌋, height and width ⌊dim/3⌋ each."""
    f_freqs = precompute_freqs_cis(dim - 2 * (dim // 3), end)
    h_freqs = precompute_freqs_cis(dim // 3, end)
    w_freqs = precompute_freqs_cis(dim // 3, end)
    return f_freqs, h_freqs, w_freqs


def rope_apply(x, freqs, num_heads):
    """x [b, s, n·d] → rotated, interleaved pairs as complex numbers, in float64."""
    b, s, nd = x.shape
    x = x.view(b, s, num_heads, nd // num_heads)
    xc = torch.view_as_complex(x.to(torch.float64).reshape(b, s, num_heads, -1, 2))
    out = torch.view_as_real(xc * freqs).flatten(2)
    return out.to(x.dtype)


def rms_norm(x, g):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * g


def linear(x, w, p):
    return F.linear(x, w[p + ".weight"], w[p + ".bias"])


def attention(q, k, v, n):
    b, s, _ = q.shape
    q, k, v = (t.view(b, t.shape[1], n, -1).transpose(1, 2) for t in (q, k, v))
    # scaled_dot_product_attention (torch ≥ 2.0) without mask or dropout, written out for torch 1.13.
    a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    o = a @ v
    return o.transpose(1, 2).reshape(b, s, -1)


def prefill(c, w, latent, context):
    """latent [1, z, 1, h, w] f64, context [1, L, T] f64 → dict of stage outputs and per-layer K/V."""
    D, H, Dh = c["hidden_dim"], c["num_heads"], c["head_dim"]
    out = {}
    # §5.1: Conv3d patch embedding, tokens in (f, y, x) order.
    x = F.conv3d(latent, w["patch_embedding.weight"], w["patch_embedding.bias"], stride=(1, 2, 2))
    _, _, fr, hh, ww = x.shape
    x = x.flatten(2).transpose(1, 2)  # [1, Sv, D]
    out["x0"] = x[0]
    sv = x.shape[1]
    # §5.2: per-token timestep, all 0.
    t = sinusoidal_embedding_1d(c["freq_dim"], torch.zeros(sv, dtype=torch.float64))
    t = linear(F.silu(linear(t, w, "time_embedding.0")), w, "time_embedding.2")
    t_mod = linear(F.silu(t), w, "time_projection.1").unflatten(1, (6, D)).unsqueeze(0)  # [1, Sv, 6, D]
    out["tm"] = t_mod[0, 0]
    # §5.3: the video expert's own text embedding.
    ctx = linear(F.gelu(linear(context, w, "text_embedding.0"), approximate="tanh"), w, "text_embedding.2")
    out["ctx_v"] = ctx[0]
    # §5.4: the 3-D RoPE table for the (f, h, w) grid.
    f_freqs, h_freqs, w_freqs = precompute_freqs_cis_3d(Dh)
    freqs = torch.cat([
        f_freqs[:fr].view(fr, 1, 1, -1).expand(fr, hh, ww, -1),
        h_freqs[:hh].view(1, hh, 1, -1).expand(fr, hh, ww, -1),
        w_freqs[:ww].view(1, 1, ww, -1).expand(fr, hh, ww, -1),
    ], dim=-1).reshape(fr * hh * ww, 1, -1)
    keys, values = [], []
    for l in range(c["num_layers"]):
        p = f"blocks.{l}."
        mod = w[p + "modulation"].unsqueeze(1) + t_mod  # [1, Sv, 6, D]
        shift1, scale1, gate1, shift2, scale2, gate2 = [m.squeeze(2) for m in mod.chunk(6, dim=2)]
        h = F.layer_norm(x, (D,), eps=EPS) * (1 + scale1) + shift1
        q = rope_apply(rms_norm(linear(h, w, p + "self_attn.q"), w[p + "self_attn.norm_q.weight"]), freqs, H)
        k = rope_apply(rms_norm(linear(h, w, p + "self_attn.k"), w[p + "self_attn.norm_k.weight"]), freqs, H)
        v = linear(h, w, p + "self_attn.v")
        keys.append(k[0])
        values.append(v[0])
        x = x + gate1 * linear(attention(q, k, v, H), w, p + "self_attn.o")
        y = F.layer_norm(x, (D,), w[p + "norm3.weight"], w[p + "norm3.bias"], eps=EPS)
        qc = rms_norm(linear(y, w, p + "cross_attn.q"), w[p + "cross_attn.norm_q.weight"])
        kc = rms_norm(linear(ctx, w, p + "cross_attn.k"), w[p + "cross_attn.norm_k.weight"])
        vc = linear(ctx, w, p + "cross_attn.v")
        x = x + linear(attention(qc, kc, vc, H), w, p + "cross_attn.o")
        h2 = F.layer_norm(x, (D,), eps=EPS) * (1 + scale2) + shift2
        x = x + gate2 * linear(F.gelu(linear(h2, w, p + "ffn.0"), approximate="tanh"), w, p + "ffn.2")
    out["keys"] = torch.stack(keys).unsqueeze(1)
    out["values"] = torch.stack(values).unsqueeze(1)
    return out


def make_context(c, w64, rng):
    """[L, T] f32: 128 text rows (rows 23.. zero), then the proprio row of a random normalised state."""
    T, P = c["text_dim"], c["proprio_dim"]
    text = rng.standard_normal((TEXT_ROWS, T)).astype(np.float32)
    text[23:] = 0
    state = rng.uniform(-1, 1, P).astype(np.float32)
    row = F.linear(torch.from_numpy(state).to(torch.float64), w64["proprio_encoder.weight"], w64["proprio_encoder.bias"])
    ctx = np.concatenate([text, row.numpy().astype(np.float32)[None]], axis=0)
    return ctx, state, row.numpy()


def run_case(c, wb, w64, rng, latent, path, extra=None):
    ctx, state, row = make_context(c, w64, rng)
    lat64 = torch.from_numpy(np.asarray(latent)).to(torch.float64)
    with torch.no_grad():
        out = prefill(c, w64, lat64[None, :, None], torch.from_numpy(ctx).to(torch.float64)[None])
    arrays = {"latent": np.asarray(latent), "context": ctx, "state_norm": state, "proprio_row": row}
    arrays.update({k: np.ascontiguousarray(v.numpy()) for k, v in out.items()})
    if extra:
        arrays.update(extra)
    np.savez_compressed(path, **arrays)


def chain_latent():
    """The tiny VAE golden's image through make_vae_golden.encode in float64 (its reference, as a module)."""
    import make_vae_golden as vae
    wv, meta = read_safetensors(os.path.join(HERE, "vae", "weights.safetensors"))
    d = int(meta["dim"])
    image = np.load(os.path.join(HERE, "vae", "vae.npz"))["image"]
    w64 = {k: v.to(torch.float64) for k, v in wv.items()}
    with torch.no_grad():
        latent, _ = vae.encode(torch.from_numpy(image).to(torch.float64), w64, d)
    return latent[0, :, 0].numpy(), image


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "dit"))
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--cases", default="98,49,chain")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: the same sums on every machine)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    c = dict(CONFIGS[args.config], num_layers=args.layers)
    rng = np.random.default_rng(args.seed)
    wb = random_weights(c, rng)
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "weights.safetensors"), wb,
                      {"fastwam_world_config": json.dumps(c, separators=(",", ":"))})
    w64 = {k: v.to(torch.float64) for k, v in wb.items()}
    z = c["latent_channels"]
    for case in args.cases.split(","):
        if case in ("98", "49"):
            grid = (14, 28) if case == "98" else (14, 14)
            latent = rng.standard_normal((z,) + grid).astype(np.float32)
            run_case(c, wb, w64, rng, latent, os.path.join(args.out, f"dit_{case}.npz"))
        elif case == "chain":
            latent, _ = chain_latent()
            run_case(c, wb, w64, rng, latent, os.path.join(args.out, "chain.npz"))
        else:
            sys.exit(f"unknown case {case!r} (want 98, 49 or chain)")


if __name__ == "__main__":
    main()
