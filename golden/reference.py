"""Independent PyTorch reference of one Fast-WAM action-expert denoise step.

Written from /work/shared/spec/action-step.md (sections 1-8) only. Everything runs
in float32 except the sinusoidal timestep embedding and the RoPE rotation, which
are computed in float64 and cast back to float32, as the specification says.

Layout of the module tree mirrors the state-dict key names of spec section 1, so
`ActionExpert(cfg).state_dict()` has exactly the keys of a trained ActionDiT
(`blocks.0.self_attn.q.weight`, `text_embedding.0.weight`, ...): 14 + 27*layers
tensors.

Public API:
    DEFAULT_CONFIG, TINY_CONFIG          configuration dicts (spec sections 2 and 11)
    ActionExpert(cfg, device=None)       the parameters and the step
      .prepare_chunk(video_keys, video_values, context, context_mask, visible_video) -> Chunk
      .step(latents, timestep, chunk)    -> velocity prediction [B, S, a]
      .forward(latents, timestep, video_keys, video_values, context, context_mask, visible_video)
    sinusoid(tau, dim)                   section 3.9
    rope_table(head_dim, positions)      section 3.6
    schedule(steps, shift)               section 8 (float32 sigmas, N+1 points)
    denoise(model, init_noise, chunk, steps, shift) -> DenoiseResult
    prefix_weights(delay, horizon, avail, rows, schedule)   RTC's soft mask (issue 10, section 2)
    guidance_weight(sigma, beta)         RTC's clipped guidance weight
    denoise_rtc(model, init_noise, chunk, target, weights, mode, beta, steps, shift) -> DenoiseResult
    init_random_(model, generator)       the section 11 randomisation
    param_count(cfg)                     section 1.3 formulas
"""

import math
from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG_KEYS = (
    "hidden_dim", "ffn_dim", "num_heads", "attn_head_dim", "num_layers",
    "text_dim", "freq_dim", "eps", "action_dim",
)

# Section 2: configs/model/fastwam.yaml action_dit_config (LIBERO: action_dim 7).
DEFAULT_CONFIG = {
    "hidden_dim": 1024, "ffn_dim": 4096, "num_heads": 24, "attn_head_dim": 128,
    "num_layers": 30, "text_dim": 4096, "freq_dim": 256, "eps": 1e-6, "action_dim": 7,
}

# Section 11: the tiny test configuration (Dh = 16, video expert not needed).
TINY_CONFIG = {
    "hidden_dim": 64, "ffn_dim": 128, "num_heads": 2, "attn_head_dim": 16,
    "num_layers": 2, "text_dim": 32, "freq_dim": 256, "eps": 1e-6, "action_dim": 7,
}

ROPE_THETA = 10000.0
ROPE_POSITIONS = 1024  # the reference table length; bounds the action chunk length S
SINUSOID_BASE = 10000.0


def check_config(cfg):
    """Return a normalised copy of cfg, raising ValueError on a bad or incomplete one."""
    missing = [k for k in CONFIG_KEYS if k not in cfg]
    if missing:
        raise ValueError(f"config is missing {missing}; expected keys {list(CONFIG_KEYS)}")
    extra = [k for k in cfg if k not in CONFIG_KEYS]
    if extra:
        raise ValueError(f"config has unknown keys {extra}; expected keys {list(CONFIG_KEYS)}")
    out = {}
    for k in CONFIG_KEYS:
        if k == "eps":
            v = float(cfg[k])
            if not v > 0:
                raise ValueError(f"config eps must be positive, got {cfg[k]!r}")
        else:
            v = cfg[k]
            if isinstance(v, bool) or int(v) != v or int(v) <= 0:
                raise ValueError(f"config {k} must be a positive integer, got {v!r}")
            v = int(v)
        out[k] = v
    if out["attn_head_dim"] % 2:
        raise ValueError(f"attn_head_dim must be even for RoPE, got {out['attn_head_dim']}")
    if out["freq_dim"] % 2:
        raise ValueError(f"freq_dim must be even, got {out['freq_dim']}")
    return out


