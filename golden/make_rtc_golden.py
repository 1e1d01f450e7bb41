"""Write the real-time chunking golden golden/tiny/rtc_chunks.npz from the PyTorch reference.

Four consecutive chunks of the tiny model (golden/tiny/weights.safetensors), on the inputs of the
tiny cases (case_all.npz / case_first4.npz, alternating like successive observations):

    chunk 0   case_all, the plain loop (mode off) from case_all's loop_init_noise
    chunk k   (k = 1..3) for BOTH modes, replace and guided: the target is the previous chunk of
              the same mode (chunk 0 for k = 1) shifted by s_k actions, Y[i] = A[s_k + i] where
              i + s_k < 32 (avail = 32 - s_k rows) and 0 beyond; the weights are
              prefix_weights(d_k, H_k, avail, 32, schedule_k); the noise is drawn from a torch
              generator seeded with NOISE_SEED.

Deterministic. Regenerate (then run golden/test_reference.py and the Go tests) with:
    PATH=/usr/bin:$PATH python3 golden/make_rtc_golden.py [--out golden/tiny/rtc_chunks.npz]

Arrays (float32 unless noted; C order; chunk axis first):
    steps [1] int64, shift [1], sigmas [11]      the schedule (10 steps, shift 5)
    chunk_case [4] int64                         0 = case_all.npz, 1 = case_first4.npz
    noise [4,1,32,7]                             each chunk's initial noise eps
    s, delay, horizon, avail, schedule [4] int64 (schedule: index into exp, linear, ones, zeros;
                                                 chunk 0 has no target: all 0)
    beta [4]                                     max guidance (guided mode)
    weights [4,32]                               W of each chunk (the same for both modes)
    off_actions [4,1,32,7]                       each chunk's plain loop from its noise (no RTC)
    replace_target, replace_actions [4,1,32,7]   Y and the result of the replace chain
    guided_target, guided_actions [4,1,32,7]     Y and the result of the guided chain
    prefix_params [40,4] int64, prefix_weights [40,32]
                                                 (delay, horizon, avail, schedule) -> W, a grid
    guidance_sigma, guidance_beta, guidance_weight [85]
                                                 guidance_weight(sigma, beta) (float64 values)
"""

import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from reference import (  # noqa: E402
    RTC_SCHEDULES, TINY_CONFIG, ActionExpert, denoise, denoise_rtc, guidance_weight, prefix_weights, schedule)
from safetensors_io import read_safetensors  # noqa: E402

STEPS, SHIFT = 10, 5.0
NOISE_SEED = 2025
ROWS = ActionExpert.ACTION_TOKENS
CASES = ("case_all.npz", "case_first4.npz")
# chunk k >= 1: (case index, s, d, H, schedule, beta)
CHUNKS = [
    (1, 5, 3, 16, "exp", 5.0),
    (0, 6, 4, 20, "linear", 5.0),
    (1, 14, 4, 24, "exp", 10.0),  # avail = 18 < H: rows 18..23 have no target
]
PREFIX_GRID = [(0, 0, 32), (0, 10, 32), (3, 16, 27), (4, 20, 26), (4, 24, 18), (8, 8, 32),
               (10, 6, 32), (5, 40, 32), (2, 12, 0), (1, 2, 32)]
GUIDANCE_BETAS = [0.0, 1.0, 5.0, 10.0, 1e6]
GUIDANCE_EXTRA_SIGMAS = [0.999, 0.99, 0.9, 0.5, 0.1, 1e-3]


def load_model():
    sd, _ = read_safetensors(os.path.join(HERE, "tiny", "weights.safetensors"))
    m = ActionExpert(TINY_CONFIG)
    m.load_state_dict(sd)
    return m.eval()


def load_chunk(model, name):
    z = np.load(os.path.join(HERE, "tiny", name))
    t = lambda k: torch.from_numpy(z[k])  # noqa: E731
    chunk = model.prepare_chunk(t("video_keys"), t("video_values"), t("context"), t("context_mask"),
                                int(z["visible_video"][0]))
    return chunk, z


