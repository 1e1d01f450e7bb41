"""Independent reference of the world model's front end, and its goldens in golden/worldmodel/.

Written from ../shared/spec/world-model.md §1-§3 (not from the Go code in worldmodel/):
- §1 image preprocessing with the real Pillow (Image.resize, BILINEAR) for the resize, NumPy for
  the 180° flip, the center crop (Python's round), the concatenation and the scaling to [-1, 1];
- §2 quat2axisangle (robosuite's, float64 with the math module), the min/max normalisation of the
  state in float32 (NumPy), and the proprio token of the Linear 8 -> T;
- §2.4/§3.3 the context: the text rows then the proprio row, the mask all true.

The Linear is accumulated in float64, product by product in input order, then the bias, then
rounded once to float32: a definition (upstream's f32 or bf16 matmul has no fixed order), the one
docs/world-model.md states and the Go code follows.

Deterministic: seeded NumPy generators, and .npz files with fixed zip timestamps (deflated:
golden/worldmodel's Go test compares the arrays of a rerun, not the bytes). Run with Debian's python3 (Pillow 9.4, NumPy 1.24):
    /usr/bin/python3 golden/make_worldmodel_golden.py [--out golden/worldmodel]

Outputs:
    image_<case>.npz     cam0 [, cam1]  u8 [h, w, 3] inputs; config i4 [tile_w, tile_h, vertical,
                         flip0, flip1]; rgb u8 the frame; image f32 [1, 3, H, W] only for the small
                         tile case
    image_scale.npz      scale f32 [256]: fl32(fl32(v * fl32(2/255)) - 1) for v = 0..255
    proprio.json         quaternions and their axis-angle (float64), raw states, the state
                         statistics (as dataset_stats.json holds them), the normalised proprio, W, b,
                         the tokens, text rows and the context (float32 values written exactly)
"""

import argparse
import io
import json
import math
import os
import zipfile

import numpy as np
from PIL import Image

TILE = 224


# ---- §1 image preprocessing ------------------------------------------------------------------

