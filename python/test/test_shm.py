"""
Tests of fastwam_action_expert.producer.ShmPublisher (the shared-memory hand-off) without ROS.

The Go test msgs.TestProducerShmMatchesReader reads its segment with the node's reader.
"""

import os
import stat
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from fastwam_action_expert import producer as P  # noqa: E402

SHAPE = (2, 1, 3, 4)


class ShmPublisherTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        for n in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, n))
        os.rmdir(self.dir)

    def gens(self, p):
        with open(p.path, 'rb') as f:
            f.seek(64)
            return struct.unpack('<%dQ' % p.slots, f.read(8 * p.slots))

    def test_layout_mode_and_generations(self):
        p = P.ShmPublisher(SHAPE, slots=2, dir=self.dir, prefix='kv')
        st = os.stat(p.path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        self.assertEqual(st.st_size, 4096 + 2 * p.slot_size)
        self.assertEqual(p.slot_size % 4096, 0)
        k, v = p.begin()
        self.assertEqual(self.gens(p), (1, 0))  # odd while written
        k[...] = 1.5
        v[...] = -2
        p.commit(stamp_ns=10**18)
        self.assertEqual(self.gens(p), (2, 0))
        with open(p.path, 'rb') as f:
            head = f.read(32)
            f.seek(4096)
            payload = np.frombuffer(f.read(96), dtype='<f4')
        self.assertEqual(head[:8], b'FWKVSHM\x01')
        self.assertEqual(struct.unpack('<IIII', head[8:24]), (1, 4096, 2, os.getpid()))
        self.assertTrue((payload == 1.5).all())
        with self.assertRaises(P.ContractError):
            p.close()  # k and v still view the slot
        del k, v
        p.close()
        self.assertFalse(os.path.exists(p.path))

    def test_shape_and_order_checks(self):
        p = P.ShmPublisher(SHAPE, dir=self.dir, prefix='kv', group=True)
        self.assertEqual(stat.S_IMODE(os.stat(p.path).st_mode), 0o660)
        with self.assertRaises(P.ContractError):
            p.publish(np.zeros((2, 1, 3, 5), np.float32), np.zeros(SHAPE, np.float32), stamp_ns=1)
        with self.assertRaises(P.ContractError):
            p.commit(stamp_ns=1)
        p.begin()
        with self.assertRaises(P.ContractError):
            p.begin()
        p.close()
        with self.assertRaises(P.ContractError):
            P.ShmPublisher(SHAPE, slots=65, dir=self.dir)
        with self.assertRaises(P.ContractError):
            P.ShmPublisher(SHAPE, dir=self.dir, prefix='a/b')

    def test_stale_segments_removed(self):
        dead = subprocess.Popen(['true'])
        dead.wait()
        stale = os.path.join(self.dir, 'kv.%d' % dead.pid)
        live = os.path.join(self.dir, 'kv.1')
        for f in (stale, live, os.path.join(self.dir, 'kv.x')):
            open(f, 'wb').close()
        p = P.ShmPublisher(SHAPE, dir=self.dir, prefix='kv')
        self.assertFalse(os.path.exists(stale))
        self.assertTrue(os.path.exists(live))
        p.close()


if __name__ == '__main__':
    unittest.main()
