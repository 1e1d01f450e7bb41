"""Export the action expert of a Fast-WAM training checkpoint to safetensors.

Input: a torch .pt file holding either a FastWAM payload (a dict whose "mot" entry is the MoT
state dict, action-expert keys under "mixtures.action.", spec section 1) or a plain ActionDiT
state dict (keys such as "blocks.0.self_attn.q.weight"). The key prefix is found from the unique
key ending in "action_encoder.weight" unless --prefix is given.

Output: action_expert.safetensors (section 1 key names, no prefix, the config JSON in the
"fastwam_config" metadata entry) and a config JSON next to it.

The config starts from the section 2 defaults, then --config JSON, then the CLI flags. What the
tensor shapes determine (hidden_dim, ffn_dim, num_layers, text_dim, freq_dim, action_dim and
num_heads*attn_head_dim) is inferred, and an explicitly given value that disagrees is an error.
Every expected key must be present with its exact shape and no other key may carry the prefix;
problems are listed by name and the exit status is non-zero.

Example:
    /usr/bin/python3 golden/export_checkpoint.py libero_uncond_2cam224.pt -o out/action_expert.safetensors --dtype f32
"""

import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reference import CONFIG_KEYS, DEFAULT_CONFIG, ActionExpert, check_config  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

ANCHOR = "action_encoder.weight"
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
KEEP_OK = (torch.float32, torch.bfloat16, torch.float16)


class ExportError(Exception):
    """A checkpoint or configuration problem; the message lists every offending item."""


def load_state_dict(path):
    """Load path and return the flat name -> tensor mapping that holds the action expert."""
    try:
        obj = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - report any unreadable file the same way
        raise ExportError(f"cannot load checkpoint {path}: {e}") from e
    if isinstance(obj, dict) and "mot" in obj:
        obj = obj["mot"]
        if not isinstance(obj, dict):
            raise ExportError(f"{path}: payload['mot'] is a {type(obj).__name__}, want a state dict")
    if not isinstance(obj, dict):
        raise ExportError(f"{path}: holds a {type(obj).__name__}, want a FastWAM payload dict or a state dict")
    return obj


def find_prefix(sd, prefix=None):
    """The key prefix of the action expert inside sd."""
    if prefix is not None:
        if prefix + ANCHOR not in sd:
            raise ExportError(f"no key {prefix + ANCHOR!r} in the checkpoint (prefix {prefix!r})")
        return prefix
    hits = sorted(k for k in sd if isinstance(k, str) and (k == ANCHOR or k.endswith("." + ANCHOR)))
    if not hits:
        raise ExportError(f"no key ending in {ANCHOR!r}: not a Fast-WAM action expert checkpoint")
    if len(hits) > 1:
        raise ExportError(f"several candidate action experts {hits}; choose one with --prefix")
    return hits[0][: -len(ANCHOR)]


def infer_from_shapes(sd):
    """Config values determined by tensor shapes: {key: (value, evidence)}; 'attn_width' is H*Dh."""
    out = {}

    def dim(key, axis, name):
        t = sd.get(key)
        if isinstance(t, torch.Tensor) and t.dim() == 2:
            out[name] = (int(t.shape[axis]), f"{key} {list(t.shape)}")

    dim("action_encoder.weight", 0, "hidden_dim")
    dim("action_encoder.weight", 1, "action_dim")
    dim("text_embedding.0.weight", 1, "text_dim")
    dim("time_embedding.0.weight", 1, "freq_dim")
    dim("blocks.0.ffn.0.weight", 0, "ffn_dim")
    dim("blocks.0.self_attn.q.weight", 0, "attn_width")
    layers = {int(m.group(1)) for k in sd for m in [re.match(r"blocks\.(\d+)\.", k)] if m}
    if layers:
        out["num_layers"] = (max(layers) + 1, f"block indices up to {max(layers)}")
    return out


def resolve_config(sd, explicit):
    """Merge defaults, explicit settings and shape inference; raise on any disagreement."""
    inferred = infer_from_shapes(sd)
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(explicit)
    errors = []
    for key, (value, why) in inferred.items():
        if key == "attn_width":
            continue
        if key in explicit and int(explicit[key]) != value:
            errors.append(f"{key}: configured {explicit[key]} but the checkpoint has {value} ({why})")
        cfg[key] = value
    if "attn_width" in inferred:
        width, why = inferred["attn_width"]
        h, dh = explicit.get("num_heads"), explicit.get("attn_head_dim")
        if h is not None and dh is not None:
            if int(h) * int(dh) != width:
                errors.append(f"num_heads*attn_head_dim: configured {h}*{dh} = {int(h) * int(dh)} but the checkpoint has {width} ({why})")
        elif h is not None:
            if width % int(h):
                errors.append(f"num_heads: {h} does not divide the attention width {width} ({why})")
            else:
                cfg["attn_head_dim"] = width // int(h)
        elif dh is not None:
            if width % int(dh):
                errors.append(f"attn_head_dim: {dh} does not divide the attention width {width} ({why})")
            else:
                cfg["num_heads"] = width // int(dh)
        elif cfg["num_heads"] * cfg["attn_head_dim"] != width:
            errors.append(f"attention width {width} ({why}) is not the default {cfg['num_heads']}*{cfg['attn_head_dim']}; "
                          "give --num-heads or --attn-head-dim")
    if errors:
        raise ExportError("configuration does not match the checkpoint:\n  " + "\n  ".join(errors))
    try:
        return check_config(cfg)
    except ValueError as e:
        raise ExportError(f"bad configuration: {e}") from e


