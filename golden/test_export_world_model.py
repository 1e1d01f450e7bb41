"""Checks of golden/export_world_model.py on tiny synthetic files (run by cmd/fastwam's TestExportWorldModel).

    /usr/bin/python3 golden/test_export_world_model.py OUTDIR

Builds, in OUTDIR, a FastWAM-style payload (payload.pt: "mot" with the video expert's keys under
"mixtures.video." at a tiny configuration, some "mixtures.action." keys, "proprio_encoder", "step",
all bf16 as the released checkpoint) and a Wan2.2-style VAE (vae.pth wrapped in "model_state", and
vae_in.safetensors, both with decoder.* and conv2.* tensors), exports them, and writes the inputs'
tensors as f32 (reference_dit.safetensors, reference_vae.safetensors) for the Go side to compare
with. Then checks that each malformed input is refused with a message naming the problem. Prints
"ok" at the end.
"""

import io
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import export_world_model as ewm  # noqa: E402
from make_vae_golden import weight_shapes  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

CFG = {"hidden_dim": 32, "ffn_dim": 64, "num_heads": 4, "head_dim": 8, "num_layers": 2, "text_dim": 24,
       "freq_dim": 16, "proprio_dim": 8, "latent_channels": 48}


def randn(gen, shape):
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(torch.bfloat16)


def payload(gen):
    mot = {ewm.VIDEO_PREFIX + k: randn(gen, s) for k, s in ewm.dit_keys(CFG)}
    mot["mixtures.action.action_encoder.weight"] = randn(gen, (16, 7))
    mot["mixtures.action.blocks.0.modulation"] = randn(gen, (1, 6, 16))
    proprio = {"weight": randn(gen, (CFG["text_dim"], CFG["proprio_dim"])), "bias": randn(gen, (CFG["text_dim"],))}
    return {"mot": mot, "proprio_encoder": proprio, "step": 7, "torch_dtype": "bfloat16"}


def vae_state(gen, d):
    sd = {"decoder.conv1.weight": randn(gen, (8, 4, 3, 3, 3)), "conv2.weight": randn(gen, (48, 48, 1, 1, 1)),
          "conv2.bias": randn(gen, (48,))}
    for k, s in weight_shapes(d):
        sd[k] = randn(gen, s)
    return sd


def refused(fn, *want):
    log = io.StringIO()
    try:
        fn(log)
    except ewm.ExportError as e:
        msg = str(e)
        for w in want:
            assert w in msg, f"error {msg!r} lacks {w!r}"
        return
    raise AssertionError(f"accepted; want an error with {want}\n{log.getvalue()}")


