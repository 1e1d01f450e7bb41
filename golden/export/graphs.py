"""Exportable torch modules for the graph set of issue 28 (docs/graphs.md holds the contracts).

Written from ../shared/spec/action-step.md (§3, §4, §6, §8) and world-model.md (§4, §5), not from the
Go code. Every module is float32 and rank <= 4 throughout, so that torch.onnx.export gives a graph
QNN can take:
- RoPE is real-valued: interleaved pairs viewed as [1, S, A/2, 2], rotated with f32 cos/sin tables
  computed in float64 at build time (no complex ops, no float64 in the graph);
- t = 0 constants of the video DiT (the time MLP and projection, §5.2) are folded at build time into
  one [6, D] modulation constant per layer; the action step keeps its timestep input (the sinusoid is
  computed in the graph in f32);
- masks are folded where they are constant (video self-attention, action self-attention with every
  video token visible); the context mask stays an input (f32, nonzero = attend);
- the VAE encoder at T = 1 is a chain of 2-D convolutions on NCHW tensors (§4): the last temporal tap
  of every 3x3x3 kernel, patchify as a one-hot stride-2 convolution, AvgDown as pooling plus a
  channel interleave written with rank-4 reshapes, the latent normalisation folded into conv1.

Graphs (names and I/O fixed by the contracts):
    VAEEncoder            vae_encoder:      image -> latent
    Prefill(lo, hi, ...)  prefill_<i> and the monolithic prefill (lo = 0, hi = N)
    ActionContext         action_context:   context -> cross_keys, cross_values
    ActionStepCtx         action_step_ctx:  ... cross_keys, cross_values, context_mask -> pred_noise
    ActionStep            action_step:      today's monolithic step (context in, cross K/V inside)
"""

import json
import math
import os
import re
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # golden/: the key checks

EPS = 1e-6
THETA = 10000.0


class GraphError(Exception):
    """A checkpoint or a configuration that cannot be turned into a graph."""


# ----------------------------------------------------------------------------- primitives (f32, rank <= 4)


def linear(x, w, b):
    """y = x W^T + b (action-step.md §3.1)."""
    return torch.matmul(x, w.t()) + b


def layer_norm(x, eps=EPS):
    """Plain LayerNorm over the last axis (§3.4). A constant gain of ones is passed (a product by 1,
    exact) because LayerNormalization's scale input is required and torch 1.13 leaves it empty."""
    return F.layer_norm(x, (x.shape[-1],), torch.ones(x.shape[-1]), eps=eps)


