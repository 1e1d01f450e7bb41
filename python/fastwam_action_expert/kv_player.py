"""
kv_player: publishes a golden .npz's inputs as VideoKVCache + TextContext, for bring-up.

    ros2 run fastwam_action_expert kv_player golden/action_step_io.npz --rate 2

The file is in the device bundle's golden format (golden/action_step_io.npz, or our
golden/tiny/case_*.npz): it reads video_keys, video_values, context, context_mask and the optional
visible_video (the other arrays are ignored), checks them as hostile input, then publishes the
pair at --rate Hz with a fresh stamp from the node's clock and an increasing seq per pair, as a
world-model node would, so the action expert can be run end to end before the world model exists.
It waits until both topics have a subscriber (discovery) before the first publish, logs every
publish and stops cleanly on Ctrl-C. Only the publishing needs rclpy; read_golden does not.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, Dict, List, Optional, Sequence
import zipfile

import numpy as np

from fastwam_action_expert.producer import (
    check_text_context,
    check_video_kv,
    ContractError,
    Producer,
    ros_clock,
)

# The node's input QoS defaults (node/params/params.go, Default: qos.kv_cache.* and qos.context.*).
DEFAULT_QOS = 'reliable/volatile/keep_last(2)'
DEFAULT_TOPICS = ('video_kv_cache', 'text_context')

# The largest .npy member read: a full-size f32 cache is 30*98*3072*4 = 36 MB per array, so 1 GiB
# leaves room for any real model while bounding what a hostile archive can make us allocate.
MAX_MEMBER_BYTES = 1 << 30
# Deflate cannot expand data more than about 1032:1; a member that claims more is a bomb or a lie.
_MAX_DEFLATE_RATIO = 1032

_REQUIRED = ('video_keys', 'video_values', 'context', 'context_mask')
_OPTIONAL = ('visible_video',)


class GoldenError(ValueError):
    """A golden file that cannot be used; the text names the file, the array and the reason."""


def _read_member(zf: zipfile.ZipFile, path: str, key: str, max_bytes: int) -> np.ndarray:
    name = key + '.npy'
    info = zf.getinfo(name)
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise GoldenError(
            f'{path}: {key}: zip compression method {info.compress_type}, want stored (0) or '
            'deflated (8)'
        )
    if info.file_size > max_bytes:
        raise GoldenError(
            f'{path}: {key}: member of {info.file_size} bytes, more than the {max_bytes} allowed'
        )
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise GoldenError(
            f'{path}: {key}: stored member of {info.file_size} bytes occupies {info.compress_size}'
        )
    if (
        info.compress_type == zipfile.ZIP_DEFLATED
        and info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 1024
    ):
        raise GoldenError(
            f'{path}: {key}: {info.compress_size} compressed bytes claim {info.file_size}, '
            f"beyond deflate's ratio of {_MAX_DEFLATE_RATIO}:1"
        )
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise GoldenError(f'{path}: {key}: .npy format version {version}, want 1.0 or 2.0')
            header_len = f.tell()
            if dtype.hasobject or dtype.kind not in 'fbiu' or dtype.fields is not None:
                raise GoldenError(f'{path}: {key}: dtype {dtype}, want a numeric or bool array')
            count = math.prod(shape)
            need = count * dtype.itemsize
            if header_len + need != info.file_size:
                raise GoldenError(
                    f'{path}: {key}: header declares shape {list(shape)} of {dtype} ({need} '
                    'bytes), '
                    f'the member holds {info.file_size - header_len} bytes of data'
                )
            data = f.read(need)
            if len(data) != need or f.read(1):
                raise GoldenError(
                    f'{path}: {key}: member holds {len(data)} bytes of data, want {need}'
                )
    except GoldenError:
        raise
    except (ValueError, zipfile.BadZipFile, EOFError, OSError) as e:
        # numpy's header parser (ValueError) and zipfile's CRC and stream checks.
        raise GoldenError(f'{path}: {key}: unreadable .npy member: {e}') from None
    return np.frombuffer(data, dtype=dtype).reshape(shape, order='F' if fortran else 'C')


def read_golden(path: str, *, max_member_bytes: int = MAX_MEMBER_BYTES) -> Dict[str, Any]:
    """
    Read and check the inputs of a golden .npz.

    Returns a dict with keys, values ([layers,1,Sv,A]), context ([1,L,T]), mask ([L] bool) and
    visible_video_tokens (int), already checked against the message contract. Every member's
    declared shape and dtype are checked against the bytes the archive really holds before
    anything is read, and each member is bounded by max_member_bytes.
    """
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise GoldenError(f'{path}: not a readable .npz (zip) file: {e}') from None
    with zf:
        names = zf.namelist()
        for key in _REQUIRED + _OPTIONAL:
            if names.count(key + '.npy') > 1:
                raise GoldenError(
                    f"{path}: {key}: the archive holds {names.count(key + '.npy')} members "
                    'for it, want one'
                )
        missing = [k for k in _REQUIRED if k + '.npy' not in names]
        if missing:
            raise GoldenError(
                f"{path}: missing array(s) {', '.join(missing)}; "
                f"a golden needs {', '.join(_REQUIRED)}"
            )
        arr = {k: _read_member(zf, path, k, max_member_bytes) for k in _REQUIRED}
        visible = 0
        if 'visible_video.npy' in names:
            vis = _read_member(zf, path, 'visible_video', max_member_bytes)
            if vis.size != 1 or vis.dtype.kind not in 'fiu' or not np.isfinite(vis.reshape(-1)[0]):
                raise GoldenError(
                    f'{path}: visible_video: {vis.size} element(s) of {vis.dtype}, want one '
                    'whole number'
                )
            v = float(vis.reshape(-1)[0])
            if v != math.floor(v) or v < 0:
                raise GoldenError(
                    f'{path}: visible_video is {v}, want a whole number of tokens >= 0'
                )
            visible = int(v)
    try:
        keys, values = check_video_kv(
            arr['video_keys'], arr['video_values'], visible_video_tokens=visible
        )
        context, mask = check_text_context(arr['context'], arr['context_mask'])
    except ContractError as e:
        raise GoldenError(
            f'{path}: {e} (video_keys/video_values -> keys/values, context_mask -> attention_mask)'
        ) from None
    return {
        'keys': keys,
        'values': values,
        'context': context,
        'mask': mask,
        'visible_video_tokens': visible,
    }


def parse_qos(text: str) -> Dict[str, Any]:
    """
    Read a QoS profile as the node prints it: reliability[/durability[/history]].

    history is keep_last(N), keep_all or just N; omitted parts take the node's input defaults.
    """
    parts = text.split('/')
    if not 1 <= len(parts) <= 3 or '' in parts:
        raise ValueError(
            f'QoS {text!r}: want reliability[/durability[/history]], e.g. {DEFAULT_QOS}'
        )
    out = {'reliability': 'reliable', 'durability': 'volatile', 'history': 'keep_last', 'depth': 2}
    if parts[0] not in ('reliable', 'best_effort'):
        raise ValueError(f'QoS {text!r}: reliability {parts[0]!r}, want reliable or best_effort')
    out['reliability'] = parts[0]
    if len(parts) > 1:
        if parts[1] not in ('volatile', 'transient_local'):
            raise ValueError(
                f'QoS {text!r}: durability {parts[1]!r}, want volatile or transient_local'
            )
        out['durability'] = parts[1]
    if len(parts) > 2:
        h = parts[2]
        if h == 'keep_all':
            out['history'] = 'keep_all'
        else:
            if h.startswith('keep_last(') and h.endswith(')'):
                h = h[len('keep_last('):-1]
            if not h.isdigit() or not 1 <= int(h) <= 1000:
                raise ValueError(
                    f'QoS {text!r}: history {parts[2]!r}, want keep_all, keep_last(N) or N with '
                    'N in [1,1000]'
                )
            out['depth'] = int(h)
    return out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the player's own arguments (ROS arguments already removed)."""
    p = argparse.ArgumentParser(
        prog='kv_player',
        description="Publish a golden .npz's inputs as VideoKVCache + TextContext pairs "
        'with fresh stamps.',
    )
    p.add_argument(
        'file',
        help='golden .npz in the device-bundle format '
        '(video_keys, video_values, context, context_mask)',
    )
    p.add_argument('--rate', type=float, default=2.0, help='pairs per second (default 2)')
    p.add_argument(
        '--count', type=int, default=0, help='pairs to publish, 0 = until Ctrl-C (default 0)'
    )
    p.add_argument(
        '--f16', action='store_true', help='send the tensors as float16 (default float32)'
    )
    p.add_argument(
        '--topics',
        nargs=2,
        metavar=('KV_CACHE', 'CONTEXT'),
        default=list(DEFAULT_TOPICS),
        help="topics (default: the node's, video_kv_cache text_context)",
    )
    p.add_argument(
        '--qos',
        default=DEFAULT_QOS,
        help=f"both publishers' QoS (default the node's inputs': {DEFAULT_QOS})",
    )
    p.add_argument(
        '--wait',
        type=float,
        default=0.0,
        help='seconds to wait for a subscriber on both topics, 0 = forever (default 0)',
    )
    p.add_argument('--instruction', default='', help='TextContext.instruction')
    p.add_argument('--frame-id', default='', help='header.frame_id of both messages')
    p.add_argument(
        '--shm',
        metavar='TOPIC',
        default='',
        help="hand the keys and values over through shared memory (the node's kv_transport shm): "
        'KVHandoff descriptors on TOPIC (its shm.topic) instead of VideoKVCache; '
        'the segment is /dev/shm/fastwam-kv.<pid>, removed at exit',
    )
    p.add_argument(
        '--shm-slots', type=int, default=3, help='slots of the shared-memory segment (default 3)'
    )
    a = p.parse_args(list(argv))
    if not (math.isfinite(a.rate) and 0 < a.rate <= 1000):
        p.error(f'--rate {a.rate}: want a rate in (0, 1000] Hz')
    if a.count < 0:
        p.error(f'--count {a.count}: want 0 (until Ctrl-C) or more')
    if not (math.isfinite(a.wait) and a.wait >= 0):
        p.error(f'--wait {a.wait}: want 0 (forever) or more seconds')
    if not 1 <= a.shm_slots <= 64:
        p.error(f'--shm-slots {a.shm_slots}: want 1 to 64')
    if a.topics[0] == a.topics[1]:
        p.error(f'--topics: both name {a.topics[0]!r}')
    try:
        a.qos_profile = parse_qos(a.qos)
    except ValueError as e:
        p.error(str(e))
    return a


