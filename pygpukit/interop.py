"""Zero-copy exchange with torch, CuPy, JAX and NumPy: DLPack both ways, CUDA Array Interface v3.

Stream semantics follow the two protocols: the consumer names the stream it will use, and the
producer makes that stream wait (an event recorded on the producer's stream) instead of
synchronising the device. Stream handles 1 and 2 are CUDA's legacy and per-thread default streams.
"""

from __future__ import annotations

from typing import Any

from pygpukit import _core, runtime
from pygpukit.array import GPUArray
from pygpukit.dtypes import from_dlpack_code

__all__ = ["from_dlpack", "to_dlpack", "cuda_array_interface", "from_cuda_array_interface"]

_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST = 1, 2, 3


def _make_stream_wait(consumer_handle: int, dev: runtime.Device, producer: Any) -> None:
    """Make the consumer's stream wait for work queued so far on ``producer``."""
    if consumer_handle == producer.handle:
        return
    ev = _core.Event(device=dev.index, enable_timing=False)
    ev.record(producer)
    _core.Stream.external(consumer_handle, dev.index).wait_event(ev)


def to_dlpack(
    arr: GPUArray,
    *,
    stream: Any = None,
    max_version: Any = None,
    dl_device: Any = None,
    copy: bool | None = None,
) -> Any:
    """Implements ``GPUArray.__dlpack__`` (array API standard semantics)."""
    dev = arr.device
    if dl_device is not None and tuple(dl_device) != arr.__dlpack_device__():
        raise BufferError(f"__dlpack__: cannot export a {dev} array to device {dl_device}")
    if copy:
        arr = arr.copy()
    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    if arr.readonly and not versioned:
        # NumPy's rule: a legacy capsule has no read-only flag, so the consumer would get
        # writable memory the producer marked immutable.
        raise BufferError(
            f"__dlpack__: the array (shape {arr.shape}, dtype {arr.dtype.name}) is read-only and "
            "a pre-1.0 DLPack capsule cannot say so; the consumer must ask for "
            "max_version=(1, 0), or export a copy (copy=True)"
        )
    if dev.type == "cuda" and stream != -1:
        if stream == 0:
            raise ValueError("__dlpack__: stream 0 is ambiguous for CUDA; pass 1 or 2 or a handle")
        consumer = 1 if stream is None else int(stream)
        _make_stream_wait(consumer, dev, runtime.current_stream(dev))
    code, bits = arr.dtype.dlpack
    dev_type, dev_id = arr.__dlpack_device__()
    return _core.dlpack_export(
        arr,
        arr.data_ptr(),
        arr.shape,
        arr.element_strides,
        code,
        bits,
        1,
        dev_type,
        dev_id,
        versioned,
        arr.readonly,
    )


def from_dlpack(obj: Any) -> GPUArray:
    """A zero-copy GPUArray over a DLPack producer (torch/CuPy/JAX/NumPy arrays or a capsule).

    The producer makes its pending work visible to our current stream before handing over. A
    read-only producer gives a read-only array (``readonly``): writes to it raise
    gp.ReadOnlyError. Exporting it again (``__dlpack__``) carries the flag onward (DLPack 1.0;
    a legacy capsule, which cannot carry it, is refused with BufferError).
    """
    if hasattr(obj, "__dlpack__"):
        dev_type, dev_id = obj.__dlpack_device__()
        kwargs: dict[str, Any] = {}
        if dev_type == _KDL_CUDA:
            kwargs["stream"] = runtime.current_stream(runtime.Device("cuda", dev_id)).handle
        try:
            capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
        except TypeError:  # producers that predate DLPack 1.0 keyword arguments
            capsule = obj.__dlpack__(**kwargs)
    else:
        capsule = obj
    t = _core.dlpack_import(capsule)
    code, bits, lanes = t.dtype
    dt = from_dlpack_code(code, bits, lanes)
    dev_type, dev_id = t.device
    if dev_type == _KDL_CUDA:
        dev = runtime.device(runtime.Device("cuda", dev_id))
    elif dev_type in (_KDL_CPU, _KDL_CUDA_HOST):
        dev = runtime.CPU
    else:
        raise BufferError(f"from_dlpack: unsupported DLPack device type {dev_type}")
    shape = tuple(t.shape)
    # The producer's read-only flag (DLPack 1.0 DLPACK_FLAG_BITMASK_READ_ONLY: a bytes-backed
    # NumPy array, a read-only memory map, a JAX buffer) is kept and enforced on every write.
    return GPUArray._make(t, t.ptr, shape, tuple(t.strides), 0, dt, dev, bool(t.read_only))


def cuda_array_interface(arr: GPUArray) -> dict[str, Any]:
    if arr.device.type != "cuda":
        raise AttributeError("__cuda_array_interface__ exists only for CUDA arrays")
    if arr.dtype.typestr is None:
        raise AttributeError(
            f"__cuda_array_interface__ has no typestr for {arr.dtype.name}; use DLPack "
            "(torch.from_dlpack / cupy.from_dlpack)"
        )
    return {
        "shape": arr.shape,
        "typestr": arr.dtype.typestr,
        "data": (arr.data_ptr(), arr.readonly),
        "strides": None if arr.is_contiguous() else arr.strides,
        "version": 3,
        "stream": runtime.current_stream(arr.device).handle,
    }


def from_cuda_array_interface(obj: Any) -> GPUArray:
    """A zero-copy view of an object exporting ``__cuda_array_interface__`` (kept alive)."""
    import numpy as np

    from pygpukit.dtypes import as_dtype

    iface = obj.__cuda_array_interface__
    dt = as_dtype(np.dtype(iface["typestr"]))
    shape = tuple(int(n) for n in iface["shape"])
    ptr = int(iface["data"][0])
    dev = runtime.default_device()
    if dev.type != "cuda":
        raise BufferError("a __cuda_array_interface__ object needs a CUDA device")
    if iface.get("strides") is None:
        from pygpukit._layout import contiguous_strides

        estrides = contiguous_strides(shape)
    else:
        if any(s % dt.itemsize for s in iface["strides"]):
            raise BufferError("__cuda_array_interface__ strides are not a multiple of itemsize")
        estrides = tuple(int(s) // dt.itemsize for s in iface["strides"])
    stream = iface.get("stream")
    if stream:  # producer's pending work must complete before our stream reads the data
        ev = _core.Event(device=dev.index, enable_timing=False)
        ev.record(_core.Stream.external(int(stream), dev.index))
        runtime.current_stream(dev).wait_event(ev)
    readonly = bool(iface["data"][1]) if len(iface["data"]) > 1 else False
    return GPUArray._make(obj, ptr, shape, estrides, 0, dt, dev, readonly)
