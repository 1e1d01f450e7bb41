"""Write the tiny golden data set of the action-expert step into golden/tiny/.

Deterministic (fixed torch generator seed). Run with:
    /usr/bin/python3 golden/make_golden.py [--out golden/tiny]

Outputs:
    weights.safetensors        f32, section 1 key names, no prefix, config in metadata
    weights_bf16.safetensors   the same rounded to bf16 (dtype BF16), keys under "mixtures.action."
    weights_f16.safetensors    the same rounded to f16 (dtype F16), no prefix
    config.json                the config dict
    case_all.npz               visible video V1 = 8 (all)
    case_first4.npz            V1 = 4, otherwise the same inputs
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reference import TINY_CONFIG, ActionExpert, denoise, init_random_, schedule  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

SEED = 10  # of seeds 0..11, the one with the largest mask and visibility effects (see report)
SV, L = 8, 5                      # tiny video tokens and context tokens (section 11)
STEP_TIMESTEPS = [1000.0, 952.38, 500.0, 37.5]
LOOP_STEPS, LOOP_SHIFT = 10, 5.0
BF16_PREFIX = "mixtures.action."


def cosine(a, b):
    a = a.double().reshape(-1)
    b = b.double().reshape(-1)
    return float((a @ b) / (a.norm() * b.norm()))


def rounded_copy(model, dtype):
    """A float32 model whose parameters are model's rounded to dtype (compute stays fp32)."""
    m = ActionExpert(model.cfg)
    m.load_state_dict({k: v.to(dtype).to(torch.float32) for k, v in model.state_dict().items()})
    return m.eval()


