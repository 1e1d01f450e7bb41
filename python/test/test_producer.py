"""
Tests of fastwam_action_expert.producer without ROS: the contract checks and the CDR bytes.

Run with: PYTHONPATH=python /usr/bin/python3 -m unittest discover -s python/test
(the Go test msgs/producer_xcheck_test.go runs them, and compares the bytes with the Go codec's).
"""

import os
import struct
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from fastwam_action_expert import producer as P  # noqa: E402

try:
    import torch
except ImportError:  # torch is optional
    torch = None


def kv(layers=2, sv=3, width=4, dtype=np.float32):
    rng = np.random.default_rng(1)
    return (
        rng.standard_normal((layers, 1, sv, width)).astype(dtype),
        rng.standard_normal((layers, 1, sv, width)).astype(dtype),
    )


def ctx(length=3, dim=5):
    rng = np.random.default_rng(2)
    return rng.standard_normal((1, length, dim)).astype(np.float32), np.ones(length, bool)


class VideoKVChecks(unittest.TestCase):
    def assertRefused(self, pattern, fn, *args, **kw):
        with self.assertRaises(P.ContractError) as cm:
            fn(*args, **kw)
        self.assertRegex(str(cm.exception), pattern)

    def test_accepts_contract_and_converts(self):
        k, v = kv()
        k2, v2 = P.check_video_kv(k, v)
        self.assertEqual(k2.dtype, np.dtype('<f4'))
        np.testing.assert_array_equal(k2, k)
        k3, _ = P.check_video_kv(k.astype(np.float64), v, f16=True)
        self.assertEqual(k3.dtype, np.float16)
        np.testing.assert_array_equal(k3, k.astype(np.float64).astype(np.float16))

    def test_shapes(self):
        k, v = kv()
        self.assertRefused(
            r'keys: shape \[2, 3, 4\], want \[layers,1,Sv,heads\*head_dim\]',
            P.check_video_kv,
            k[:, 0],
            v,
        )
        self.assertRefused(
            r'values: shape \[2, 2, 3, 4\]', P.check_video_kv, k, np.concatenate([v, v], 1)
        )
        self.assertRefused(
            r'keys: shape \[2, 1, 0, 4\]', P.check_video_kv, k[:, :, :0], v[:, :, :0]
        )
        self.assertRefused(
            r'values: shape \[2, 1, 2, 4\], keys \[2, 1, 3, 4\]: they must match',
            P.check_video_kv,
            k,
            v[:, :, :2],
        )
        c = P.Contract.fastwam()
        self.assertRefused(
            r'keys: shape \[2, 1, 3, 4\], want \[layers,1,Sv,heads\*head_dim\] = \[30,1,98,3072\]',
            P.check_video_kv,
            k,
            v,
            contract=c,
        )

    def test_dtype_and_values(self):
        k, v = kv()
        self.assertRefused(
            r'keys: dtype int32, want a floating-point type',
            P.check_video_kv,
            k.astype(np.int32),
            v,
        )
        bad = v.copy()
        bad[1, 0, 2, 3] = np.nan
        self.assertRefused(
            r'values\[1,0,2,3\] is nan, want finite values only', P.check_video_kv, k, bad
        )
        bad[1, 0, 2, 3] = -np.inf
        self.assertRefused(r'values\[1,0,2,3\] is -inf', P.check_video_kv, k, bad)
        big = k.copy()
        big[0, 0, 1, 1] = 70000.0
        P.check_video_kv(big, v)  # fine in float32
        self.assertRefused(
            r"keys\[0,0,1,1\] is 70000.0, beyond float16's range",
            P.check_video_kv,
            big,
            v,
            f16=True,
        )
        self.assertRefused(r'keys: got a str', P.check_video_kv, 'x', v)

    def test_visible_video_tokens(self):
        k, v = kv(sv=3)
        P.check_video_kv(k, v, visible_video_tokens=3)
        for bad in (4, -1, 1.5, True):
            self.assertRefused(
                r'visible_video_tokens: .*want a whole number in \[0,3\]',
                P.check_video_kv,
                k,
                v,
                visible_video_tokens=bad,
            )


