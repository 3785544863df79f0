"""Moving bytes: host views of CPU arrays, host<->device copies, strided device copies, fills.

Device-to-device copies go to the routed ``copy`` op (a Triton strided-copy kernel) when a GPU
backend serves it. Without one, a copy *engine* over the driver's 2-D memcpy moves the bytes: dims
are merged where both sides are jointly contiguous, the innermost run becomes the row, the next dim
the pitch, and the rest loop on the host. Every layout is served exactly; layouts whose innermost
dim is strided on either side cost one driver call per row of elements and are slow.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit import _convert, _core, _layout
from pygpukit.dtypes import DataType
from pygpukit.errors import OverlapError, ReadOnlyError

if TYPE_CHECKING:
    from pygpukit.array import GPUArray

_POOL_BUFFER = _core.Buffer  # what runtime pools allocate (GPUArray._buf of gp.empty etc.)
# Same-width NumPy types whose typestr __array_interface__ understands; ml_dtypes views follow.
_CARRIER = {1: "|u1", 2: "<u2", 4: "<u4", 8: "<u8", 16: "|V16"}


class _HostHolder:
    """Exposes host memory through __array_interface__ and keeps its owner alive (as the base)."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, iface: dict[str, Any], owner: Any) -> None:
        self.__array_interface__ = iface
        self.owner = owner


def host_view(arr: GPUArray) -> np.ndarray:
    """Zero-copy NumPy view of a CPU-device array (not for packed int4)."""
    dt = arr._dtype
    if dt.is_packed:
        raise TypeError("packed int4 has no element-wise NumPy view; use to_numpy()")
    itemsize = dt.itemsize
    iface = {
        "version": 3,
        "shape": arr._shape,
        "typestr": _CARRIER[itemsize],
        "data": (arr.data_ptr(), arr._readonly),
        "strides": tuple(s * itemsize for s in arr._estrides),
    }
    view = np.asarray(_HostHolder(iface, arr._buf))
    return view if view.dtype == dt.np_dtype else view.view(dt.np_dtype)


def check_target(arr: GPUArray, what: str) -> None:
    """Refuse a write into ``arr`` when it is read-only or its elements share memory.

    Every write path calls this before touching memory: setitem, fill, copies and host uploads
    into an array here, ``out=`` and in-place ops in routing/dispatch.py run, the KV cache write.
    """
    if arr._readonly:
        raise ReadOnlyError(
            f"{what}: the target array (shape {arr._shape}, dtype {arr._dtype.name}, on "
            f"{arr._device}) is read-only: it was imported from a producer that marked its "
            "memory read-only; write to a copy (x.copy()) instead"
        )
    if not _layout.is_contiguous(arr._shape, arr._estrides):
        why = _layout.overlap_reason(arr._shape, arr._estrides)
        if why:
            raise OverlapError(
                f"{what}: the target view (shape {arr._shape}, element strides "
                f"{arr._estrides}) has elements that share memory ({why}); the writes would "
                "race and change the source array. Write to the source array or to a copy()"
            )


def _extent(arr: GPUArray) -> tuple[int, int]:
    """The byte range [lo, hi) that arr's elements lie in."""
    lo = hi = 0  # element offsets from the first element
    for n, s in zip(arr._shape, arr._estrides, strict=True):
        step = (n - 1) * s
        lo, hi = (lo + step, hi) if step < 0 else (lo, hi + step)
    if arr._dtype.is_packed:  # two elements a byte: element e of the owner is in byte e // 2
        base = arr.data_ptr() - arr._offset // 2
        return base + (arr._offset + lo) // 2, base + (arr._offset + hi) // 2 + 1
    item = arr._dtype.itemsize
    return arr.data_ptr() + lo * item, arr.data_ptr() + (hi + 1) * item


def may_share_memory(a: GPUArray, b: GPUArray) -> bool:
    """Whether a and b may address a common byte (their byte ranges intersect), as NumPy's
    may_share_memory: interleaved views such as x[::2] and x[1::2] count as sharing."""
    ba, bb = a._buf, b._buf
    if ba is not bb and type(ba) is _POOL_BUFFER and type(bb) is _POOL_BUFFER:
        # Two distinct live allocations of the pools never overlap; only views of one buffer,
        # or memory imported from another library (DLPack, __cuda_array_interface__, whose
        # owners may alias), need the byte ranges. Every out= call checks its inputs this way,
        # so the common case costs two attribute reads.
        return False
    if a.size == 0 or b.size == 0 or a._device != b._device:
        return False
    alo, ahi = _extent(a)
    blo, bhi = _extent(b)
    return alo < bhi and blo < ahi