def check_keys(sd, cfg):
    """Strict comparison with the expected state dict; returns the expected names in section 1 order."""
    expected = {k: tuple(v.shape) for k, v in ActionExpert(cfg, device="meta").state_dict().items()}
    problems = []
    for k, shape in expected.items():
        if k not in sd:
            problems.append(f"missing: {k} {list(shape)}")
        elif not isinstance(sd[k], torch.Tensor):
            problems.append(f"not a tensor: {k} ({type(sd[k]).__name__})")
        elif tuple(sd[k].shape) != shape:
            problems.append(f"misshaped: {k} is {list(sd[k].shape)}, want {list(shape)}")
    for k in sd:
        if k not in expected:
            problems.append(f"extra: {k}" + (f" {list(sd[k].shape)}" if isinstance(sd[k], torch.Tensor) else ""))
    for k in expected:
        t = sd.get(k)
        if isinstance(t, torch.Tensor) and tuple(t.shape) == expected[k]:
            if not t.is_floating_point():
                problems.append(f"not floating point: {k} ({t.dtype})")
            elif not bool(torch.isfinite(t).all()):
                problems.append(f"non-finite values: {k}")
    if problems:
        raise ExportError(f"{len(problems)} key problem(s) for config {json.dumps(cfg)}:\n  " + "\n  ".join(problems))
    return list(expected)


def convert(t, name, dtype):
    """The tensor in the output dtype ('keep' keeps f32/bf16/f16 and refuses anything else)."""
    if dtype == "keep":
        if t.dtype not in KEEP_OK:
            raise ExportError(f"{name} is {t.dtype}; --dtype keep only writes f32, bf16 or f16, choose --dtype")
        return t.contiguous()
    return t.to(DTYPES[dtype]).contiguous()


def export(checkpoint, output, explicit=None, dtype="keep", prefix=None, config_out=None, log=None):
    """Export checkpoint to output; returns the resolved config. Raises ExportError on any problem.

    A one-line summary goes to log (default: sys.stderr at call time)."""
    raw = load_state_dict(checkpoint)
    prefix = find_prefix(raw, prefix)
    sd = {k[len(prefix):]: v for k, v in raw.items() if isinstance(k, str) and k.startswith(prefix)}
    ignored = len(raw) - len(sd)
    del raw
    cfg = resolve_config(sd, explicit or {})
    names = check_keys(sd, cfg)
    tensors = {}
    for k in names:
        tensors[k] = convert(sd.pop(k), k, dtype)
    meta = {"fastwam_config": json.dumps(cfg)}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_safetensors(output, tensors, meta)
    config_out = config_out or os.path.join(os.path.dirname(os.path.abspath(output)), "config.json")
    with open(config_out, "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    n = sum(t.numel() for t in tensors.values())
    print(f"exported {len(tensors)} tensors ({n:,} parameters, {'/'.join(dtypes)}) from prefix {prefix!r} "
          f"to {output}; {ignored} other checkpoint entries ignored; config {config_out}", file=log or sys.stderr)
    return cfg


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="FastWAM .pt checkpoint or ActionDiT state dict")
    ap.add_argument("-o", "--output", default="action_expert.safetensors", help="output safetensors path")
    ap.add_argument("--config-out", help="where to write the config JSON (default: config.json next to --output)")
    ap.add_argument("--config", help="JSON file with config keys (flat, or under 'action_dit_config')")
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16", "keep"], default="keep")
    ap.add_argument("--prefix", help="key prefix of the action expert (default: found automatically)")
    for k in CONFIG_KEYS:
        ap.add_argument("--" + k.replace("_", "-"), type=float if k == "eps" else int, default=None,
                        help=f"config {k} (default {DEFAULT_CONFIG[k]})")
    return ap.parse_args(argv)


def explicit_config(args):
    """Config values the user gave: --config file first, CLI flags override it."""
    explicit = {}
    if args.config:
        try:
            with open(args.config) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as e:
            raise ExportError(f"cannot read --config {args.config}: {e}") from e
        if isinstance(data, dict) and isinstance(data.get("action_dit_config"), dict):
            data = data["action_dit_config"]
        if not isinstance(data, dict):
            raise ExportError(f"--config {args.config}: want a JSON object")
        unknown = sorted(set(data) - set(CONFIG_KEYS))
        if unknown:
            raise ExportError(f"--config {args.config}: unknown keys {unknown}; expected {list(CONFIG_KEYS)}")
        for k, v in data.items():
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (k == "eps" or float(v).is_integer())
            if not ok:
                raise ExportError(f"--config {args.config}: {k} must be {'a number' if k == 'eps' else 'an integer'}, got {v!r}")
        explicit.update({k: (float(v) if k == "eps" else int(v)) for k, v in data.items()})
    for k in CONFIG_KEYS:
        v = getattr(args, k)
        if v is not None:
            explicit[k] = v
    return explicit


def main(argv=None):
    args = parse_args(argv)
    try:
        export(args.checkpoint, args.output, explicit_config(args), args.dtype, args.prefix, args.config_out)
    except ExportError as e:
        print(f"export_checkpoint: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
