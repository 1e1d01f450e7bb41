"""
The producer kit: VideoKVCache and TextContext messages from NumPy arrays or torch tensors.

The world-model node publishes, for every observation, one ``VideoKVCache`` and one
``TextContext`` with the same header stamp; the action expert pairs them by that exact stamp.
This module builds both messages in the layout, element type, stamps and sequence numbers the
node checks, and refuses any input the node would reject, with an error naming the field, what it
got and what it expects.

Mapping from Fast-WAM
---------------------
``MoT.prefill_video_cache`` leaves one entry per DiT layer (30 for the released model): the
video-token keys ``k`` (after the video expert's ``norm_k`` RMSNorm and its 3-D RoPE, in the
interleaved RoPE layout) and values ``v`` (the raw ``v`` projection plus bias), each either
``[B, Sv, heads, head_dim]`` (per head) or ``[B, Sv, heads*head_dim]`` (heads already flattened).
``VideoKVCache.keys`` and ``.values`` are those entries stacked over layers, for one batch row,
with heads flattened head-major (column ``h*head_dim + d``, which is what ``reshape`` does to
``[..., heads, head_dim]``): ``[layers, 1, Sv, heads*head_dim]``, 30 x 1 x 98 x 3072 for the
released model. Nothing is re-normalised, rotated or projected: the node uses the cache as is.
:func:`stack_video_cache` does this stacking. ``TextContext.context`` is the text-encoder states
plus the proprio token, *before* the action expert's ``text_embedding``: ``[1, L, T]``
(1 x 129 x 4096: 128 T5 tokens and ``proprio_encoder(proprio)``), and ``attention_mask`` is its
``[L]`` (or ``[1, L]``) mask, True where the token may be attended (all True in Fast-WAM, padding
included). ``visible_video_tokens`` is how many leading video tokens the actions may attend to
(0 = all).

On the wire each tensor is float32 or float16 (``f16=True`` halves the 72 MB of a full-size
cache; the node converts either). The same stamp goes on both messages of an observation and both
carry the same ``seq``, which increases by one per observation (:class:`Producer` owns both).

Everything here needs NumPy only. :meth:`Observation.video_kv_cache_cdr` and
:meth:`Observation.text_context_cdr` give the serialized messages (CDR, XCDR1 little endian, the
bytes ROS 2 puts on the wire and rosbag2 stores), which an rclpy publisher publishes as they are
(``publisher.publish(data)`` with ``bytes``); :meth:`Observation.video_kv_cache_msg` and
:meth:`Observation.text_context_msg` give rclpy message objects of the generated types and import
them only when called.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import struct
import time
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    'DTYPE_FLOAT32',
    'DTYPE_FLOAT16',
    'ContractError',
    'Contract',
    'Observation',
    'Producer',
    'ros_clock',
    'check_video_kv',
    'check_text_context',
    'stack_video_cache',
    'video_kv_cache_cdr',
    'text_context_cdr',
]

# Tensor.dtype codes (msg/Tensor.msg).
DTYPE_FLOAT32 = 0
DTYPE_FLOAT16 = 1

_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_INT32_MAX = 2**31 - 1
_F16_MAX = 65504.0


class ContractError(ValueError):
    """An input that does not fit the node's message contract; the text names the field."""


@dataclasses.dataclass(frozen=True)
class Contract:
    """
    The sizes the node's backend was built for; None leaves a size unchecked.

    The released Fast-WAM model is ``Contract(layers=30, video_tokens=98, attn_width=3072,
    context_tokens=129, text_dim=4096)`` (:meth:`fastwam`).
    """

    layers: Optional[int] = None
    video_tokens: Optional[int] = None
    attn_width: Optional[int] = None
    context_tokens: Optional[int] = None
    text_dim: Optional[int] = None

    @staticmethod
    def fastwam() -> 'Contract':
        """Return the contract of the released Fast-WAM action expert (LIBERO)."""
        return Contract(
            layers=30, video_tokens=98, attn_width=3072, context_tokens=129, text_dim=4096
        )


# --- array checks -----------------------------------------------------------------------------


