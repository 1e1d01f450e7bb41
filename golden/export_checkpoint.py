"""Export the action expert of a Fast-WAM training checkpoint to safetensors.

Input: a torch .pt file holding either a FastWAM payload (a dict whose "mot" entry is the MoT
state dict, action-expert keys under "mixtures.action.", spec section 1) or a plain ActionDiT
state dict (keys such as "blocks.0.self_attn.q.weight"). The key prefix is found from the unique
key ending in "action_encoder.weight" unless --prefix is given.

Output: action_expert.safetensors (section 1 key names, no prefix, the config JSON in the
"fastwam_config" metadata entry) and a config JSON next to it.

The config starts from the section 2 defaults, then the checkpoint's own configuration when the
payload carries one (payload["action_dit_config"], payload["config"]["action_dit_config"] or
payload["config"]["model"]["action_dit_config"]), then --config JSON, then the CLI flags. What the
tensor shapes determine (hidden_dim, ffn_dim, num_layers, text_dim, freq_dim, action_dim and
num_heads*attn_head_dim) is inferred, and a given value that disagrees is an error, as is a flag
that contradicts the checkpoint's own configuration.

The shapes fix only the attention width, not its split into heads. The split comes from the
checkpoint's configuration when it has one; FastWAM.save_checkpoint writes none (its payload is
"mot", "step", "torch_dtype", "proprio_encoder" and maybe "optimizer"), so for such checkpoints it
comes from --num-heads / --attn-head-dim (which must divide the width), or else it is assumed:
attn_head_dim 128 (section 2), e.g. 24 heads for a width of 3072. Where the split came from is
printed on stderr and written to the "fastwam_head_split" metadata entry ({"num_heads",
"attn_head_dim", "source": "checkpoint" | "flags" | "assumed", "note"}), which `fastwam parity`
shows.

The number of action tokens S is not fixed by the weights either: --action-tokens (or
"action_tokens" in --config) writes it into the configuration; without it none is written and
the Go backend takes 32, which the exporter says on stderr.

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

from reference import CONFIG_KEYS, DEFAULT_CONFIG, ROPE_POSITIONS, ActionExpert, check_config  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

ANCHOR = "action_encoder.weight"
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
KEEP_OK = (torch.float32, torch.bfloat16, torch.float16)
SPLIT_METADATA_KEY = "fastwam_head_split"
ASSUMED_HEAD_DIM = DEFAULT_CONFIG["attn_head_dim"]  # section 2: 128
# Where a payload may carry the action expert's configuration (paths of nested keys).
PAYLOAD_CONFIG_PATHS = (("action_dit_config",), ("config", "action_dit_config"), ("config", "model", "action_dit_config"))


class ExportError(Exception):
    """A checkpoint or configuration problem; the message lists every offending item."""


def load_checkpoint(path):
    """Load path; return (the flat name -> tensor mapping that holds the action expert,
    the payload's own action-expert configuration as (dict, where) or None)."""
    try:
        obj = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - report any unreadable file the same way
        raise ExportError(f"cannot load checkpoint {path}: {e}") from e
    payload_cfg = None
    if isinstance(obj, dict) and "mot" in obj:
        payload_cfg = payload_config(obj, path)
        obj = obj["mot"]
        if not isinstance(obj, dict):
            raise ExportError(f"{path}: payload['mot'] is a {type(obj).__name__}, want a state dict")
    if not isinstance(obj, dict):
        raise ExportError(f"{path}: holds a {type(obj).__name__}, want a FastWAM payload dict or a state dict")
    return obj, payload_cfg


def load_state_dict(path):
    """Load path and return the flat name -> tensor mapping that holds the action expert."""
    return load_checkpoint(path)[0]


def payload_config(payload, path):
    """The action-expert configuration a payload carries: (dict of CONFIG_KEYS, where) or None.

    Keys outside CONFIG_KEYS are left out; a value that is not a number is an error."""
    for keys in PAYLOAD_CONFIG_PATHS:
        node = payload
        for k in keys:
            node = node.get(k) if hasattr(node, "get") else None
            if node is None:
                break
        if node is None:
            continue
        where = "payload" + "".join(f"[{k!r}]" for k in keys)
        if not hasattr(node, "items"):
            raise ExportError(f"{path}: {where} is a {type(node).__name__}, want a mapping of config keys")
        cfg = {}
        for k, v in node.items():
            if k not in CONFIG_KEYS:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (k != "eps" and not float(v).is_integer()):
                raise ExportError(f"{path}: {where}[{k!r}] is {v!r}, want {'a number' if k == 'eps' else 'an integer'}")
            cfg[k] = float(v) if k == "eps" else int(v)
        return cfg, where
    return None


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


def resolve_config(sd, explicit, payload_cfg=None, origins=None):
    """Merge defaults, the checkpoint's own config, explicit settings and shape inference.

    Returns (config, split) where split records where the head split came from: {"num_heads",
    "attn_head_dim", "source": "checkpoint" | "flags" | "assumed", "note"}. Raises ExportError on
    any disagreement. origins names where each explicit key came from (for messages)."""
    origins = origins or {}
    own, where = payload_cfg if payload_cfg else ({}, None)
    inferred = infer_from_shapes(sd)
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(own)
    cfg.update(explicit)
    errors = []

    def given(key):
        return f"{origins.get(key, 'configured')} {explicit[key]}"

    for key, value in explicit.items():
        if key in own and own[key] != value and key not in ("num_heads", "attn_head_dim"):  # those: head_split
            errors.append(f"{key}: {given(key)} contradicts the checkpoint's own configuration ({where}: {own[key]})")
    for key, (value, why) in inferred.items():
        if key == "attn_width":
            continue
        if key in own and own[key] != value:
            errors.append(f"{key}: the checkpoint's configuration ({where}) says {own[key]} but its tensors have {value} ({why})")
        if key in explicit and int(explicit[key]) != value:
            errors.append(f"{key}: configured {explicit[key]} but the checkpoint has {value} ({why})")
        cfg[key] = value
    split = None
    if "attn_width" in inferred:
        width, why = inferred["attn_width"]
        split, problem = head_split(width, why, own, where, explicit, origins)
        if problem:
            errors.append(problem)
        else:
            cfg["num_heads"], cfg["attn_head_dim"] = split["num_heads"], split["attn_head_dim"]
    if errors:
        raise ExportError("configuration does not match the checkpoint:\n  " + "\n  ".join(errors))
    try:
        cfg = check_config(cfg)
    except ValueError as e:
        raise ExportError(f"bad configuration: {e}") from e
    if split is None:
        split = {"num_heads": cfg["num_heads"], "attn_head_dim": cfg["attn_head_dim"], "source": "assumed",
                 "note": "assumed: no self_attn.q weight to read the attention width from"}
    return cfg, split


def head_split(width, why, own, where, explicit, origins):
    """The split of the attention width into heads: (split record, None) or (None, problem)."""
    h, dh = explicit.get("num_heads"), explicit.get("attn_head_dim")
    for name, v in (("num_heads", h), ("attn_head_dim", dh)):
        if v is not None and int(v) <= 0:
            return None, f"{name}: {origins.get(name, 'configured')} {v} must be positive"

    def record(heads, head_dim, source, note):
        return {"num_heads": heads, "attn_head_dim": head_dim, "source": source, "note": note}, None

    if "num_heads" in own or "attn_head_dim" in own:
        oh, odh = own.get("num_heads"), own.get("attn_head_dim")
        oh = oh if oh is not None else (width // odh if odh and width % odh == 0 else None)
        odh = odh if odh is not None else (width // oh if oh and width % oh == 0 else None)
        if oh is None or odh is None or oh * odh != width:
            return None, (f"num_heads*attn_head_dim: the checkpoint's own configuration ({where}) gives "
                          f"{own.get('num_heads')}*{own.get('attn_head_dim')}, which is not the attention width {width} ({why})")
        for name, v, have in (("num_heads", h, oh), ("attn_head_dim", dh, odh)):
            if v is not None and int(v) != have:
                return None, (f"{name}: {origins.get(name, 'configured')} {v} contradicts the checkpoint's own configuration "
                              f"({where}: {oh} heads of {odh})")
        return record(oh, odh, "checkpoint", f"from the checkpoint's own configuration ({where}): {oh} heads of {odh}")
    if h is not None and dh is not None:
        if int(h) * int(dh) != width:
            return None, (f"num_heads*attn_head_dim: configured {h}*{dh} = {int(h) * int(dh)} but the checkpoint has {width} ({why})")
        return record(int(h), int(dh), "flags", f"given: {origins.get('num_heads', 'num_heads')} {h} and "
                      f"{origins.get('attn_head_dim', 'attn_head_dim')} {dh}; the checkpoint does not record the head split")
    if h is not None:
        if width % int(h):
            return None, f"num_heads: {h} does not divide the attention width {width} ({why})"
        return record(int(h), width // int(h), "flags", f"given: {origins.get('num_heads', 'num_heads')} {h} -> "
                      f"attn_head_dim {width // int(h)}; the checkpoint does not record the head split")
    if dh is not None:
        if width % int(dh):
            return None, f"attn_head_dim: {dh} does not divide the attention width {width} ({why})"
        return record(width // int(dh), int(dh), "flags", f"given: {origins.get('attn_head_dim', 'attn_head_dim')} {dh} -> "
                      f"{width // int(dh)} heads; the checkpoint does not record the head split")
    if width % ASSUMED_HEAD_DIM:
        return None, (f"attention width {width} ({why}) is not a multiple of the assumed attn_head_dim {ASSUMED_HEAD_DIM} and "
                      "the checkpoint does not record its head split; give --num-heads or --attn-head-dim")
    heads = width // ASSUMED_HEAD_DIM
    return record(heads, ASSUMED_HEAD_DIM, "assumed",
                  f"assumed: the checkpoint does not record the head split; attention width {width} split with "
                  f"attn_head_dim {ASSUMED_HEAD_DIM} (section 2) -> {heads} heads; give --num-heads if the model differs")


def check_action_tokens(value, origin):
    """A valid number of action tokens S, or ExportError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise ExportError(f"{origin}: action_tokens must be an integer, got {value!r}")
    if not 1 <= int(value) <= ROPE_POSITIONS:
        raise ExportError(f"{origin}: action_tokens {int(value)} is outside 1..{ROPE_POSITIONS} (the RoPE table's positions)")
    return int(value)


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


def export(checkpoint, output, explicit=None, dtype="keep", prefix=None, config_out=None, log=None,
           action_tokens=None, origins=None):
    """Export checkpoint to output; returns the resolved config. Raises ExportError on any problem.

    action_tokens, when given, is written into the config. What was assumed (the head split, S)
    and a one-line summary go to log (default: sys.stderr at call time)."""
    log = log or sys.stderr
    raw, payload_cfg = load_checkpoint(checkpoint)
    prefix = find_prefix(raw, prefix)
    sd = {k[len(prefix):]: v for k, v in raw.items() if isinstance(k, str) and k.startswith(prefix)}
    ignored = len(raw) - len(sd)
    del raw
    cfg, split = resolve_config(sd, explicit or {}, payload_cfg, origins)
    names = check_keys(sd, cfg)
    if action_tokens is not None:
        cfg["action_tokens"] = check_action_tokens(action_tokens, (origins or {}).get("action_tokens", "action_tokens"))
    tensors = {}
    for k in names:
        tensors[k] = convert(sd.pop(k), k, dtype)
    print(f"export_checkpoint: head split {split['num_heads']}x{split['attn_head_dim']}: {split['note']}", file=log)
    if action_tokens is None:
        print("export_checkpoint: action_tokens not written: the weights do not fix the chunk length, and the Go "
              "backend assumes 32; give --action-tokens if the model was trained with another", file=log)
    meta = {"fastwam_config": json.dumps(cfg), SPLIT_METADATA_KEY: json.dumps(split)}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_safetensors(output, tensors, meta)
    config_out = config_out or os.path.join(os.path.dirname(os.path.abspath(output)), "config.json")
    with open(config_out, "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in tensors.values()})
    n = sum(t.numel() for t in tensors.values())
    print(f"exported {len(tensors)} tensors ({n:,} parameters, {'/'.join(dtypes)}) from prefix {prefix!r} "
          f"to {output}; {ignored} other checkpoint entries ignored; config {config_out}", file=log)
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
    ap.add_argument("--action-tokens", type=int, default=None,
                    help="action tokens S per chunk, written as action_tokens (default: not written; the Go side takes 32)")
    return ap.parse_args(argv)


def explicit_config(args):
    """Config values the user gave: --config file first, CLI flags override it.

    Returns (explicit config, action_tokens or None, origins: key -> "--flag" or "--config FILE")."""
    explicit, origins, action_tokens = {}, {}, None
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
        data = dict(data)
        if "action_tokens" in data:
            action_tokens = check_action_tokens(data.pop("action_tokens"), f"--config {args.config}")
            origins["action_tokens"] = f"--config {args.config}"
        unknown = sorted(set(data) - set(CONFIG_KEYS))
        if unknown:
            raise ExportError(f"--config {args.config}: unknown keys {unknown}; expected {list(CONFIG_KEYS) + ['action_tokens']}")
        for k, v in data.items():
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (k == "eps" or float(v).is_integer())
            if not ok:
                raise ExportError(f"--config {args.config}: {k} must be {'a number' if k == 'eps' else 'an integer'}, got {v!r}")
        explicit.update({k: (float(v) if k == "eps" else int(v)) for k, v in data.items()})
        origins.update({k: f"--config {args.config} {k}" for k in data})
    for k in CONFIG_KEYS:
        v = getattr(args, k)
        if v is not None:
            explicit[k] = v
            origins[k] = "--" + k.replace("_", "-")
    if args.action_tokens is not None:
        action_tokens = args.action_tokens
        origins["action_tokens"] = "--action-tokens"
    return explicit, action_tokens, origins


def main(argv=None):
    args = parse_args(argv)
    try:
        explicit, action_tokens, origins = explicit_config(args)
        export(args.checkpoint, args.output, explicit, args.dtype, args.prefix, args.config_out,
               action_tokens=action_tokens, origins=origins)
    except ExportError as e:
        print(f"export_checkpoint: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
