"""Export the world model's weights from Fast-WAM's released files to the files our Go code reads.

Two subcommands:

  dit  CHECKPOINT -o OUT   the video DiT (payload["mot"], keys under "mixtures.video.", world-model spec
                           section 6.2) and the proprio encoder (payload["proprio_encoder"], {weight, bias},
                           section 6.3) of a FastWAM training checkpoint (a torch .pt payload) to the DiT
                           weight file contract (docs/world-model.md): the section 6.2 keys without the
                           prefix, proprio_encoder.weight [T, P] and .bias [T], and the configuration in the
                           "fastwam_world_config" metadata entry ({"hidden_dim", "ffn_dim", "num_heads",
                           "head_dim", "num_layers", "text_dim", "freq_dim", "proprio_dim",
                           "latent_channels"}). The head and the last layer's tensors that its K and V do
                           not need (all but modulation, self_attn.k, self_attn.v, self_attn.norm_k) are
                           dropped unless --keep-unused. --dtype bf16 (default: the checkpoint's own),
                           f16 or f32.

  vae  VAEFILE -o OUT      the Wan2.2 VAE (Wan2.2_VAE.pth, a state dict or one wrapped as
                           {"model_state": ...}, or DiffSynth's Wan2.2_VAE.safetensors) to the encoder-only
                           file worldmodel.LoadVAEWeights reads: the 86 encoder-side tensors of section 6.1
                           (encoder.*, time_conv included, and conv1 whole) in the released names and
                           shapes; decoder.* and conv2.* are dropped. --dtype keep (default: the file's
                           own), bf16, f16 or f32.

The tensor shapes fix every configuration value but the split of the DiT's width into heads:
--num-heads or --head-dim gives it, else head_dim 128 (section 5.4) is assumed and said on stderr.
Every expected key must be present with its exact shape, floating point and finite, and no other key
may carry the prefix (the VAE: no key other than the encoder's, decoder.* and conv2.*): problems are
listed by name and the exit status is 1. Other entries of the payload (the action expert's
"mixtures.action.*" keys, the optimizer, ...) are ignored and counted.

Examples:
    /usr/bin/python3 golden/export_world_model.py dit libero_uncond_2cam224.pt -o out/world.safetensors
    /usr/bin/python3 golden/export_world_model.py vae Wan2.2_VAE.pth -o out/vae.safetensors
"""

import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from export_checkpoint import ExportError, convert  # noqa: E402
from make_vae_golden import weight_shapes  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

VIDEO_PREFIX = "mixtures.video."
CONFIG_METADATA_KEY = "fastwam_world_config"
ASSUMED_HEAD_DIM = 128
CONFIG_KEYS = ("hidden_dim", "ffn_dim", "num_heads", "head_dim", "num_layers", "text_dim", "freq_dim", "proprio_dim",
               "latent_channels")
# The last layer's tensors that its K and V need (the contract).
LAST_LAYER_KEPT = ("modulation", "self_attn.k.weight", "self_attn.k.bias", "self_attn.v.weight", "self_attn.v.bias",
                   "self_attn.norm_k.weight")


def load_torch(path):
    try:
        return torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - report any unreadable file the same way
        raise ExportError(f"cannot load {path}: {e}") from e


def dit_keys(cfg):
    """Section 6.2's keys (without the prefix) and shapes for cfg, in order."""
    D, F, T, f, z = cfg["hidden_dim"], cfg["ffn_dim"], cfg["text_dim"], cfg["freq_dim"], cfg["latent_channels"]
    out = [("patch_embedding.weight", (D, z, 1, 2, 2)), ("patch_embedding.bias", (D,))]

    def lin(name, o, i):
        out.extend([(name + ".weight", (o, i)), (name + ".bias", (o,))])

    lin("text_embedding.0", D, T)
    lin("text_embedding.2", D, D)
    lin("time_embedding.0", D, f)
    lin("time_embedding.2", D, D)
    lin("time_projection.1", 6 * D, D)
    lin("head.head", 4 * z, D)
    out.append(("head.modulation", (1, 2, D)))
    for layer in range(cfg["num_layers"]):
        p = f"blocks.{layer}."
        out.append((p + "modulation", (1, 6, D)))
        for attn in ("self_attn", "cross_attn"):
            for proj in "qkvo":
                lin(p + attn + "." + proj, D, D)
            out.extend([(p + attn + ".norm_q.weight", (D,)), (p + attn + ".norm_k.weight", (D,))])
        out.extend([(p + "norm3.weight", (D,)), (p + "norm3.bias", (D,))])
        lin(p + "ffn.0", F, D)
        lin(p + "ffn.2", D, F)
    return out


