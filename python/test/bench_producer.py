"""
Time Producer.observe plus both serializations on full-size Fast-WAM inputs (by hand).

Run: /usr/bin/time -v /usr/bin/python3 python/test/bench_producer.py f32|f16
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from fastwam_action_expert.producer import Contract, Producer  # noqa: E402

wire = sys.argv[1] if len(sys.argv) > 1 else 'f32'
rng = np.random.default_rng(0)
k = rng.standard_normal((30, 1, 98, 3072), dtype=np.float32)
v = rng.standard_normal((30, 1, 98, 3072), dtype=np.float32)
c = rng.standard_normal((1, 129, 4096), dtype=np.float32)
m = np.ones(129, bool)
p = Producer(f16=wire == 'f16', contract=Contract.fastwam())
ts = []
for _ in range(10):
    t0 = time.perf_counter()
    o = p.observe(k, v, c, m, instruction='put the bowl on the plate')
    kv, ctx = o.video_kv_cache_cdr(), o.text_context_cdr()
    ts.append(time.perf_counter() - t0)
ts.sort()
print(
    f'{wire}: observe + both CDR: median {1e3 * ts[5]:.1f} ms, min {1e3 * ts[0]:.1f} ms; '
    f'VideoKVCache {len(kv)} B, TextContext {len(ctx)} B (float32 arrays in)'
)
