"""Convert upstream Fast-WAM's text-embedding cache files into the world model's text cache.

Upstream (scripts/precompute_text_embeds.py) writes, per prompt, `{sha256(prompt)}.t5_len128.wan22ti2v5b.pt`
holding {"context": [128, 4096] bf16, "mask": [128] bool}, with the encoder's raw outputs in the padding
rows. This tool reads such files on a workstation (torch needed; Debian's python3-torch 1.13 does) and writes
one `{sha256(prompt)}.text.safetensors` per prompt (docs/world-model.md, "The text cache"):

    tensor   "context"  [Lt, T], the .pt's dtype kept (BF16, or F32 with --f32), rows n..Lt-1 set to 0
    metadata format "fastwam-text-cache/1", prompt, prompt_sha256, tokens (n, the mask's true count), encoder

The prompt is upstream's DEFAULT_PROMPT followed by the task's instruction (spec §3.1). The mask must be
n true values then false ones (the tokenizer pads at the end); anything else is refused.

    /usr/bin/python3 golden/text_cache.py --cache-dir UPSTREAM_CACHE -o OUT --task "put the bowl on the plate" ...
    /usr/bin/python3 golden/text_cache.py --cache-dir UPSTREAM_CACHE -o OUT --tasks-jsonl meta/tasks.jsonl
    /usr/bin/python3 golden/text_cache.py --pt FILE.pt -o OUT --task "put the bowl on the plate"
"""

import argparse
import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from safetensors_io import write_safetensors  # noqa: E402

PROMPT_PREFIX = "A video recorded from a robot's point of view executing the following instruction: "
FORMAT = "fastwam-text-cache/1"
UPSTREAM_SUFFIX = ".t5_len128.wan22ti2v5b.pt"
DEFAULT_ENCODER = "umt5-xxl-enc-bf16 (Wan2.1-T2V-1.3B google/umt5-xxl tokenizer, max_length 128)"


def prompt_of(task):
    return PROMPT_PREFIX + task


def sha256_hex(prompt):
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def load_pt(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch without weights_only
        return torch.load(path, map_location="cpu")


def convert(pt_path, task, out_dir, encoder, f32=False):
    """Convert one upstream cache file; returns the path written."""
    prompt = prompt_of(task)
    d = load_pt(pt_path)
    if not isinstance(d, dict) or set(d) != {"context", "mask"}:
        raise ValueError(f"{pt_path}: want a dict with exactly 'context' and 'mask', got {type(d).__name__} {sorted(d) if isinstance(d, dict) else ''}")
    ctx, mask = d["context"], d["mask"]
    if ctx.dim() == 3 and ctx.shape[0] == 1:
        ctx = ctx[0]
    if mask.dim() == 2 and mask.shape[0] == 1:
        mask = mask[0]
    if ctx.dim() != 2 or mask.dim() != 1 or mask.shape[0] != ctx.shape[0]:
        raise ValueError(f"{pt_path}: context {list(ctx.shape)} and mask {list(mask.shape)}: want [Lt, T] and [Lt]")
    if ctx.dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"{pt_path}: context is {ctx.dtype}: want bfloat16 (the encoder's) or float32")
    mask = mask.to(torch.bool)
    n = int(mask.sum())
    if n < 1 or not bool(mask[:n].all()) or bool(mask[n:].any()):
        raise ValueError(f"{pt_path}: mask {mask.int().tolist()}: want n >= 1 true values then false ones")
    ctx = ctx.clone().contiguous()
    ctx[n:] = 0  # what the model sees (spec §3.3); upstream's file holds the raw outputs there
    if not bool(torch.isfinite(ctx.float()).all()):
        raise ValueError(f"{pt_path}: context has non-finite values")
    if f32:
        ctx = ctx.float()
    meta = {"format": FORMAT, "prompt": prompt, "prompt_sha256": sha256_hex(prompt), "tokens": str(n), "encoder": encoder}
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, sha256_hex(prompt) + ".text.safetensors")
    write_safetensors(out, {"context": ctx}, metadata=meta)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="the text cache directory to write")
    ap.add_argument("--cache-dir", help="upstream's text_embedding_cache_dir")
    ap.add_argument("--pt", help="one upstream .pt file (with exactly one --task)")
    ap.add_argument("--task", action="append", default=[], help="a task's instruction (repeatable)")
    ap.add_argument("--tasks-jsonl", help="a LeRobot meta/tasks.jsonl: every line's \"task\"")
    ap.add_argument("--encoder", default=DEFAULT_ENCODER, help="the encoder identity to record")
    ap.add_argument("--f32", action="store_true", help="store F32 (upcast, lossless) instead of the .pt's dtype")
    args = ap.parse_args(argv)
    tasks = list(args.task)
    if args.tasks_jsonl:
        with open(args.tasks_jsonl, encoding="utf-8") as fh:
            tasks += [json.loads(line)["task"] for line in fh if line.strip()]
    if not tasks:
        ap.error("no task: give --task or --tasks-jsonl")
    if args.pt:
        if len(tasks) != 1:
            ap.error("--pt converts one file: give exactly one --task")
        print(convert(args.pt, tasks[0], args.out, args.encoder, args.f32))
        return
    if not args.cache_dir:
        ap.error("give --cache-dir (upstream's cache) or --pt")
    missing = []
    for task in tasks:
        src = os.path.join(args.cache_dir, sha256_hex(prompt_of(task)) + UPSTREAM_SUFFIX)
        if not os.path.exists(src):
            missing.append(f"{task!r} ({src})")
            continue
        print(convert(src, task, args.out, args.encoder, args.f32))
    if missing:
        sys.exit("no upstream cache file for: " + "; ".join(missing))


if __name__ == "__main__":
    main()