class TextChecks(unittest.TestCase):
    def assertRefused(self, pattern, fn, *args, **kw):
        with self.assertRaises(P.ContractError) as cm:
            fn(*args, **kw)
        self.assertRegex(str(cm.exception), pattern)

    def test_mask_forms(self):
        x, m = ctx()
        _, m2 = P.check_text_context(x, m[None])
        self.assertEqual(m2.shape, (3,))
        _, m3 = P.check_text_context(x, np.array([[1.0, 0.0, 1.0]], np.float32))
        np.testing.assert_array_equal(m3, [True, False, True])
        self.assertRefused(
            r'attention_mask: shape \[4\], want \[3\] or \[1,3\]',
            P.check_text_context,
            x,
            np.ones(4, bool),
        )
        self.assertRefused(
            r'attention_mask\[1\] is 2, want bool', P.check_text_context, x, np.array([1, 2, 0])
        )
        self.assertRefused(
            r'attention_mask masks all 3 tokens', P.check_text_context, x, np.zeros(3, bool)
        )
        self.assertRefused(
            r'attention_mask: dtype <U1, want bool',
            P.check_text_context,
            x,
            np.array(['a', 'b', 'c']),
        )

    def test_context_shape_and_values(self):
        x, m = ctx()
        self.assertRefused(
            r'context: shape \[3, 5\], want \[1,L,T\]', P.check_text_context, x[0], m
        )
        self.assertRefused(
            r'context: shape \[1, 3, 5\], want \[1,L,T\] = \[1,129,4096\]',
            P.check_text_context,
            x,
            m,
            contract=P.Contract.fastwam(),
        )
        x2 = x.copy()
        x2[0, 2, 4] = np.inf
        self.assertRefused(r'context\[0,2,4\] is inf', P.check_text_context, x2, m)


class CDRBytes(unittest.TestCase):
    def test_video_kv_cache_layout(self):
        # Expected bytes written out by hand from the CDR rules (alignment from after the header).
        k = np.array([1.0, -2.0], np.float32).reshape(1, 1, 1, 2)
        v = np.array([0.5, 4.0], np.float32).reshape(1, 1, 1, 2)
        got = P.video_kv_cache_cdr(
            k, v, stamp=(5, 7), seq=3, frame_id='ab', visible_video_tokens=1
        )
        want = (
            b'\x00\x01\x00\x00'
            + struct.pack('<iI', 5, 7)
            + struct.pack('<I', 3)
            + b'ab\x00'  # header; offset 15
            + b'\x00'
            + struct.pack('<Q', 3)  # seq aligned to 16
            + struct.pack('<I', 1)  # visible_video_tokens, offset 28
            + struct.pack('<5I', 4, 1, 1, 1, 2)
            + b'\x00'  # keys shape, dtype FLOAT32 at 48
            + b'\x00\x00\x00'
            + struct.pack('<I', 8)
            + struct.pack('<2f', 1.0, -2.0)  # data length at 52
            + struct.pack('<5I', 4, 1, 1, 1, 2)
            + b'\x00'
            + b'\x00\x00\x00'
            + struct.pack('<I', 8)
            + struct.pack('<2f', 0.5, 4.0)
        )
        self.assertEqual(got, want)

    def test_text_context_layout_f16(self):
        x = np.array([1.0, 0.1], np.float32).reshape(1, 2, 1)
        got = P.text_context_cdr(
            x, np.array([True, False]), stamp=(1, 2), seq=2**40, instruction='go', f16=True
        )
        h = np.array([1.0, 0.1], np.float32).astype(np.float16).view('<u2')
        want = (
            b'\x00\x01\x00\x00'
            + struct.pack('<iII', 1, 2, 1)
            + b'\x00'  # empty frame_id: length 1, offset 13
            + b'\x00\x00\x00'
            + struct.pack('<Q', 2**40)  # seq at 16
            + struct.pack('<I', 3)
            + b'go\x00'  # instruction, offset 31
            + b'\x00'
            + struct.pack('<4I', 3, 1, 2, 1)
            + b'\x01'  # shape at 32, dtype FLOAT16 at 48
            + b'\x00\x00\x00'
            + struct.pack('<I', 4)
            + struct.pack('<2H', *h)  # data at 52
            + struct.pack('<I', 2)
            + b'\x01\x00'
        )  # mask at 60
        self.assertEqual(got, want)

    def test_refusals(self):
        k, v = kv()
        with self.assertRaisesRegex(P.ContractError, r'stamp: zero'):
            P.video_kv_cache_cdr(k, v, stamp=(0, 0), seq=0)
        with self.assertRaisesRegex(P.ContractError, r'stamp: \(1, 1000000000\)'):
            P.video_kv_cache_cdr(k, v, stamp=(1, 10**9), seq=0)
        with self.assertRaisesRegex(P.ContractError, r'seq: -1'):
            P.video_kv_cache_cdr(k, v, stamp=(1, 0), seq=-1)
        with self.assertRaisesRegex(P.ContractError, r'header.frame_id: contains a NUL'):
            P.video_kv_cache_cdr(k, v, stamp=(1, 0), seq=0, frame_id='a\x00b')