def written(name, cfg, keep_unused):
    """Whether the contract file holds the section 6.2 key name (without the prefix)."""
    if keep_unused:
        return True
    if name.startswith("head."):
        return False
    last = f"blocks.{cfg['num_layers'] - 1}."
    return not name.startswith(last) or name[len(last):] in LAST_LAYER_KEPT


def check_tensors(sd, expected, what):
    """Strict comparison of sd with [(key, shape)]; extra keys are refused. Raises ExportError."""
    problems = []
    want = dict(expected)
    for k, shape in expected:
        t = sd.get(k)
        if t is None:
            problems.append(f"missing: {k} {list(shape)}")
        elif not isinstance(t, torch.Tensor):
            problems.append(f"not a tensor: {k} ({type(t).__name__})")
        elif tuple(t.shape) != tuple(shape):
            problems.append(f"misshaped: {k} is {list(t.shape)}, want {list(shape)}")
        elif not t.is_floating_point():
            problems.append(f"not floating point: {k} ({t.dtype})")
        elif not bool(torch.isfinite(t.float()).all()):
            problems.append(f"non-finite values: {k}")
    for k in sd:
        if k not in want:
            t = sd[k]
            problems.append(f"extra: {k}" + (f" {list(t.shape)}" if isinstance(t, torch.Tensor) else ""))
    if problems:
        raise ExportError(f"{len(problems)} key problem(s) in {what}:\n  " + "\n  ".join(problems))


def shape_of(sd, key, rank, what):
    t = sd.get(key)
    if not isinstance(t, torch.Tensor) or t.dim() != rank:
        got = list(t.shape) if isinstance(t, torch.Tensor) else ("missing" if t is None else type(t).__name__)
        raise ExportError(f"{what}: {key} is {got}, want a rank-{rank} tensor (the configuration is read from it)")
    return [int(s) for s in t.shape]


def dit_config(sd, proprio, num_heads=None, head_dim=None, log=None):
    """The configuration the tensors fix, and the head split (given or assumed)."""
    what = f"payload['mot'] under {VIDEO_PREFIX!r}"
    pe = shape_of(sd, "patch_embedding.weight", 5, what)
    cfg = {
        "hidden_dim": pe[0],
        "latent_channels": pe[1],
        "text_dim": shape_of(sd, "text_embedding.0.weight", 2, what)[1],
        "freq_dim": shape_of(sd, "time_embedding.0.weight", 2, what)[1],
        "ffn_dim": shape_of(sd, "blocks.0.ffn.0.weight", 2, what)[0],
        "proprio_dim": shape_of(proprio, "weight", 2, "payload['proprio_encoder']")[1],
    }
    layers = {int(m.group(1)) for k in sd for m in [re.match(r"blocks\.(\d+)\.", k)] if m}
    cfg["num_layers"] = max(layers) + 1
    D = cfg["hidden_dim"]
    if num_heads is not None and head_dim is not None and num_heads * head_dim != D:
        raise ExportError(f"--num-heads {num_heads} x --head-dim {head_dim} = {num_heads * head_dim}: want the width {D}")
    if num_heads is not None:
        if num_heads <= 0 or D % num_heads:
            raise ExportError(f"--num-heads {num_heads} does not divide the width {D} (patch_embedding.weight {pe})")
        head_dim = D // num_heads
    elif head_dim is not None:
        if head_dim <= 0 or D % head_dim:
            raise ExportError(f"--head-dim {head_dim} does not divide the width {D} (patch_embedding.weight {pe})")
    else:
        if D % ASSUMED_HEAD_DIM:
            raise ExportError(f"width {D} is not a multiple of the assumed head_dim {ASSUMED_HEAD_DIM}; give --num-heads or --head-dim")
        head_dim = ASSUMED_HEAD_DIM
        print(f"export_world_model: head split assumed: head_dim {ASSUMED_HEAD_DIM} (spec section 5.4) -> {D // head_dim} heads; "
              "the checkpoint does not record it, give --num-heads if the model differs", file=log or sys.stderr)
    third = head_dim // 3
    if third % 2 or (head_dim - 2 * third) % 2:
        raise ExportError(f"head_dim {head_dim}: the 3-D RoPE splits it into {head_dim - 2 * third} + {third} + {third}, want all even")
    cfg["head_dim"], cfg["num_heads"] = head_dim, D // head_dim
    return {k: cfg[k] for k in CONFIG_KEYS}


