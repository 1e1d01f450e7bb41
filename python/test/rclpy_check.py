"""
Checks the installed producer kit against rclpy and the generated message types (needs ROS 2).

    source install/setup.bash && python3 python/test/rclpy_check.py [golden.npz]

The kit's CDR bytes must be what rclpy's own serializer (rmw_serialize, the middleware's type
support) writes for the kit's message objects, except in alignment padding, which Fast-CDR
leaves unwritten (leftover bytes) and the kit zeroes; and rclpy must deserialize the kit's bytes
into messages equal to the kit's message objects. Not a unittest: the unit tests run without ROS.
"""

import os
import sys

from rclpy.serialization import deserialize_message, serialize_message

from fastwam_action_expert.kv_player import read_golden
from fastwam_action_expert.msg import TextContext, VideoKVCache
from fastwam_action_expert.producer import Producer


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    path = (
        sys.argv[1]
        if len(sys.argv) > 1
        else os.path.join(here, '..', '..', 'golden', 'tiny', 'case_first4.npz')
    )
    g = read_golden(path)
    n, failures = 0, []
    for f16 in (False, True):
        # Strings of every length mod 4 move the alignment of what follows them.
        for frame, instruction in (
            ('', ''),
            ('a', 'x'),
            ('cam', 'pick up the red block'),
            ('kamera_ünï', '日本語の指示'),
        ):
            p = Producer(f16=f16, first_seq=2**40 + 3, frame_id=frame)
            o = p.observe(
                g['keys'],
                g['values'],
                g['context'],
                g['mask'],
                instruction=instruction,
                visible_video_tokens=g['visible_video_tokens'],
                stamp_ns=1_700_000_000_999_999_999,
            )
            for ours, msg, typ in (
                (o.video_kv_cache_cdr(), o.video_kv_cache_msg(), VideoKVCache),
                (o.text_context_cdr(), o.text_context_msg(), TextContext),
            ):
                case = f'{typ.__name__} f16={f16} frame_id={frame!r}'
                theirs = serialize_message(msg)
                diff = [i for i in range(min(len(ours), len(theirs))) if ours[i] != theirs[i]]
                if len(ours) != len(theirs) or any(ours[i] != 0 for i in diff):
                    failures.append(
                        f'{case}: rclpy wrote {len(theirs)} bytes, the kit {len(ours)}, '
                        f'differing at {diff[:8]}'
                    )
                if deserialize_message(ours, typ) != msg:
                    failures.append(f"{case}: rclpy reads the kit's bytes as a different message")
                n += 1
    for f in failures:
        print('FAIL', f)
    print(f'{n} messages checked against rclpy, {len(failures)} failure(s)')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
