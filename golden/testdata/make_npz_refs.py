#!/usr/bin/python3
"""Reference files for the Go .npz reader's tests, judged by numpy itself.

Writes, next to this script:

  numpy_headers.npz   one .npy member per header variant (keys in other
                      orders, format versions 1.0/2.0/3.0, whitespace,
                      comments, literal spellings, and headers numpy refuses)
  numpy_headers.json  numpy's verdict on each member: the shape, dtype and
                      values numpy.load returns, or the error it raises
  numpy_golden.npz    a small golden case (savez_compressed), some members
                      with the keys in another order or version 2.0/3.0
                      headers; numpy_golden.json holds numpy's arrays
  fuzz/FuzzParse/*    the seed corpus of FuzzParse (go test fuzz v1)

The verdicts come from numpy.load, so the Go tests compare our reader with
numpy, not with itself. Run with Debian's python3-numpy:

  /usr/bin/python3 golden/testdata/make_npz_refs.py
"""

import io
import json
import os
import struct
import warnings
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(header, data, version=1, pad=True):
    """A .npy image with the header text written as given (padded to a
    multiple of 64 with spaces and a newline, as numpy writes, when pad)."""
    enc = "utf8" if version == 3 else "latin1"
    h = header.encode(enc)
    pre = 10 if version == 1 else 12
    if pad:
        h += b" " * ((-(pre + len(h) + 1)) % 64) + b"\n"
    if version == 1:
        head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h))
    else:
        head = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(h))
    return head + h + data


def raw(version, hlen, header, data):
    """A .npy image whose header length field is hlen, whatever follows."""
    fmt = "<H" if version == 1 else "<I"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, hlen) + header + data


F4_6 = (np.arange(6, dtype="<f4") * 0.5 - 1).tobytes()

