"""Checks of the PyTorch reference, the golden files and the checkpoint exporter.

Run by hand (CI installs no torch): /usr/bin/python3 golden/test_reference.py
(plain asserts; a few seconds on one core; Debian's python3-torch 1.13 and python3-numpy suffice)

The golden-file checks run when golden/tiny/ exists (make_golden.py writes it). The cross-check
implementation below (np_step) is a second, float64 NumPy version of the step that uses the
rotate-half RoPE form of spec section 3.6 with permuted q/k rows and permuted video-key columns,
so it shares no code path with reference.py. The real-time chunking golden (rtc_chunks.npz, from
make_rtc_golden.py) is re-derived both with reference.denoise_rtc and with a float64 loop on np_step.
"""

import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import export_checkpoint  # noqa: E402
from reference import (  # noqa: E402
    DEFAULT_CONFIG, RTC_SCHEDULES, TINY_CONFIG, ActionExpert, denoise, denoise_rtc, guidance_weight, init_random_,
    param_count, prefix_weights, schedule, sinusoid)
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

TINY_DIR = os.path.join(HERE, "tiny")


def cosine(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def tiny_model(seed=1, cfg=TINY_CONFIG):
    return init_random_(ActionExpert(cfg), torch.Generator().manual_seed(seed)).eval()


def tiny_inputs(seed=2, cfg=TINY_CONFIG, sv=8, L=5, batch=1):
    g = torch.Generator().manual_seed(seed)
    A = cfg["num_heads"] * cfg["attn_head_dim"]
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(latents=r(batch, 32, cfg["action_dim"]), vk=r(cfg["num_layers"], batch, sv, A),
                vv=r(cfg["num_layers"], batch, sv, A), ctx=r(batch, L, cfg["text_dim"]),
                mask=torch.tensor([[1, 1, 1, 1, 0]] * batch, dtype=torch.float32)[:, :L])


# ----------------------------------------------------------------------------- float64 NumPy cross-check


def np_step(W, cfg, lat, tau, vk, vv, C, mask, v1):
    """Float64 step for one sample. W: name -> float64 array. lat [S,a], vk/vv [N,Sv,A], C [L,T], mask [L] bool."""
    D, H, Dh, eps = cfg["hidden_dim"], cfg["num_heads"], cfg["attn_head_dim"], cfg["eps"]
    S, Sv, half = lat.shape[0], vk.shape[1], Dh // 2

    def lin(x, n):
        return x @ W[n + ".weight"].T + W[n + ".bias"]

    def ln(x):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)

    def rms(x, g):
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * g

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    def silu(x):
        return x / (1 + np.exp(-x))

    def attn(q, k, v, allowed):
        out = np.empty_like(q)
        for h in range(H):
            sl = slice(h * Dh, (h + 1) * Dh)
            s = q[:, sl] @ k[:, sl].T / math.sqrt(Dh)
            s[:, ~allowed] = -np.inf
            p = np.exp(s - s.max(-1, keepdims=True))
            out[:, sl] = (p / p.sum(-1, keepdims=True)) @ v[:, sl]
        return out

    # rotate-half RoPE on P-permuted heads (even indices first, then odd)
    P = np.concatenate([h * Dh + np.r_[np.arange(0, Dh, 2), np.arange(1, Dh, 2)] for h in range(H)])
    ang = np.arange(S)[:, None] * 10000.0 ** (-2.0 * np.arange(half) / Dh)[None, :]
    cs, sn = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):
        x = x.reshape(S, H, Dh)
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cs - x2 * sn, x1 * sn + x2 * cs], -1).reshape(S, H * Dh)

    hf = cfg["freq_dim"] // 2
    e = np.concatenate([np.cos(tau * 10000.0 ** (-np.arange(hf) / hf)), np.sin(tau * 10000.0 ** (-np.arange(hf) / hf))])
    tm = lin(silu(lin(silu(lin(e, "time_embedding.0")), "time_embedding.2")), "time_projection.1").reshape(6, D)
    x = lin(lat, "action_encoder")
    ctx = lin(gelu(lin(C, "text_embedding.0")), "text_embedding.2")
    allowed_self = np.r_[np.arange(Sv) < v1, np.ones(S, bool)]
    for l in range(cfg["num_layers"]):
        b = f"blocks.{l}."
        M = W[b + "modulation"][0] + tm
        h = ln(x) * (1 + M[1]) + M[0]
        sa = b + "self_attn."
        q = rope(rms(h @ W[sa + "q.weight"][P].T + W[sa + "q.bias"][P], W[sa + "norm_q.weight"][P]))
        k = rope(rms(h @ W[sa + "k.weight"][P].T + W[sa + "k.bias"][P], W[sa + "norm_k.weight"][P]))
        v = lin(h, sa + "v")
        o = attn(q, np.concatenate([vk[l][:, P], k]), np.concatenate([vv[l], v]), allowed_self)
        x = x + M[2] * lin(o, sa + "o")
        ca = b + "cross_attn."
        y = ln(x) * W[b + "norm3.weight"] + W[b + "norm3.bias"]
        qc = rms(lin(y, ca + "q"), W[ca + "norm_q.weight"])
        kc = rms(lin(ctx, ca + "k"), W[ca + "norm_k.weight"])
        x = x + lin(attn(qc, kc, lin(ctx, ca + "v"), mask), ca + "o")
        h2 = ln(x) * (1 + M[4]) + M[3]
        x = x + M[5] * lin(gelu(lin(h2, b + "ffn.0")), b + "ffn.2")
    return lin(x, "head")


def np_weights(sd, prefix=""):
    return {k[len(prefix):]: v.to(torch.float64).numpy() for k, v in sd.items()}


# ----------------------------------------------------------------------------- spec values