def _rows_and_run(arr: GPUArray) -> tuple[tuple[tuple[int, int], ...], int] | None:
    """arr's elements as runs of ``run`` contiguous elements at the offsets of a grid of
    (extent, stride) dims, strides descending (the innermost dims merged while each stride is
    the product of the extents inside it). None unless the grid is nested (each stride at least
    the extent times the stride of the next dim, the last at least the run), which puts any two
    distinct rows at least the smallest stride apart."""
    dims = sorted(
        ((n, st) for n, st in zip(arr._shape, arr._estrides, strict=True) if n > 1),
        key=lambda t: -t[1],
    )
    run = 1
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    inner = [*((n * st) for n, st in dims[1:]), run][-len(dims) :] if dims else []
    if any(st < need for (_, st), need in zip(dims, inner, strict=True)):
        return None
    return tuple(dims), run


def shares_elements(a: GPUArray, b: GPUArray) -> bool:
    """Whether a and b may address a common element: may_share_memory, except that views of
    one buffer on the same grid of rows whose runs sit side by side in each row (the q, k and v
    column slices of one projection) are known apart. Conservative (True) where it cannot tell."""
    if not may_share_memory(a, b):
        return False
    if a._dtype.itemsize != b._dtype.itemsize or a._dtype.is_packed or b._dtype.is_packed:
        return True
    ga, gb = _rows_and_run(a), _rows_and_run(b)
    if ga is None or gb is None or ga[0] != gb[0]:
        return True
    grid, (la, lb) = ga[0], (ga[1], gb[1])
    delta, rem = divmod(b.data_ptr() - a.data_ptr(), a._dtype.itemsize)
    if rem:
        return True
    period = min((st for _, st in grid), default=None)  # rows are at least this far apart
    lo, hi = min(0, delta), max(la, delta + lb)
    side_by_side = delta >= la or delta + lb <= 0
    return not (side_by_side and (period is None or hi - lo <= period))


def same_view(a: GPUArray, b: GPUArray) -> bool:
    """a and b address the same elements in the same order (an in-place write is safe for a
    kernel that reads each element before writing it)."""
    return (
        a.data_ptr() == b.data_ptr()
        and a._device == b._device
        and a._shape == b._shape
        and a._dtype.itemsize == b._dtype.itemsize
        and a._dtype.is_packed == b._dtype.is_packed
        and all(
            s1 == s2 for n, s1, s2 in zip(a._shape, a._estrides, b._estrides, strict=True) if n > 1
        )
    )


def pack_int4(values: np.ndarray) -> np.ndarray:
    """Pack int4 values (last dim even) two a byte, low nibble first."""
    v = np.ascontiguousarray(values).astype(np.int8).reshape(-1)
    if v.size % 2:
        raise ValueError("packed int4 needs an even number of elements")
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError("int4 values must lie in [-8, 7]")
    u = (v & 0xF).astype(np.uint8)
    return (u[0::2] | (u[1::2] << 4)).astype(np.uint8)


def unpack_int4(packed: np.ndarray, shape: tuple[int, ...], np_dtype: Any) -> np.ndarray:
    b = packed.reshape(-1)
    out = np.empty(b.size * 2, dtype=np.int8)
    # Sign-extend a nibble: (n ^ 8) - 8 maps 0..15 to 0..7, -8..-1.
    out[0::2] = ((b & 0xF).astype(np.int8) ^ 8) - 8
    out[1::2] = ((b >> 4).astype(np.int8) ^ 8) - 8
    return out.reshape(shape).astype(np_dtype)


def packed_nbytes(dtype: DataType, n: int) -> int:
    return (n + 1) // 2 if dtype.is_packed else n * dtype.itemsize


def to_numpy(arr: GPUArray) -> np.ndarray:
    """A new host NumPy array with the array's values (waits for the copy)."""
    from pygpukit import runtime

    dt = arr._dtype
    if arr._device.type == "cpu":
        if dt.is_packed:
            nbytes = packed_nbytes(dt, arr.size)
            raw = np.asarray(
                _HostHolder(
                    {
                        "version": 3,
                        "shape": (nbytes,),
                        "typestr": "|u1",
                        "data": (arr.data_ptr(), False),
                    },
                    arr._buf,
                )
            )
            return unpack_int4(raw, arr._shape, dt.np_dtype)
        return np.array(host_view(arr), copy=True, order="C")
    src = arr if arr.is_contiguous() else arr.copy()
    stream = runtime.current_stream(arr._device)
    if dt.is_packed:
        raw = np.empty(packed_nbytes(dt, arr.size), dtype=np.uint8)
        _core.memcpy_dtoh(raw.ctypes.data, src.data_ptr(), raw.nbytes, stream)
        return unpack_int4(raw, arr._shape, dt.np_dtype)
    host = np.empty(arr._shape, dtype=dt.np_dtype)
    if host.nbytes:
        _core.memcpy_dtoh(host.ctypes.data, src.data_ptr(), host.nbytes, stream)
    return host


