"""Per-step CPU fp32 cost of the PyTorch reference step, for comparison with the Go backends.

Builds the action expert with random weights (spec section 11 init), binds one chunk with
prepare_chunk, then times `step` (inference mode): one warm-up call and --iters timed calls.
Prints one JSON line.

    /usr/bin/python3 golden/bench_torch.py --layers 4            # full width, 4 layers
    /usr/bin/python3 golden/bench_torch.py                       # full size: 30 layers, ~4.1 GB f32
    /usr/bin/python3 golden/bench_torch.py --tiny                # the section 11 tiny config

Thread count: --threads sets torch.set_num_threads and, because Debian's torch calls the system
BLAS (OpenBLAS, whose pool torch does not size), also OPENBLAS_NUM_THREADS/OMP_NUM_THREADS
before torch is imported.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--layers", type=int, default=None, help="number of blocks (default 30, tiny 2)")
    ap.add_argument("--tiny", action="store_true", help="tiny config (D=64, 2x16 heads, Sv=8, L=5)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.iters < 1 or (args.layers is not None and args.layers < 1):
        ap.error("--threads, --iters and --layers must be positive")
    return args


def blas_description(torch):
    """BLAS as torch's build config reports it, plus the BLAS library actually mapped in."""
    show = torch.__config__.show()
    parts = [m.group(0) for m in re.finditer(r"(BLAS_INFO|LAPACK_INFO)=[^,\s]+", show)]
    if "MKL" in show and "MKL not found" not in torch.__config__.parallel_info():
        parts.append("MKL")
    libs = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if re.search(r"lib(open)?blas|libmkl|libblis", os.path.basename(path)):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    if libs:
        parts.append("loaded: " + ", ".join(sorted(libs)))
    return "; ".join(parts) if parts else show.strip()


def step_flops(cfg, S, Sv, L):
    """Matmul FLOPs of one cached step (spec section 9), time MLP included."""
    D, Fw, A, a, f = cfg["hidden_dim"], cfg["ffn_dim"], cfg["num_heads"] * cfg["attn_head_dim"], cfg["action_dim"], cfg["freq_dim"]
    per_layer = (3 * 2 * S * D * A + 2 * 2 * S * (Sv + S) * A + 2 * S * A * D
                 + 2 * S * D * A + 2 * 2 * S * L * A + 2 * S * A * D + 2 * 2 * S * D * Fw)
    time_mlp = 2 * (f * D + D * D + D * 6 * D)
    return cfg["num_layers"] * per_layer + time_mlp + 2 * 2 * S * a * D


def main(argv=None):
    args = parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch  # after the thread environment is set

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reference import DEFAULT_CONFIG, TINY_CONFIG, ActionExpert, init_random_, schedule

    torch.set_num_threads(args.threads)
    cfg = dict(TINY_CONFIG if args.tiny else DEFAULT_CONFIG)
    if args.layers is not None:
        cfg["num_layers"] = args.layers
    Sv, L = (8, 5) if args.tiny else (98, 129)
    S, A = ActionExpert.ACTION_TOKENS, cfg["num_heads"] * cfg["attn_head_dim"]

    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.perf_counter()
    model = init_random_(ActionExpert(cfg), gen).eval()
    build_s = time.perf_counter() - t0
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    vk, vv = r(cfg["num_layers"], 1, Sv, A), r(cfg["num_layers"], 1, Sv, A)
    ctx = r(1, L, cfg["text_dim"])
    mask = torch.ones(1, L)
    latents = r(1, S, cfg["action_dim"])
    taus = (schedule(10, 5.0)[:-1] * 1000).tolist()

    with torch.inference_mode():
        t0 = time.perf_counter()
        chunk = model.prepare_chunk(vk, vv, ctx, mask, Sv)
        prepare_ms = (time.perf_counter() - t0) * 1e3
        model.step(latents, torch.tensor([taus[0]]), chunk)  # warm-up
        times = []
        for i in range(args.iters):
            tau = torch.tensor([taus[(i + 1) % len(taus)]])
            t0 = time.perf_counter()
            pred = model.step(latents, tau, chunk)
            times.append((time.perf_counter() - t0) * 1e3)
        if not bool(torch.isfinite(pred).all()):
            raise SystemExit("benchmark step produced non-finite values")

    median = statistics.median(times)
    print(json.dumps({
        "torch_version": torch.__version__,
        "threads": args.threads,
        "layers": cfg["num_layers"],
        "ms_per_step_median": round(median, 3),
        "ms_per_step_min": round(min(times), 3),
        "ms_per_chunk_prepare": round(prepare_ms, 3),
        "blas": blas_description(torch),
        "config": "tiny" if args.tiny else "full-width",
        "iters": args.iters,
        "gflop_per_step": round(step_flops(cfg, S, Sv, L) / 1e9, 4),
        "gflops_median": round(step_flops(cfg, S, Sv, L) / median / 1e6, 2),
        "build_s": round(build_s, 1),
    }))


if __name__ == "__main__":
    main()