def test_sinusoid_sanity():
    e = sinusoid(torch.tensor([1000.0]), 256)[0]
    assert e.dtype == torch.float32
    want = {0: 0.5623791, 1: 0.7896147, 2: 0.4399539, 128: 0.8268796, 129: 0.6136029, 130: -0.8980204,
            127: 0.9942316, 255: 0.1072541}
    for i, v in want.items():
        assert abs(float(e[i]) - v) < 5e-7, (i, float(e[i]), v)


def test_param_counts():
    m = ActionExpert(TINY_CONFIG)
    sd = m.state_dict()
    assert len(sd) == 14 + 27 * 2, len(sd)
    assert sum(v.numel() for v in sd.values()) == 120_647
    assert param_count(TINY_CONFIG) == (52_807, 33_920, 120_647)
    assert list(sd["blocks.0.self_attn.q.weight"].shape) == [32, 64]
    assert list(sd["time_projection.1.weight"].shape) == [384, 64]
    assert list(sd["blocks.1.modulation"].shape) == [1, 6, 64]
    assert list(sd["blocks.0.self_attn.norm_q.weight"].shape) == [32]
    # section 11 caveat: Dh = 24 gives 42,272 per block and 137,351 overall
    cfg24 = dict(TINY_CONFIG, attn_head_dim=24)
    assert sum(v.numel() for v in ActionExpert(cfg24).state_dict().values()) == 137_351
    assert param_count(cfg24)[1] == 42_272

    full = ActionExpert(DEFAULT_CONFIG, device="meta").state_dict()
    assert len(full) == 824, len(full)
    assert sum(v.numel() for v in full.values()) == 1_020_886_023
    assert param_count(DEFAULT_CONFIG) == (12_870_663, 33_600_512, 1_020_886_023)
    assert list(full["time_projection.1.weight"].shape) == [6144, 1024]
    assert list(full["blocks.29.cross_attn.k.weight"].shape) == [3072, 1024]
    assert list(full["head.weight"].shape) == [7, 1024]
    assert not any(k.startswith("blocks.0.norm1") or k.startswith("blocks.0.norm2") for k in full)


def test_schedule():
    s10 = schedule(10, 5.0)
    assert s10.dtype == torch.float32 and s10.shape == (11,)
    assert float(s10[0]) == 1.0 and float(s10[-1]) == 0.0
    taus = [1000, 978.261, 952.381, 921.053, 882.353, 833.333, 769.231, 681.818, 555.556, 357.143]
    deltas = [-0.0217391, -0.0258799, -0.0313284, -0.0386997, -0.0490196, -0.0641025, -0.0874126, -0.126263,
              -0.198413, -0.357143]
    for k in range(10):
        assert abs(float(s10[k] * 1000) - taus[k]) < 1e-3, (k, float(s10[k] * 1000))
        assert abs(float(s10[k + 1] - s10[k]) - deltas[k]) < 1e-6, (k, float(s10[k + 1] - s10[k]))
    s20 = schedule(20, 5.0)
    taus20 = [1000, 989.583, 978.261, 965.909, 952.381, 937.5, 921.053, 902.778, 882.353, 859.375, 833.333,
              803.571, 769.231, 729.167, 681.818, 625, 555.556, 468.75, 357.143, 208.333]
    for k in range(20):
        assert abs(float(s20[k] * 1000) - taus20[k]) < 1e-3, (k, float(s20[k] * 1000))
    assert float(s20[-1]) == 0.0


# ----------------------------------------------------------------------------- behaviour of the step


def test_step_matches_float64_rotate_half():
    m, x = tiny_model(), tiny_inputs()
    W = np_weights(m.state_dict())
    with torch.no_grad():
        for v1 in (8, 4):
            for tau in (1000.0, 952.38, 37.5):
                got = m(x["latents"], torch.tensor([tau]), x["vk"], x["vv"], x["ctx"], x["mask"], v1)[0].numpy()
                want = np_step(W, TINY_CONFIG, x["latents"][0].double().numpy(), float(np.float32(tau)),
                               x["vk"][:, 0].double().numpy(), x["vv"][:, 0].double().numpy(),
                               x["ctx"][0].double().numpy(), x["mask"][0].numpy() != 0, v1)
                c = cosine(got, want)
                d = float(np.abs(got - want).max())
                assert c > 1 - 1e-10 and d < 1e-4, (v1, tau, c, d)


def test_prepare_step_equals_forward_and_batches():
    m, x = tiny_model(), tiny_inputs(batch=2)
    tau = torch.tensor([1000.0, 500.0])
    with torch.no_grad():
        chunk = m.prepare_chunk(x["vk"], x["vv"], x["ctx"], x["mask"], 8)
        both = m.step(x["latents"], tau, chunk)
        for b in range(2):
            one = m(x["latents"][b:b + 1], tau[b:b + 1], x["vk"][:, b:b + 1], x["vv"][:, b:b + 1],
                    x["ctx"][b:b + 1], x["mask"][b:b + 1], 8)
            assert torch.allclose(one[0], both[b], atol=1e-5, rtol=0), float((one[0] - both[b]).abs().max())
        # a bool mask and the float contract give the same answer; None/0 mean all video visible
        a = m(x["latents"], tau, x["vk"], x["vv"], x["ctx"], x["mask"] != 0, None)
        assert torch.equal(a, both)


