"""Minimal safetensors writer and reader (no safetensors package needed).

File layout: 8-byte little-endian header length N, a JSON header of N bytes (padded with
spaces so that N is a multiple of 8) mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the start of the data
section) plus an optional "__metadata__" map of strings, then the raw little-endian data.
"""

import json
import struct

import numpy as np
import torch

DTYPE_NAMES = {
    torch.float32: "F32",
    torch.bfloat16: "BF16",
    torch.float16: "F16",
    torch.float64: "F64",
    torch.int64: "I64",
    torch.int32: "I32",
}
NAME_DTYPES = {v: k for k, v in DTYPE_NAMES.items()}
ELEMENT_SIZE = {"F32": 4, "BF16": 2, "F16": 2, "F64": 8, "I64": 8, "I32": 4}


def tensor_bytes(t):
    """Raw little-endian bytes of a CPU tensor (bf16 via its 16-bit pattern)."""
    t = t.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def write_safetensors(path, tensors, metadata=None):
    """Write tensors (an ordered mapping name -> torch.Tensor) to path, in the mapping's order."""
    header = {}
    offset = 0
    items = list(tensors.items())
    for name, t in items:
        if t.dtype not in DTYPE_NAMES:
            raise ValueError(f"tensor {name}: unsupported dtype {t.dtype}")
        n = t.numel() * ELEMENT_SIZE[DTYPE_NAMES[t.dtype]]
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        for k, v in metadata.items():
            if not isinstance(v, str):
                raise ValueError(f"metadata {k}: values must be strings, got {type(v).__name__}")
        header = {"__metadata__": dict(metadata), **header}
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * ((-len(raw)) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for name, t in items:
            fh.write(tensor_bytes(t))


def read_safetensors(path):
    """Read a safetensors file: returns (dict name -> torch.Tensor in file order, metadata dict)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(data)}")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        dt = info["dtype"]
        if dt not in NAME_DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dt}")
        b, e = info["data_offsets"]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        if e - b != count * ELEMENT_SIZE[dt]:
            raise ValueError(f"{path}: tensor {name} has {e - b} bytes for shape {info['shape']} {dt}")
        buf = bytearray(data[base + b:base + e])
        if dt == "BF16":
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16) if count else torch.empty(0, dtype=torch.bfloat16)
        else:
            t = torch.frombuffer(buf, dtype=NAME_DTYPES[dt]) if count else torch.empty(0, dtype=NAME_DTYPES[dt])
        out[name] = t.reshape(info["shape"])
    return out, meta
