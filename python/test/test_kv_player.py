"""Tests of kv_player's golden reading and argument parsing, without ROS."""

import io
import os
import struct
import sys
import tempfile
import unittest
from unittest import mock
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
REPO = os.path.normpath(os.path.join(HERE, '..', '..'))

from fastwam_action_expert import kv_player as K  # noqa: E402


def npy(a):
    b = io.BytesIO()
    np.lib.format.write_array(b, np.asarray(a), allow_pickle=False)
    return b.getvalue()


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def arrays():
    rng = np.random.default_rng(3)
    return {
        'latents_action': rng.standard_normal((1, 4, 2)).astype(np.float32),
        'video_keys': rng.standard_normal((2, 1, 3, 4)).astype(np.float32),
        'video_values': rng.standard_normal((2, 1, 3, 4)).astype(np.float32),
        'context': rng.standard_normal((1, 5, 6)).astype(np.float32),
        'context_mask': np.array([[1, 1, 1, 1, 0]], np.float32),
    }


class ReadGolden(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, members, compression=zipfile.ZIP_DEFLATED):
        """Write an .npz from {name: bytes or array}; names may repeat through a list of pairs."""
        path = os.path.join(self.dir.name, 'g.npz')
        items = members if isinstance(members, list) else list(members.items())
        with zipfile.ZipFile(path, 'w', compression) as z:
            for name, data in items:
                if not isinstance(data, bytes):
                    data = npy(data)
                with _Quiet():
                    z.writestr(name if name.endswith('.npy') else name + '.npy', data)
        return path

    def refused(self, pattern, path, **kw):
        with self.assertRaises(K.GoldenError) as cm:
            K.read_golden(path, **kw)
        self.assertRegex(str(cm.exception), pattern)

    def test_tiny_goldens(self):
        # case_all records visible_video = Sv = 8 (every token), case_first4 the first 4.
        for name, visible in (('case_all.npz', 8), ('case_first4.npz', 4)):
            path = os.path.join(REPO, 'golden', 'tiny', name)
            g = K.read_golden(path)
            ref = np.load(path)
            np.testing.assert_array_equal(g['keys'], ref['video_keys'])
            np.testing.assert_array_equal(g['values'], ref['video_values'])
            np.testing.assert_array_equal(g['context'], ref['context'])
            np.testing.assert_array_equal(g['mask'], ref['context_mask'][0] != 0)
            self.assertEqual(g['visible_video_tokens'], visible)
            self.assertEqual(g['mask'].tolist(), [True, True, True, True, False])

    def test_written_file_round_trips(self):
        a = arrays()
        g = K.read_golden(self.write(a))
        np.testing.assert_array_equal(g['keys'], a['video_keys'])
        self.assertEqual(g['visible_video_tokens'], 0)

    def test_missing_and_duplicate(self):
        a = arrays()
        del a['context_mask']
        self.refused(r'missing array\(s\) context_mask', self.write(a))
        a = arrays()
        items = list(a.items()) + [('context', a['context'])]
        self.refused(r'context: the archive holds 2 members for it', self.write(items))

    def test_not_a_zip(self):
        path = os.path.join(self.dir.name, 'x.npz')
        with open(path, 'wb') as f:
            f.write(b'PK\x03\x04 not really')
        self.refused(r'not a readable .npz \(zip\) file', path)
        self.refused(r'not a readable .npz', os.path.join(self.dir.name, 'absent.npz'))

    def test_header_declares_more_than_the_member_holds(self):
        a = arrays()
        raw = npy(a['video_keys'])
        # Same header, half the data: the declared shape needs 96 float32, the member has 48.
        header_len = len(raw) - a['video_keys'].nbytes
        cut = raw[: header_len + a['video_keys'].nbytes // 2]
        a2 = dict(a, video_keys=cut)
        self.refused(
            r'video_keys: header declares shape \[2, 1, 3, 4\] of float32 \(96 bytes\), '
            r'the member holds 48 bytes',
            self.write(a2),
        )
        # A header declaring an enormous shape is refused before anything is allocated.
        huge = npy(np.zeros((1, 1, 1, 1), np.float32)).replace(
            b'(1, 1, 1, 1)', b'(9999999, 1, 99999, 9)'
        )
        self.refused(
            r'video_keys: header declares shape \[9999999, 1, 99999, 9\]',
            self.write(dict(a, video_keys=huge)),
        )

    def test_pickled_and_non_numeric(self):
        a = arrays()
        b = io.BytesIO()
        np.lib.format.write_array(b, np.array([{'x': 1}], dtype=object), allow_pickle=True)
        self.refused(
            r'context: dtype object, want a numeric or bool array',
            self.write(dict(a, context=b.getvalue())),
        )
        self.refused(r'context: dtype <U1', self.write(dict(a, context=np.array(['a']))))

    def test_bad_magic(self):
        a = arrays()
        self.refused(
            r'context: unreadable .npy member',
            self.write(dict(a, context=b'\x93NUMPX' + b'\x00' * 60)),
        )

    def test_crc(self):
        path = self.write(arrays(), compression=zipfile.ZIP_STORED)
        data = bytearray(read(path))
        raw = npy(arrays()['context'])
        i = data.find(raw)
        self.assertGreater(i, 0)
        data[i + len(raw) - 1] ^= 0xFF  # flip the last data byte of context.npy
        with open(path, 'wb') as f:
            f.write(data)
        self.refused(r'context: unreadable .npy member: Bad CRC-32', path)

    def test_bounds(self):
        a = arrays()
        self.refused(
            r'video_keys: member of \d+ bytes, more than the 100 allowed',
            self.write(a),
            max_member_bytes=100,
        )
        # A deflated member claiming far more bytes than deflate can produce from its size.
        path = self.write(a)
        with zipfile.ZipFile(path) as z:
            info = z.getinfo('context.npy')
        data = bytearray(read(path))
        # Patch the uncompressed size (offset 24) of context.npy's central directory entry.
        j = data.find(b'context.npy', data.find(b'PK\x01\x02'))
        entry = data.rfind(b'PK\x01\x02', 0, j)
        data[entry + 24:entry + 28] = (info.compress_size * 5000).to_bytes(4, 'little')
        with open(path, 'wb') as f:
            f.write(data)
        self.refused(r"context: \d+ compressed bytes claim \d+, beyond deflate's ratio", path)

    def test_contract_checks_name_the_arrays(self):
        a = arrays()
        self.refused(
            r'values: shape \[2, 1, 2, 4\], keys \[2, 1, 3, 4\]: they must match '
            r'.*video_keys/video_values',
            self.write(dict(a, video_values=a['video_values'][:, :, :2])),
        )
        self.refused(
            r'attention_mask: shape \[1, 4\], want \[5\] or \[1,5\]',
            self.write(dict(a, context_mask=np.ones((1, 4), np.float32))),
        )
        bad = a['context'].copy()
        bad[0, 1, 2] = np.nan
        self.refused(r'context\[0,1,2\] is nan', self.write(dict(a, context=bad)))
        self.refused(
            r'visible_video_tokens: 9, want a whole number in \[0,3\]',
            self.write(dict(a, visible_video=np.array([9]))),
        )
        self.refused(r'visible_video is 1.5', self.write(dict(a, visible_video=np.array([1.5]))))
        self.refused(
            r'visible_video: 2 element', self.write(dict(a, visible_video=np.array([1, 2])))
        )


class _Quiet:
    """zipfile warns on duplicate names; the duplicate test writes one on purpose."""

    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter('ignore')

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


class Args(unittest.TestCase):
    def test_qos(self):
        self.assertEqual(
            K.parse_qos(K.DEFAULT_QOS),
            {
                'reliability': 'reliable',
                'durability': 'volatile',
                'history': 'keep_last',
                'depth': 2,
            },
        )
        self.assertEqual(K.parse_qos('best_effort')['reliability'], 'best_effort')
        self.assertEqual(K.parse_qos('reliable/transient_local/5')['depth'], 5)
        self.assertEqual(K.parse_qos('reliable/volatile/keep_all')['history'], 'keep_all')
        for bad, msg in (
            ('fast', "reliability 'fast'"),
            ('reliable/sticky', "durability 'sticky'"),
            ('reliable/volatile/keep_last(0)', 'history'),
            ('reliable//2', 'want reliability'),
            ('a/b/c/d', 'want reliability'),
        ):
            with self.assertRaisesRegex(ValueError, msg):
                K.parse_qos(bad)

    def test_args(self):
        a = K.parse_args(['g.npz'])
        self.assertEqual(
            (a.rate, a.count, a.f16, a.topics), (2.0, 0, False, ['video_kv_cache', 'text_context'])
        )
        a = K.parse_args(
            [
                'g.npz',
                '--rate',
                '5',
                '--count',
                '3',
                '--f16',
                '--topics',
                '/a',
                '/b',
                '--qos',
                'best_effort',
            ]
        )
        self.assertEqual(
            (a.rate, a.count, a.f16, a.topics, a.qos_profile['reliability']),
            (5.0, 3, True, ['/a', '/b'], 'best_effort'),
        )
        a = K.parse_args(['g.npz', '--shm', 'video_kv_handoff', '--shm-slots', '4'])
        self.assertEqual((a.shm, a.shm_slots), ('video_kv_handoff', 4))
        self.assertEqual(K.parse_args(['g.npz']).shm, '')
        for bad in (
            ['g.npz', '--shm', 't', '--shm-slots', '0'],
            ['g.npz', '--shm-slots', '65'],
            ['g.npz', '--rate', '0'],
            ['g.npz', '--rate', 'nan'],
            ['g.npz', '--count', '-1'],
            ['g.npz', '--topics', 'a', 'a'],
            ['g.npz', '--qos', 'x'],
            ['g.npz', '--wait', '-1'],
        ):
            with self.assertRaises(SystemExit), _Quiet(), _NoStderr():
                K.parse_args(bad)


class _NoStderr:
    def __enter__(self):
        self._old, sys.stderr = sys.stderr, io.StringIO()

    def __exit__(self, *exc):
        sys.stderr = self._old


class FakeROS:
    """
    Just enough of rclpy (and of the generated message module) for kv_player.main.

    Publishers whose subscriber appears after `discover_after` polls, a clock that advances 1 ms a
    read.
    """

    def __init__(self, discover_after=3, interrupt_at=None):
        import types

        self.discover_after, self.interrupt_at = discover_after, interrupt_at
        self.polls, self.pubs, self.logs, self.qos = 0, [], [], None
        self.inited = self.shut = self.destroyed = False
        self.now_ns = 1_700_000_000 * 10**9
        ros = self

        class Pub:
            def __init__(self, topic):
                self.topic_name, self.sent, self.acked = '/' + topic, [], False

            def get_subscription_count(self):
                ros.polls += 1
                return 1 if ros.polls > ros.discover_after else 0

            def publish(self, data):
                if not isinstance(data, bytes):
                    raise TypeError(f'publish({type(data).__name__})')
                if len(self.sent) >= 100:  # a test that should have stopped publishing long ago
                    raise AssertionError('kv_player kept publishing')
                if (
                    ros.interrupt_at is not None
                    and sum(len(p.sent) for p in ros.pubs) == ros.interrupt_at
                ):
                    raise KeyboardInterrupt
                self.sent.append((data, ros.polls))

            def wait_for_all_acked(self, timeout):
                self.acked = True
                return True

        class Logger:
            def info(self, m):
                ros.logs.append(('info', m))

            def error(self, m):
                ros.logs.append(('error', m))

        class Clock:
            def now(self):
                ros.now_ns += 1_000_000
                return types.SimpleNamespace(nanoseconds=ros.now_ns)

        class Node:
            def create_publisher(self, msg_type, topic, qos):
                ros.qos = qos
                p = Pub(topic)
                ros.pubs.append(p)
                return p

            def get_logger(self):
                return Logger()

            def get_clock(self):
                return Clock()

            def destroy_node(self):
                ros.destroyed = True

        def init(args=None):
            ros.inited, ros.init_args = True, args

        def remove_ros_args(args=None):
            return args[: args.index('--ros-args')] if '--ros-args' in args else list(args)

        enum = types.SimpleNamespace
        rclpy = types.ModuleType('rclpy')
        rclpy.init, rclpy.create_node, rclpy.ok = init, lambda name: Node(), lambda: not ros.shut
        rclpy.try_shutdown = lambda: setattr(ros, 'shut', True)
        mods = {
            'rclpy': rclpy,
            'rclpy.duration': types.SimpleNamespace(Duration=lambda seconds: seconds),
            'rclpy.utilities': types.SimpleNamespace(remove_ros_args=remove_ros_args),
            'rclpy.logging': types.SimpleNamespace(get_logger=lambda name: Logger()),
            'rclpy.qos': types.SimpleNamespace(
                QoSProfile=lambda **kw: kw,
                ReliabilityPolicy=enum(RELIABLE='RELIABLE', BEST_EFFORT='BEST_EFFORT'),
                DurabilityPolicy=enum(VOLATILE='VOLATILE', TRANSIENT_LOCAL='TRANSIENT_LOCAL'),
                HistoryPolicy=enum(KEEP_LAST='KEEP_LAST', KEEP_ALL='KEEP_ALL'),
            ),
            'fastwam_action_expert.msg': types.SimpleNamespace(
                VideoKVCache='VideoKVCache', TextContext='TextContext'
            ),
        }
        self.patch = mock.patch.dict(sys.modules, mods)


class Main(unittest.TestCase):
    GOLDEN = os.path.join(REPO, 'golden', 'tiny', 'case_first4.npz')

    def run_main(self, ros, *args):
        with ros.patch:
            return K.main(['kv_player', self.GOLDEN, '--rate', '500', *args])

    def test_publishes_after_discovery(self):
        ros = FakeROS(discover_after=3)
        rc = self.run_main(ros, '--count', '3', '--f16', '--ros-args', '-r', '__ns:=/robot')
        self.assertEqual(rc, 0)
        self.assertEqual(ros.init_args[-3:], ['--ros-args', '-r', '__ns:=/robot'])
        self.assertEqual(
            ros.qos,
            {
                'reliability': 'RELIABLE',
                'durability': 'VOLATILE',
                'history': 'KEEP_LAST',
                'depth': 2,
            },
        )
        kv, ctx = ros.pubs
        self.assertEqual((kv.topic_name, ctx.topic_name), ('/video_kv_cache', '/text_context'))
        self.assertEqual((len(kv.sent), len(ctx.sent)), (3, 3))
        self.assertTrue(
            all(polls > ros.discover_after for _, polls in kv.sent + ctx.sent),
            'published before discovery',
        )
        stamps = []
        for i, ((a, _), (b, _)) in enumerate(zip(kv.sent, ctx.sent)):
            # Empty frame_id: stamp at 4, seq at 4+16; both messages of a pair carry the same.
            for data in (a, b):
                self.assertEqual(struct.unpack_from('<Q', data, 20)[0], i)
            self.assertEqual(a[4:12], b[4:12])
            stamps.append(struct.unpack_from('<iI', a, 4))
            self.assertEqual(
                struct.unpack_from('<I', a, 28)[0], 4
            )  # visible_video_tokens of case_first4
            self.assertEqual(a[4 + 28 + 20], 1)  # keys dtype FLOAT16
        self.assertEqual(stamps, sorted(set(stamps)))
        self.assertTrue(kv.acked and ctx.acked and ros.destroyed and ros.shut)
        self.assertEqual(sum('published seq' in m for _, m in ros.logs), 3)

    def test_discovery_timeout(self):
        ros = FakeROS(discover_after=10**9)
        self.assertEqual(self.run_main(ros, '--wait', '0.2'), 1)
        self.assertIn(
            ('error', 'no subscriber on /video_kv_cache, /text_context after 0.2 s'), ros.logs
        )
        self.assertEqual(ros.pubs[0].sent, [])
        self.assertTrue(ros.destroyed and ros.shut)

    def test_ctrl_c(self):
        ros = FakeROS(discover_after=0, interrupt_at=3)
        self.assertEqual(self.run_main(ros), 0)  # --count 0: until interrupted
        self.assertIn(('info', 'interrupted: 1 pair(s) published'), ros.logs)
        self.assertTrue(ros.destroyed and ros.shut)

    def test_bad_file_fails_before_ros(self):
        ros = FakeROS()
        with _NoStderr():
            self.assertEqual(_main_with(ros, ['kv_player', '/nonexistent.npz']), 1)
        self.assertFalse(ros.inited)


def _main_with(ros, argv):
    with ros.patch:
        return K.main(argv)


if __name__ == '__main__':
    unittest.main()
