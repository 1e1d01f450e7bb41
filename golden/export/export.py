#!/usr/bin/env python3
"""Export the graph set of docs/graphs.md to ONNX, one file per graph, each checked by the linter.

Inputs are safetensors files in our layouts:
  --action  the action expert (golden/export_checkpoint.py's output: section 1 keys, metadata fastwam_config)
  --world   the video DiT (world-model.md §6.2 keys without 'mixtures.video.', optional metadata
            fastwam_world_config JSON of the DiT weight file contract: num_heads / head_dim)
  --vae     the VAE (the released Wan2.2_VAE layout, world-model.md §6.1)
Any of them may be left out; only the graphs of the given ones are written.

Usage:
  /usr/bin/python3 golden/export/export.py --out DIR [--action F] [--world F --ranges 0:8,8:16,16:30]
      [--vae F] [--image 224x448] [--video-tokens 98] [--context-rows 129]
The ranges come from `fastwam graphs plan`; without --ranges the prefill is one graph.
Writes DIR/<graph>.onnx for vae_encoder, prefill_<i>, action_context, action_step_ctx, action_step.
"""

import argparse
import os
import sys

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import graphs  # noqa: E402
import lint  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

OPSET = 17  # the newest opset both torch 1.13's exporter and onnx 1.12 know


def load_action(path):
    sd, meta = read_safetensors(path)
    return graphs.ActionWeights(sd, graphs.action_config(meta, sd))


def load_world(path):
    sd, meta = read_safetensors(path)
    return sd, graphs.world_config(meta, sd)


def load_vae(path):
    sd, _ = read_safetensors(path)
    return sd


def parse_ranges(text, n):
    """'0:8,8:16,16:30' -> [(0, 8), (8, 16), (16, 30)], contiguous and covering [0, n)."""
    out = []
    for part in text.split(","):
        try:
            a, b = (int(v) for v in part.split(":"))
        except ValueError:
            raise graphs.GraphError(f"range {part!r}: want a:b") from None
        out.append((a, b))
    want = 0
    for a, b in out:
        if a != want or b <= a:
            raise graphs.GraphError(f"ranges {text!r} are not contiguous from 0 (at {a}:{b}, expected start {want})")
        want = b
    if want != n:
        raise graphs.GraphError(f"ranges {text!r} end at {want}, the model has {n} layers")
    return out


def export_graph(module, args, path):
    """torch.onnx.export module (its INPUTS/OUTPUTS names) to path, then onnx.checker and the linter."""
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, tuple(args), path, input_names=list(module.INPUTS),
                          output_names=list(module.OUTPUTS), opset_version=OPSET, do_constant_folding=True)
    # torch 1.13's exporter leaves some output dims symbolic (after Pad, Conv) although every shape is
    # static; onnx's inference (with data propagation) resolves them: write its shapes into the outputs.
    m = onnx.load(path, load_external_data=False)  # over 2 GB torch writes external data: keep it there
    for out in m.graph.output:
        out.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    for out, inf in zip(m.graph.output, inferred.graph.output):
        out.type.CopyFrom(inf.type)
    onnx.save(m, path)
    return lint.lint(path)


def action_inputs(cfg, video_tokens, context_rows, gen=None):
    """Example f32 inputs of the action graphs (random; shapes are what the export fixes)."""
    A = cfg["num_heads"] * cfg["attn_head_dim"]
    N = cfg["num_layers"]
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    return {
        "latents_action": r(1, 32, cfg["action_dim"]), "timestep": torch.tensor([952.381]),
        "video_keys": r(N, 1, video_tokens, A), "video_values": r(N, 1, video_tokens, A),
        "context": r(1, context_rows, cfg["text_dim"]), "context_mask": torch.ones(1, context_rows),
    }


def export_all(out, action=None, world=None, ranges=None, vae=None, image=(224, 448), video_tokens=98,
               context_rows=129, log=sys.stderr):
    """Write every graph of the given weights to out; returns {graph name: path}."""
    os.makedirs(out, exist_ok=True)
    paths = {}

    def put(name, module, args):
        p = os.path.join(out, name + ".onnx")
        m = export_graph(module, args, p)
        print(f"{name}: {p} ({len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers)", file=log)
        paths[name] = p

    if vae is not None:
        put("vae_encoder", graphs.VAEEncoder(load_vae(vae), image), [torch.zeros(1, 3, *image)])
    if world is not None:
        sd, cfg = load_world(world)
        rs = parse_ranges(ranges, cfg["num_layers"]) if ranges else [(0, cfg["num_layers"])]
        lh, lw = image[0] // 16, image[1] // 16
        sv = (lh // 2) * (lw // 2)
        for i, (a, b) in enumerate(rs):
            m = graphs.Prefill(sd, cfg, a, b, (lh, lw))
            args = ([torch.zeros(1, cfg["z_dim"], lh, lw), torch.zeros(1, context_rows, cfg["text_dim"])] if a == 0
                    else [torch.zeros(1, sv, cfg["dim"]), torch.zeros(1, context_rows, cfg["dim"])])
            put(f"prefill_{i}", m, args)
    if action is not None:
        W = load_action(action)
        x = action_inputs(W.cfg, video_tokens, context_rows)
        N, A = W.cfg["num_layers"], W.cfg["num_heads"] * W.cfg["attn_head_dim"]
        put("action_context", graphs.ActionContext(W), [x["context"]])
        kv = torch.zeros(N, 1, context_rows, A)
        put("action_step_ctx", graphs.ActionStepCtx(W, video_tokens),
            [x["latents_action"], x["timestep"], x["video_keys"], x["video_values"], kv, kv, x["context_mask"]])
        put("action_step", graphs.ActionStep(W, video_tokens), [x[k] for k in graphs.ActionStep.INPUTS])
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--action")
    ap.add_argument("--world")
    ap.add_argument("--ranges", help="prefill layer ranges a:b,... (from `fastwam graphs plan`)")
    ap.add_argument("--vae")
    ap.add_argument("--image", default="224x448", help="HxW of the VAE input (multiples of 32)")
    ap.add_argument("--video-tokens", type=int, default=98)
    ap.add_argument("--context-rows", type=int, default=129)
    a = ap.parse_args(argv)
    try:
        h, w = (int(v) for v in a.image.split("x"))
        if h <= 0 or w <= 0 or h % 32 or w % 32:
            raise graphs.GraphError(f"--image {a.image}: H and W must be positive multiples of 32")
        export_all(a.out, a.action, a.world, a.ranges, a.vae, (h, w), a.video_tokens, a.context_rows)
    except (graphs.GraphError, lint.LintError, ValueError, OSError) as e:
        print(f"export: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
