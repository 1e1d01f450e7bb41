#!/usr/bin/python3
"""Independent reference of the action post-processing (package actions).

Written from the formulas of /work/shared/spec/action-postprocess.md (upstream
Fast-WAM's normaliser backward pass and its LIBERO gripper steps) and the limit
rules of docs/robot.md, in NumPy, not from the Go code. It writes

  dataset_stats.json  statistics in upstream's layout ("action" -> key -> global_/stepwise_ stats,
                      plus a "state" section), with a zero-range dimension (3) and T = 32 stepwise rows;
  golden.json         model rows y and, per case, the expected float32 actions as bit patterns.

Run from this folder:  /usr/bin/python3 reference.py
Rounding: un-normalised values are computed in float64 and rounded to float32 (the message's type);
the gripper steps and the limits work on those float32 values in float64 and round again.
"""
import json

import numpy as np

T, D = 32, 7
RANGE_TOL, STD_REG = 1e-4, 1e-8
ZERO_DIM = 3

rng = np.random.default_rng(20261201)


def make_stats():
    # Per-timestep statistics that differ row by row, with one constant dimension.
    base_lo = rng.uniform(-0.9, -0.1, size=D)
    base_hi = rng.uniform(0.1, 0.9, size=D)
    drift = np.linspace(0.0, 0.2, T)[:, None]
    s_min = base_lo[None, :] - drift * rng.uniform(0.5, 1.5, size=D)
    s_max = base_hi[None, :] + drift * rng.uniform(0.5, 1.5, size=D)
    s_q01 = s_min + 0.05 * (s_max - s_min)
    s_q99 = s_max - 0.05 * (s_max - s_min)
    s_mean = 0.5 * (s_min + s_max) + rng.uniform(-0.05, 0.05, size=(T, D))
    s_std = 0.25 * (s_max - s_min)
    # The gripper (last dimension) lives in [0, 1] as upstream's dataloader stores it.
    for a in (s_min, s_q01):
        a[:, D - 1] = 0.0
    for a in (s_max, s_q99):
        a[:, D - 1] = 1.0
    s_mean[:, D - 1], s_std[:, D - 1] = 0.5, 0.45
    # Zero range: min == max (and q01 == q99) on ZERO_DIM; its std stays positive.
    for a, b in ((s_min, s_max), (s_q01, s_q99)):
        a[:, ZERO_DIM] = 0.125
        b[:, ZERO_DIM] = 0.125 + RANGE_TOL / 4
    stepwise = {"min": s_min, "max": s_max, "q01": s_q01, "q99": s_q99, "mean": s_mean, "std": s_std}
    glob = {"min": s_min.min(0), "max": s_max.max(0), "q01": s_q01.min(0), "q99": s_q99.max(0),
            "mean": s_mean.mean(0), "std": s_std.mean(0)}
    glob["min"][ZERO_DIM] = glob["max"][ZERO_DIM] = -0.25
    glob["q01"][ZERO_DIM] = glob["q99"][ZERO_DIM] = -0.25
    entry = {}
    for k, v in glob.items():
        entry["global_" + k] = [float(x) for x in v]
    for k, v in stepwise.items():
        entry["stepwise_" + k] = [[float(x) for x in row] for row in v]
    state = {"global_min": [0.0] * 8, "global_max": [1.0] * 8, "global_mean": [0.5] * 8, "global_std": [0.1] * 8}
    other = {"global_min": [-2.0] * 4, "global_max": [2.0] * 4}
    return {"action": {"default": entry, "other": other}, "state": {"default": state}}


def stat(stats, key, name, stepwise):
    v = np.asarray(stats["action"][key][("stepwise_" if stepwise else "global_") + name], dtype=np.float64)
    return v if stepwise else v[None, :]