def f32(t):
    return t.detach().to(torch.float32).numpy()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # bit-stable results regardless of the machine's thread count

    cfg = dict(TINY_CONFIG)
    gen = torch.Generator().manual_seed(SEED)
    model = init_random_(ActionExpert(cfg), gen).eval()
    N, A = cfg["num_layers"], cfg["num_heads"] * cfg["attn_head_dim"]
    S, a, T = ActionExpert.ACTION_TOKENS, cfg["action_dim"], cfg["text_dim"]

    # ---- weights
    meta = {"fastwam_config": json.dumps(cfg)}
    sd = model.state_dict()
    write_safetensors(os.path.join(args.out, "weights.safetensors"),
                      {k: v.to(torch.float32) for k, v in sd.items()}, meta)
    write_safetensors(os.path.join(args.out, "weights_bf16.safetensors"),
                      {BF16_PREFIX + k: v.to(torch.bfloat16) for k, v in sd.items()}, meta)
    write_safetensors(os.path.join(args.out, "weights_f16.safetensors"),
                      {k: v.to(torch.float16) for k, v in sd.items()}, meta)
    with open(os.path.join(args.out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")

    # ---- inputs (shared by both cases)
    randn = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float32)  # noqa: E731
    latents_action = randn(1, S, a)
    timestep = torch.tensor([1000.0], dtype=torch.float32)
    video_keys = randn(N, 1, SV, A)
    video_values = randn(N, 1, SV, A)
    context = randn(1, L, T)
    context_mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.float32)
    step_timesteps = torch.tensor(STEP_TIMESTEPS, dtype=torch.float32)
    step_latents = randn(len(STEP_TIMESTEPS), 1, S, a)
    loop_init_noise = randn(1, S, a)
    sigmas = schedule(LOOP_STEPS, LOOP_SHIFT)

    models = {"": model, "_bf16": rounded_copy(model, torch.bfloat16), "_f16": rounded_copy(model, torch.float16)}
    rows = []
    preds = {}
    with torch.no_grad():
        for case, visible in (("all", SV), ("first4", 4)):
            chunk = model.prepare_chunk(video_keys, video_values, context, context_mask, visible)
            pred = model.step(latents_action, timestep, chunk)
            step_pred = torch.stack([model.step(step_latents[i], step_timesteps[i:i + 1], chunk)
                                     for i in range(len(STEP_TIMESTEPS))])
            loop = denoise(model, loop_init_noise, chunk, LOOP_STEPS, LOOP_SHIFT)
            assert torch.equal(loop.sigmas, sigmas)
            out = {
                "latents_action": f32(latents_action),
                "timestep": f32(timestep),
                "video_keys": f32(video_keys),
                "video_values": f32(video_values),
                "context": f32(context),
                "context_mask": f32(context_mask),
                "pred_noise": f32(pred),
                "visible_video": np.array([visible], dtype=np.int64),
                "step_timesteps": f32(step_timesteps),
                "step_latents": f32(step_latents),
                "step_pred": f32(step_pred),
                "loop_init_noise": f32(loop_init_noise),
                "loop_sigmas": f32(sigmas),
                "loop_pred": f32(loop.preds),
                "loop_latents": f32(loop.latents),
                "loop_actions": f32(loop.actions),
            }
            for suffix in ("_bf16", "_f16"):
                m = models[suffix]
                ch = m.prepare_chunk(video_keys, video_values, context, context_mask, visible)
                out["pred_noise" + suffix] = f32(m.step(latents_action, timestep, ch))
                out["loop_actions" + suffix] = f32(denoise(m, loop_init_noise, ch, LOOP_STEPS, LOOP_SHIFT).actions)

            # The same step with the mask ignored (all ones): must differ clearly.
            ch1 = model.prepare_chunk(video_keys, video_values, context, torch.ones_like(context_mask), visible)
            unmasked = model.step(latents_action, timestep, ch1)
            step_unmasked = torch.stack([model.step(step_latents[i], step_timesteps[i:i + 1], ch1)
                                         for i in range(len(STEP_TIMESTEPS))])
            out["pred_noise_unmasked"] = f32(unmasked)

            np.savez(os.path.join(args.out, f"case_{case}.npz"), **out)
            preds[case] = (pred, step_pred, loop.actions)
            cos_mask = cosine(pred, unmasked)
            cos_mask_steps = min(cosine(step_pred[i], step_unmasked[i]) for i in range(len(STEP_TIMESTEPS)))
            rows.append((case, visible, float(pred.abs().max()), float(step_pred.abs().max()),
                         float(loop.actions.abs().max()), cos_mask, cos_mask_steps,
                         cosine(pred, torch.from_numpy(out["pred_noise_bf16"])),
                         cosine(loop.actions, torch.from_numpy(out["loop_actions_bf16"])),
                         cosine(pred, torch.from_numpy(out["pred_noise_f16"])),
                         cosine(loop.actions, torch.from_numpy(out["loop_actions_f16"]))))

    print(f"golden written to {args.out} (seed {SEED}, config {json.dumps(cfg)})")
    hdr = ("case", "V1", "max|pred|", "max|step_pred|", "max|actions|", "cos(mask,nomask)",
           "min step cos(mask,nomask)", "cos pred bf16", "cos actions bf16", "cos pred f16", "cos actions f16")
    print(" | ".join(hdr))
    for r in rows:
        print(" | ".join([r[0], str(r[1])] + [f"{v:.6g}" if i < 3 else f"{v:.10f}" for i, v in enumerate(r[2:])]))
    cos_vis = cosine(preds["all"][0], preds["first4"][0])
    cos_vis_steps = min(cosine(preds["all"][1][i], preds["first4"][1][i]) for i in range(len(STEP_TIMESTEPS)))
    cos_vis_loop = cosine(preds["all"][2], preds["first4"][2])
    print(f"cos(case_all, case_first4): pred_noise {cos_vis:.10f}, min over step_pred {cos_vis_steps:.10f}, "
          f"loop_actions {cos_vis_loop:.10f}")
    print(f"loop_sigmas: {[round(float(s), 7) for s in sigmas]}")
    for name in sorted(os.listdir(args.out)):
        print(f"  {name:28s} {os.path.getsize(os.path.join(args.out, name)):>9d} bytes")

    worst_mask = max(max(r[5], r[6]) for r in rows)
    if not worst_mask < 0.9999:
        raise SystemExit(f"masked and unmasked predictions agree too well (cos {worst_mask}); the mask test is weak")
    if not max(cos_vis, cos_vis_steps) < 0.9999:
        raise SystemExit(f"case_all and case_first4 agree too well (cos {cos_vis}); the visibility test is weak")


if __name__ == "__main__":
    main()