def shifted(prev, s):
    """Y[i] = prev[s + i] where it exists, 0 beyond; returns (Y, avail)."""
    y = torch.zeros_like(prev)
    avail = max(ROWS - s, 0)
    y[:, :avail] = prev[:, s:s + avail]
    return y, avail


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "tiny", "rtc_chunks.npz"))
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    model = load_model()
    chunks, files = zip(*(load_chunk(model, n) for n in CASES))
    gen = torch.Generator().manual_seed(NOISE_SEED)
    n = 1 + len(CHUNKS)
    a = TINY_CONFIG["action_dim"]
    out = {k: np.zeros((n,), np.int64) for k in ("chunk_case", "s", "delay", "horizon", "avail", "schedule")}
    out["beta"] = np.zeros((n,), np.float32)
    out["noise"] = np.zeros((n, 1, ROWS, a), np.float32)
    out["weights"] = np.zeros((n, ROWS), np.float32)
    for k in ("off_actions", "replace_target", "replace_actions", "guided_target", "guided_actions"):
        out[k] = np.zeros((n, 1, ROWS, a), np.float32)

    with torch.no_grad():
        eps0 = torch.from_numpy(files[0]["loop_init_noise"])
        first = denoise_rtc(model, eps0, chunks[0], torch.zeros_like(eps0), torch.zeros(ROWS), "off",
                            steps=STEPS, shift=SHIFT).actions
        if not torch.equal(first, denoise(model, eps0, chunks[0], STEPS, SHIFT).actions):
            raise SystemExit("denoise_rtc(mode off) differs from denoise")
        if not np.abs(first.numpy() - files[0]["loop_actions"]).max() < 1e-5:
            raise SystemExit("chunk 0 does not reproduce case_all's loop_actions")
        out["noise"][0] = eps0.numpy()
        prev = {"replace": first, "guided": first}
        for mode in prev:
            out[mode + "_actions"][0] = first.numpy()
        out["off_actions"][0] = first.numpy()
        print("chunk | case | s | d | H | schedule | beta | mode | max|A-Y| frozen rows (off -> rtc) | max|A| ")
        for k, (case, s, d, H, sched, beta) in enumerate(CHUNKS, start=1):
            eps = torch.randn(1, ROWS, a, generator=gen, dtype=torch.float32)
            off = denoise(model, eps, chunks[case], STEPS, SHIFT).actions
            avail = ROWS - s
            w = prefix_weights(d, H, avail, ROWS, sched).to(torch.float32)
            for key, v in (("chunk_case", case), ("s", s), ("delay", d), ("horizon", H), ("avail", avail),
                           ("schedule", RTC_SCHEDULES.index(sched)), ("beta", beta)):
                out[key][k] = v
            out["noise"][k], out["weights"][k], out["off_actions"][k] = eps.numpy(), w.numpy(), off.numpy()
            frozen = slice(0, min(d, H, avail))
            for mode in ("replace", "guided"):
                y, got_avail = shifted(prev[mode], s)
                assert got_avail == avail
                act = denoise_rtc(model, eps, chunks[case], y, w, mode, beta, STEPS, SHIFT).actions
                out[mode + "_target"][k], out[mode + "_actions"][k] = y.numpy(), act.numpy()
                e_off = float((off - y)[:, frozen].abs().max())
                e_rtc = float((act - y)[:, frozen].abs().max())
                print(f"{k} | {CASES[case]} | {s} | {d} | {H} | {sched} | {beta} | {mode} | "
                      f"{e_off:.4g} -> {e_rtc:.4g} | {float(act.abs().max()):.4g}")
                prev[mode] = act

    params, pw = [], []
    for d, H, avail in PREFIX_GRID:
        for sched in RTC_SCHEDULES:
            params.append((d, H, avail, RTC_SCHEDULES.index(sched)))
            pw.append(prefix_weights(d, H, avail, ROWS, sched).numpy())
    out["prefix_params"] = np.array(params, np.int64)
    out["prefix_weights"] = np.array(pw, np.float32)

    sig = schedule(STEPS, SHIFT)
    sigmas = [float(v) for v in sig] + [float(np.float32(v)) for v in GUIDANCE_EXTRA_SIGMAS]
    gs, gb, gw = [], [], []
    for beta in GUIDANCE_BETAS:
        for s in sigmas:
            gs.append(s)
            gb.append(beta)
            gw.append(guidance_weight(s, beta))
    out["guidance_sigma"] = np.array(gs, np.float32)
    out["guidance_beta"] = np.array(gb, np.float32)
    out["guidance_weight"] = np.array(gw, np.float64)
    out["steps"] = np.array([STEPS], np.int64)
    out["shift"] = np.array([SHIFT], np.float32)
    out["sigmas"] = sig.numpy()

    np.savez(args.out, **out)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