def rms_norm(x, g, eps=EPS):
    """RMSNorm over the whole last axis (§3.5)."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * g


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def rope(x, cos, sin):
    """Interleaved-pair rotation (§3.6) in real form on x [1, S, A]; cos/sin [S, A/2] f32 constants."""
    _, S, A = x.shape
    z = x.reshape(1, S, A // 2, 2)
    a, b = z[..., 0], z[..., 1]
    out = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return out.reshape(1, S, A)


def attention(q, k, v, heads, bias=None):
    """Per-head softmax(q k^T / sqrt(Dh) + bias) v (§3.7); q [1, Sq, A], k/v [1, Sk, A]."""
    _, Sq, A = q.shape
    Sk = k.shape[1]
    dh = A // heads
    qh = q.reshape(Sq, heads, dh).transpose(0, 1)           # [H, Sq, Dh]
    kh = k.reshape(Sk, heads, dh).transpose(0, 1)
    vh = v.reshape(Sk, heads, dh).transpose(0, 1)
    s = torch.matmul(qh, kh.transpose(1, 2)) * (1.0 / math.sqrt(dh))
    if bias is not None:
        s = s + bias
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, vh).transpose(0, 1).reshape(1, Sq, A)


def mask_bias(mask):
    """f32 mask [1, L] (nonzero = attend) -> additive bias [1, 1, L] (0 / -inf), in the graph."""
    return torch.where(mask != 0, torch.zeros_like(mask), torch.full_like(mask, float("-inf"))).reshape(1, 1, -1)


def sinusoid_freqs(dim):
    """§3.9's frequencies w_j = 10000^(-j/half), built in float64, as the f32 constant the graph
    multiplies tau by (the graph then takes [cos | sin] in f32; see docs/graphs.md)."""
    half = dim // 2
    j = torch.arange(half, dtype=torch.float64)
    w = torch.pow(torch.tensor(THETA, dtype=torch.float64), -j / half).to(torch.float32)
    return w


def rope_1d(positions, head_dim, heads):
    """cos/sin [positions, heads*Dh/2] f32 for the action tokens (angle p * 10000^(-2j/Dh)), built in float64."""
    j = torch.arange(head_dim // 2, dtype=torch.float64)
    w = torch.pow(torch.tensor(THETA, dtype=torch.float64), -2.0 * j / head_dim)
    ang = torch.arange(positions, dtype=torch.float64).reshape(-1, 1) * w.reshape(1, -1)
    return torch.cos(ang).repeat(1, heads).float(), torch.sin(ang).repeat(1, heads).float()


def rope_3d(frames, rows, cols, head_dim, heads):
    """cos/sin [tokens, heads*Dh/2] for the video tokens (world-model.md §5.4), built in float64."""
    dh3 = head_dim // 3
    dt = head_dim - 2 * dh3
    if dt % 2 or dh3 % 2:
        raise GraphError(f"head dim {head_dim} does not split into even 3-D RoPE parts ({dt}, {dh3}, {dh3})")

    def omega(d):
        j = torch.arange(d // 2, dtype=torch.float64)
        return torch.pow(torch.tensor(THETA, dtype=torch.float64), -2.0 * j / d)

    wt, wh = omega(dt), omega(dh3)
    angs = []
    for f in range(frames):
        for y in range(rows):
            for x in range(cols):
                angs.append(torch.cat([f * wt, y * wh, x * wh]))
    ang = torch.stack(angs)
    return torch.cos(ang).repeat(1, heads).float(), torch.sin(ang).repeat(1, heads).float()


def f32(sd, key):
    t = sd.get(key)
    if not isinstance(t, torch.Tensor):
        raise GraphError(f"missing tensor {key!r}")
    if not t.is_floating_point():
        raise GraphError(f"tensor {key!r} is {t.dtype}, want a float")
    return t.detach().to(torch.float32).contiguous()


# ----------------------------------------------------------------------------- action expert


def action_layer_keys(l):
    p = f"blocks.{l}."
    names = ["modulation", "norm3.weight", "norm3.bias", "ffn.0.weight", "ffn.0.bias", "ffn.2.weight", "ffn.2.bias"]
    for a in ("self_attn", "cross_attn"):
        for n in ("q", "k", "v", "o"):
            names += [f"{a}.{n}.weight", f"{a}.{n}.bias"]
        names += [f"{a}.norm_q.weight", f"{a}.norm_k.weight"]
    return [p + n for n in names]


class ActionWeights(nn.Module):
    """The action expert's tensors as f32 buffers (exported as initializers), keys with '.' -> '__'."""

    def __init__(self, sd, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        keys = ["action_encoder.weight", "action_encoder.bias", "text_embedding.0.weight", "text_embedding.0.bias",
                "text_embedding.2.weight", "text_embedding.2.bias", "time_embedding.0.weight", "time_embedding.0.bias",
                "time_embedding.2.weight", "time_embedding.2.bias", "time_projection.1.weight",
                "time_projection.1.bias", "head.weight", "head.bias"]
        for l in range(cfg["num_layers"]):
            keys += action_layer_keys(l)
        for k in keys:
            self.register_buffer(k.replace(".", "__"), f32(sd, k))

    def w(self, key):
        return getattr(self, key.replace(".", "__"))


def action_config(meta, sd):
    """The fastwam_config of an action-expert safetensors file (golden/export_checkpoint.py layout)."""
    try:
        cfg = json.loads(meta["fastwam_config"])
    except (KeyError, ValueError) as e:
        raise GraphError(f"no usable fastwam_config metadata: {e}") from e
    if not isinstance(cfg, dict):
        raise GraphError("fastwam_config metadata is not a JSON object")
    from export_checkpoint import ExportError, check_keys  # the action expert's strict key and shape check
    from reference import CONFIG_KEYS
    try:
        check_keys(sd, {k: cfg[k] for k in CONFIG_KEYS if k in cfg})
    except (ExportError, ValueError, TypeError) as e:
        raise GraphError(f"action expert: {e}") from e
    return cfg


def text_mlp(W, prefix, context):
    h = gelu_tanh(linear(context, W.w(prefix + ".0.weight"), W.w(prefix + ".0.bias")))
    return linear(h, W.w(prefix + ".2.weight"), W.w(prefix + ".2.bias"))


def action_cross_kv(W, context):
    """ctx = text MLP(context); per layer RMS(k(ctx)) and v(ctx), stacked [N, 1, L, A] (action-step.md §6)."""
    ctx = text_mlp(W, "text_embedding", context)
    ks, vs = [], []
    for l in range(W.cfg["num_layers"]):
        p = f"blocks.{l}.cross_attn."
        ks.append(rms_norm(linear(ctx, W.w(p + "k.weight"), W.w(p + "k.bias")), W.w(p + "norm_k.weight")))
        vs.append(linear(ctx, W.w(p + "v.weight"), W.w(p + "v.bias")))
    return torch.stack(ks), torch.stack(vs)


class ActionCore(nn.Module):
    """The per-step part of action-step.md §4, with the cross K/V given."""

    ACTION_TOKENS = 32

    def __init__(self, W, video_tokens, visible_video=None):
        super().__init__()
        self.W = W
        cfg = W.cfg
        self.heads = cfg["num_heads"]
        S = self.ACTION_TOKENS
        cos, sin = rope_1d(S, cfg["attn_head_dim"], self.heads)
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)
        self.register_buffer("freqs", sinusoid_freqs(cfg["freq_dim"]))
        v1 = video_tokens if not visible_video else int(visible_video)
        if v1 < video_tokens:  # folded self-attention mask (spec §5.4); none in production (V1 = Sv)
            b = torch.zeros(video_tokens + S)
            b[v1:video_tokens] = float("-inf")
            self.register_buffer("self_bias", b.reshape(1, 1, -1))
        else:
            self.self_bias = None

    def forward(self, latents_action, timestep, video_keys, video_values, cross_keys, cross_values, context_mask):
        W, H, D = self.W, self.heads, self.W.cfg["hidden_dim"]
        ang = timestep.reshape(1, 1) * self.freqs.reshape(1, -1)
        e = torch.cat([torch.cos(ang), torch.sin(ang)], dim=1)                       # [1, f]
        t = linear(F.silu(linear(e, W.w("time_embedding.0.weight"), W.w("time_embedding.0.bias"))),
                   W.w("time_embedding.2.weight"), W.w("time_embedding.2.bias"))
        tm = linear(F.silu(t), W.w("time_projection.1.weight"), W.w("time_projection.1.bias")).reshape(1, 6, D)
        cross_bias = mask_bias(context_mask)
        x = linear(latents_action, W.w("action_encoder.weight"), W.w("action_encoder.bias"))
        for l in range(W.cfg["num_layers"]):
            p = f"blocks.{l}."
            m = W.w(p + "modulation") + tm
            sh1, sc1, g1, sh2, sc2, g2 = (m[:, i:i + 1] for i in range(6))
            h = layer_norm(x) * (1 + sc1) + sh1
            sa = p + "self_attn."
            q = rope(rms_norm(linear(h, W.w(sa + "q.weight"), W.w(sa + "q.bias")), W.w(sa + "norm_q.weight")),
                     self.rope_cos, self.rope_sin)
            k = rope(rms_norm(linear(h, W.w(sa + "k.weight"), W.w(sa + "k.bias")), W.w(sa + "norm_k.weight")),
                     self.rope_cos, self.rope_sin)
            v = linear(h, W.w(sa + "v.weight"), W.w(sa + "v.bias"))
            K = torch.cat([video_keys[l], k], dim=1)
            V = torch.cat([video_values[l], v], dim=1)
            o = attention(q, K, V, H, self.self_bias)
            x = x + g1 * linear(o, W.w(sa + "o.weight"), W.w(sa + "o.bias"))
            ca = p + "cross_attn."
            y = F.layer_norm(x, (D,), W.w(p + "norm3.weight"), W.w(p + "norm3.bias"), eps=EPS)
            qc = rms_norm(linear(y, W.w(ca + "q.weight"), W.w(ca + "q.bias")), W.w(ca + "norm_q.weight"))
            oc = attention(qc, cross_keys[l], cross_values[l], H, cross_bias)
            x = x + linear(oc, W.w(ca + "o.weight"), W.w(ca + "o.bias"))
            h2 = layer_norm(x) * (1 + sc2) + sh2
            f = linear(gelu_tanh(linear(h2, W.w(p + "ffn.0.weight"), W.w(p + "ffn.0.bias"))),
                       W.w(p + "ffn.2.weight"), W.w(p + "ffn.2.bias"))
            x = x + g2 * f
        return linear(x, W.w("head.weight"), W.w("head.bias"))