def test_masked_inputs_are_ignored_and_visible_ones_are_not():
    m, x = tiny_model(), tiny_inputs()
    t = torch.tensor([952.38])
    with torch.no_grad():
        base = m(x["latents"], t, x["vk"], x["vv"], x["ctx"], x["mask"], 4)
        ctx2 = x["ctx"].clone()
        ctx2[0, 4] += 3.0  # masked context token
        assert torch.equal(m(x["latents"], t, x["vk"], x["vv"], ctx2, x["mask"], 4), base)
        vk2, vv2 = x["vk"].clone(), x["vv"].clone()
        vk2[:, :, 4:] += 3.0  # video tokens beyond V1 = 4
        vv2[:, :, 4:] -= 3.0
        assert torch.equal(m(x["latents"], t, vk2, vv2, x["ctx"], x["mask"], 4), base)
        # ... but they matter when they are visible / attendable
        assert cosine(m(x["latents"], t, vk2, vv2, x["ctx"], x["mask"], 8), m(x["latents"], t, x["vk"], x["vv"], x["ctx"], x["mask"], 8)) < 0.9999
        ctx3 = x["ctx"].clone()
        ctx3[0, 0] += 3.0
        assert cosine(m(x["latents"], t, x["vk"], x["vv"], ctx3, x["mask"], 4), base) < 0.9999
        assert cosine(m(x["latents"], t, x["vk"], x["vv"], x["ctx"], torch.ones_like(x["mask"]), 4), base) < 0.9999


def test_bad_inputs_rejected():
    m, x = tiny_model(), tiny_inputs()
    bad = [
        lambda: m.prepare_chunk(x["vk"][:1], x["vv"][:1], x["ctx"], x["mask"], 8),
        lambda: m.prepare_chunk(x["vk"], x["vv"][:, :, :7], x["ctx"], x["mask"], 8),
        lambda: m.prepare_chunk(x["vk"], x["vv"], x["ctx"][:, :, :31], x["mask"], 8),
        lambda: m.prepare_chunk(x["vk"], x["vv"], x["ctx"], x["mask"][:, :4], 8),
        lambda: m.prepare_chunk(x["vk"], x["vv"], x["ctx"], torch.zeros_like(x["mask"]), 8),
        lambda: m.prepare_chunk(x["vk"], x["vv"], x["ctx"], x["mask"], 9),
        lambda: m.step(x["latents"][:, :31], torch.tensor([1000.0]),
                       m.prepare_chunk(x["vk"], x["vv"], x["ctx"], x["mask"], 8)),
        lambda: ActionExpert(dict(TINY_CONFIG, attn_head_dim=15)),
        lambda: ActionExpert({k: v for k, v in TINY_CONFIG.items() if k != "eps"}),
        lambda: schedule(0, 5.0),
    ]
    for i, f in enumerate(bad):
        try:
            f()
        except ValueError:
            continue
        raise AssertionError(f"bad input {i} was accepted")


def test_denoise_loop():
    m, x = tiny_model(), tiny_inputs()
    W = np_weights(m.state_dict())
    with torch.no_grad():
        chunk = m.prepare_chunk(x["vk"], x["vv"], x["ctx"], x["mask"], 8)
        r = denoise(m, x["latents"], chunk, 10, 5.0)
        assert r.preds.shape == (10, 1, 32, 7) and r.latents.shape == (10, 1, 32, 7)
        assert torch.equal(r.preds[0], m.step(x["latents"], torch.tensor([1000.0]), chunk))
        assert torch.equal(r.latents[-1], r.actions)
    # float64 loop on the same float32 schedule
    lat = x["latents"][0].double().numpy()
    sig = r.sigmas.numpy()
    args = (x["vk"][:, 0].double().numpy(), x["vv"][:, 0].double().numpy(), x["ctx"][0].double().numpy(),
            x["mask"][0].numpy() != 0, 8)
    for k in range(10):
        lat = lat + np_step(W, TINY_CONFIG, lat, float(np.float32(sig[k] * np.float32(1000))), *args) * float(sig[k + 1] - sig[k])
    c = cosine(r.actions[0].numpy(), lat)
    assert c > 1 - 1e-9, c


# ----------------------------------------------------------------------------- files