def param_count(cfg):
    """Parameter count from the section 1.3 formulas: (non_block, per_block, total)."""
    D, Fw, T, f, a = cfg["hidden_dim"], cfg["ffn_dim"], cfg["text_dim"], cfg["freq_dim"], cfg["action_dim"]
    A = cfg["num_heads"] * cfg["attn_head_dim"]
    attn = 3 * (D * A + A) + (A * D + D) + 2 * A
    per_block = 6 * D + 2 * attn + 2 * D + (D * Fw + Fw + Fw * D + D)
    non_block = (a * D + D) + (T * D + D + D * D + D) + (f * D + D + D * D + D) + (6 * D * D + 6 * D) + (D * a + a)
    return non_block, per_block, non_block + cfg["num_layers"] * per_block


# ----------------------------------------------------------------------------- primitives


def sinusoid(tau, dim):
    """Section 3.9: [cos(tau*w_j) | sin(tau*w_j)], w_j = 10000^(-j/half), in float64, cast to f32.

    tau: tensor [B] (the raw timestep sigma*1000). Returns [B, dim] float32.
    """
    half = dim // 2
    j = torch.arange(half, dtype=torch.float64)
    w = torch.pow(torch.tensor(SINUSOID_BASE, dtype=torch.float64), -j / half)
    ang = tau.to(torch.float64).reshape(-1, 1) * w.reshape(1, -1)
    return torch.cat([torch.cos(ang), torch.sin(ang)], dim=1).to(torch.float32)


