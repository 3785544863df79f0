"""Per-(device, stream) workspaces of the GPU kernels, reused by every launch on that stream
(stream order makes the reuse safe). A CUDA graph being captured gets its own (kept by the graph:
graphs._CapturePool.scratch), so eager calls never share a graph's buffers and a captured graph
never points at memory an eager call may free or grow.

- ``stream_buffer``: a fixed-size pool buffer (cuBLASLt's 32 MiB workspace).
- ``decode_workspace`` with ``key_splits``: the split-key decode attention kernels (the Triton
  kernel, pygpukit/backends/triton_kernels/attention_decode.py, and its native twin,
  pygpukit/backends/native/attention_decode.py): fp32 partial outputs and log2-sum-exps of the
  key splits, and int32 counters, one per (sequence, kv head, row tile), with which the last split
  to finish finds out that it combines. The deterministic mode's fixed-tile GEMM
  (triton_kernels/matmul.py) keeps its K-chunk partials and per-tile counters here too. Every
  kernel leaves every counter at 0 when a launch ends,
  so calls in order on one stream share one workspace whichever backend serves them. It grows
  but is never freed, so a captured CUDA graph never points at released memory.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from pygpukit import _core, runtime
from pygpukit.array import GPUArray
from pygpukit.creation import empty, zeros

__all__ = [
    "DecodeScratch",
    "KeySplits",
    "decode_workspace",
    "key_splits",
    "retained_bytes",
    "split_chunk",
    "stream_buffer",
]


def _stream_key(dev: Any) -> tuple[int, int]:
    return dev.index, runtime.current_stream(dev).handle


# ----- fixed-size buffers -------------------------------------------------------------------------

_MAX_BUFFERS = 8
_buffers: dict[tuple[str, int, int], Any] = {}
_buffers_lock = threading.Lock()  # lookup, insert and eviction from several threads


def stream_buffer(dev: Any, name: str, nbytes: int) -> Any:
    """A pool buffer of ``nbytes`` named ``name`` for the current stream of ``dev`` (or the graph
    being captured on it). Beyond 8 (name, device, stream) buffers the oldest is released (freed
    in its own stream's order)."""
    cap = runtime.capture_pool(dev)
    if cap is not None:
        buf = cap.scratch.get(name)
        if buf is None:
            buf = cap.scratch[name] = cap.allocate(nbytes)
        return buf
    key = (name, *_stream_key(dev))
    buf = _buffers.get(key)
    if buf is None:
        # The default context's pool: a process-wide scratch area is not charged to the quota of
        # whichever user context happened to run first. An evicted buffer stays alive while a
        # caller still holds it and is freed in its own stream's order.
        with _buffers_lock:
            buf = _buffers.get(key)
            if buf is None:
                pool = runtime._default_context(dev).pool
                buf = pool.allocate(nbytes, runtime.current_stream(dev))
                if len(_buffers) >= _MAX_BUFFERS:
                    _buffers.pop(next(iter(_buffers)))
                _buffers[key] = buf
    return buf


# ----- split-key decode attention -----------------------------------------------------------------


# True: a launch's keys per split follow each sequence's length on the device (split_chunk):
# up to a one-split reach a sequence takes one split; past it its keys spread over the launch's
# splits in whole blocks, never fewer than the floor and never more than the capacity's chunk.
# False: every split takes the capacity's chunk, so a cache much longer than its sequences
# leaves most splits idle and a few long ones do the work. H200, batch 1, Hq32 / Hkv8, bf16, a
# graph of 16 layers' calls (benchmarks/tuning/decode_capacity.py, 2026-11-29): at 2000 keys D
# 64 took 6.77 us a call in a 2048-slot cache, 10.28 in an 8192-slot one and 23.73 in a
# 32768-slot one by the capacity (D 128: 8.39 / 12.35 / 31.80 us); by the length 6.77-6.81 (D
# 128: 8.31-8.42) in all three.
LENGTH_CHUNKS = True


class KeySplits(NamedTuple):
    """A split-key launch's split axis: splits (the grid), chunk (keys a split takes at full
    capacity), floor (the fewest keys a split takes) and solo (a sequence of up to this many
    keys takes one split, however short the chunk; 0: none). floor == chunk and solo 0: every
    length splits by the capacity."""

    splits: int
    chunk: int
    floor: int
    solo: int = 0


def key_splits(
    capacity: int,
    block: int,
    programs: int,
    slots: int,
    *,
    min_keys: int,
    max_splits: int,
    forced: int | None = None,
    at_least: int = 1,
    one_split_keys: int = 0,
) -> KeySplits:
    """The splits for ``programs`` (sequence, kv head, row tile) programs over ``capacity``
    keys in blocks of ``block``: fill ``slots`` program slots (programs per SM x SMs) in one
    wave (floor: a partial second wave costs a whole program's time), with chunks of at least
    min_keys keys and at most max_splits splits; forced overrides that count (and fixes the
    chunk at every length), at_least bounds it from below. The floor is min_keys and the
    one-split reach one_split_keys, each rounded up to whole blocks (the floor never above the
    chunk). The chunk is whole blocks, and the count is recomputed from it, so no split is
    empty at full capacity."""
    blocks = max(1, -(-capacity // block))
    if forced is None:
        ns = min(slots // max(1, programs), max_splits, capacity // max(1, min_keys))
    else:
        ns = int(forced)
    ns = max(1, min(max(ns, at_least), blocks))
    chunk = -(-blocks // ns) * block
    floor, solo = chunk, 0
    if LENGTH_CHUNKS and forced is None:
        floor = min(chunk, max(1, -(-min_keys // block)) * block)
        solo = max(0, -(-one_split_keys // block)) * block
    return KeySplits(-(-(blocks * block) // chunk), chunk, floor, solo)


def split_chunk(length: int, sp: KeySplits, block: int) -> int:
    """Keys a split takes for a sequence of ``length`` keys: the kernels' on-device rule (the
    Triton kernel's _seq_len, the native split_decode_kernel, which has no one-split reach),
    mirrored for the tests. The length's blocks spread over the splits, within [floor, chunk];
    up to sp.solo keys one split, past the capacity's chunk too (a single split needs no
    partials, and the Triton kernel no per-split table). ``length`` is a valid one, in [0,
    capacity]: the kernels count a length outside it as 0 keys (and poison the row)."""
    blocks = -(-max(length, 0) // block)
    keys = min(sp.chunk, max(sp.floor, -(-blocks // sp.splits) * block))
    return max(keys, blocks * block) if length <= sp.solo else keys


class DecodeScratch:
    """fp32 partial outputs and lse, int32 counters (zero between launches)."""

    __slots__ = ("cnt", "lse", "parts")

    def __init__(self) -> None:
        self.parts: GPUArray | None = None
        self.lse: GPUArray | None = None
        self.cnt: GPUArray | None = None


_scratch: dict[tuple[int, int], DecodeScratch] = {}
# Outgrown buffers stay alive: a captured CUDA graph may still point at them.
_retired: list[GPUArray] = []


def _grown(buf: GPUArray | None, n: int, dtype: str, dev: Any, zero: bool) -> GPUArray:
    if buf is not None and buf.shape[0] >= n:
        return buf
    if buf is not None:
        _retired.append(buf)
        n = max(n, 2 * buf.shape[0])
    return zeros((n,), dtype, dev) if zero else empty((n,), dtype, dev)


def _capture_workspace(cap: Any, dev: Any, n_rows: int, width: int, n_cnt: int) -> DecodeScratch:
    """A workspace of the CUDA graph being captured (graphs._CapturePool): its own, so eager
    calls on any stream never share the graph's partials and counters; the counters are zeroed
    now, on the capture's side stream (a memset recorded in the graph would run only at replay),
    and reset themselves at the end of every launch, so the captured calls (one stream, in
    order) share it as eager calls share their stream's."""
    ws = cap.scratch.get("sdpa_decode")
    if (
        ws is not None
        and ws.parts.shape[0] >= n_rows * width
        and ws.lse.shape[0] >= n_rows
        and ws.cnt.shape[0] >= n_cnt
    ):
        return ws  # type: ignore[no-any-return]
    # A larger one replaces it (the smaller one stays kept by the graph), each buffer at least as
    # large as before: the decode attention and the fixed-tile GEMM ask for different shapes.
    old = ws
    ws = cap.scratch["sdpa_decode"] = DecodeScratch()
    ws.parts = empty((max(n_rows * width, old.parts.shape[0] if old else 0),), "float32", dev)
    ws.lse = empty((max(n_rows, old.lse.shape[0] if old else 0),), "float32", dev)
    ws.cnt = empty((max(n_cnt, 1, old.cnt.shape[0] if old else 0),), "int32", dev)
    _core.memset_d32(ws.cnt.data_ptr(), 0, ws.cnt.shape[0], cap.side)
    cap.side.synchronize()
    return ws  # type: ignore[no-any-return]


def decode_workspace(dev: Any, n_rows: int, width: int, n_cnt: int) -> DecodeScratch:
    """At least n_rows lse values, n_rows * width partial values and n_cnt zeroed counters for
    the current stream of dev (or the graph being captured on it)."""
    cap = runtime.capture_pool(dev)
    if cap is not None:
        return _capture_workspace(cap, dev, n_rows, width, n_cnt)
    key = _stream_key(dev)
    ws = _scratch.get(key)
    if ws is None:
        ws = _scratch[key] = DecodeScratch()
    ws.parts = _grown(ws.parts, n_rows * width, "float32", dev, False)
    ws.lse = _grown(ws.lse, n_rows, "float32", dev, False)
    if n_cnt:
        ws.cnt = _grown(ws.cnt, n_cnt, "int32", dev, True)  # counters start at 0, self-resetting
    return ws


def retained_bytes(dev: Any) -> int:
    """Bytes of ``dev``'s default pool that these workspaces keep by design (the fixed-size
    stream buffers, the decode workspaces and their outgrown predecessors): what a leak check
    expects that pool to still hold once every array is gone. Workspaces first made inside a
    scheduler context live in that context's pool and are not counted."""
    pool = runtime._default_context(dev).pool.name
    index = dev.index
    with _buffers_lock:
        kept = [b for (_, i, _), b in _buffers.items() if i == index]
    spaces = [v for (i, _), v in list(_scratch.items()) if i == index]
    kept += [a.owner for ws in spaces for a in (ws.parts, ws.lse, ws.cnt) if a is not None]
    kept += [a.owner for a in list(_retired) if a.device.index == index]
    return sum(int(b.nbytes) for b in kept if getattr(b, "pool_name", None) == pool)