def _to_numpy(x: Any, field: str) -> np.ndarray:
    """
    Return x as a NumPy array without changing its values.

    A torch tensor is detached and moved to the CPU (bfloat16, which NumPy lacks, becomes float32
    exactly).
    """
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, 'detach') and hasattr(x, 'cpu') and hasattr(x, 'numpy'):  # a torch tensor
        t = x.detach().cpu()
        if str(getattr(t, 'dtype', '')) == 'torch.bfloat16':
            t = t.float()
        return t.numpy()
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    raise ContractError(f'{field}: got a {type(x).__name__}, want a NumPy array or a torch tensor')


def _float_tensor(x: Any, field: str, f16: bool) -> np.ndarray:
    """
    Check that x holds floating-point values and return them in the wire dtype.

    The result is C-contiguous and little-endian; NaN and infinity are refused (also a value that
    overflows float16).
    """
    a = _to_numpy(x, field)
    if a.dtype.kind != 'f':
        raise ContractError(
            f'{field}: dtype {a.dtype}, want a floating-point type (float16, float32, float64 or '
            'bfloat16)'
        )
    wire = np.dtype('<f2') if f16 else np.dtype('<f4')
    with np.errstate(over='ignore', invalid='ignore'):
        out = np.ascontiguousarray(a, dtype=wire)
    bad = ~np.isfinite(out)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        idx = tuple(int(v) for v in np.unravel_index(i, out.shape))
        src = a[idx] if a.ndim else a
        if np.isfinite(src):
            raise ContractError(
                f"{field}[{','.join(map(str, idx))}] is {float(src)!r}, beyond float16's range "
                f'(+-{_F16_MAX:g}): send float32 (f16=False) or rescale'
            )
        raise ContractError(
            f"{field}[{','.join(map(str, idx))}] is {float(src)!r}, want finite values only"
        )
    return out


def _check_dims(
    field: str, shape: Tuple[int, ...], want: Sequence[Optional[int]], spec: str
) -> None:
    """Check a shape against want (None = any positive size) and the uint32 of the wire."""
    if (
        len(shape) != len(want)
        or any(d <= 0 for d in shape)
        or any(w is not None and d != w for d, w in zip(shape, want))
    ):
        raise ContractError(f'{field}: shape {list(shape)}, want {spec}')
    if any(d > _UINT32_MAX for d in shape):
        raise ContractError(
            f'{field}: shape {list(shape)} has a dimension beyond the uint32 of Tensor.shape'
        )