class ActionContext(nn.Module):
    """action_context: context [1, L, T] -> cross_keys, cross_values [N, 1, L, A]."""

    INPUTS, OUTPUTS = ["context"], ["cross_keys", "cross_values"]

    def __init__(self, W):
        super().__init__()
        self.W = W

    def forward(self, context):
        return action_cross_kv(self.W, context)


class ActionStepCtx(nn.Module):
    """action_step_ctx: the per-step graph with the cross K/V as inputs."""

    INPUTS = ["latents_action", "timestep", "video_keys", "video_values", "cross_keys", "cross_values", "context_mask"]
    OUTPUTS = ["pred_noise"]

    def __init__(self, W, video_tokens, visible_video=None):
        super().__init__()
        self.core = ActionCore(W, video_tokens, visible_video)

    def forward(self, latents_action, timestep, video_keys, video_values, cross_keys, cross_values, context_mask):
        return self.core(latents_action, timestep, video_keys, video_values, cross_keys, cross_values, context_mask)


class ActionStep(nn.Module):
    """action_step: today's monolithic contract (the context in, the cross K/V computed every step)."""

    INPUTS = ["latents_action", "timestep", "video_keys", "video_values", "context", "context_mask"]
    OUTPUTS = ["pred_noise"]

    def __init__(self, W, video_tokens, visible_video=None):
        super().__init__()
        self.core = ActionCore(W, video_tokens, visible_video)

    def forward(self, latents_action, timestep, video_keys, video_values, context, context_mask):
        ck, cv = action_cross_kv(self.core.W, context)
        return self.core(latents_action, timestep, video_keys, video_values, ck, cv, context_mask)