def upload(dst: GPUArray, host: np.ndarray) -> None:
    """Copy a host array of dst's shape into dst (any layout on both sides)."""
    from pygpukit import runtime

    dt = dst._dtype
    check_target(dst, "copy")
    if dt.is_packed:
        if not dst.is_contiguous():
            raise ValueError("packed int4 arrays can only be written whole and contiguous")
        raw = pack_int4(host)
    else:
        raw = np.ascontiguousarray(host, dtype=dt.np_dtype)
    if dst._device.type == "cpu":
        if dt.is_packed:
            np.copyto(_raw_host_bytes(dst, raw.nbytes), raw)
        else:
            np.copyto(host_view(dst), raw)
        return
    target = dst if dst.is_contiguous() else dst.empty_like_contiguous()
    if raw.nbytes:
        _core.memcpy_htod(
            target.data_ptr(), raw.ctypes.data, raw.nbytes, runtime.current_stream(dst._device)
        )
    if target is not dst:
        copy_into(dst, target)


def _raw_host_bytes(arr: GPUArray, nbytes: int) -> np.ndarray:
    iface = {"version": 3, "shape": (nbytes,), "typestr": "|u1", "data": (arr.data_ptr(), False)}
    return np.asarray(_HostHolder(iface, arr._buf))


def copy_into(dst: GPUArray, src: GPUArray) -> None:
    """dst[...] = src for equal shapes and dtypes, on any pair of devices."""
    from pygpukit import runtime

    check_target(dst, "copy")
    if dst._shape != src._shape or dst._dtype is not src._dtype:
        raise ValueError(
            f"copy: destination {dst._shape} {dst._dtype.name} does not match "
            f"source {src._shape} {src._dtype.name}"
        )
    if dst.size == 0:
        return
    if dst._dtype.is_complex:
        # A complex element is a (real, imaginary) pair: copy the float view [..., 2], which
        # every copy path (the Triton strided copy, the driver's engine, NumPy) serves.
        from pygpukit._complex import view_as_real

        dst, src = view_as_real(dst), view_as_real(src)
    if may_share_memory(dst, src):
        if same_view(dst, src):
            return  # x[...] = x
        # A kernel or memcpy over overlapping ranges would read elements it already wrote:
        # copy the source out first (NumPy's copyto does the same).
        src = src.copy()
    dd, sd = dst._device, src._device
    if dd.type == "cpu" and sd.type == "cpu":
        if dst._dtype.is_packed:
            upload(dst, to_numpy(src))
        else:
            np.copyto(host_view(dst), host_view(src))
        return
    if dd.type == "cpu":  # device -> host
        if dst.is_contiguous():
            _dtoh_into(dst, src)
        else:
            upload(dst, to_numpy(src))
        return
    if sd.type == "cpu":  # host -> device
        upload(dst, host_view(src) if not src._dtype.is_packed else to_numpy(src))
        return
    if dd != sd:
        raise ValueError(f"copy between {sd} and {dd} needs peer access, not supported yet")
    if not dst._dtype.is_packed and _routed_copy(dst, src):
        return
    stream = runtime.current_stream(dd)
    if dst._dtype.is_packed:
        if not (dst.is_contiguous() and src.is_contiguous()):
            raise ValueError("packed int4 arrays can only be copied whole and contiguous")
        _core.memcpy_dtod(dst.data_ptr(), src.data_ptr(), dst.nbytes, stream)
        return
    strided_device_copy(
        dst.data_ptr(),
        dst._estrides,
        src.data_ptr(),
        src._estrides,
        dst._shape,
        dst._dtype.itemsize,
        stream,
    )