def rope_table(head_dim, positions=ROPE_POSITIONS):
    """Section 3.6: float64 (cos, sin) tables [positions, head_dim/2] for angle p * 10000^(-2j/head_dim)."""
    j = torch.arange(head_dim // 2, dtype=torch.float64)
    w = torch.pow(torch.tensor(ROPE_THETA, dtype=torch.float64), -2.0 * j / head_dim)
    ang = torch.arange(positions, dtype=torch.float64).reshape(-1, 1) * w.reshape(1, -1)
    return torch.cos(ang), torch.sin(ang)


def rope_interleaved(x, cos, sin, num_heads):
    """Rotate interleaved pairs (2j, 2j+1) of every head by the angle of its token position.

    x: [B, S, H*Dh] float32, token s has position s. cos/sin: float64 [>=S, Dh/2].
    The rotation runs in float64 and the result is cast back to x's dtype.
    """
    B, S, A = x.shape
    dh = A // num_heads
    z = x.to(torch.float64).reshape(B, S, num_heads, dh // 2, 2)
    a, b = z[..., 0], z[..., 1]
    c = cos[:S].reshape(1, S, 1, dh // 2)
    s = sin[:S].reshape(1, S, 1, dh // 2)
    out = torch.stack([a * c - b * s, a * s + b * c], dim=-1)
    return out.reshape(B, S, A).to(x.dtype)


def attention(q, k, v, num_heads, bias):
    """Section 3.7: per-head softmax(q k^T / sqrt(Dh) + bias) v, heads head-major in the last axis.

    q: [B, Sq, A], k/v: [B, Sk, A], bias: additive mask broadcastable to [B, H, Sq, Sk]
    (0 where attended, -inf where masked). Returns [B, Sq, A].
    """
    B, Sq, A = q.shape
    Sk = k.shape[1]
    dh = A // num_heads
    qh = q.reshape(B, Sq, num_heads, dh).transpose(1, 2)
    kh = k.reshape(B, Sk, num_heads, dh).transpose(1, 2)
    vh = v.reshape(B, Sk, num_heads, dh).transpose(1, 2)
    scores = torch.matmul(qh, kh.transpose(-1, -2)) * (1.0 / math.sqrt(dh)) + bias
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, vh).transpose(1, 2).reshape(B, Sq, A)


def mask_bias(allowed):
    """Boolean mask (True = attend) to an additive float32 bias (0 / -inf)."""
    bias = torch.zeros(allowed.shape, dtype=torch.float32)
    return bias.masked_fill(~allowed, float("-inf"))


class RMSNorm(nn.Module):
    """Section 3.5: x / sqrt(mean(x^2) + eps) * g over the whole last axis (all heads together)."""

    def __init__(self, dim, eps, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, device=device))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    """q, k, v, o projections (all with bias) plus RMSNorm gains norm_q / norm_k over H*Dh."""

    def __init__(self, dim, attn_dim, eps, device=None):
        super().__init__()
        self.q = nn.Linear(dim, attn_dim, device=device)
        self.k = nn.Linear(dim, attn_dim, device=device)
        self.v = nn.Linear(dim, attn_dim, device=device)
        self.o = nn.Linear(attn_dim, dim, device=device)
        self.norm_q = RMSNorm(attn_dim, eps, device=device)
        self.norm_k = RMSNorm(attn_dim, eps, device=device)


class Block(nn.Module):
    """One action DiT block (section 1.2). norm1/norm2 are parameter-free LayerNorms."""

    def __init__(self, cfg, device=None):
        super().__init__()
        D, A = cfg["hidden_dim"], cfg["num_heads"] * cfg["attn_head_dim"]
        self.eps = cfg["eps"]
        self.modulation = nn.Parameter(torch.zeros(1, 6, D, device=device))
        self.self_attn = Attention(D, A, cfg["eps"], device=device)
        self.cross_attn = Attention(D, A, cfg["eps"], device=device)
        self.norm3 = nn.LayerNorm(D, eps=cfg["eps"], elementwise_affine=True, device=device)
        self.ffn = nn.Sequential(
            nn.Linear(D, cfg["ffn_dim"], device=device),
            nn.GELU(approximate="tanh"),
            nn.Linear(cfg["ffn_dim"], D, device=device),
        )

    def plain_ln(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=self.eps)


@dataclass
class Chunk:
    """What is constant for every step of one action chunk (section 9)."""

    ctx: torch.Tensor                 # [B, L, D] embedded context
    cross_k: List[torch.Tensor]       # per layer [B, L, A], RMS-normed
    cross_v: List[torch.Tensor]       # per layer [B, L, A]
    video_keys: torch.Tensor          # [N, B, Sv, A]
    video_values: torch.Tensor        # [N, B, Sv, A]
    self_bias: torch.Tensor           # [1, 1, 1, Sv+S] additive bias of the mixed self-attention
    cross_bias: torch.Tensor          # [B, 1, 1, L] additive bias of the text cross-attention
    visible_video: int                # V1


@dataclass
class DenoiseResult:
    """Output of the Euler loop: final actions plus the per-step trajectory."""

    actions: torch.Tensor             # [B, S, a]
    sigmas: torch.Tensor              # [N+1] float32
    preds: torch.Tensor               # [N, B, S, a] prediction of each step
    latents: torch.Tensor             # [N, B, S, a] latents after each update


class ActionExpert(nn.Module):
    """The Fast-WAM action expert (ActionDiT) with the section 1 parameter names."""

    ACTION_TOKENS = 32

    def __init__(self, cfg, device=None):
        super().__init__()
        cfg = check_config(cfg)
        self.cfg = cfg
        D, a, T, f = cfg["hidden_dim"], cfg["action_dim"], cfg["text_dim"], cfg["freq_dim"]
        self.num_heads = cfg["num_heads"]
        self.attn_dim = cfg["num_heads"] * cfg["attn_head_dim"]
        self.action_encoder = nn.Linear(a, D, device=device)
        self.text_embedding = nn.Sequential(
            nn.Linear(T, D, device=device), nn.GELU(approximate="tanh"), nn.Linear(D, D, device=device))
        self.time_embedding = nn.Sequential(
            nn.Linear(f, D, device=device), nn.SiLU(), nn.Linear(D, D, device=device))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(D, 6 * D, device=device))
        self.blocks = nn.ModuleList([Block(cfg, device=device) for _ in range(cfg["num_layers"])])
        self.head = nn.Linear(D, a, device=device)
        cos, sin = rope_table(cfg["attn_head_dim"])
        # Plain attributes, not buffers: the table is not part of the state dict (section 1).
        self.rope_cos, self.rope_sin = cos, sin

    # ------------------------------------------------------------------ per chunk

    def prepare_chunk(self, video_keys, video_values, context, context_mask, visible_video=None):
        """Compute what is constant for a chunk.

        video_keys/video_values: [N, B, Sv, A] float32; context: [B, L, T] float32;
        context_mask: [B, L] bool, or float (nonzero = attend); visible_video: V1, the number
        of leading video tokens the action queries see (None or 0 = all Sv).
        """
        cfg = self.cfg
        N, A = cfg["num_layers"], self.attn_dim
        if video_keys.dim() != 4 or video_keys.shape[0] != N or video_keys.shape[3] != A:
            raise ValueError(f"video_keys has shape {tuple(video_keys.shape)}, want [{N}, B, Sv, {A}]")
        if video_values.shape != video_keys.shape:
            raise ValueError(f"video_values has shape {tuple(video_values.shape)}, want {tuple(video_keys.shape)}")
        B, Sv = video_keys.shape[1], video_keys.shape[2]
        if context.dim() != 3 or context.shape[0] != B or context.shape[2] != cfg["text_dim"]:
            raise ValueError(f"context has shape {tuple(context.shape)}, want [{B}, L, {cfg['text_dim']}]")
        L = context.shape[1]
        if tuple(context_mask.shape) != (B, L):
            raise ValueError(f"context_mask has shape {tuple(context_mask.shape)}, want [{B}, {L}]")
        allowed = context_mask if context_mask.dtype == torch.bool else context_mask != 0
        if not bool(allowed.any(dim=1).all()):
            raise ValueError("context_mask masks every context token of a sample")
        if visible_video is None or int(visible_video) == 0:
            visible_video = Sv
        visible_video = int(visible_video)
        if not 0 < visible_video <= Sv:
            raise ValueError(f"visible_video {visible_video} out of range [1, {Sv}]")

        S = self.ACTION_TOKENS
        self_allowed = torch.ones(Sv + S, dtype=torch.bool)
        self_allowed[visible_video:Sv] = False  # video tokens after the first V1 are hidden
        self_bias = mask_bias(self_allowed).reshape(1, 1, 1, Sv + S)
        cross_bias = mask_bias(allowed).reshape(B, 1, 1, L)

        video_keys = video_keys.to(torch.float32)
        video_values = video_values.to(torch.float32)
        ctx = self.text_embedding(context.to(torch.float32))
        cross_k, cross_v = [], []
        for blk in self.blocks:
            cross_k.append(blk.cross_attn.norm_k(blk.cross_attn.k(ctx)))
            cross_v.append(blk.cross_attn.v(ctx))
        return Chunk(ctx=ctx, cross_k=cross_k, cross_v=cross_v, video_keys=video_keys,
                     video_values=video_values, self_bias=self_bias, cross_bias=cross_bias,
                     visible_video=visible_video)

    # ------------------------------------------------------------------ per step

    def time_modulation(self, timestep):
        """Section 4 time conditioning: tau [B] -> TM [B, 6, D] (chunk-major)."""
        e = sinusoid(timestep, self.cfg["freq_dim"])
        t = self.time_embedding(e)
        tm = self.time_projection(t)
        return tm.reshape(tm.shape[0], 6, self.cfg["hidden_dim"])

    def step(self, latents, timestep, chunk):
        """One denoise step: latents [B, S, a], timestep [B] (tau = sigma*1000) -> velocity [B, S, a]."""
        B, S, a = latents.shape
        if S != self.ACTION_TOKENS or a != self.cfg["action_dim"]:
            raise ValueError(f"latents has shape {tuple(latents.shape)}, want [B, {self.ACTION_TOKENS}, {self.cfg['action_dim']}]")
        if S > self.rope_cos.shape[0]:
            raise ValueError(f"{S} action tokens exceed the RoPE table of {self.rope_cos.shape[0]} positions")
        timestep = timestep.to(torch.float32).reshape(-1)
        if timestep.shape[0] != B or chunk.video_keys.shape[1] != B:
            raise ValueError(f"batch mismatch: latents {B}, timestep {timestep.shape[0]}, chunk {chunk.video_keys.shape[1]}")
        H = self.num_heads
        tmod = self.time_modulation(timestep)                      # [B, 6, D]
        x = self.action_encoder(latents.to(torch.float32))          # [B, S, D]
        for l, blk in enumerate(self.blocks):
            m = blk.modulation + tmod                                # [B, 6, D]
            shift1, scale1, gate1, shift2, scale2, gate2 = (m[:, i:i + 1] for i in range(6))

            # (a) mixed self-attention over [video keys ; action keys]
            h = blk.plain_ln(x) * (1 + scale1) + shift1
            sa = blk.self_attn
            q = rope_interleaved(sa.norm_q(sa.q(h)), self.rope_cos, self.rope_sin, H)
            k = rope_interleaved(sa.norm_k(sa.k(h)), self.rope_cos, self.rope_sin, H)
            v = sa.v(h)
            K = torch.cat([chunk.video_keys[l], k], dim=1)
            V = torch.cat([chunk.video_values[l], v], dim=1)
            o = attention(q, K, V, H, chunk.self_bias)
            x = x + gate1 * sa.o(o)

            # (b) text cross-attention: no gate, no modulation, no RoPE
            ca = blk.cross_attn
            qc = ca.norm_q(ca.q(blk.norm3(x)))
            oc = attention(qc, chunk.cross_k[l], chunk.cross_v[l], H, chunk.cross_bias)
            x = x + ca.o(oc)

            # (c) FFN
            h2 = blk.plain_ln(x) * (1 + scale2) + shift2
            x = x + gate2 * blk.ffn(h2)
        return self.head(x)

    def forward(self, latents, timestep, video_keys, video_values, context, context_mask, visible_video=None):
        """prepare_chunk + step for a single call (the FastWAM `_predict_action_noise_with_cache`)."""
        chunk = self.prepare_chunk(video_keys, video_values, context, context_mask, visible_video)
        return self.step(latents, timestep, chunk)


# ----------------------------------------------------------------------------- schedule and loop


def schedule(steps, shift):
    """Section 8: float32 sigmas [steps+1] = shift*u / (1 + (shift-1)*u), u = linspace(1, 0, steps+1)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    u = torch.linspace(1, 0, steps + 1, dtype=torch.float32)
    shift_t = torch.tensor(shift, dtype=torch.float32)
    return shift_t * u / (1 + (shift_t - 1) * u)


@torch.no_grad()
def denoise(model, init_noise, chunk, steps=10, shift=5.0):
    """Section 8 Euler loop: latents <- latents + pred * (sigma[k+1] - sigma[k]), tau_k = sigma[k]*1000."""
    sig = schedule(steps, shift)
    latents = init_noise.to(torch.float32).clone()
    B = latents.shape[0]
    preds, traj = [], []
    for k in range(steps):
        tau = (sig[k] * 1000).reshape(1).expand(B).contiguous()
        pred = model.step(latents, tau, chunk)
        latents = latents + pred * (sig[k + 1] - sig[k])
        preds.append(pred)
        traj.append(latents)
    return DenoiseResult(actions=latents, sigmas=sig, preds=torch.stack(preds), latents=torch.stack(traj))


# ----------------------------------------------------------------------------- real-time chunking (issue 10)
#
# Written from the formulas of issue 10, section 2 (Wan's convention: sigma 1 = noise, 0 = clean,
# pred = eps - x0, so the clean estimate at level sigma is x0_hat = x - sigma * pred).

RTC_MODES = ("off", "replace", "guided")
RTC_SCHEDULES = ("exp", "linear", "ones", "zeros")  # the index is the code the RTC golden stores


def prefix_weights(delay, horizon, avail, rows, schedule="exp"):
    """RTC's soft mask over the rows of a new chunk, float64 [rows].

    Row i weighs 1 for i < d (d = min(delay, horizon): the actions executed before the chunk
    arrives), then for d <= i < horizon the schedule applied to the ramp c = (H - i) / (H - d + 1):
    exp c * (e^c - 1) / (e - 1), linear c, ones 1, zeros 0; 0 from the horizon on, and 0 for every
    row i >= avail (the previous chunk has no action there).
    """
    for name, v in (("delay", delay), ("horizon", horizon), ("avail", avail), ("rows", rows)):
        if isinstance(v, bool) or int(v) != v or v < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {v!r}")
    if schedule not in RTC_SCHEDULES:
        raise ValueError(f"schedule {schedule!r}: want one of {RTC_SCHEDULES}")
    H = int(horizon)
    d = min(int(delay), H)
    w = torch.zeros(int(rows), dtype=torch.float64)
    for i in range(int(rows)):
        if i >= avail or i >= H:
            continue
        if i < d:
            w[i] = 1.0
            continue
        c = (H - i) / (H - d + 1)
        w[i] = {"exp": c * (math.exp(c) - 1) / (math.e - 1), "linear": c, "ones": 1.0, "zeros": 0.0}[schedule]
    return w


def guidance_weight(sigma, beta):
    """RTC's guidance weight at noise level sigma, in float64: c = min(beta, (1 - tau) / (tau r^2)),
    tau = 1 - sigma, r^2 = (1 - tau)^2 / (tau^2 + (1 - tau)^2).

    At tau = 0 (sigma = 1, pure noise) the unclipped weight is infinite: c = beta. At sigma = 0 the
    expression is 0/0; a clean chunk has nothing left to guide, so c = 0 (LeRobot's nan_to_num gives
    the same). The Euler loop evaluates it only at sigma_0 .. sigma_{N-1}, all > 0.
    """
    sigma, beta = float(sigma), float(beta)
    if not (beta >= 0 and math.isfinite(beta)):
        raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
    if not 0 <= sigma <= 1:
        raise ValueError(f"sigma must be in [0, 1], got {sigma!r}")
    tau = 1.0 - sigma
    if tau == 0:
        return beta
    if sigma == 0:
        return 0.0
    r2 = (1 - tau) ** 2 / (tau ** 2 + (1 - tau) ** 2)
    return min(beta, (1 - tau) / (tau * r2))


@torch.no_grad()
def denoise_rtc(model, init_noise, chunk, target, weights, mode, beta=5.0, steps=10, shift=5.0):
    """The section 8 Euler loop with real-time chunking toward target Y with row weights W.

    init_noise eps [B, S, a]; target Y [B, S, a] (or [S, a]); weights W [S] in [0, 1].
    mode "off": the plain loop (denoise). "guided": before each Euler update the prediction
    becomes pred - c(sigma_k) * W * (Y - (x - sigma_k * pred)), c = guidance_weight(sigma_k, beta).
    "replace": after the update to sigma_{k+1}, x <- (1 - W) x + W ((1 - sigma_{k+1}) Y + sigma_{k+1} eps).
    The latents and the model run in float32; c is a float64 scalar. Returns a DenoiseResult whose
    preds are the (corrected) predictions and latents the latents after each step's correction.
    """
    if mode not in RTC_MODES:
        raise ValueError(f"mode {mode!r}: want one of {RTC_MODES}")
    eps = init_noise.to(torch.float32)
    B, S, a = eps.shape
    Y = target.to(torch.float32).reshape(-1, S, a).expand(B, S, a)
    W = torch.as_tensor(weights, dtype=torch.float32).reshape(-1)
    if W.shape[0] != S:
        raise ValueError(f"weights have {W.shape[0]} rows, want {S}")
    if not bool(((W >= 0) & (W <= 1)).all()):
        raise ValueError("weights must lie in [0, 1]")
    if not bool(torch.isfinite(Y).all()):
        raise ValueError("target must be finite")
    W = W.reshape(1, S, 1)
    sig = schedule(steps, shift)
    x = eps.clone()
    preds, traj = [], []
    for k in range(steps):
        s_k, s_next = sig[k], sig[k + 1]
        pred = model.step(x, (s_k * 1000).reshape(1).expand(B).contiguous(), chunk)
        if mode == "guided":
            c = guidance_weight(float(s_k), beta)
            x0_hat = x - s_k * pred
            pred = pred - c * W * (Y - x0_hat)
        x = x + pred * (s_next - s_k)
        if mode == "replace":
            x = (1 - W) * x + W * ((1 - s_next) * Y + s_next * eps)
        preds.append(pred)
        traj.append(x)
    return DenoiseResult(actions=x, sigmas=sig, preds=torch.stack(preds), latents=torch.stack(traj))


# ----------------------------------------------------------------------------- randomisation (section 11)


def param_kind(name):
    """Classify a state-dict key for the section 11 randomisation."""
    if name.endswith("modulation"):
        return "modulation"
    if name.endswith("norm_q.weight") or name.endswith("norm_k.weight") or name.endswith("norm3.weight"):
        return "gain"
    if name.endswith(".bias"):
        return "bias"
    return "weight"


@torch.no_grad()
def init_random_(model, generator):
    """Randomise every parameter in place: gains 1+0.2N, biases 0.1N, modulation 0.3N,
    Linear weights N/sqrt(fan_in). Deterministic for a given generator state; parameters are
    filled in state-dict order."""
    for name, p in model.named_parameters():
        kind = param_kind(name)
        p.normal_(generator=generator)
        if kind == "modulation":
            p.mul_(0.3)
        elif kind == "gain":
            p.mul_(0.2).add_(1.0)
        elif kind == "bias":
            p.mul_(0.1)
        else:
            p.mul_(1.0 / math.sqrt(p.shape[1]))
    return model