# ----------------------------------------------------------------------------- video DiT prefill


WORLD_CONFIG_KEY = "fastwam_world_config"


def world_config(meta, sd):
    """The video DiT's sizes: read from the tensors' shapes, the head split from the metadata
    fastwam_world_config (the DiT weight file contract of docs/world-model.md: num_heads / head_dim, and
    the other sizes, which must agree with the shapes) or else head dim 128 (world-model.md §5.4)."""
    pe = f32(sd, "patch_embedding.weight")
    if pe.dim() != 5 or tuple(pe.shape[2:]) != (1, 2, 2):
        raise GraphError(f"patch_embedding.weight has shape {list(pe.shape)}, want [D, z, 1, 2, 2]")
    n = 1 + max((int(m.group(1)) for k in sd for m in [re.match(r"blocks\.(\d+)\.", k)] if m), default=-1)
    cfg = {"dim": int(pe.shape[0]), "z_dim": int(pe.shape[1]), "num_layers": n,
           "ffn_dim": int(f32(sd, "blocks.0.ffn.0.weight").shape[0]),
           "text_dim": int(f32(sd, "text_embedding.0.weight").shape[1]),
           "freq_dim": int(f32(sd, "time_embedding.0.weight").shape[1])}
    own = {}
    if WORLD_CONFIG_KEY in meta:
        try:
            own = json.loads(meta[WORLD_CONFIG_KEY])
        except ValueError as e:
            raise GraphError(f"metadata {WORLD_CONFIG_KEY} is not JSON: {e}") from e
        if not isinstance(own, dict):
            raise GraphError(f"metadata {WORLD_CONFIG_KEY} is not a JSON object")
    # The contract's names for the sizes this module calls otherwise.
    alias = {"hidden_dim": "dim", "latent_channels": "z_dim", "head_dim": "attn_head_dim"}
    own = {alias.get(k, k): v for k, v in own.items()}
    dh = int(own.get("attn_head_dim") or (cfg["dim"] // int(own["num_heads"]) if own.get("num_heads") else 128))
    if dh <= 0 or cfg["dim"] % dh:
        raise GraphError(f"head dim {dh} does not divide the width {cfg['dim']}")
    cfg["attn_head_dim"], cfg["num_heads"] = dh, cfg["dim"] // dh
    for k, v in own.items():
        if k in cfg and v != cfg[k]:
            raise GraphError(f"{WORLD_CONFIG_KEY} says {k} = {v}, the tensors say {cfg[k]}")
    if n < 1:
        raise GraphError("no blocks.<l>. tensors: not a video DiT")
    check_shapes(sd, world_shapes(cfg), "video DiT")
    return cfg


def world_shapes(cfg):
    """The §6.2 keys (no prefix) and shapes the prefill reads, for cfg (head.* is never used)."""
    D, Fw, T, f, z = cfg["dim"], cfg["ffn_dim"], cfg["text_dim"], cfg["freq_dim"], cfg["z_dim"]
    shapes = {"patch_embedding.weight": (D, z, 1, 2, 2), "patch_embedding.bias": (D,),
              "text_embedding.0.weight": (D, T), "text_embedding.0.bias": (D,),
              "text_embedding.2.weight": (D, D), "text_embedding.2.bias": (D,),
              "time_embedding.0.weight": (D, f), "time_embedding.0.bias": (D,),
              "time_embedding.2.weight": (D, D), "time_embedding.2.bias": (D,),
              "time_projection.1.weight": (6 * D, D), "time_projection.1.bias": (6 * D,)}
    for l in range(cfg["num_layers"]):
        p = f"blocks.{l}."
        shapes[p + "modulation"] = (1, 6, D)
        if l == cfg["num_layers"] - 1:
            # §5.6: of the last layer only h, k and v are computed; its other tensors are optional
            # in the DiT weight file contract (weights make and the exporter leave them out).
            for n in "kv":
                shapes[f"{p}self_attn.{n}.weight"], shapes[f"{p}self_attn.{n}.bias"] = (D, D), (D,)
            shapes[p + "self_attn.norm_k.weight"] = (D,)
            continue
        for a in ("self_attn", "cross_attn"):
            for n in "qkvo":
                shapes[f"{p}{a}.{n}.weight"] = (D, D)
                shapes[f"{p}{a}.{n}.bias"] = (D,)
            shapes[f"{p}{a}.norm_q.weight"] = (D,)
            shapes[f"{p}{a}.norm_k.weight"] = (D,)
        shapes[p + "norm3.weight"], shapes[p + "norm3.bias"] = (D,), (D,)
        shapes[p + "ffn.0.weight"], shapes[p + "ffn.0.bias"] = (Fw, D), (Fw,)
        shapes[p + "ffn.2.weight"], shapes[p + "ffn.2.bias"] = (D, Fw), (D,)
    return shapes


def check_shapes(sd, shapes, what):
    """GraphError listing every missing, misshaped, non-float or non-finite tensor of sd against shapes."""
    problems = []
    for k, shape in shapes.items():
        t = sd.get(k)
        if not isinstance(t, torch.Tensor):
            problems.append(f"missing: {k} {list(shape)}")
        elif tuple(t.shape) != tuple(shape):
            problems.append(f"misshaped: {k} is {list(t.shape)}, want {list(shape)}")
        elif not t.is_floating_point():
            problems.append(f"not floating point: {k} ({t.dtype})")
        elif not bool(torch.isfinite(t).all()):
            problems.append(f"non-finite values: {k}")
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise GraphError(f"{what}: {len(problems)} tensor problem(s):\n  " + "\n  ".join(shown))


class Prefill(nn.Module):
    """Layers [lo, hi) of the video DiT prefill at t = 0 (world-model.md §5).

    lo = 0: inputs latent [1, z, h, w] and context [1, L, T]; does the patch embedding and ctx_v and
    emits ctx_v. lo > 0: inputs hidden [1, Sv, D] and ctx_v [1, L, D]. Emits video_keys and
    video_values [hi - lo, 1, Sv, D] and, unless hi = N (the trimmed last range, §5.6), hidden_out.
    The time MLP at t = 0 and every layer's modulation are folded into constants.
    """

    def __init__(self, sd, cfg, lo, hi, latent_hw):
        super().__init__()
        N = cfg["num_layers"]
        if not 0 <= lo < hi <= N:
            raise GraphError(f"layer range [{lo}, {hi}) is not inside [0, {N})")
        self.cfg, self.lo, self.hi, self.first, self.last = cfg, lo, hi, lo == 0, hi == N
        D = cfg["dim"]
        self.heads = cfg["num_heads"]
        h, w = latent_hw
        if h % 2 or w % 2:
            raise GraphError(f"latent {h}x{w} is not even (the DiT patch is 2x2)")
        self.grid = (h // 2, w // 2)
        cos, sin = rope_3d(1, h // 2, w // 2, cfg["attn_head_dim"], self.heads)
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)
        # §5.2: TM at tau = 0 (e = [1]*half ++ [0]*half), computed once in f32 and folded per layer.
        half = cfg["freq_dim"] // 2
        e = torch.cat([torch.ones(1, half), torch.zeros(1, half)], dim=1)
        with torch.no_grad():
            t = linear(F.silu(linear(e, f32(sd, "time_embedding.0.weight"), f32(sd, "time_embedding.0.bias"))),
                       f32(sd, "time_embedding.2.weight"), f32(sd, "time_embedding.2.bias"))
            tm = linear(F.silu(t), f32(sd, "time_projection.1.weight"), f32(sd, "time_projection.1.bias")).reshape(1, 6, D)
        self.names = {}
        if self.first:
            self._buf("patch_w", f32(sd, "patch_embedding.weight")[:, :, 0])  # [D, z, 2, 2]
            self._buf("patch_b", f32(sd, "patch_embedding.bias"))
            for k in ("0.weight", "0.bias", "2.weight", "2.bias"):
                self._buf("text_" + k, f32(sd, "text_embedding." + k))
        for l in range(lo, hi):
            p = f"blocks.{l}."
            with torch.no_grad():
                self._buf(f"mod{l}", f32(sd, p + "modulation") + tm)
            keys = ["self_attn.k.weight", "self_attn.k.bias", "self_attn.v.weight", "self_attn.v.bias",
                    "self_attn.norm_k.weight"]
            if not (self.last and l == N - 1):
                keys = [k[len(p):] for k in action_layer_keys(l) if k[len(p):] != "modulation"]
            for k in keys:
                self._buf(f"b{l}_{k}", f32(sd, p + k))

    def _buf(self, name, t):
        self.register_buffer(name.replace(".", "__"), t)

    def b(self, name):
        return getattr(self, name.replace(".", "__"))

    @property
    def INPUTS(self):
        return ["latent", "context"] if self.first else ["hidden", "ctx_v"]

    @property
    def OUTPUTS(self):
        out = (["ctx_v"] if self.first else []) + ["video_keys", "video_values"]
        return out if self.last else out + ["hidden_out"]

    def forward(self, a, c):
        N, D, H = self.cfg["num_layers"], self.cfg["dim"], self.heads
        if self.first:
            pe = F.conv2d(a, self.b("patch_w"), self.b("patch_b"), stride=2)          # [1, D, h/2, w/2]
            x = pe.reshape(1, D, -1).transpose(1, 2)                                   # [1, Sv, D], row-major
            h1 = gelu_tanh(linear(c, self.b("text_0.weight"), self.b("text_0.bias")))
            ctx = linear(h1, self.b("text_2.weight"), self.b("text_2.bias"))
        else:
            x, ctx = a, c
        ks, vs = [], []
        for l in range(self.lo, self.hi):
            g = lambda k: self.b(f"b{l}_{k}")  # noqa: E731
            m = self.b(f"mod{l}")
            sh1, sc1, g1, sh2, sc2, g2 = (m[:, i:i + 1] for i in range(6))
            h = layer_norm(x) * (1 + sc1) + sh1
            k = rope(rms_norm(linear(h, g("self_attn.k.weight"), g("self_attn.k.bias")), g("self_attn.norm_k.weight")),
                     self.rope_cos, self.rope_sin)
            v = linear(h, g("self_attn.v.weight"), g("self_attn.v.bias"))
            ks.append(k)
            vs.append(v)
            if l == N - 1:
                break  # §5.6: the last layer's K and V are all that is used
            q = rope(rms_norm(linear(h, g("self_attn.q.weight"), g("self_attn.q.bias")), g("self_attn.norm_q.weight")),
                     self.rope_cos, self.rope_sin)
            o = attention(q, k, v, H)
            x = x + g1 * linear(o, g("self_attn.o.weight"), g("self_attn.o.bias"))
            y = F.layer_norm(x, (D,), g("norm3.weight"), g("norm3.bias"), eps=EPS)
            qc = rms_norm(linear(y, g("cross_attn.q.weight"), g("cross_attn.q.bias")), g("cross_attn.norm_q.weight"))
            kc = rms_norm(linear(ctx, g("cross_attn.k.weight"), g("cross_attn.k.bias")), g("cross_attn.norm_k.weight"))
            vc = linear(ctx, g("cross_attn.v.weight"), g("cross_attn.v.bias"))
            x = x + linear(attention(qc, kc, vc, H), g("cross_attn.o.weight"), g("cross_attn.o.bias"))
            h2 = layer_norm(x) * (1 + sc2) + sh2
            x = x + g2 * linear(gelu_tanh(linear(h2, g("ffn.0.weight"), g("ffn.0.bias"))),
                                g("ffn.2.weight"), g("ffn.2.bias"))
        out = ([ctx] if self.first else []) + [torch.stack(ks), torch.stack(vs)]
        return tuple(out if self.last else out + [x])


# ----------------------------------------------------------------------------- VAE encoder (rank 4)

VAE_MEAN = [-0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557,
            -0.1382, 0.0542, 0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825,
            -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
            -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230,
            -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
            0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667]
VAE_STD = [0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013,
           0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978,
           0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
           0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093,
           0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
           0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744]


class VAEEncoder(nn.Module):
    """vae_encoder: image [1, 3, H, W] -> normalised latent mean [1, 48, H/16, W/16] (world-model.md §4)."""

    INPUTS, OUTPUTS = ["image"], ["latent"]

    def __init__(self, sd, image_hw=(224, 448)):
        super().__init__()
        H, Wd = image_hw
        if H <= 0 or Wd <= 0 or H % 32 or Wd % 32:
            raise GraphError(f"image {H}x{Wd}: H and W must be positive multiples of 32 (world-model.md §4.11)")
        self.latent_hw = (H // 16, Wd // 16)  # fixed: the graph's shapes are static
        d = int(f32(sd, "encoder.conv1.weight").shape[0])
        from make_vae_golden import weight_shapes  # the §6.1 key list and shapes
        check_shapes(sd, {k: v for k, v in weight_shapes(d) if ".time_conv." not in k}, "VAE")
        self.dims = [d, d, 2 * d, 4 * d, 4 * d]
        self.n = 0
        self.params = {}

        def tap2(key):
            t = f32(sd, key)
            if t.dim() != 5 or t.shape[2:] != (3, 3, 3):
                raise GraphError(f"{key} has shape {list(t.shape)}, want [O, I, 3, 3, 3]")
            return t[:, :, 2].contiguous()

        def gamma(key):  # folded: sqrt(C) * gamma, as the f32 product upstream's forward takes
            g = f32(sd, key).reshape(1, -1, 1, 1)
            return g * math.sqrt(g.shape[1])

        onehot = torch.zeros(12, 3, 2, 2)  # §4.2: P[c*4 + 2r + q] = x[c, 2i + q, 2j + r]
        for c in range(3):
            for q in range(2):
                for r in range(2):
                    onehot[c * 4 + 2 * r + q, c, q, r] = 1
        self._p("patchify", onehot)
        self._p("conv1.w", tap2("encoder.conv1.weight"))
        self._p("conv1.b", f32(sd, "encoder.conv1.bias"))

        def res(prefix):
            self._p(prefix + ".g0", gamma(prefix + ".residual.0.gamma"))
            self._p(prefix + ".w2", tap2(prefix + ".residual.2.weight"))
            self._p(prefix + ".b2", f32(sd, prefix + ".residual.2.bias"))
            self._p(prefix + ".g3", gamma(prefix + ".residual.3.gamma"))
            self._p(prefix + ".w6", tap2(prefix + ".residual.6.weight"))
            self._p(prefix + ".b6", f32(sd, prefix + ".residual.6.bias"))
            if prefix + ".shortcut.weight" in sd:
                self._p(prefix + ".sw", f32(sd, prefix + ".shortcut.weight")[:, :, 0])
                self._p(prefix + ".sb", f32(sd, prefix + ".shortcut.bias"))

        for s in range(4):
            for r in range(2):
                res(f"encoder.downsamples.{s}.downsamples.{r}")
            if s != 3:
                p = f"encoder.downsamples.{s}.downsamples.2.resample.1"
                self._p(p + ".w", f32(sd, p + ".weight"))
                self._p(p + ".b", f32(sd, p + ".bias"))
        for s in range(3):
            c, h, w = self.dims[s + 1], H // 2 >> s, Wd // 2 >> s
            self._p(f"zcol{s}", torch.zeros(1, c, h, 1))
            self._p(f"zrow{s}", torch.zeros(1, c, 1, w + 1))
        for s in (1, 2):  # one-hot 1x1 kernel: channel c -> 2c + 1 (exact: one product by 1, the rest by 0)
            c = self.dims[s]
            e = torch.zeros(2 * c, c, 1, 1)
            e[torch.arange(c) * 2 + 1, torch.arange(c)] = 1
            self._p(f"interleave{s}", e)
        res("encoder.middle.0")
        res("encoder.middle.2")
        self._p("attn.g", gamma("encoder.middle.1.norm.gamma"))
        qkv_w, qkv_b = f32(sd, "encoder.middle.1.to_qkv.weight"), f32(sd, "encoder.middle.1.to_qkv.bias")
        c = self.dims[4]
        for i, n in enumerate("qkv"):  # rows 0..C-1, C..2C-1, 2C..3C-1 (§4.7) as three 1x1 convolutions
            self._p(f"attn.{n}_w", qkv_w[i * c:(i + 1) * c])
            self._p(f"attn.{n}_b", qkv_b[i * c:(i + 1) * c])
        self._p("attn.proj_w", f32(sd, "encoder.middle.1.proj.weight"))
        self._p("attn.proj_b", f32(sd, "encoder.middle.1.proj.bias"))
        self._p("head.g", gamma("encoder.head.0.gamma"))
        self._p("head.w", tap2("encoder.head.2.weight"))
        self._p("head.b", f32(sd, "encoder.head.2.bias"))
        # §4.9 folded into conv1's first 48 rows: W' = W / std, b' = (b - mean) / std.
        z = len(VAE_MEAN)
        mean = torch.tensor(VAE_MEAN, dtype=torch.float64)
        std = torch.tensor(VAE_STD, dtype=torch.float64)
        w = f32(sd, "conv1.weight")[:z, :, :1].reshape(z, -1, 1, 1).double()
        b = f32(sd, "conv1.bias")[:z].double()
        self._p("out.w", (w / std.reshape(-1, 1, 1, 1)).float())
        self._p("out.b", ((b - mean) / std).float())

    def _p(self, name, t):
        self.register_buffer(name.replace(".", "__"), t.contiguous())

    def p(self, name):
        return getattr(self, name.replace(".", "__"))

    @staticmethod
    def rmsc(x, g):
        """§4.1 RMSc: x / max(||x||_2 over channels, 1e-12) * (sqrt(C) * gamma); g holds sqrt(C) * gamma."""
        n = torch.sqrt(x.pow(2).sum(dim=1, keepdim=True)).clamp_min(1e-12)
        return x / n * g

    def resblock(self, x, p):
        s = F.conv2d(x, self.p(p + ".sw"), self.p(p + ".sb")) if hasattr(self, (p + ".sw").replace(".", "__")) else x
        y = F.conv2d(F.silu(self.rmsc(x, self.p(p + ".g0"))), self.p(p + ".w2"), self.p(p + ".b2"), padding=1)
        y = F.conv2d(F.silu(self.rmsc(y, self.p(p + ".g3"))), self.p(p + ".w6"), self.p(p + ".b6"), padding=1)
        return y + s

    def forward(self, image):
        x = F.conv2d(image, self.patchify, stride=2)
        x = F.conv2d(x, self.p("conv1.w"), self.p("conv1.b"), padding=1)
        for s in range(4):
            x0 = x
            pre = f"encoder.downsamples.{s}.downsamples"
            x = self.resblock(x, pre + ".0")
            x = self.resblock(x, pre + ".1")
            if s != 3:
                r = pre + ".2.resample.1"
                # ZeroPad2d((0, 1, 0, 1)) as concatenations with constant zeros: torch 1.13 exports F.pad
                # with pads computed at run time (a reversed Slice it cannot fold), which leaves shapes unknown.
                x = torch.cat([x, self.p(f"zcol{s}")], dim=3)
                x = torch.cat([x, self.p(f"zrow{s}")], dim=2)
                x = F.conv2d(x, self.p(r + ".w"), self.p(r + ".b"), stride=2)
                pooled = F.avg_pool2d(x0, 2)
                if s in (1, 2):  # §4.5, f_t = 2: even channels 0, odd channel 2c + 1 = pool(x0)[c]
                    pooled = F.conv2d(pooled, self.p(f"interleave{s}"))
                x = x + pooled
            else:
                x = x + x0
        x = self.resblock(x, "encoder.middle.0")
        C = self.dims[4]
        y = self.rmsc(x, self.p("attn.g"))
        q, k, v = (F.conv2d(y, self.p(f"attn.{n}_w"), self.p(f"attn.{n}_b")).flatten(2).transpose(1, 2)
                   for n in "qkv")                                                   # [1, n, C] each
        o = torch.softmax(torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(C)), dim=-1)
        o = torch.matmul(o, v).transpose(1, 2).reshape(1, C, *self.latent_hw)
        x = x + F.conv2d(o, self.p("attn.proj_w"), self.p("attn.proj_b"))
        x = self.resblock(x, "encoder.middle.2")
        x = F.conv2d(F.silu(self.rmsc(x, self.p("head.g"))), self.p("head.w"), self.p("head.b"), padding=1)
        return F.conv2d(x, self.p("out.w"), self.p("out.b"))