def check_video_kv(
    keys: Any,
    values: Any,
    *,
    f16: bool = False,
    visible_video_tokens: int = 0,
    contract: Optional[Contract] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """
    Check the video cache and return (keys, values) in the wire dtype.

    keys and values must be ``[layers, 1, Sv, heads*head_dim]`` with every size > 0, of the
    same shape, floating point and finite; visible_video_tokens must be in [0, Sv].
    """
    c = contract or Contract()
    k = _to_numpy(keys, 'keys')
    v = _to_numpy(values, 'values')
    want = (c.layers, 1, c.video_tokens, c.attn_width)
    spec = '[layers,1,Sv,heads*head_dim] = [{}]'.format(
        ','.join('*' if w is None else str(w) for w in want)
    )
    _check_dims('keys', tuple(k.shape), want, spec)
    _check_dims('values', tuple(v.shape), want, spec)
    if k.shape != v.shape:
        raise ContractError(
            f'values: shape {list(v.shape)}, keys {list(k.shape)}: they must match'
        )
    sv = k.shape[2]
    if (
        not isinstance(visible_video_tokens, (int, np.integer))
        or isinstance(visible_video_tokens, bool)
        or not (0 <= visible_video_tokens <= sv)
    ):
        raise ContractError(
            f'visible_video_tokens: {visible_video_tokens!r}, want a whole number in [0,{sv}] (0 '
            '= all)'
        )
    return _float_tensor(k, 'keys', f16), _float_tensor(v, 'values', f16)


def check_text_context(
    context: Any,
    mask: Any,
    *,
    f16: bool = False,
    contract: Optional[Contract] = None,
) -> Tuple[np.ndarray, np.ndarray]:
    """
    Check the text context and return (context in the wire dtype, mask as a [L] bool array).

    context must be ``[1, L, T]``; mask ``[L]`` or ``[1, L]``, bool (or numbers that are all 0 or
    1), with at least one True (the node refuses a context with every token masked).
    """
    c = contract or Contract()
    x = _to_numpy(context, 'context')
    want = (1, c.context_tokens, c.text_dim)
    spec = '[1,L,T] = [{}]'.format(','.join('*' if w is None else str(w) for w in want))
    _check_dims('context', tuple(x.shape), want, spec)
    length = x.shape[1]
    m = _to_numpy(mask, 'attention_mask')
    if m.shape not in ((length,), (1, length)):
        raise ContractError(
            f'attention_mask: shape {list(m.shape)}, want [{length}] or [1,{length}] (L of the '
            'context)'
        )
    m = m.reshape(length)
    if m.dtype != np.bool_:
        if m.dtype.kind not in 'fiu':
            raise ContractError(f'attention_mask: dtype {m.dtype}, want bool')
        ok = (m == 0) | (m == 1)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise ContractError(f'attention_mask[{i}] is {m[i]!r}, want bool (or 0/1)')
        m = m == 1
    if not m.any():
        raise ContractError(
            f'attention_mask masks all {length} tokens; at least one must be attendable'
        )
    return _float_tensor(x, 'context', f16), np.ascontiguousarray(m, dtype=np.bool_)


def stack_video_cache(cache: Iterable[Any], batch_index: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """
    Stacks Fast-WAM's prefilled video cache into (keys, values) of ``[layers, 1, Sv, A]``.

    cache holds one entry per layer, in layer order: a dict with "k" and "v", or a (k, v) pair.
    Each k and v is ``[B, Sv, heads, head_dim]`` or ``[B, Sv, heads*head_dim]`` (NumPy or torch);
    batch row batch_index is taken and heads are flattened head-major (h*head_dim + d). The
    values are not changed (float32 stays float32); check_video_kv then checks them.
    """
    ks, vs = [], []
    shape0 = None
    for layer, entry in enumerate(cache):
        if isinstance(entry, dict):
            if 'k' not in entry or 'v' not in entry:
                raise ContractError(
                    f"cache[{layer}]: a dict with keys {sorted(entry)}, want 'k' and 'v'"
                )
            k, v = entry['k'], entry['v']
        elif isinstance(entry, (tuple, list)) and len(entry) == 2:
            k, v = entry
        else:
            raise ContractError(
                f'cache[{layer}]: a {type(entry).__name__}, '
                "want a dict with 'k' and 'v' or a (k, v) pair"
            )
        out = []
        for name, t in (('k', k), ('v', v)):
            a = _to_numpy(t, f'cache[{layer}].{name}')
            if a.ndim not in (3, 4) or any(d <= 0 for d in a.shape):
                raise ContractError(
                    f'cache[{layer}].{name}: shape {list(a.shape)}, want [B,Sv,heads,head_dim] '
                    'or [B,Sv,heads*head_dim]'
                )
            if not 0 <= batch_index < a.shape[0]:
                raise ContractError(
                    f'cache[{layer}].{name}: batch {a.shape[0]}, batch_index {batch_index} is '
                    'outside it'
                )
            row = a[batch_index]
            out.append(row.reshape(row.shape[0], -1))
        if out[0].shape != out[1].shape:
            raise ContractError(
                f'cache[{layer}]: k is {list(out[0].shape)} and v {list(out[1].shape)} per batch '
                'row; they must match'
            )
        if shape0 is None:
            shape0 = out[0].shape
        elif out[0].shape != shape0:
            raise ContractError(
                f'cache[{layer}]: [Sv,A] = {list(out[0].shape)}, layer 0 has {list(shape0)}'
            )
        ks.append(out[0])
        vs.append(out[1])
    if not ks:
        raise ContractError('cache: no layers, want one entry per DiT layer')
    return np.stack(ks)[:, None], np.stack(vs)[:, None]


# --- CDR ----------------------------------------------------------------------------------------


class _CDRWriter:
    """
    Write plain CDR (XCDR1, little endian).

    An encapsulation header 00 01 00 00, then each primitive aligned to its own size, counted from
    the first byte after the header; sequences are a uint32 count then the elements, strings a
    uint32 length that counts a final NUL.
    """

    def __init__(self) -> None:
        self._parts: list = [b'\x00\x01\x00\x00']
        self._off = 0  # bytes written after the header

    def _pad(self, n: int) -> None:
        p = -self._off % n
        if p:
            self._parts.append(b'\x00' * p)
            self._off += p

    def u8(self, v: int) -> None:
        self._parts.append(struct.pack('<B', v))
        self._off += 1

    def boolean(self, v: bool) -> None:
        self.u8(1 if v else 0)

    def u32(self, v: int) -> None:
        self._pad(4)
        self._parts.append(struct.pack('<I', v))
        self._off += 4

    def i32(self, v: int) -> None:
        self._pad(4)
        self._parts.append(struct.pack('<i', v))
        self._off += 4

    def u64(self, v: int) -> None:
        self._pad(8)
        self._parts.append(struct.pack('<Q', v))
        self._off += 8

    def string(self, field: str, s: str) -> None:
        b = s.encode('utf-8')
        if b'\x00' in b:
            raise ContractError(
                f'{field}: contains a NUL character, which a ROS string cannot hold'
            )
        self.u32(len(b) + 1)
        self._parts.append(b + b'\x00')
        self._off += len(b) + 1

    def raw(self, b: Any) -> None:
        """Append bytes (or a C-contiguous array's buffer) without alignment."""
        mv = memoryview(b).cast('B')
        self._parts.append(mv)
        self._off += mv.nbytes

    def bools(self, m: np.ndarray) -> None:
        self.u32(len(m))
        self.raw(m.astype(np.uint8))

    def tensor(self, a: np.ndarray) -> None:
        """Write a Tensor: uint32[] shape, uint8 dtype, uint8[] data (little-endian elements)."""
        self.u32(a.ndim)
        for d in a.shape:
            self.u32(d)
        self.u8(DTYPE_FLOAT16 if a.dtype == np.float16 else DTYPE_FLOAT32)
        self.u32(a.nbytes)
        self.raw(a.reshape(-1).view(np.uint8))

    def header(self, stamp: Tuple[int, int], frame_id: str) -> None:
        self.i32(stamp[0])
        self.u32(stamp[1])
        self.string('header.frame_id', frame_id)

    def getvalue(self) -> bytes:
        return b''.join(self._parts)


def _check_stamp(stamp: Tuple[int, int]) -> Tuple[int, int]:
    sec, nsec = stamp
    if not (0 <= sec <= _INT32_MAX and 0 <= nsec < 1_000_000_000):
        raise ContractError(
            f'stamp: ({sec}, {nsec}), want sec in [0,{_INT32_MAX}] and nanosec in [0,1e9)'
        )
    if sec == 0 and nsec == 0:
        raise ContractError('stamp: zero, which the node refuses; stamp the observation')
    return int(sec), int(nsec)


def _check_seq(seq: int) -> int:
    if (
        not isinstance(seq, (int, np.integer))
        or isinstance(seq, bool)
        or not 0 <= seq <= _UINT64_MAX
    ):
        raise ContractError(f'seq: {seq!r}, want a whole number in [0,2^64)')
    return int(seq)


def video_kv_cache_cdr(
    keys: Any,
    values: Any,
    *,
    stamp: Tuple[int, int],
    seq: int,
    frame_id: str = '',
    visible_video_tokens: int = 0,
    f16: bool = False,
    contract: Optional[Contract] = None,
) -> bytes:
    """
    Check the video cache (check_video_kv) and serialize a VideoKVCache.

    stamp is (sec, nanosec).
    """
    k, v = check_video_kv(
        keys, values, f16=f16, visible_video_tokens=visible_video_tokens, contract=contract
    )
    return _video_kv_cache_cdr(
        k, v, _check_stamp(stamp), _check_seq(seq), frame_id, int(visible_video_tokens)
    )


def text_context_cdr(
    context: Any,
    mask: Any,
    *,
    stamp: Tuple[int, int],
    seq: int,
    frame_id: str = '',
    instruction: str = '',
    f16: bool = False,
    contract: Optional[Contract] = None,
) -> bytes:
    """
    Check the text context (check_text_context) and serialize a TextContext.

    stamp is (sec, nanosec).
    """
    x, m = check_text_context(context, mask, f16=f16, contract=contract)
    return _text_context_cdr(x, m, _check_stamp(stamp), _check_seq(seq), frame_id, instruction)


def _video_kv_cache_cdr(
    k: np.ndarray, v: np.ndarray, stamp: Tuple[int, int], seq: int, frame_id: str, visible: int
) -> bytes:
    w = _CDRWriter()
    w.header(stamp, frame_id)
    w.u64(seq)
    w.u32(visible)
    w.tensor(k)
    w.tensor(v)
    return w.getvalue()


def _text_context_cdr(
    x: np.ndarray, m: np.ndarray, stamp: Tuple[int, int], seq: int, frame_id: str, instruction: str
) -> bytes:
    w = _CDRWriter()
    w.header(stamp, frame_id)
    w.u64(seq)
    w.string('instruction', instruction)
    w.tensor(x)
    w.bools(m)
    return w.getvalue()


# --- messages and the producer -------------------------------------------------------------------


def _tensor_msg(a: np.ndarray) -> Any:
    import array

    from fastwam_action_expert.msg import Tensor  # the rosidl-generated type

    t = Tensor()
    t.shape = array.array('I', a.shape)
    t.dtype = DTYPE_FLOAT16 if a.dtype == np.float16 else DTYPE_FLOAT32
    data = array.array('B')
    data.frombytes(a.reshape(-1).view(np.uint8))  # one copy, no per-element work
    t.data = data
    return t


def _header_msg(stamp: Tuple[int, int], frame_id: str) -> Any:
    from std_msgs.msg import Header

    h = Header()
    h.stamp.sec, h.stamp.nanosec = stamp
    h.frame_id = frame_id
    return h


@dataclasses.dataclass(frozen=True)
class Observation:
    """
    One observation's inputs, checked and ready to publish.

    Both messages share stamp and seq.
    """

    stamp: Tuple[int, int]  # (sec, nanosec) of both headers
    seq: int
    keys: np.ndarray  # [layers,1,Sv,A], the wire dtype
    values: np.ndarray
    context: np.ndarray  # [1,L,T], the wire dtype
    mask: np.ndarray  # [L] bool
    visible_video_tokens: int = 0
    instruction: str = ''
    frame_id: str = ''

    def video_kv_cache_cdr(self) -> bytes:
        """Return the serialized VideoKVCache."""
        return _video_kv_cache_cdr(
            self.keys, self.values, self.stamp, self.seq, self.frame_id, self.visible_video_tokens
        )

    def text_context_cdr(self) -> bytes:
        """Return the serialized TextContext."""
        return _text_context_cdr(
            self.context, self.mask, self.stamp, self.seq, self.frame_id, self.instruction
        )

    def video_kv_cache_msg(self) -> Any:
        """Return a fastwam_action_expert.msg.VideoKVCache (needs the built package and rclpy)."""
        from fastwam_action_expert.msg import VideoKVCache

        m = VideoKVCache()
        m.header = _header_msg(self.stamp, self.frame_id)
        m.seq = self.seq
        m.visible_video_tokens = self.visible_video_tokens
        m.keys = _tensor_msg(self.keys)
        m.values = _tensor_msg(self.values)
        return m

    def text_context_msg(self) -> Any:
        """Return a fastwam_action_expert.msg.TextContext (needs the built package and rclpy)."""
        from fastwam_action_expert.msg import TextContext

        m = TextContext()
        m.header = _header_msg(self.stamp, self.frame_id)
        m.seq = self.seq
        m.instruction = self.instruction
        m.context = _tensor_msg(self.context)
        m.attention_mask = [bool(b) for b in self.mask]
        return m


def ros_clock(node: Any) -> Callable[[], int]:
    """Return a stamp source on an rclpy node's clock (ROS time, or /clock if use_sim_time)."""
    return lambda: node.get_clock().now().nanoseconds


class Producer:
    """
    Build one Observation per call.

    It checks the arrays, stamps both messages with one stamp from the clock and numbers them with
    one seq, increasing by one per observation.

    clock returns nanoseconds since the epoch (time.time_ns by default; ros_clock(node) for a
    node's clock). A refused input consumes no seq. A stamp that does not increase (a clock
    that stood still or went back) is refused, since the node drops duplicates and older
    stamps; after a deliberate time jump (a restarted simulation) make a new Producer.
    """

    def __init__(
        self,
        *,
        f16: bool = False,
        clock: Callable[[], int] = time.time_ns,
        first_seq: int = 0,
        frame_id: str = '',
        contract: Optional[Contract] = None,
    ) -> None:
        self.f16 = bool(f16)
        self._clock = clock
        self._seq = _check_seq(first_seq)
        self._frame_id = frame_id
        self._contract = contract
        self._last_ns: Optional[int] = None

    @property
    def next_seq(self) -> int:
        """Return the seq the next observation will carry."""
        return self._seq

    def observe(
        self,
        keys: Any,
        values: Any,
        context: Any,
        mask: Any,
        *,
        instruction: str = '',
        visible_video_tokens: int = 0,
        stamp_ns: Optional[int] = None,
    ) -> Observation:
        """Check one observation's arrays and return it stamped (stamp_ns, or the clock's now)."""
        k, v = check_video_kv(
            keys,
            values,
            f16=self.f16,
            visible_video_tokens=visible_video_tokens,
            contract=self._contract,
        )
        x, m = check_text_context(context, mask, f16=self.f16, contract=self._contract)
        if '\x00' in instruction or '\x00' in self._frame_id:
            raise ContractError(
                'instruction/frame_id: contains a NUL character, which a ROS string cannot hold'
            )
        return self._stamped(
            Observation(
                stamp=(0, 0),
                seq=0,
                keys=k,
                values=v,
                context=x,
                mask=m,
                visible_video_tokens=int(visible_video_tokens),
                instruction=instruction,
                frame_id=self._frame_id,
            ),
            stamp_ns,
        )

    def again(self, obs: Observation, *, stamp_ns: Optional[int] = None) -> Observation:
        """
        Return obs's arrays as the next observation: a new stamp and seq, no second check.

        For inputs that do not change between observations (a player of recorded inputs): obs was
        made by observe(), so its arrays are checked and in the wire dtype already, and a second
        scan of 72 MB would only add to the input age. The arrays are shared, not copied.
        """
        if not isinstance(obs, Observation):
            raise ContractError(f'again: {type(obs).__name__}, want an Observation from observe()')
        if (obs.keys.dtype.itemsize == 2) != self.f16:
            raise ContractError(
                f"again: the observation's keys are {obs.keys.dtype}, this producer sends "
                f"{'float16' if self.f16 else 'float32'}"
            )
        return self._stamped(obs, stamp_ns)

    def _stamped(self, obs: Observation, stamp_ns: Optional[int]) -> Observation:
        """Return obs with the next stamp (stamp_ns, or the clock's now) and seq."""
        ns = int(self._clock() if stamp_ns is None else stamp_ns)
        stamp = _check_stamp(divmod(ns, 1_000_000_000))
        if self._last_ns is not None and ns <= self._last_ns:
            raise ContractError(
                f"stamp: {ns} ns does not follow the previous observation's {self._last_ns} ns; "
                'the node drops duplicate and older stamps (make a new Producer after a time jump)'
            )
        if self._seq > _UINT64_MAX:
            raise ContractError('seq: the uint64 sequence is exhausted')
        out = dataclasses.replace(obs, stamp=stamp, seq=self._seq, frame_id=self._frame_id)
        self._last_ns = ns
        self._seq += 1
        return out


# --- shared-memory hand-off (kv_transport shm, docs/shm.md) --------------------------------------

SHM_MAGIC = b'FWKVSHM\x01'
SHM_VERSION = 1
SHM_HEADER_SIZE = 4096
SHM_MAX_SLOTS = 64
SHM_SLOT_ALIGN = 4096
SHM_TENSOR_ALIGN = 64


def _fence_fn() -> Optional[Callable[[], None]]:
    """
    Return a full memory fence, or None where none is needed.

    The fence (libatomic's atomic_thread_fence(seq_cst)) goes between the generation's stores and
    the payload's. It is needed on arm64, where stores may be reordered; on x86-64 the stores stay
    in program order (TSO) and none is needed.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library('atomic')
    if name:
        try:
            f = ctypes.CDLL(name).atomic_thread_fence
            f.argtypes, f.restype = [ctypes.c_int], None
            return lambda: f(5)  # __ATOMIC_SEQ_CST
        except (OSError, AttributeError):
            pass
    import platform

    if platform.machine() in ('x86_64', 'AMD64'):
        return None
    raise ContractError(
        'shared-memory hand-off: no libatomic.so.1 for the memory fence this machine needs'
    )


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


class ShmPublisher:
    """
    The producer's side of a shared-memory segment.

    The segment is ``dir/prefix.<pid>``, mode 0600 (0660 with group): ``slots`` slots of
    ``slot_size`` bytes after a 4096-byte header (the layout of Go's kvshm). ``begin()``
    returns the next slot's NumPy views to write keys and values into (the world model may write
    its output there directly: no copy), ``commit()`` returns the KVHandoff descriptor's CDR
    bytes. Stale segments of dead producers are removed at creation, this one on ``close()``.
    """

    def __init__(
        self,
        kv_shape: Sequence[int],
        f16: bool = False,
        slots: int = 3,
        dir: str = '/dev/shm',  # noqa: A002
        prefix: str = 'fastwam-kv',
        group: bool = False,
        frame_id: str = '',
    ) -> None:
        import mmap

        if not 1 <= slots <= SHM_MAX_SLOTS:
            raise ContractError(f'slots: {slots}, want 1 to {SHM_MAX_SLOTS}')
        if not prefix or '/' in prefix or '\x00' in prefix:
            raise ContractError(f'prefix: {prefix!r}, want a file name')
        self.kv_shape = tuple(int(d) for d in kv_shape)
        self.dtype = np.dtype('<f2' if f16 else '<f4')
        self.nbytes = int(np.prod(self.kv_shape)) * self.dtype.itemsize
        self.values_offset = _align(self.nbytes, SHM_TENSOR_ALIGN)
        self.slot_size = _align(max(self.values_offset + self.nbytes, 1), SHM_SLOT_ALIGN)
        self.slots, self.frame_id = slots, frame_id
        self.name = f'{prefix}.{os.getpid()}'
        self.path = os.path.join(dir, self.name)
        clean_stale_segments(dir, prefix)
        mode = 0o660 if group else 0o600
        size = SHM_HEADER_SIZE + slots * self.slot_size
        fd = os.open(
            self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
        try:
            os.fchmod(fd, mode)
            os.ftruncate(fd, size)
            # Populated: the pages exist now, not at the first write of each slot (a fault per
            # 4 KiB page: 64-77 ms for a full-size slot's first write, against 6 ms after).
            self._mm = mmap.mmap(
                fd,
                size,
                mmap.MAP_SHARED | getattr(mmap, 'MAP_POPULATE', 0),
                mmap.PROT_READ | mmap.PROT_WRITE,
            )
        except BaseException:
            os.close(fd)
            os.unlink(self.path)
            raise
        os.close(fd)
        hdr = struct.pack(
            '<8sIIIIQ',
            SHM_MAGIC,
            SHM_VERSION,
            SHM_HEADER_SIZE,
            slots,
            os.getpid() & 0xFFFFFFFF,
            self.slot_size,
        )
        self._mm[: len(hdr)] = hdr
        self._gens = np.frombuffer(self._mm, dtype='<u8', count=slots, offset=64)
        self._fence = _fence_fn()
        self._next, self._open = 0, -1
        self._seq = 0

    def _barrier(self) -> None:
        if self._fence is not None:
            self._fence()

    def begin(self) -> Tuple[np.ndarray, np.ndarray]:
        """
        Mark the next slot as being written and return views of it.

        The slot's generation turns odd; the views are its keys and values, of kv_shape and the
        wire dtype.
        """
        if self._open >= 0:
            raise ContractError('begin() twice without commit()')
        s = self._next
        self._next = (s + 1) % self.slots
        self._gens[s] = int(self._gens[s]) | 1
        self._barrier()  # odd before any byte of the payload changes
        self._open = s
        base = SHM_HEADER_SIZE + s * self.slot_size
        n = int(np.prod(self.kv_shape))
        k = np.frombuffer(self._mm, dtype=self.dtype, count=n, offset=base).reshape(self.kv_shape)
        v = np.frombuffer(
            self._mm, dtype=self.dtype, count=n, offset=base + self.values_offset
        ).reshape(self.kv_shape)
        return k, v

    def commit(
        self, stamp_ns: int, seq: Optional[int] = None, visible_video_tokens: int = 0
    ) -> bytes:
        """Mark the slot as written (generation even, new) and return the KVHandoff's CDR."""
        if self._open < 0:
            raise ContractError('commit() without begin()')
        s, self._open = self._open, -1
        self._barrier()  # the payload before the even generation
        gen = (int(self._gens[s]) | 1) + 1
        self._gens[s] = gen
        if seq is None:
            seq, self._seq = self._seq, self._seq + 1
        stamp = _check_stamp((stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000))
        w = _CDRWriter()
        w.header(stamp, self.frame_id)
        w.u64(_check_seq(seq))
        w.u32(visible_video_tokens)
        w.string('segment', self.name)
        w.u32(s)
        w.u64(gen)
        for off in (0, self.values_offset):
            w.u32(len(self.kv_shape))
            for d in self.kv_shape:
                w.u32(d)
            w.u8(DTYPE_FLOAT16 if self.dtype.itemsize == 2 else DTYPE_FLOAT32)
            w.u64(off)
            w.u64(self.nbytes)
        return w.getvalue()

    def publish(
        self,
        keys: Any,
        values: Any,
        stamp_ns: int,
        seq: Optional[int] = None,
        visible_video_tokens: int = 0,
    ) -> bytes:
        """
        Write keys and values into the next slot and return the descriptor's CDR.

        Keys and values are NumPy arrays or torch tensors of kv_shape, copied once each.
        """
        k = _float_tensor(keys, 'keys', self.dtype.itemsize == 2)
        v = _float_tensor(values, 'values', self.dtype.itemsize == 2)
        for name, a in (('keys', k), ('values', v)):
            if a.shape != self.kv_shape:
                raise ContractError(f'{name}: shape {a.shape}, the segment holds {self.kv_shape}')
        dk, dv = self.begin()
        dk[...] = k
        dv[...] = v
        return self.commit(stamp_ns, seq, visible_video_tokens)

    def close(self) -> None:
        """Unmap and remove the segment."""
        if self._mm is None:
            return
        gens, self._gens = self._gens, None
        del gens
        try:
            self._mm.close()
        except BufferError as e:
            raise ContractError(
                'close(): views from begin() are still alive; drop them first'
            ) from e
        self._mm = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def clean_stale_segments(dir: str, prefix: str) -> List[str]:  # noqa: A002
    """Remove this user's ``prefix.<pid>`` segments in dir whose pid no longer runs."""
    removed = []
    for n in os.listdir(dir):
        rest = n[len(prefix) + 1:] if n.startswith(prefix + '.') else ''
        if not rest.isdigit() or str(int(rest)) != rest:
            continue
        p = os.path.join(dir, n)
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            continue
        try:
            os.kill(int(rest), 0)
            continue  # alive
        except PermissionError:
            continue  # alive, another user's
        except ProcessLookupError:
            pass
        try:
            os.unlink(p)
            removed.append(n)
        except FileNotFoundError:
            pass
    return removed