def _routed_copy(dst: GPUArray, src: GPUArray) -> bool:
    """Run the routed ``copy`` op (a strided-copy kernel) when a GPU backend serves it.

    Returns False only when no backend is available at all; the driver's copy engine below then
    moves the bytes (always exact, slow for layouts with a strided innermost dim). A forced route
    that cannot serve still raises.
    """
    from pygpukit.errors import BackendUnavailableError
    from pygpukit.routing.dispatch import run

    try:
        run("copy", (src,), None, out=dst)
    except BackendUnavailableError:
        return False
    return True


def _dtoh_into(dst: GPUArray, src: GPUArray) -> None:
    from pygpukit import runtime

    s = src if src.is_contiguous() else src.copy()
    _core.memcpy_dtoh(dst.data_ptr(), s.data_ptr(), dst.nbytes, runtime.current_stream(s._device))


def strided_device_copy(
    dst: int,
    dst_strides: tuple[int, ...],
    src: int,
    src_strides: tuple[int, ...],
    shape: tuple[int, ...],
    itemsize: int,
    stream: Any,
) -> None:
    rows = _layout.merge_dims(shape, dst_strides, src_strides)
    if not rows:
        _core.memcpy_dtod(dst, src, itemsize, stream)
        return
    n, d, s = rows[-1]
    if d == 1 and s == 1:  # contiguous innermost run on both sides
        width = n * itemsize
        if len(rows) == 1:
            _core.memcpy_dtod(dst, src, width, stream)
            return
        h, dp, sp = rows[-2]
        if dp * itemsize >= width and sp * itemsize >= width:
            _loop(
                rows[:-2],
                dst,
                src,
                itemsize,
                lambda a, b: _core.memcpy_2d(a, dp * itemsize, b, sp * itemsize, width, h, stream),
            )
            return
        _loop(rows[:-1], dst, src, itemsize, lambda a, b: _core.memcpy_dtod(a, b, width, stream))
        return
    if d > 0 and s > 0:  # strided innermost: one element per row of a 2-D copy
        _loop(
            rows[:-1],
            dst,
            src,
            itemsize,
            lambda a, b: _core.memcpy_2d(a, d * itemsize, b, s * itemsize, itemsize, n, stream),
        )
        return
    _loop(rows, dst, src, itemsize, lambda a, b: _core.memcpy_dtod(a, b, itemsize, stream))


def _loop(rows: list[tuple[int, ...]], dst: int, src: int, itemsize: int, fn: Any) -> None:
    if not rows:
        fn(dst, src)
        return
    ranges = [range(r[0]) for r in rows]
    for idx in itertools.product(*ranges):
        do = so = 0
        for i, r in zip(idx, rows, strict=True):
            do += i * r[1]
            so += i * r[2]
        fn(dst + do * itemsize, src + so * itemsize)


def fill(arr: GPUArray, value: Any) -> None:
    """arr[...] = value for a Python scalar."""
    from pygpukit import runtime

    dt = arr._dtype
    check_target(arr, "fill")
    if arr.size == 0:
        return
    scalar = _convert.scalar(value, dt, "fill")
    if dt.is_packed:
        v = int(scalar)
        byte = (v & 0xF) | ((v & 0xF) << 4)
        if arr._device.type == "cpu":
            _raw_host_bytes(arr, arr.nbytes)[...] = byte
        else:
            _core.memset_d8(arr.data_ptr(), byte, arr.nbytes, runtime.current_stream(arr._device))
        return
    if arr._device.type == "cpu":
        host_view(arr)[...] = scalar
        return
    if not arr.is_contiguous():
        tmp = arr.empty_like_contiguous()
        fill(tmp, value)
        copy_into(arr, tmp)
        return
    raw = scalar.tobytes()
    stream = runtime.current_stream(arr._device)
    n, ptr = arr.size, arr.data_ptr()
    if len(raw) == 1:
        _core.memset_d8(ptr, raw[0], n, stream)
    elif len(raw) == 2:
        _core.memset_d16(ptr, int.from_bytes(raw, "little"), n, stream)
    elif len(raw) == 4:
        _core.memset_d32(ptr, int.from_bytes(raw, "little"), n, stream)
    elif raw[:4] == raw[4:]:
        _core.memset_d32(ptr, int.from_bytes(raw[:4], "little"), 2 * n, stream)
    else:  # 8/16-byte pattern: write one element, then double the filled prefix by dtod copies
        size = len(raw)
        host = np.frombuffer(raw, dtype=np.uint8).copy()
        _core.memcpy_htod(ptr, host.ctypes.data, size, stream)
        done = 1
        while done < n:
            k = min(done, n - done)
            _core.memcpy_dtod(ptr + done * size, ptr, k * size, stream)
            done += k