def main(out):
    gen = torch.Generator().manual_seed(26)
    p = payload(gen)
    pt = os.path.join(out, "payload.pt")
    torch.save(p, pt)
    ref = {k[len(ewm.VIDEO_PREFIX):]: v.float() for k, v in p["mot"].items() if k.startswith(ewm.VIDEO_PREFIX)}
    ref.update({"proprio_encoder." + k: v.float() for k, v in p["proprio_encoder"].items()})
    write_safetensors(os.path.join(out, "reference_dit.safetensors"), ref)
    log = io.StringIO()
    cfg = ewm.export_dit(pt, os.path.join(out, "world.safetensors"), head_dim=8, log=log)
    assert cfg == CFG, cfg
    assert "2 unused" not in log.getvalue() and "unused tensors dropped" in log.getvalue(), log.getvalue()
    ewm.export_dit(pt, os.path.join(out, "world_full_f32.safetensors"), dtype="f32", keep_unused=True, num_heads=4, log=log)

    sd = vae_state(gen, 4)
    pth = os.path.join(out, "vae.pth")
    torch.save({"model_state": sd}, pth)
    st = os.path.join(out, "vae_in.safetensors")
    write_safetensors(st, sd)
    write_safetensors(os.path.join(out, "reference_vae.safetensors"), {k: v.float() for k, v in sd.items()})
    assert ewm.export_vae(pth, os.path.join(out, "vae.safetensors"), log=log) == 4
    assert ewm.export_vae(st, os.path.join(out, "vae_f32.safetensors"), dtype="f32", log=log) == 4
    assert "3 decoder/conv2 tensors dropped" in log.getvalue(), log.getvalue()

    bad = os.path.join(out, "bad.pt")
    x = os.path.join(out, "x.safetensors")

    def dit_with(edit, **kw):
        q = payload(torch.Generator().manual_seed(1))
        edit(q)
        torch.save(q, bad)
        return lambda log: ewm.export_dit(bad, x, log=log, **kw)

    V = ewm.VIDEO_PREFIX
    refused(dit_with(lambda q: q["mot"].pop(V + "blocks.1.cross_attn.o.bias"), head_dim=8),
            "missing: blocks.1.cross_attn.o.bias [32]")
    refused(dit_with(lambda q: q["mot"].__setitem__(V + "blocks.0.extra.weight", torch.zeros(2)), head_dim=8),
            "extra: blocks.0.extra.weight [2]")
    refused(dit_with(lambda q: q["mot"].__setitem__(V + "blocks.0.norm3.bias", torch.zeros(31)), head_dim=8),
            "misshaped: blocks.0.norm3.bias is [31], want [32]")
    refused(dit_with(lambda q: q["mot"][V + "blocks.0.ffn.2.weight"].__setitem__((0, 0), float("nan")), head_dim=8),
            "non-finite values: blocks.0.ffn.2.weight")
    refused(dit_with(lambda q: q["mot"].__setitem__(V + "head.modulation", torch.zeros(1, 2, 32, dtype=torch.int32)), head_dim=8),
            "not floating point: head.modulation")
    refused(dit_with(lambda q: q["proprio_encoder"].__setitem__("weight", torch.zeros(20, 8)), head_dim=8),
            "misshaped: weight is [20, 8], want [24, 8]")
    refused(dit_with(lambda q: q["mot"].__setitem__(V + "text_embedding.0.weight", torch.zeros(32, 20)), head_dim=8),
            "misshaped: weight is [24, 8], want [20, 8]")
    refused(dit_with(lambda q: q["proprio_encoder"].__setitem__("scale", torch.zeros(1)), head_dim=8), "extra: scale")
    refused(dit_with(lambda q: None, num_heads=3), "--num-heads 3 does not divide the width 32")
    refused(dit_with(lambda q: None, head_dim=16), "head_dim 16: the 3-D RoPE splits it into 6 + 5 + 5")
    refused(dit_with(lambda q: None), "width 32 is not a multiple of the assumed head_dim 128")
    refused(dit_with(lambda q: q.pop("proprio_encoder"), head_dim=8), "payload['proprio_encoder'] is NoneType")
    refused(dit_with(lambda q: q["mot"].clear(), head_dim=8), "no key under 'mixtures.video.'")

    def vae_with(edit):
        s = vae_state(torch.Generator().manual_seed(2), 4)
        edit(s)
        torch.save(s, bad)
        return lambda log: ewm.export_vae(bad, x, log=log)

    refused(vae_with(lambda s: s.pop("encoder.middle.1.proj.bias")), "missing: encoder.middle.1.proj.bias [16]")
    refused(vae_with(lambda s: s.__setitem__("encoder.extra", torch.zeros(3))), "extra: encoder.extra [3]")
    refused(vae_with(lambda s: s.__setitem__("model.encoder.conv1.weight", torch.zeros(3))), "extra: model.encoder.conv1.weight")
    refused(vae_with(lambda s: s.__setitem__("conv1.bias", torch.zeros(95))), "misshaped: conv1.bias is [95], want [96]")
    refused(vae_with(lambda s: s["encoder.head.0.gamma"].__setitem__((0, 0, 0, 0), float("inf"))), "non-finite values: encoder.head.0.gamma")
    refused(vae_with(lambda s: s.pop("encoder.conv1.weight")), "encoder.conv1.weight is missing")
    assert not os.path.exists(x), "a refused export wrote its output"
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