class ProducerTests(unittest.TestCase):
    def test_stamps_and_seq(self):
        ticks = iter([10**18 + 5, 10**18 + 500_000_000, 10**18 + 500_000_000, 10**18 + 7])
        p = P.Producer(clock=lambda: next(ticks), first_seq=7, frame_id='cam')
        k, v = kv()
        x, m = ctx()
        a = p.observe(k, v, x, m, instruction='pick')
        self.assertEqual((a.seq, a.stamp), (7, (10**9, 5)))
        b = p.observe(k, v, x, m)
        self.assertEqual((b.seq, b.stamp), (8, (10**9, 500_000_000)))
        # Both messages of an observation carry the same stamp and seq.
        for data in (b.video_kv_cache_cdr(), b.text_context_cdr()):
            self.assertEqual(struct.unpack_from('<iI', data, 4), (10**9, 500_000_000))
            self.assertEqual(
                struct.unpack_from('<Q', data, 4 + 16)[0], 8
            )  # frame_id "cam": 12+4 bytes, seq at 16
        # A clock that stands still or goes back is refused and consumes no seq.
        with self.assertRaisesRegex(
            P.ContractError, r"does not follow the previous observation's"
        ):
            p.observe(k, v, x, m)
        with self.assertRaisesRegex(P.ContractError, r'does not follow'):
            p.observe(k, v, x, m)
        self.assertEqual(p.next_seq, 9)
        # A refused array consumes neither a seq nor a stamp.
        with self.assertRaises(P.ContractError):
            p.observe(k[:, 0], v, x, m, stamp_ns=2 * 10**18)
        self.assertEqual(p.observe(k, v, x, m, stamp_ns=2 * 10**18).seq, 9)

    def test_again(self):
        ticks = iter([10**18 + 5, 10**18 + 9, 10**18 + 9, 10**18 + 20])
        p = P.Producer(clock=lambda: next(ticks), first_seq=3, frame_id='cam')
        k, v = kv()
        x, m = ctx()
        a = p.observe(k, v, x, m, instruction='pick', visible_video_tokens=1)
        b = p.again(a)
        self.assertEqual((b.seq, b.stamp), (4, (10**9, 9)))
        # The arrays are a's (checked once, not copied), and so is the rest but stamp and seq.
        self.assertIs(b.keys, a.keys)
        self.assertIs(b.context, a.context)
        self.assertEqual((b.instruction, b.frame_id, b.visible_video_tokens), ('pick', 'cam', 1))
        self.assertEqual(b.text_context_cdr()[4:12], struct.pack('<iI', 10**9, 9))
        self.assertEqual((a.seq, a.stamp), (3, (10**9, 5)))  # a itself unchanged
        # The stamp rule holds as for observe: a clock standing still consumes no seq.
        with self.assertRaisesRegex(P.ContractError, r'does not follow'):
            p.again(b)
        self.assertEqual(p.again(b).seq, 5)
        with self.assertRaisesRegex(P.ContractError, r'want an Observation'):
            p.again((k, v))
        with self.assertRaisesRegex(P.ContractError, r'this producer sends float16'):
            P.Producer(f16=True).again(a)

    def test_f16_flag(self):
        p = P.Producer(f16=True, clock=lambda: 10**9)
        k, v = kv()
        x, m = ctx()
        o = p.observe(k, v, x, m)
        self.assertEqual((o.keys.dtype, o.context.dtype), (np.float16, np.float16))
        data = o.video_kv_cache_cdr()
        # header, seq and visible_video_tokens take 28 bytes; each tensor 4+16 (shape), 1+3 (dtype,
        # padding), 4 (length) and 2 per element.
        self.assertEqual(len(data), 4 + 28 + 2 * (4 + 16 + 4 + 4 + k.size * 2))
        self.assertEqual(data[4 + 28 + 20], P.DTYPE_FLOAT16)