# name -> .npy image; the values of the valid ones are arange-based.
HEADERS = {
    "sorted_v1": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", F4_6),
    "shape_first": npy("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", F4_6),
    "fortran_first": npy("{'fortran_order': False, 'descr': '<f4', 'shape': (2, 3)}", F4_6),
    "no_newline": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", F4_6, pad=False),
    "v2": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", F4_6, version=2),
    "v3_utf8_comment": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } # \u00e9t\u00e9 \u2713", F4_6, version=3),
    "v3_keys_reordered": npy("{'shape': (6,), 'descr': '<f4', 'fortran_order': False}", F4_6, version=3),
    "double_quotes": npy('{"descr": "<f4", "fortran_order": False, "shape": (2, 3)}', F4_6),
    "u_prefix_and_concat": npy("{u'descr': '<' 'f4', 'fortran_order': False, r'shape': (2, 3)}", F4_6),
    "escapes": npy("{'de\\x73cr': '\\x3cf4', 'fortran_order': False, 'sh\\141pe': (2, 3)}", F4_6),
    "multiline_comments": npy("{'descr': '<f4',  # type\n 'fortran_order': False,\n\t'shape': (2,\n 3)}\n", F4_6),
    "leading_blank_lines": npy("\n\n  # c\n{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", F4_6),
    "leading_spaces": npy("   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", F4_6),
    "binop": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0x2, 0o3, 0b1, 1_0 - 9)}", F4_6),
    "plus_sign": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (+2, 3)}", F4_6),
    "hex_octal_bin": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0x2, 0o3, 0b1, 00)}", b""),
    "hex_dims": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0x2, 0o3, 0b1)}", F4_6),
    "underscore_dims": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0_2, 3)}", F4_6),
    "underscore_ok": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2_0, 3)}", b""),
    "long_suffix_v1": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", F4_6),
    "long_suffix_v3": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", F4_6, version=3),
    "bool_dim": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (True, 6)}", F4_6),
    "parenthesised": npy("({'descr': ('<f4'), 'fortran_order': (False), 'shape': ((2), (3),)})", F4_6),
    "repeated_key": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), 'descr': '<f4'}", F4_6),
    "fortran_1d": npy("{'descr': '<f4', 'fortran_order': True, 'shape': (6,)}", F4_6),
    "scalar": npy("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", F4_6[:4]),
    "empty": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}", b""),
    "big_endian": npy("{'descr': '>f4', 'fortran_order': False, 'shape': (6,)}", (np.arange(6, dtype=">f4") * 0.5 - 1).tobytes()),
    "f8": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (6,)}", (np.arange(6) * 0.25).tobytes()),
    "f2": npy("{'descr': '<f2', 'fortran_order': False, 'shape': (6,)}", (np.arange(6, dtype="<f2") * 0.5).tobytes()),
    "bool": npy("{'descr': '|b1', 'fortran_order': False, 'shape': (6,)}", bytes([1, 0, 1, 1, 0, 0])),
    "i8": npy("{'descr': '<i8', 'fortran_order': False, 'shape': (6,)}", (np.arange(6, dtype="<i8") - 3).tobytes()),
    "i4": npy("{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}", (np.arange(6, dtype="<i4") - 3).tobytes()),
    "u1": npy("{'descr': '|u1', 'fortran_order': False, 'shape': (6,)}", bytes([0, 1, 2, 250, 254, 255])),
    "i1": npy("{'descr': '|i1', 'fortran_order': False, 'shape': (6,)}", bytes([0, 1, 2, 250, 254, 255])),
    "u2_big": npy("{'descr': '>u2', 'fortran_order': False, 'shape': (3,)}", bytes([0, 1, 1, 0, 255, 255])),
    # numpy refuses these.
    "neg_dim": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3)}", F4_6),
    "huge_dim": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,)}", F4_6),
    "float_dim": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3)}", F4_6),
    "list_shape": npy("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", F4_6),
    "int_shape": npy("{'descr': '<f4', 'fortran_order': False, 'shape': 6}", F4_6),
    "missing_key": npy("{'descr': '<f4', 'shape': (2, 3)}", F4_6),
    "extra_key": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", F4_6),
    "int_fortran": npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", F4_6),
    "not_a_dict": npy("[('descr', '<f4'), ('fortran_order', False), ('shape', (2, 3))]", F4_6),
    "unterminated": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", F4_6),
    "name_value": npy("{'descr': float32, 'fortran_order': False, 'shape': (2, 3)}", F4_6),
    "call": npy("{'descr': '<f4', 'fortran_order': bool(0), 'shape': (2, 3)}", F4_6),
    "bytes_keys": npy("{b'descr': '<f4', b'fortran_order': False, b'shape': (2, 3)}", F4_6),
    "indented_last_line": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n\t", F4_6, pad=False),
    "indented_last_line_v3": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n\t", F4_6, version=3, pad=False),
    "indented_first_line": npy("\n  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", F4_6),
    "nul": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\x00", F4_6),
    "neg_true": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-True, 3)}", F4_6),
    "double_sign": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (--2, 3)}", F4_6),
    "leading_zero": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (02, 3)}", F4_6),
    "too_long": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}" + " " * 10000, F4_6, version=2),
    "header_len_fffffff0": raw(2, 0xFFFFFFF0, b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", F4_6),
    "header_len_past_end": raw(1, 0xFFFF, b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", F4_6),
    "version_1_1": raw(1, 60, b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}  \n", F4_6).replace(b"NUMPY\x01\x00", b"NUMPY\x01\x01", 1),
    "version_4": raw(2, 60, b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}  \n", F4_6).replace(b"NUMPY\x02", b"NUMPY\x04", 1),
    "short_data": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", F4_6[:20]),
    "truncated_header": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", b"")[:40],
    # numpy accepts these; we refuse them on purpose (see the Go test).
    "trailing_data": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", F4_6 + b"\0\0\0\0"),
    "fortran_2d": npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", F4_6),
    "complex": npy("{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}", F4_6),
    "native_order": npy("{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3)}", F4_6),
}


def verdict(z, key):
    try:
        a = z[key]
    except Exception as e:  # numpy's own refusal, whatever its type
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:200])}
    if a.dtype.kind not in "fiub":
        return {"ok": True, "shape": list(a.shape), "dtype": a.dtype.str, "values": None}
    return {"ok": True, "shape": list(a.shape), "dtype": a.dtype.str,
            "values": [float(x) for x in a.astype(np.float64).ravel()]}