def center_crop_resize(img, tile_w, tile_h):
    """§1.2: scale to cover the tile (Python round), Pillow BILINEAR resize, center crop."""
    src_h, src_w = img.shape[:2]
    s = max(tile_w / src_w, tile_h / src_h)
    rw, rh = round(src_w * s), round(src_h * s)
    assert rw >= tile_w and rh >= tile_h, (rw, rh)
    pil = Image.fromarray(img, mode="RGB").resize((rw, rh), Image.BILINEAR)
    left = max((rw - tile_w) // 2, 0)
    top = max((rh - tile_h) // 2, 0)
    out = np.asarray(pil.crop((left, top, left + tile_w, top + tile_h)), dtype=np.uint8)
    assert out.shape == (tile_h, tile_w, 3)
    return out


def frame(cams, flips, tile_w, tile_h, vertical):
    """§1.1 flips, §1.2 per camera, §1.3 concatenation in the given camera order."""
    tiles = []
    for img, flip in zip(cams, flips):
        if flip:
            img = np.ascontiguousarray(img[::-1, ::-1])
        tiles.append(center_crop_resize(img, tile_w, tile_h))
    return np.concatenate(tiles, axis=0 if vertical else 1)


def to_tensor(rgb):
    """§1.4: [1, 3, H, W] float32, fl32(fl32(v * fl32(2/255)) - 1)."""
    x = rgb.astype(np.float32).transpose(2, 0, 1)[None]
    return (x * np.float32(2 / 255)) - np.float32(1)


# ---- §2 proprio ------------------------------------------------------------------------------

def quat2axisangle(quat):
    """robosuite's quat2axisangle, (x, y, z, w), float64 (§2.1)."""
    quat = list(quat)
    if quat[3] > 1.0:
        quat[3] = 1.0
    elif quat[3] < -1.0:
        quat[3] = -1.0
    den = math.sqrt(1.0 - quat[3] * quat[3])
    if math.isclose(den, 0.0):
        return [0.0, 0.0, 0.0]
    return [(q * 2.0 * math.acos(quat[3])) / den for q in quat[:3]]


def normalise_state(state, lo, hi):
    """§2.2 in float32."""
    state, lo, hi = (np.asarray(a, dtype=np.float32) for a in (state, lo, hi))
    r = hi - lo
    deg = r < np.float32(1e-4)
    r = np.where(deg, np.float32(2), r)
    scale = np.float32(2) / r
    offset = np.where(deg, np.float32(0) - lo, np.float32(-1) - scale * lo)
    return np.clip(state * scale + offset, np.float32(-5), np.float32(5)).astype(np.float32)


def linear_row(w, b, p):
    """§2.3: row[j] = sum_i w[j, i] * p[i] + b[j], float64 in index order, rounded once."""
    acc = np.zeros(w.shape[0], dtype=np.float64)
    for i in range(w.shape[1]):
        acc = acc + w[:, i].astype(np.float64) * np.float64(p[i])
    return (acc + b.astype(np.float64)).astype(np.float32)


# ---- writing ---------------------------------------------------------------------------------

def write_npz(path, arrays):
    """A deflated .npz with fixed timestamps."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, a in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(a), version=(1, 0))
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, member.getvalue())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def floats(a):
    """A list of exact Python floats (float32 values are exact in float64's repr)."""
    return [float(v) for v in np.asarray(a).reshape(-1)]


def bf16(a):
    """float32 values rounded to bfloat16 (round half to even), as float32."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def camera_image(rng, h, w):
    """A u8 [h, w, 3] test image: random 8 x 8 blocks over the whole range (edges everywhere),
    with 4 bits of per-pixel noise on the rows y % 16 < 4 (fine detail): it compresses well enough
    to keep a 480 x 640 case under 1 MB."""
    base = rng.integers(0, 256, size=(h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    base = base.repeat(8, axis=0).repeat(8, axis=1)[:h, :w]
    noise = rng.integers(0, 16, size=(h, w, 3), dtype=np.uint8)
    noise[np.arange(h) % 16 >= 4] = 0
    return base ^ noise


# (name, [(h, w) per camera], flips, tile (w, h), vertical)
IMAGE_CASES = [
    ("libero", [(256, 256), (240, 320)], [1, 1], (TILE, TILE), 0),
    ("cam480", [(480, 640), (50, 60)], [0, 1], (TILE, TILE), 0),
    ("odd", [(333, 227), (97, 131)], [1, 0], (TILE, TILE), 0),
    ("small_vertical", [(61, 47)], [1], (24, 32), 1),
    ("two_vertical", [(37, 53), (120, 90)], [0, 1], (20, 16), 1),
    # s = 1: no resize, only the crop (rows, then columns), both flipped.
    ("crop_only", [(300, 224), (224, 300)], [1, 1], (TILE, TILE), 0),
    # s = 251/250: the width rounds back to 100 (no horizontal pass), the height changes.
    ("width_kept", [(250, 100)], [1], (100, 251), 0),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "worldmodel"))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    for k, (name, sizes, flips, (tw, th), vertical) in enumerate(IMAGE_CASES):
        rng = np.random.default_rng(100 + k)
        cams = [camera_image(rng, h, w) for h, w in sizes]
        rgb = frame(cams, flips, tw, th, vertical)
        arrays = {f"cam{i}": c for i, c in enumerate(cams)}
        arrays["config"] = np.array([tw, th, vertical] + flips + [0] * (2 - len(flips)), dtype=np.int32)
        arrays["rgb"] = rgb
        if tw * th < 1000:
            arrays["image"] = to_tensor(rgb)
        write_npz(os.path.join(args.out, f"image_{name}.npz"), arrays)

    write_npz(os.path.join(args.out, "image_scale.npz"),
              {"scale": to_tensor(np.arange(256, dtype=np.uint8).reshape(1, 256, 1).repeat(3, axis=2))[0, 0, 0]})

    rng = np.random.default_rng(7)
    quats = [
        [0.0, 0.0, 0.0, 1.0],                 # identity: den == 0
        [0.1, -0.2, 0.3, 1.0000001],          # w clipped to 1
        [0.0, 0.0, 1.0, 0.0],                 # 180° about z
        [-0.5, 0.5, -0.5, -0.5],              # negative w
        [0.7071067811865476, 0.0, 0.0, 0.7071067811865476],
    ]
    for _ in range(5):
        q = rng.normal(size=4)
        quats.append(list(q / np.linalg.norm(q)))
    aas = [quat2axisangle(q) for q in quats]

    # Statistics: dimension 6 degenerate (range 5e-5 < 1e-4), the others scaled.
    lo = np.array([-0.3, -0.4, 0.8, -3.2, -1.1, -0.9, 0.02, -0.04], dtype=np.float32)
    hi = np.array([0.35, 0.42, 1.35, 3.2, 1.2, 0.8, 0.02005, -0.001], dtype=np.float32)
    stats = {"state": {"default": {"global_min": floats(lo), "global_max": floats(hi)}},
             "action": {"default": {"global_min": [-1.0] * 7, "global_max": [1.0] * 7}}}
    states, normed, positions, grippers = [], [], [], []
    for k, (q, aa) in enumerate(zip(quats, aas)):
        pos = rng.uniform(-0.4, 1.3, size=3)
        grip = rng.uniform(-0.045, 0.045, size=2)
        if k == 1:
            pos[0] = 9.0    # far above max: clamps to 5
            pos[1] = -40.0  # far below min: clamps to -5
        # §2.1: concatenated in float64, then cast to float32.
        raw = np.concatenate([pos, np.array(aa), grip]).astype(np.float32)
        positions.append(floats(pos))
        grippers.append(floats(grip))
        states.append(raw)
        normed.append(normalise_state(raw, lo, hi))

    T, LT, N_REAL = 64, 128, 23
    w = (rng.normal(size=(T, 8)) / math.sqrt(8)).astype(np.float32)
    b = (0.1 * rng.normal(size=T)).astype(np.float32)
    tokens = [linear_row(w, b, p) for p in normed]
    text = bf16(rng.normal(size=(LT, T)).astype(np.float32))
    text[N_REAL:] = 0
    context = np.concatenate([text, tokens[0][None]], axis=0)[None]  # [1, 129, T]
    mask = np.ones((1, LT + 1), dtype=bool)

    out = {
        "quat_xyzw": [[float(v) for v in q] for q in quats],
        "axis_angle": aas,
        "state": [floats(s) for s in states],
        "eef_pos": positions,
        "gripper_qpos": grippers,
        "dataset_stats": stats,
        "normalised": [floats(p) for p in normed],
        "text_dim": T,
        "W": floats(w),
        "b": floats(b),
        "token": [floats(t) for t in tokens],
        "text_rows": LT,
        "text_real_rows": N_REAL,
        "text": floats(text),
        "context": floats(context),
        "context_mask": [bool(v) for v in mask.reshape(-1)],
    }
    with open(os.path.join(args.out, "proprio.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