class StackVideoCache(unittest.TestCase):
    def test_heads_flatten_head_major(self):
        # Fast-WAM's cache: per layer k, v of [B, Sv, heads, head_dim].
        layers, b, sv, heads, hd = 3, 2, 4, 2, 3
        ks = [
            np.arange(b * sv * heads * hd, dtype=np.float32).reshape(b, sv, heads, hd) + 1000 * i
            for i in range(layers)
        ]
        cache = [{'k': ks[i], 'v': -ks[i]} for i in range(layers)]
        k, v = P.stack_video_cache(cache, batch_index=1)
        self.assertEqual(k.shape, (layers, 1, sv, heads * hd))
        for layer in range(layers):
            for t in range(sv):
                for h in range(heads):
                    for d in range(hd):
                        self.assertEqual(k[layer, 0, t, h * hd + d], ks[layer][1, t, h, d])
                        self.assertEqual(v[layer, 0, t, h * hd + d], -ks[layer][1, t, h, d])
        # Already flattened [B, Sv, A] entries, as (k, v) pairs, give the same.
        k2, _ = P.stack_video_cache(
            [(x.reshape(b, sv, -1), -x.reshape(b, sv, -1)) for x in ks], batch_index=1
        )
        np.testing.assert_array_equal(k, k2)

    def test_refusals(self):
        x = np.zeros((1, 4, 6), np.float32)
        with self.assertRaisesRegex(P.ContractError, r'cache: no layers'):
            P.stack_video_cache([])
        with self.assertRaisesRegex(
            P.ContractError, r'cache\[1\]: \[Sv,A\] = \[3, 6\], layer 0 has \[4, 6\]'
        ):
            P.stack_video_cache([(x, x), (x[:, :3], x[:, :3])])
        with self.assertRaisesRegex(P.ContractError, r'cache\[0\].k: batch 1, batch_index 1'):
            P.stack_video_cache([(x, x)], batch_index=1)
        with self.assertRaisesRegex(P.ContractError, r"cache\[0\]: a dict with keys \['key'\]"):
            P.stack_video_cache([{'key': x}])
        with self.assertRaisesRegex(P.ContractError, r'cache\[0\].v: shape \[4, 6\]'):
            P.stack_video_cache([(x, x[0])])


@unittest.skipUnless(torch is not None, 'torch is not installed')
class TorchInputs(unittest.TestCase):
    def test_torch_tensors(self):
        k, v = kv()
        x, m = ctx()
        kt = torch.from_numpy(k).to(torch.bfloat16)
        got, _ = P.check_video_kv(kt, torch.from_numpy(v).requires_grad_())
        np.testing.assert_array_equal(got, kt.float().numpy())
        _, mt = P.check_text_context(torch.from_numpy(x), torch.from_numpy(m))
        np.testing.assert_array_equal(mt, m)
        with self.assertRaisesRegex(P.ContractError, r'keys: dtype int64'):
            P.check_video_kv(torch.zeros(k.shape, dtype=torch.int64), v)


if __name__ == '__main__':
    unittest.main()