def write_headers():
    path = os.path.join(HERE, "numpy_headers.npz")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, img in HEADERS.items():
            z.writestr(name + ".npy", img)
    out = {}
    with np.load(path) as z:
        for name in HEADERS:
            out[name] = verdict(z, name)
    with open(os.path.join(HERE, "numpy_headers.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


def golden_arrays():
    """A valid golden case of the device bundle's format, tiny sizes."""
    rng = np.random.default_rng(7)
    f4 = lambda *s: rng.standard_normal(s).astype("<f4")
    S, a, L, Sv, A, T, Lc = 2, 3, 1, 2, 4, 4, 2
    return {
        "latents_action": f4(1, S, a),
        "timestep": np.array([952.5], "<f4"),
        "video_keys": f4(L, 1, Sv, A),
        "video_values": f4(L, 1, Sv, A),
        "context": f4(1, Lc, T),
        "context_mask": np.array([[True, False]]),
        "pred_noise": f4(1, S, a),
        "step_timesteps": np.array([1000, 500], "<f8"),
        "step_latents": f4(2, 1, S, a),
        "step_pred": f4(2, 1, S, a),
        "loop_init_noise": f4(1, S, a),
        "loop_sigmas": np.array([1.0, 0.5, 0.0], "<f4"),
        "loop_pred": f4(2, 1, S, a),
        "loop_latents": f4(2, 1, S, a),
        "loop_actions": f4(1, S, a),
        "pred_noise_bf16": f4(1, S, a),
    }


def reordered(arr, version):
    """arr as .npy with the header keys in another order and version."""
    dims = ", ".join(str(d) for d in arr.shape) + ("," if arr.ndim == 1 else "")
    h = "{'shape': (%s), 'descr': '%s', 'fortran_order': False}" % (dims, arr.dtype.str)
    return npy(h, np.ascontiguousarray(arr).tobytes(), version=version)


def savez(path, arrays, compressed, hostile=()):
    """numpy.savez(_compressed) of arrays, with the members named in hostile
    rewritten by reordered (versions 1.0, 2.0 and 3.0 in turn)."""
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as z:
        for i, info in enumerate(src.infolist()):
            key = info.filename[:-4]
            data = src.read(info)
            if key in hostile:
                data = reordered(arrays[key], 1 + hostile.index(key) % 3)
            z.writestr(info.filename, data)


def go_corpus(data):
    out = []
    for b in data:
        if 0x20 <= b < 0x7F and b not in (0x22, 0x5C):
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return 'go test fuzz v1\n[]byte("%s")\n' % "".join(out)


def write_golden_and_seeds():
    arrays = golden_arrays()
    hostile = ("latents_action", "video_keys", "context_mask", "loop_sigmas", "timestep", "pred_noise")
    path = os.path.join(HERE, "numpy_golden.npz")
    savez(path, arrays, True, hostile)
    with np.load(path) as z:
        ref = {k: [float(x) for x in z[k].astype(np.float64).ravel()] for k in z.files}
    with open(os.path.join(HERE, "numpy_golden.json"), "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True)
        f.write("\n")

    seeds = {}
    with open(path, "rb") as f:
        seeds["golden_compressed_hostile_headers"] = f.read()
    minimal = {k: v for k, v in arrays.items() if not k.startswith(("step_", "loop_"))}
    tmp = io.BytesIO()
    np.savez(tmp, **minimal)
    seeds["golden_minimal_savez"] = tmp.getvalue()

    def edited(member, img, extra=()):
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
            for k, v in minimal.items():
                z.writestr(k + ".npy", img if k == member else reordered(v, 1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # zipfile warns of duplicate names
                for name, data in extra:
                    z.writestr(name, data)
        return b.getvalue()

    seeds["declared_1x2p28x7"] = edited("latents_action", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 268435456, 7), }", minimal["latents_action"].tobytes()))
    seeds["negative_dim"] = edited("video_keys", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 1, 2, 4), }", minimal["video_keys"].tobytes()))
    seeds["header_len_fffffff0"] = edited("context", raw(2, 0xFFFFFFF0, b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 4), }\n", minimal["context"].tobytes()))
    seeds["header_no_newline"] = edited("timestep", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", minimal["timestep"].tobytes(), pad=False))
    seeds["duplicate_member"] = edited(None, None, [("pred_noise.npy", reordered(minimal["pred_noise"] * 2, 2))])
    for name, data in seeds.items():
        d = os.path.join(HERE, "fuzz", "FuzzParse")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "w") as f:
            f.write(go_corpus(data))


if __name__ == "__main__":
    write_headers()
    write_golden_and_seeds()