def _qos(profile: Dict[str, Any]) -> Any:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        reliability=ReliabilityPolicy.RELIABLE
        if profile['reliability'] == 'reliable'
        else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE
        if profile['durability'] == 'volatile'
        else DurabilityPolicy.TRANSIENT_LOCAL,
        history=HistoryPolicy.KEEP_LAST
        if profile['history'] == 'keep_last'
        else HistoryPolicy.KEEP_ALL,
        depth=profile['depth'],
    )


def main(argv: Optional[List[str]] = None) -> int:
    """Run the player; argv is the whole command line (sys.argv), ROS arguments included."""
    argv = list(sys.argv if argv is None else argv)
    try:
        import rclpy
        from rclpy.duration import Duration
        from rclpy.utilities import remove_ros_args
    except ImportError as e:
        print(
            f'kv_player: rclpy is not importable ({e}); source a ROS 2 install (setup.bash)',
            file=sys.stderr,
        )
        return 2
    args = parse_args(remove_ros_args(args=argv)[1:])
    try:
        golden = read_golden(args.file)
    except GoldenError as e:
        print(f'kv_player: {e}', file=sys.stderr)
        return 1
    try:
        from fastwam_action_expert.msg import TextContext, VideoKVCache
    except ImportError as e:
        print(
            f'kv_player: the fastwam_action_expert messages are not importable ({e}); '
            'build the package and source its install/setup.bash',
            file=sys.stderr,
        )
        return 2

    if args.f16:  # convert once, not on every publish
        try:
            golden['keys'], golden['values'] = check_video_kv(
                golden['keys'],
                golden['values'],
                f16=True,
                visible_video_tokens=golden['visible_video_tokens'],
            )
            golden['context'], golden['mask'] = check_text_context(
                golden['context'], golden['mask'], f16=True
            )
        except ContractError as e:
            print(f'kv_player: {args.file}: --f16: {e}', file=sys.stderr)
            return 1

    shm = None
    if args.shm:
        try:
            from fastwam_action_expert.msg import KVHandoff
            from fastwam_action_expert.producer import ShmPublisher
        except ImportError as e:
            print(
                f'kv_player: --shm: the KVHandoff message is not importable ({e})', file=sys.stderr
            )
            return 2
        shm = ShmPublisher(
            golden['keys'].shape, f16=args.f16, slots=args.shm_slots, frame_id=args.frame_id
        )

    rclpy.init(args=argv)
    node = rclpy.create_node('kv_player')
    log = node.get_logger()
    producer = Producer(f16=args.f16, clock=ros_clock(node), frame_id=args.frame_id)
    qos = _qos(args.qos_profile)
    pubs = [
        node.create_publisher(KVHandoff, args.shm, qos)
        if shm
        else node.create_publisher(VideoKVCache, args.topics[0], qos),
        node.create_publisher(TextContext, args.topics[1], qos),
    ]
    k = golden['keys']
    log.info(
        f"{args.file}: keys/values {list(k.shape)}, context {list(golden['context'].shape)}, "
        f"visible video tokens {golden['visible_video_tokens'] or 'all'}; "
        f"{'float16' if args.f16 else 'float32'} on {pubs[0].topic_name} + {pubs[1].topic_name}, "
        f'QoS {args.qos}'
    )
    sent = 0
    stop = ''  # how a Ctrl-C stopped the player, logged once the node is gone

    def stopped(how: str) -> None:
        nonlocal stop
        stop = f'{how}: {sent} pair(s) published'

    try:
        # Discovery first: a sample published before the node's subscription is matched is lost.
        start = time.monotonic()
        waiting_logged = False
        while rclpy.ok() and any(p.get_subscription_count() == 0 for p in pubs):
            if not waiting_logged:
                log.info('waiting for a subscriber on both topics (discovery)')
                waiting_logged = True
            if args.wait and time.monotonic() - start > args.wait:
                missing = [p.topic_name for p in pubs if p.get_subscription_count() == 0]
                log.error(f"no subscriber on {', '.join(missing)} after {args.wait:g} s")
                return 1
            time.sleep(0.05)
        period = 1.0 / args.rate
        next_at = time.monotonic()
        obs = None
        while rclpy.ok() and (args.count == 0 or sent < args.count):
            # The inputs are checked once, at the first observation; later ones reuse them with
            # a fresh stamp and seq (a second scan of 72 MB would only add to the input age).
            if obs is None:
                obs = producer.observe(
                    golden['keys'],
                    golden['values'],
                    golden['context'],
                    golden['mask'],
                    instruction=args.instruction,
                    visible_video_tokens=golden['visible_video_tokens'],
                )
            else:
                obs = producer.again(obs)
            # The context first: its 2 MB travel while the 72 MB are written or serialized.
            ctx = obs.text_context_cdr()
            pubs[1].publish(ctx)
            if shm:  # the tensors into the next slot (one copy), a descriptor on the topic
                dk, dv = shm.begin()
                dk[...] = obs.keys
                dv[...] = obs.values
                del dk, dv
                kv = shm.commit(
                    obs.stamp[0] * 1_000_000_000 + obs.stamp[1],
                    seq=obs.seq,
                    visible_video_tokens=obs.visible_video_tokens,
                )
            else:
                kv = obs.video_kv_cache_cdr()
            pubs[0].publish(kv)
            sent += 1
            log.info(
                f'published seq {obs.seq} stamp {obs.stamp[0]}.{obs.stamp[1]:09d} '
                f"({'KVHandoff' if shm else 'VideoKVCache'} {len(kv)} B, TextContext {len(ctx)} B)"
            )
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()  # late: do not burst to catch up
        if not rclpy.ok():
            stopped('shut down')
            return 0
        if args.qos_profile['reliability'] == 'reliable':
            for p in pubs:  # let the last pair reach the subscribers before the writers go
                p.wait_for_all_acked(Duration(seconds=2))
        log.info(f'done: {sent} pair(s) published')
    except KeyboardInterrupt:
        stopped('interrupted')
    except ContractError as e:
        log.error(str(e))
        return 1
    except Exception:
        # rclpy's SIGINT handler shuts the context down from another thread, so a publish or
        # a wait racing with Ctrl-C fails; that is a clean stop, anything else is not.
        if rclpy.ok():
            raise
        stopped('interrupted')
    finally:
        if shm is not None:
            shm.close()
        node.destroy_node()
        if stop:
            # After Ctrl-C rclpy has shut the context down and the node's /rosout publisher is
            # unusable; with the node destroyed its logger writes to the console only.
            from rclpy.logging import get_logger

            get_logger('kv_player').info(stop)
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