def export_dit(checkpoint, output, dtype="bf16", keep_unused=False, num_heads=None, head_dim=None, log=None):
    """Write the DiT weight file contract from a FastWAM payload; returns the configuration."""
    log = log or sys.stderr
    payload = load_torch(checkpoint)
    if not isinstance(payload, dict) or not isinstance(payload.get("mot"), dict):
        raise ExportError(f"{checkpoint}: want a FastWAM payload, a dict whose 'mot' is the MoT state dict")
    proprio = payload.get("proprio_encoder")
    if hasattr(proprio, "state_dict") and not isinstance(proprio, dict):
        proprio = proprio.state_dict()
    if not isinstance(proprio, dict):
        raise ExportError(f"{checkpoint}: payload['proprio_encoder'] is {type(proprio).__name__}, want the state dict {{weight, bias}}")
    mot = payload["mot"]
    sd = {k[len(VIDEO_PREFIX):]: v for k, v in mot.items() if isinstance(k, str) and k.startswith(VIDEO_PREFIX)}
    if not sd:
        raise ExportError(f"{checkpoint}: no key under {VIDEO_PREFIX!r} in payload['mot'] (it has {len(mot)} keys)")
    ignored = len(mot) - len(sd)
    cfg = dit_config(sd, proprio, num_heads, head_dim, log)
    check_tensors(sd, dit_keys(cfg), f"payload['mot'] under {VIDEO_PREFIX!r} for config {json.dumps(cfg)}")
    check_tensors(proprio, [("weight", (cfg["text_dim"], cfg["proprio_dim"])), ("bias", (cfg["text_dim"],))],
                  "payload['proprio_encoder'] (a Linear proprio_dim -> text_dim)")
    tensors = {}
    dropped = 0
    for k, _ in dit_keys(cfg):
        if written(k, cfg, keep_unused):
            tensors[k] = convert(sd[k], k, dtype)
        else:
            dropped += 1
    for k in ("weight", "bias"):
        tensors["proprio_encoder." + k] = convert(proprio[k], "proprio_encoder." + k, dtype)
    meta = {CONFIG_METADATA_KEY: json.dumps(cfg), "format": "pt",
            "note": f"exported by golden/export_world_model.py from {os.path.basename(checkpoint)}"}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_safetensors(output, tensors, meta)
    n = sum(t.numel() for t in tensors.values())
    print(f"exported {len(tensors)} tensors ({n:,} parameters, {dtype}) to {output}; {dropped} unused tensors dropped"
          f"{'' if keep_unused else ' (--keep-unused keeps them)'}; {ignored} other payload['mot'] entries ignored; "
          f"config {json.dumps(cfg)}", file=log)
    return cfg


def load_vae(path):
    """The VAE state dict of path (.safetensors, or a torch file with an optional 'model_state' wrapper)."""
    if path.endswith(".safetensors"):
        try:
            sd, _ = read_safetensors(path)
        except (OSError, ValueError) as e:
            raise ExportError(f"cannot read {path}: {e}") from e
        return sd
    obj = load_torch(path)
    if isinstance(obj, dict) and "model_state" in obj:
        obj = obj["model_state"]
    if not isinstance(obj, dict):
        raise ExportError(f"{path}: holds a {type(obj).__name__}, want the VAE's state dict (or one under 'model_state')")
    return obj


def export_vae(path, output, dtype="keep", log=None):
    """Write the encoder-only VAE file; returns the base width d."""
    log = log or sys.stderr
    sd = load_vae(path)
    d = shape_of(sd, "encoder.conv1.weight", 5, path)[0]
    expected = weight_shapes(d)
    rest = {k: v for k, v in sd.items() if not (isinstance(k, str) and (k.startswith("decoder.") or k.startswith("conv2.")))}
    dropped = len(sd) - len(rest)
    check_tensors(rest, expected, f"{path} (VAE encoder, d = {d})")
    tensors = {k: convert(rest[k], k, dtype) for k, _ in expected}
    meta = {"format": "pt", "note": f"encoder side of {os.path.basename(path)}, exported by golden/export_world_model.py"}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_safetensors(output, tensors, meta)
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    print(f"exported {len(tensors)} VAE encoder tensors (d = {d}, {'/'.join(dtypes)}) to {output}; "
          f"{dropped} decoder/conv2 tensors dropped", file=log)
    return d


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    dit = sub.add_parser("dit", help="the video DiT and proprio encoder of a FastWAM checkpoint")
    dit.add_argument("checkpoint")
    dit.add_argument("-o", "--output", required=True)
    dit.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    dit.add_argument("--keep-unused", action="store_true", help="also write head.* and the whole last layer")
    dit.add_argument("--num-heads", type=int)
    dit.add_argument("--head-dim", type=int)
    vae = sub.add_parser("vae", help="the encoder side of the Wan2.2 VAE")
    vae.add_argument("vae")
    vae.add_argument("-o", "--output", required=True)
    vae.add_argument("--dtype", choices=["keep", "bf16", "f16", "f32"], default="keep")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.what == "dit":
            export_dit(args.checkpoint, args.output, args.dtype, args.keep_unused, args.num_heads, args.head_dim)
        else:
            export_vae(args.vae, args.output, args.dtype)
    except ExportError as e:
        print(f"export_world_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
