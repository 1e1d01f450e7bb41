"""Write golden/testdata/rtc_horizon.npz: RTC's soft mask and guided chunks under the horizon rule of the
RTC paper and LeRobot, in float64 NumPy (no torch).

Written from the sources' formulas, not from the Go code (issue 16):

- K. Black, M. Y. Galliker, S. Levine, "Real-Time Execution of Action Chunking Flow Policies" (2025),
  the soft mask: with H the chunk length, s the actions executed since the previous chunk started and
  d the inference delay, row i weighs 1 for i < d, c_i (e^c_i - 1)/(e - 1) with
  c_i = (H - s - i)/(H - s - d + 1) for d <= i < H - s, and 0 for i >= H - s: the ramp ends where the
  previous chunk's leftover ends. Its Kinetix code passes chunk_size - execute_horizon as the end.
- LeRobot, src/lerobot/policies/rtc/modeling_rtc.py (RTCProcessor): the leftover of the previous
  chunk (T - s rows) is zero-padded to the chunk's T rows; an execution_horizon longer than the
  leftover is cut to its length ("nothing to merge"); get_prefix_weights(start = min(d, end),
  end, total = T) puts `start` leading ones, then linspace(1, 0, end - start + 2)[1:-1] (exp:
  each value w becomes w (e^w - 1)/(e - 1)), then zeros from `end` on; `ones` is 1 before `end`,
  `zeros` 1 before `start`. Its guided step (time 1 = noise, as ours), with a velocity v independent
  of x so that d x1/d x = I exactly and its autograd correction is the weighted error itself:
      x1 = x - time * v,  err = (Y_padded - x1) * W,  tau = 1 - time,
      c = nan_to_num((1 - tau)/tau, posinf=beta),  inv_r2 = ((1 - tau)^2 + tau^2)/(1 - tau)^2,
      g = min(nan_to_num(c * inv_r2, posinf=beta), beta),  v_guided = v - g * err,
  then the Euler step x <- x + (sigma_{k+1} - sigma_k) * v_guided. LeRobot requires beta > 0
  (RTCConfig: max_guidance_weight must be positive).

The two sources agree: the ramp of a chunk tied with shift s runs to min(execution horizon, T - s).

The schedule is ours (the node's 10 shifted steps, shift 5: sigma = shift u / (1 + (shift - 1) u),
u = linspace(1, 0, 11), in float32 as the node keeps it); the velocity at step k is
v = a + sigma_k b with a and b fixed random fields (seeded): the same for any x.

Cases (params rows: T, s, H, d, schedule index into exp/linear/ones/zeros): H <= T - s, H > T - s,
every s in 9..23 at the defaults (T 32, H 24, exp, beta 5; d 4, and d 10 > T - s for s 23), s 0,
and other T and schedules. Per case k: c{k}_prev [T, 7] (the previous chunk), c{k}_noise [T, 7],
c{k}_a, c{k}_b [T, 7] (the velocity), c{k}_weights [4, T] (W for each schedule), c{k}_guided [T, 7] (the guided chunk
with the case's schedule). Also params [n, 5] int64, beta [n], sigmas [11] float32, shift [1].

Regenerate (deterministic) and check:
    PATH=/usr/bin:$PATH python3 golden/make_rtc_horizon_golden.py   # writes golden/testdata/rtc_horizon.npz
    go test -count=1 -run RTCHorizon ./node/
"""

import argparse
import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEDULES = ("exp", "linear", "ones", "zeros")
STEPS, SHIFT, DIM, SEED = 10, 5.0, 7, 16

# (T, s, H, d, schedule, beta)
CASES = [
    (32, 5, 16, 3, "exp", 5.0),       # H <= T - s: the old and the new rule agree
    (32, 14, 24, 4, "exp", 10.0),     # H > T - s: the ramp ends at row 18, not 24
    (32, 0, 24, 0, "exp", 5.0),       # nothing executed yet, no delay
    (16, 4, 16, 2, "linear", 5.0),    # H = T
    (8, 2, 8, 1, "ones", 1.0),
    (50, 20, 40, 5, "zeros", 5.0),
    (32, 6, 32, 4, "linear", 5.0),    # H = T > T - s
] + [(32, s, 24, 4, "exp", 5.0) for s in range(9, 24)] + [(32, 23, 24, 10, "exp", 5.0)]  # d 10 > T - s = 9