def scale_offset(stats, key, mode, stepwise):
    """Upstream's normaliser: forward y = x*scale + offset."""
    if mode == "z-score":
        mean, std = stat(stats, key, "mean", stepwise), stat(stats, key, "std", stepwise)
        return 1.0 / (std + STD_REG), -mean / (std + STD_REG)
    if mode in ("min/max", "q01/q99"):
        lo_name, hi_name = mode.split("/")
        lo, hi = stat(stats, key, lo_name, stepwise), stat(stats, key, hi_name, stepwise)
    else:
        a, b = (float(s) for s in mode.split("/"))
        lo, hi = np.full((1, D), a), np.full((1, D), b)
    rng_ = hi - lo
    with np.errstate(divide="ignore"):
        scale = 2.0 / rng_
    offset = -1.0 - scale * lo
    small = rng_ < RANGE_TOL
    scale = np.where(small, 1.0, scale)   # range taken as 2
    offset = np.where(small, 0.0 - lo, offset)  # lo moved to the output's middle
    return scale, offset


def backward(y, scale, offset):
    return ((y.astype(np.float64) - offset) / scale).astype(np.float32)


def gripper(x, affine, invert, binarize):
    g = x[:, D - 1].astype(np.float64)
    if affine:
        g = 2.0 * g - 1.0
    if invert:
        g = -g
    if binarize:
        g = np.sign(g)
    x = x.copy()
    x[:, D - 1] = g.astype(np.float32)
    return x


def limits_clamp(x, lo, hi, max_step, prior):
    """Clamp mode: each value's step from the action before it (the prior for row 0) limited to
    max_step, then the value clamped into [lo, hi]; row r's step is from row r-1 as already limited."""
    out = x.astype(np.float64).copy()
    for r in range(T):
        before = prior if r == 0 else out[r - 1]
        if before is not None:
            d = out[r] - before
            out[r] = np.where(np.abs(d) > max_step, before + np.copysign(max_step, d), out[r])
        out[r] = np.minimum(np.maximum(out[r], lo), hi)
        out[r] = out[r].astype(np.float32)
    return out.astype(np.float32)


def bits(a):
    return [int(b) for b in np.asarray(a, dtype=np.float32).reshape(-1).view(np.uint32)]


def main():
    stats = make_stats()
    with open("dataset_stats.json", "w") as f:
        json.dump(stats, f, indent=1)
    with open("dataset_stats.json") as f:
        stats = json.load(f)  # what the Go side reads: the numbers as written
    y = rng.uniform(-1.2, 1.2, size=(T, D)).astype(np.float32)
    cases = []
    for mode in ("min/max", "q01/q99", "z-score"):
        for stepwise in (False, True):
            s, o = scale_offset(stats, "default", mode, stepwise)
            cases.append({"name": f"{mode} {'stepwise' if stepwise else 'global'}", "mode": mode,
                          "stepwise": stepwise, "want": bits(backward(y, s, o))})
    for mode in ("-1/1", "0/2", "-0.5/0.50001"):
        s, o = scale_offset(stats, "default", mode, False)
        cases.append({"name": f"const {mode}", "mode": mode, "stepwise": False, "want": bits(backward(y, s, o))})
    s, o = scale_offset(stats, "default", "min/max", False)
    x = backward(y, s, o)
    for aff, inv, bina in ((True, False, False), (True, True, False), (True, True, True)):
        cases.append({"name": f"min/max gripper affine={aff} invert={inv} binarize={bina}", "mode": "min/max",
                      "stepwise": False, "gripper": {"affine": aff, "invert": inv, "binarize": bina},
                      "want": bits(gripper(x, aff, inv, bina))})
    lo, hi = np.full(D, -0.6), np.full(D, 0.6)
    lo[D - 1], hi[D - 1] = -1.0, 1.0
    max_step = np.full(D, 0.3)
    g = gripper(x, True, True, False)
    cases.append({"name": "min/max gripper limits clamp", "mode": "min/max", "stepwise": False,
                  "gripper": {"affine": True, "invert": True, "binarize": False},
                  "limits": {"min": list(lo), "max": list(hi), "max_step": list(max_step)},
                  "want": bits(limits_clamp(g, lo, hi, max_step, None))})
    with open("golden.json", "w") as f:
        json.dump({"tokens": T, "dim": D, "zero_dim": ZERO_DIM, "y": bits(y), "cases": cases}, f, indent=0)


if __name__ == "__main__":
    main()