def test_safetensors_roundtrip():
    g = torch.Generator().manual_seed(3)
    ts = {"b": torch.randn(3, 5, generator=g), "a": torch.randn(7, generator=g).bfloat16(),
          "c": torch.randn(2, 2, generator=g).half()}
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.safetensors")
        write_safetensors(p, ts, {"k": "v"})
        with open(p, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        assert n % 8 == 0
        assert header["__metadata__"] == {"k": "v"}
        assert header["a"]["dtype"] == "BF16" and header["c"]["dtype"] == "F16" and header["b"]["dtype"] == "F32"
        assert header["b"]["data_offsets"] == [0, 60] and header["a"]["data_offsets"] == [60, 74]
        back, meta = read_safetensors(p)
        assert meta == {"k": "v"} and list(back) == ["b", "a", "c"]
        for k in ts:
            assert back[k].dtype == ts[k].dtype and torch.equal(back[k], ts[k]), k


def test_golden_files():
    if not os.path.isdir(TINY_DIR):
        print("  (golden/tiny missing: run make_golden.py; skipped)")
        return
    with open(os.path.join(TINY_DIR, "config.json")) as fh:
        cfg = json.load(fh)
    assert cfg == TINY_CONFIG
    f32, meta = read_safetensors(os.path.join(TINY_DIR, "weights.safetensors"))
    assert json.loads(meta["fastwam_config"]) == cfg
    assert len(f32) == 68 and all(t.dtype == torch.float32 for t in f32.values())
    assert set(f32) == set(ActionExpert(cfg).state_dict())
    bf, meta_bf = read_safetensors(os.path.join(TINY_DIR, "weights_bf16.safetensors"))
    assert json.loads(meta_bf["fastwam_config"]) == cfg
    assert set(bf) == {"mixtures.action." + k for k in f32}
    hf, _ = read_safetensors(os.path.join(TINY_DIR, "weights_f16.safetensors"))
    assert set(hf) == set(f32)
    for k, v in f32.items():
        assert bf["mixtures.action." + k].dtype == torch.bfloat16 and torch.equal(bf["mixtures.action." + k], v.bfloat16())
        assert hf[k].dtype == torch.float16 and torch.equal(hf[k], v.half())
    # the gains and modulations really are randomised (section 11)
    assert float((f32["blocks.0.self_attn.norm_q.weight"] - 1).abs().max()) > 0.05
    assert float(f32["blocks.1.modulation"].abs().max()) > 0.1

    W = {k: v.double().numpy() for k, v in f32.items()}
    Wbf = np_weights(bf, "mixtures.action.")
    Whf = np_weights(hf)
    for case, v1 in (("all", 8), ("first4", 4)):
        z = np.load(os.path.join(TINY_DIR, f"case_{case}.npz"))
        shapes = {"latents_action": (1, 32, 7), "timestep": (1,), "video_keys": (2, 1, 8, 32),
                  "video_values": (2, 1, 8, 32), "context": (1, 5, 32), "context_mask": (1, 5),
                  "pred_noise": (1, 32, 7), "visible_video": (1,), "step_timesteps": (4,),
                  "step_latents": (4, 1, 32, 7), "step_pred": (4, 1, 32, 7), "loop_init_noise": (1, 32, 7),
                  "loop_sigmas": (11,), "loop_pred": (10, 1, 32, 7), "loop_latents": (10, 1, 32, 7),
                  "loop_actions": (1, 32, 7), "pred_noise_bf16": (1, 32, 7), "loop_actions_bf16": (1, 32, 7),
                  "pred_noise_f16": (1, 32, 7), "loop_actions_f16": (1, 32, 7), "pred_noise_unmasked": (1, 32, 7)}
        for k, s in shapes.items():
            assert z[k].shape == s, (case, k, z[k].shape)
            assert z[k].dtype == (np.int64 if k == "visible_video" else np.float32), (case, k, z[k].dtype)
        assert int(z["visible_video"][0]) == v1 and float(z["timestep"][0]) == 1000.0
        assert z["context_mask"].tolist() == [[1, 1, 1, 1, 0]]
        assert np.allclose(z["step_timesteps"], [1000, 952.38, 500, 37.5])
        assert np.array_equal(z["loop_sigmas"], schedule(10, 5.0).numpy())
        common = (z["video_keys"][:, 0].astype(np.float64), z["video_values"][:, 0].astype(np.float64),
                  z["context"][0].astype(np.float64), z["context_mask"][0] != 0, v1)
        checks = [(z["pred_noise"][0], np_step(W, cfg, z["latents_action"][0].astype(np.float64), 1000.0, *common))]
        for i in range(4):
            checks.append((z["step_pred"][i, 0], np_step(W, cfg, z["step_latents"][i, 0].astype(np.float64),
                                                        float(z["step_timesteps"][i]), *common)))
        checks.append((z["pred_noise_bf16"][0], np_step(Wbf, cfg, z["latents_action"][0].astype(np.float64), 1000.0, *common)))
        checks.append((z["pred_noise_f16"][0], np_step(Whf, cfg, z["latents_action"][0].astype(np.float64), 1000.0, *common)))
        unmasked = common[:3] + (np.ones(5, bool), v1)
        checks.append((z["pred_noise_unmasked"][0], np_step(W, cfg, z["latents_action"][0].astype(np.float64), 1000.0, *unmasked)))
        for j, (got, want) in enumerate(checks):
            assert cosine(got, want) > 1 - 1e-10 and np.abs(got - want).max() < 1e-4, (case, j, cosine(got, want))
        # the loop: each recorded step is consistent with the recorded latents and schedule
        sig = z["loop_sigmas"]
        lat = z["loop_init_noise"][0].astype(np.float64)
        for k in range(10):
            p = np_step(W, cfg, z["loop_latents"][k - 1, 0].astype(np.float64) if k else lat,
                        float(np.float32(sig[k] * np.float32(1000))), *common)
            assert cosine(z["loop_pred"][k, 0], p) > 1 - 1e-9, (case, k)
            lat = lat + p * float(sig[k + 1] - sig[k])
            assert cosine(z["loop_latents"][k, 0], lat) > 1 - 1e-9, (case, k)
        assert np.array_equal(z["loop_actions"], z["loop_latents"][-1])
        assert cosine(z["loop_actions_bf16"], z["loop_actions"]) > 0.999
        assert cosine(z["loop_actions_f16"], z["loop_actions"]) > 0.99999
        assert cosine(z["pred_noise"], z["pred_noise_unmasked"]) < 0.9999
    za, z4 = (np.load(os.path.join(TINY_DIR, f"case_{c}.npz")) for c in ("all", "first4"))
    assert cosine(za["pred_noise"], z4["pred_noise"]) < 0.9999


# ----------------------------------------------------------------------------- real-time chunking


def test_rtc_prefix_weights():
    ex = lambda c: c * (math.exp(c) - 1) / (math.e - 1)  # noqa: E731
    cases = [((2, 6, 8, "linear"), [1, 1, 0.8, 0.6, 0.4, 0.2, 0, 0]),
             ((2, 6, 8, "exp"), [1, 1, ex(0.8), ex(0.6), ex(0.4), ex(0.2), 0, 0]),
             ((2, 6, 8, "ones"), [1, 1, 1, 1, 1, 1, 0, 0]),
             ((2, 6, 8, "zeros"), [1, 1, 0, 0, 0, 0, 0, 0]),
             ((2, 6, 4, "linear"), [1, 1, 0.8, 0.6, 0, 0, 0, 0]),         # no target from row 4
             ((9, 3, 8, "linear"), [1, 1, 1, 0, 0, 0, 0, 0]),             # delay clamped to the horizon
             ((0, 3, 8, "linear"), [0.75, 0.5, 0.25, 0, 0, 0, 0, 0]),
             ((1, 12, 8, "linear"), [1] + [(12 - i) / 12 for i in range(1, 8)]),  # horizon past the chunk
             ((0, 0, 8, "ones"), [0] * 8)]
    for (d, H, avail, sched), want in cases:
        got = prefix_weights(d, H, avail, 8, sched)
        assert got.dtype == torch.float64 and np.allclose(got.numpy(), want, rtol=0, atol=1e-15), (d, H, avail, sched, got)
    for bad in [(-1, 4, 4, 8, "exp"), (1, 4.5, 4, 8, "exp"), (1, 4, True, 8, "exp"), (1, 4, 4, 8, "cosine")]:
        try:
            prefix_weights(*bad)
        except ValueError:
            continue
        raise AssertionError(f"prefix_weights{bad} accepted")


def test_rtc_guidance_weight():
    # sigma 0.5: r^2 = 1/2, c = 0.5/(0.5*0.5) = 2; sigma 0.8: tau 0.2, r^2 = 0.64/0.68, c = 0.68/0.16
    for sigma, beta, want in [(0.5, 10, 2), (0.5, 1, 1), (0.5, 0, 0), (0.8, 10, 4.25), (0.2, 10, 4.25),
                              (0.8, 4, 4), (1.0, 7, 7), (0.0, 7, 0)]:
        assert abs(guidance_weight(sigma, beta) - want) < 1e-12, (sigma, beta, guidance_weight(sigma, beta))
    sig = schedule(10, 5.0)
    for s in (0.3, 0.6, 0.95):  # the unclipped weight (tau^2 + sigma^2)/(tau sigma) is symmetric in sigma and tau
        assert abs(guidance_weight(s, 1e9) - guidance_weight(1 - s, 1e9)) < 1e-9
        assert abs(guidance_weight(s, 1e9) - (s * s + (1 - s) ** 2) / (s * (1 - s))) < 1e-9
    assert guidance_weight(float(sig[0]), 5) == 5 and guidance_weight(float(sig[1]), 5) == 5  # clipped near noise
    for bad in [(0.5, -1), (0.5, float("nan")), (0.5, float("inf")), (1.5, 1), (-0.1, 1)]:
        try:
            guidance_weight(*bad)
        except ValueError:
            continue
        raise AssertionError(f"guidance_weight{bad} accepted")


class OracleModel:
    """The exact denoiser of one clean chunk m: pred = (x - m)/sigma (rows evolve independently)."""

    def __init__(self, m):
        self.m = m

    def step(self, latents, timestep, chunk):
        return (latents - self.m) / (timestep.reshape(-1, 1, 1) / 1000)


def _rtc_fixture():
    g = torch.Generator().manual_seed(7)
    m = torch.randn(1, 32, 7, generator=g)
    y = m + 2 + torch.rand(1, 32, 7, generator=g)
    eps = torch.randn(1, 32, 7, generator=g)
    w = prefix_weights(4, 16, 28, 32, "exp")
    return m, y, eps, w


def test_rtc_modes_exact_denoiser():
    m, y, eps, w = _rtc_fixture()
    model = OracleModel(m)
    off = denoise_rtc(model, eps, None, y, w, "off").actions
    assert torch.allclose(off, m, atol=1e-5)
    rep = denoise_rtc(model, eps, None, y, w, "replace").actions
    gui = denoise_rtc(model, eps, None, y, w, "guided", beta=5.0).actions
    assert torch.equal(rep[:, :4], y[:, :4])  # W = 1 rows end exactly at Y
    zero = (w == 0)
    assert torch.equal(rep[:, zero], off[:, zero]) and torch.equal(gui[:, zero], off[:, zero])
    for r in range(32):
        if w[r] > 0:
            d_off = float((off[:, r] - y[:, r]).abs().max())
            assert float((rep[:, r] - y[:, r]).abs().max()) < d_off
            assert float((gui[:, r] - y[:, r]).abs().max()) < d_off, r
    # guided, closed form in float64: x0_hat = m, e' = e*s'/s + c(s) W (s - s') (Y - m)
    sig = schedule(10, 5.0).double()
    e = (eps - m).double()
    W = w.reshape(1, 32, 1)
    for k in range(10):
        s, sn = float(sig[k]), float(sig[k + 1])
        e = e * sn / s + guidance_weight(s, 5.0) * W * (s - sn) * (y - m).double()
    assert torch.allclose(gui.double(), m.double() + e, atol=1e-5)
    # a flipped guidance sign moves the weighted rows away from Y
    x = eps.clone()
    for k in range(10):
        s, sn = sig[k].float(), sig[k + 1].float()
        pred = model.step(x, (s * 1000).reshape(1), None)
        pred = pred + guidance_weight(float(s), 5.0) * W.float() * (y - (x - s * pred))
        x = x + pred * (sn - s)
    assert float((x - y)[:, :4].abs().max()) > float((off - y)[:, :4].abs().max())


def test_rtc_modes_tiny_model():
    m, x = tiny_model(), tiny_inputs()
    with torch.no_grad():
        chunk = m.prepare_chunk(x["vk"], x["vv"], x["ctx"], x["mask"], 8)
        prev = denoise(m, x["latents"], chunk).actions
        y = torch.zeros_like(prev)
        y[:, :27] = prev[:, 5:]
        w = prefix_weights(3, 16, 27, 32, "exp")
        eps = torch.randn(1, 32, 7, generator=torch.Generator().manual_seed(11))
        off = denoise_rtc(m, eps, chunk, y, w, "off")
        assert torch.equal(off.actions, denoise(m, eps, chunk).actions) and torch.equal(off.preds, denoise(m, eps, chunk).preds)
        rep = denoise_rtc(m, eps, chunk, y, w, "replace").actions
        gui = denoise_rtc(m, eps, chunk, y, w, "guided", beta=5.0).actions
    d = lambda a: float((a - y)[:, :3].abs().max())  # noqa: E731
    assert d(rep) == 0 and d(gui) < 0.05 * d(off.actions), (d(rep), d(gui), d(off.actions))
    for bad in [dict(mode="inpaint"), dict(weights=torch.full((32,), 1.5)), dict(weights=torch.ones(31)),
                dict(target=torch.full((1, 32, 7), float("nan")))]:
        args = dict(model=m, init_noise=eps, chunk=chunk, target=y, weights=w, mode="guided")
        args.update(bad)
        try:
            denoise_rtc(**args)
        except ValueError:
            continue
        raise AssertionError(f"denoise_rtc accepted {list(bad)}")


def test_rtc_golden_file():
    path = os.path.join(TINY_DIR, "rtc_chunks.npz")
    if not os.path.exists(path):
        print("  (golden/tiny/rtc_chunks.npz missing: run make_rtc_golden.py; skipped)")
        return
    z = np.load(path)
    n = 4
    shapes = {"steps": (1,), "shift": (1,), "sigmas": (11,), "chunk_case": (n,), "noise": (n, 1, 32, 7), "s": (n,),
              "delay": (n,), "horizon": (n,), "avail": (n,), "schedule": (n,), "beta": (n,), "weights": (n, 32),
              "off_actions": (n, 1, 32, 7), "replace_target": (n, 1, 32, 7), "replace_actions": (n, 1, 32, 7),
              "guided_target": (n, 1, 32, 7), "guided_actions": (n, 1, 32, 7), "prefix_params": (40, 4),
              "prefix_weights": (40, 32), "guidance_sigma": (85,), "guidance_beta": (85,), "guidance_weight": (85,)}
    assert sorted(z.files) == sorted(shapes)
    for k, shape in shapes.items():
        assert z[k].shape == shape, (k, z[k].shape)
    assert np.array_equal(z["sigmas"], schedule(10, 5.0).numpy())
    sd, _ = read_safetensors(os.path.join(TINY_DIR, "weights.safetensors"))
    cfg = TINY_CONFIG
    model = ActionExpert(cfg)
    model.load_state_dict(sd)
    W64 = {k: v.double().numpy() for k, v in sd.items()}
    cases = [np.load(os.path.join(TINY_DIR, f)) for f in ("case_all.npz", "case_first4.npz")]
    assert np.abs(z["off_actions"][0] - cases[0]["loop_actions"]).max() < 1e-5
    sig = z["sigmas"]
    for k in range(1, n):
        c = cases[int(z["chunk_case"][k])]
        common = (c["video_keys"][:, 0].astype(np.float64), c["video_values"][:, 0].astype(np.float64),
                  c["context"][0].astype(np.float64), c["context_mask"][0] != 0, int(c["visible_video"][0]))
        chunk = model.prepare_chunk(*(torch.from_numpy(c[key]) for key in ("video_keys", "video_values", "context",
                                                                            "context_mask")), common[4])
        d, H, avail, s = (int(z[key][k]) for key in ("delay", "horizon", "avail", "s"))
        sched = RTC_SCHEDULES[int(z["schedule"][k])]
        assert avail == 32 - s
        w = z["weights"][k]
        assert np.array_equal(w, prefix_weights(d, H, avail, 32, sched).numpy().astype(np.float32))
        beta = float(z["beta"][k])
        eps = z["noise"][k, 0].astype(np.float64)
        for mode in ("replace", "guided"):
            y = z[mode + "_target"][k, 0]
            prev = z[mode + "_actions"][k - 1, 0]
            assert np.array_equal(y[:avail], prev[s:]) and not y[avail:].any()
            # the file is what the reference writes ...
            got = denoise_rtc(model, torch.from_numpy(z["noise"][k]), chunk, torch.from_numpy(y), torch.from_numpy(w),
                              mode, beta).actions
            assert np.array_equal(got.numpy(), z[mode + "_actions"][k]), (k, mode)
            # ... and a float64 loop on the NumPy step, written from the same formulas, agrees
            x, y64, w64 = eps.copy(), y.astype(np.float64), w.astype(np.float64)[:, None]
            for j in range(10):
                s_k, s_n = float(sig[j]), float(sig[j + 1])
                p = np_step(W64, cfg, x, float(np.float32(sig[j] * np.float32(1000))), *common)
                if mode == "guided":
                    p = p - guidance_weight(s_k, beta) * w64 * (y64 - (x - s_k * p))
                x = x + p * (s_n - s_k)
                if mode == "replace":
                    x = (1 - w64) * x + w64 * ((1 - s_n) * y64 + s_n * eps)
            want = z[mode + "_actions"][k, 0]
            assert cosine(want, x) > 1 - 1e-9 and np.abs(want - x).max() < 1e-4, (k, mode, cosine(want, x))
            frozen = slice(0, min(d, H, avail))
            assert np.abs(want[frozen] - y[frozen]).max() < 0.05 * np.abs(z["off_actions"][k, 0][frozen] - y[frozen]).max()
    for row, (d, H, avail, code) in zip(z["prefix_weights"], z["prefix_params"]):
        assert np.array_equal(row, prefix_weights(int(d), int(H), int(avail), 32, RTC_SCHEDULES[int(code)]).numpy().astype(np.float32))
    for s, b, c in zip(z["guidance_sigma"], z["guidance_beta"], z["guidance_weight"]):
        assert c == guidance_weight(float(s), float(b))


# ----------------------------------------------------------------------------- exporter


def run_export(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = export_checkpoint.main(argv)
    return rc, err.getvalue()


def test_export_checkpoint():
    m = tiny_model(seed=7)
    sd = m.state_dict()
    g = torch.Generator().manual_seed(8)
    mot = {"mixtures.action." + k: v.bfloat16() for k, v in sd.items()}
    mot["mixtures.video.blocks.0.self_attn.q.weight"] = torch.randn(4, 4, generator=g).bfloat16()
    payload = {"mot": mot, "proprio_encoder": {"weight": torch.randn(32, 8, generator=g), "bias": torch.zeros(32)},
               "step": 123}
    with tempfile.TemporaryDirectory() as d:
        ckpt = os.path.join(d, "fastwam.pt")
        torch.save(payload, ckpt)

        # keep: bf16 out, config inferred (heads given: 32 = 2*16 is not the default 24*128)
        out = os.path.join(d, "keep", "action_expert.safetensors")
        rc, err = run_export([ckpt, "-o", out, "--num-heads", "2"])
        assert rc == 0, err
        back, meta = read_safetensors(out)
        assert json.loads(meta["fastwam_config"]) == TINY_CONFIG, meta
        with open(os.path.join(d, "keep", "config.json")) as fh:
            assert json.load(fh) == TINY_CONFIG
        assert list(back) == list(sd)  # section 1 order, no prefix
        for k, v in sd.items():
            assert back[k].dtype == torch.bfloat16 and torch.equal(back[k], v.bfloat16()), k

        # f32 through the CLI (a real process and exit status), config from a JSON file
        cfgfile = os.path.join(d, "cfg.json")
        with open(cfgfile, "w") as fh:
            json.dump({"action_dit_config": {"num_heads": 2, "attn_head_dim": 16, "eps": 1e-6}}, fh)
        out32 = os.path.join(d, "f32", "action_expert.safetensors")
        p = subprocess.run([sys.executable, os.path.join(HERE, "export_checkpoint.py"), ckpt, "-o", out32,
                            "--config", cfgfile, "--dtype", "f32"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        back32, _ = read_safetensors(out32)
        for k, v in sd.items():
            assert back32[k].dtype == torch.float32 and torch.equal(back32[k], v.bfloat16().float()), k

        # a plain ActionDiT state dict in f32, exported to f16
        plain = os.path.join(d, "plain.pt")
        torch.save(sd, plain)
        out16 = os.path.join(d, "f16", "action_expert.safetensors")
        rc, err = run_export([plain, "-o", out16, "--attn-head-dim", "16", "--dtype", "f16"])
        assert rc == 0, err
        back16, _ = read_safetensors(out16)
        assert all(torch.equal(back16[k], v.half()) for k, v in sd.items())

        # heads not given and not the default: refused with a hint
        rc, err = run_export([ckpt, "-o", os.path.join(d, "x.safetensors")])
        assert rc == 1 and "--num-heads" in err, err

        # conflicting explicit config
        rc, err = run_export([ckpt, "-o", os.path.join(d, "x.safetensors"), "--num-heads", "2", "--hidden-dim", "128"])
        assert rc == 1 and "hidden_dim: configured 128 but the checkpoint has 64" in err, err
        rc, err = run_export([ckpt, "-o", os.path.join(d, "x.safetensors"), "--num-heads", "4", "--attn-head-dim", "16"])
        assert rc == 1 and "num_heads*attn_head_dim" in err, err

        # missing, extra and misshaped keys are all reported by name
        bad = dict(mot)
        del bad["mixtures.action.blocks.1.ffn.2.bias"]
        bad["mixtures.action.blocks.0.norm1.weight"] = torch.ones(64)
        bad["mixtures.action.blocks.0.cross_attn.norm_k.weight"] = torch.ones(31)
        badp = os.path.join(d, "bad.pt")
        torch.save({"mot": bad}, badp)
        rc, err = run_export([badp, "-o", os.path.join(d, "bad", "a.safetensors"), "--num-heads", "2"])
        assert rc == 1, err
        assert "missing: blocks.1.ffn.2.bias [64]" in err, err
        assert "extra: blocks.0.norm1.weight" in err, err
        assert "misshaped: blocks.0.cross_attn.norm_k.weight is [31], want [32]" in err, err
        assert not os.path.exists(os.path.join(d, "bad", "a.safetensors"))

        # a missing block is caught by the layer count and the key check
        two = {k: v for k, v in mot.items() if not k.startswith("mixtures.action.blocks.1.")}
        torch.save({"mot": two}, badp)
        rc, err = run_export([badp, "-o", os.path.join(d, "bad", "a.safetensors"), "--num-heads", "2", "--num-layers", "2"])
        assert rc == 1 and "num_layers: configured 2 but the checkpoint has 1" in err, err

        # non-finite values and float64 with --dtype keep
        nan = dict(mot)
        nan["mixtures.action.head.bias"] = torch.full((7,), float("nan"))
        torch.save({"mot": nan}, badp)
        rc, err = run_export([badp, "-o", os.path.join(d, "bad", "a.safetensors"), "--num-heads", "2"])
        assert rc == 1 and "non-finite values: head.bias" in err, err
        f64 = {k: v.double() for k, v in sd.items()}
        torch.save(f64, badp)
        rc, err = run_export([badp, "-o", os.path.join(d, "bad", "a.safetensors"), "--num-heads", "2"])
        assert rc == 1 and "--dtype keep" in err, err
        rc, err = run_export([badp, "-o", os.path.join(d, "ok64", "a.safetensors"), "--num-heads", "2", "--dtype", "f32"])
        assert rc == 0, err

        # not a Fast-WAM checkpoint / ambiguous prefix
        torch.save({"mot": {"mixtures.video.x": torch.zeros(1)}}, badp)
        rc, err = run_export([badp, "-o", os.path.join(d, "bad", "a.safetensors")])
        assert rc == 1 and "action_encoder.weight" in err, err
        amb = dict(mot)
        amb["mixtures.other.action_encoder.weight"] = torch.zeros(64, 7)
        torch.save({"mot": amb}, badp)
        rc, err = run_export([badp, "-o", os.path.join(d, "bad", "a.safetensors"), "--num-heads", "2"])
        assert rc == 1 and "--prefix" in err, err
        rc, err = run_export([badp, "-o", os.path.join(d, "pre", "a.safetensors"), "--num-heads", "2",
                              "--prefix", "mixtures.action."])
        assert rc == 0, err


def test_export_head_split_and_action_tokens():
    """The exporter says where the head split comes from (stderr and metadata), refuses splits
    that do not divide the width or contradict the checkpoint's own configuration, and writes
    action_tokens when told."""
    cfg = dict(TINY_CONFIG, num_heads=2, attn_head_dim=128)  # attention width 256: a multiple of 128
    sd = tiny_model(seed=9, cfg=cfg).state_dict()
    mot = {"mixtures.action." + k: v for k, v in sd.items()}
    with tempfile.TemporaryDirectory() as d:
        def save(payload, name):
            path = os.path.join(d, name)
            torch.save(payload, path)
            return path

        def split_of(out):
            _, meta = read_safetensors(out)
            return json.loads(meta["fastwam_head_split"]), json.loads(meta["fastwam_config"])

        # FastWAM.save_checkpoint's payload carries no config: the split is assumed, and said so.
        plain = save({"mot": mot, "step": 1, "torch_dtype": "torch.float32"}, "plain.pt")
        out = os.path.join(d, "assumed", "a.safetensors")
        rc, err = run_export([plain, "-o", out])
        assert rc == 0, err
        assert "head split 2x128: assumed: the checkpoint does not record the head split; attention width 256 " \
               "split with attn_head_dim 128 (section 2) -> 2 heads" in err, err
        assert "action_tokens not written" in err, err
        split, written = split_of(out)
        assert split["source"] == "assumed" and (split["num_heads"], split["attn_head_dim"]) == (2, 128), split
        assert written == cfg and "action_tokens" not in written, written

        # A flag that divides the width is taken, and recorded as given, not as the checkpoint's.
        out = os.path.join(d, "flag", "a.safetensors")
        rc, err = run_export([plain, "-o", out, "--num-heads", "1"])
        assert rc == 0, err
        split, written = split_of(out)
        assert split["source"] == "flags" and "--num-heads 1" in split["note"] and "does not record" in split["note"], split
        assert (written["num_heads"], written["attn_head_dim"]) == (1, 256), written
        # One that does not divide it, or is not positive, is refused.
        for heads, want in (("3", "num_heads: 3 does not divide the attention width 256"),
                            ("0", "num_heads: --num-heads 0 must be positive"),
                            ("-2", "num_heads: --num-heads -2 must be positive")):
            rc, err = run_export([plain, "-o", os.path.join(d, "bad", "a.safetensors"), "--num-heads", heads])
            assert rc == 1 and want in err, (heads, err)
        assert not os.path.exists(os.path.join(d, "bad"))

        # A payload with its own config: the split comes from it; contradicting flags are refused.
        own = dict(cfg, video_dit_hint="ignored")  # keys outside the action config are left out
        nested = save({"mot": mot, "config": {"model": {"action_dit_config": own}}}, "nested.pt")
        out = os.path.join(d, "own", "a.safetensors")
        rc, err = run_export([nested, "-o", out])
        assert rc == 0, err
        split, written = split_of(out)
        assert split["source"] == "checkpoint", split
        assert "payload['config']['model']['action_dit_config']" in split["note"], split
        assert written == cfg, written
        for flags, want in ((["--num-heads", "1"], "num_heads: --num-heads 1 contradicts the checkpoint's own configuration"),
                            (["--attn-head-dim", "64"], "attn_head_dim: --attn-head-dim 64 contradicts"),
                            (["--ffn-dim", "256"], "ffn_dim: --ffn-dim 256 contradicts the checkpoint's own configuration")):
            rc, err = run_export([nested, "-o", os.path.join(d, "bad", "a.safetensors")] + flags)
            assert rc == 1 and want in err, (flags, err)
        # A config that disagrees with the checkpoint's own tensors is refused.
        for bad_cfg, want in ((dict(cfg, num_heads=4), "gives 4*128, which is not the attention width 256"),
                              (dict(cfg, hidden_dim=128), "says 128 but its tensors have 64"),
                              (dict(cfg, num_heads="two"), "is 'two', want an integer")):
            path = save({"mot": mot, "action_dit_config": bad_cfg}, "badcfg.pt")
            rc, err = run_export([path, "-o", os.path.join(d, "bad", "a.safetensors")])
            assert rc == 1 and want in err, (bad_cfg, err)

        # action_tokens: from the flag or --config, into the metadata and config.json; checked.
        out = os.path.join(d, "s16", "a.safetensors")
        rc, err = run_export([plain, "-o", out, "--action-tokens", "16"])
        assert rc == 0 and "action_tokens not written" not in err, err
        assert split_of(out)[1]["action_tokens"] == 16
        with open(os.path.join(d, "s16", "config.json")) as fh:
            assert json.load(fh)["action_tokens"] == 16
        cfgfile = os.path.join(d, "s8.json")
        with open(cfgfile, "w") as fh:
            json.dump({"action_tokens": 8, "num_heads": 2}, fh)
        out = os.path.join(d, "s8", "a.safetensors")
        rc, err = run_export([plain, "-o", out, "--config", cfgfile])
        assert rc == 0, err
        split, written = split_of(out)
        assert written["action_tokens"] == 8 and split["source"] == "flags", (written, split)
        assert f"--config {cfgfile} num_heads 2" in split["note"], split
        for s, want in (("0", "outside 1..1024"), ("1025", "action_tokens 1025 is outside 1..1024")):
            rc, err = run_export([plain, "-o", os.path.join(d, "bad", "a.safetensors"), "--action-tokens", s])
            assert rc == 1 and want in err, (s, err)


def main():
    torch.set_num_threads(1)
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    failed = 0
    for name, f in tests:
        try:
            f()
            print(f"ok   {name}")
        except Exception:  # noqa: BLE001 - report every failing test, then exit non-zero
            failed += 1
            import traceback
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{len(tests) - failed}/{len(tests)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