def prefix_weights(start, end, total, schedule):
    """LeRobot's get_prefix_weights(start, end, total), written from its description (float64)."""
    start = min(start, end)
    if schedule == "zeros":
        w = np.zeros(total)
        w[:start] = 1.0
        return w
    if schedule == "ones":
        w = np.ones(total)
        w[end:] = 0.0
        return w
    steps = end - start  # rows of the ramp (end <= total here)
    ramp = np.linspace(1.0, 0.0, steps + 2)[1:-1] if steps > 0 else np.zeros(0)
    if schedule == "exp":
        ramp = ramp * np.expm1(ramp) / (math.e - 1)
    w = np.zeros(total)
    w[:start] = 1.0
    w[start:start + len(ramp)] = ramp
    return w


def soft_mask_paper(H, s, d):
    """The paper's exponential soft mask over H rows (H the chunk length), s executed, d delay."""
    w = np.zeros(H)
    for i in range(H):
        if i < d:
            w[i] = 1.0
        elif i < H - s:
            c = (H - s - i) / (H - s - d + 1)
            w[i] = c * (math.exp(c) - 1) / (math.e - 1)
    return w


def guidance_weight(time, beta):
    """LeRobot's guidance weight at time (1 = noise), with its nan_to_num and clip."""
    tau = 1.0 - time
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.nan_to_num(np.float64(1 - tau) / np.float64(tau), posinf=beta)
        inv_r2 = ((1 - tau) ** 2 + tau ** 2) / np.float64((1 - tau) ** 2)
        g = np.nan_to_num(c * inv_r2, posinf=beta)
    return min(float(g), beta)


def sigmas():
    u = np.linspace(1, 0, STEPS + 1, dtype=np.float32)
    s = np.float32(SHIFT)
    return (s * u / (np.float32(1) + (s - np.float32(1)) * u)).astype(np.float32)


def guided_chunk(x, v, prev, s, H, d, schedule, beta, sig):
    T = x.shape[0]
    left = prev[s:]  # the leftover, T - s rows
    end = min(H, left.shape[0])  # LeRobot: a horizon longer than the leftover is cut to it
    y = np.zeros_like(x)
    y[:left.shape[0]] = left  # zero-padded to T rows
    w = prefix_weights(d, end, T, schedule)[:, None]
    x = x.copy()
    for k in range(STEPS):
        time = float(sig[k])
        x1 = x - time * v[k]
        err = (y - x1) * w
        vg = v[k] - guidance_weight(time, beta) * err
        x = x + (float(sig[k + 1]) - float(sig[k])) * vg
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "testdata", "rtc_horizon.npz"))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(SEED)
    sig = sigmas()
    out = {"sigmas": sig, "shift": np.array([SHIFT], np.float32)}
    params, betas = [], []
    for k, (T, s, H, d, sched, beta) in enumerate(CASES):
        assert 0 <= s < T and 1 <= H <= T and 0 <= d <= H and beta > 0
        # The paper's mask (its H is the chunk length T) is LeRobot's with H >= T - s.
        if sched == "exp" and H >= T - s:
            ref = soft_mask_paper(T, s, min(d, T - s))
            if not np.allclose(ref, prefix_weights(d, T - s, T, "exp"), rtol=0, atol=1e-15):
                raise SystemExit(f"case {k}: the paper's mask and LeRobot's differ")
        prev = rng.standard_normal((T, DIM))
        x = rng.standard_normal((T, DIM))
        a = rng.standard_normal((T, DIM)).astype(np.float32)
        b = rng.standard_normal((T, DIM)).astype(np.float32)
        v = np.stack([a.astype(np.float64) + float(sig[j]) * b.astype(np.float64) for j in range(STEPS)])
        end = min(H, T - s)
        out[f"c{k}_prev"] = prev.astype(np.float32)
        out[f"c{k}_noise"] = x.astype(np.float32)
        out[f"c{k}_a"], out[f"c{k}_b"] = a, b
        out[f"c{k}_weights"] = np.stack([prefix_weights(d, end, T, m) for m in SCHEDULES]).astype(np.float32)
        got = guided_chunk(x.astype(np.float32).astype(np.float64), v,
                           prev.astype(np.float32).astype(np.float64), s, H, d, sched, beta, sig)
        out[f"c{k}_guided"] = got.astype(np.float32)
        params.append((T, s, H, d, SCHEDULES.index(sched)))
        betas.append(beta)
        w = out[f"c{k}_weights"][SCHEDULES.index(sched)]
        print(f"case {k}: T {T} s {s} H {H} d {d} {sched} beta {beta}: ramp ends at {end}, "
              f"last weight > 0 at row {int(np.nonzero(w)[0].max()) if w.any() else -1}")
    out["params"] = np.array(params, np.int64)
    out["beta"] = np.array(betas, np.float32)
    np.savez(args.out, **out)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, {len(CASES)} cases)")


if __name__ == "__main__":
    main()
