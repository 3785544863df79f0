"""PyGPUkit: a lightweight GPU runtime for Python.

``import pygpukit as gp``: NumPy-like GPUArray, ops routed to the best backend (Triton, native
CUDA, or NumPy on a machine without a GPU), and a Rust core that owns memory and streams.
"""

from __future__ import annotations

from pygpukit import dtypes, routing, runtime
from pygpukit._version import __version__
from pygpukit.array import GPUArray
from pygpukit.creation import (
    arange,
    asarray,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from pygpukit.dtypes import (
    DataType,
    as_dtype,
    bfloat16,
    bool_,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    int4,
    int8,
    int16,
    int32,
    int64,
    result_type,
    uint8,
)
from pygpukit.errors import (
    BackendUnavailableError,
    CaptureError,
    CudaError,
    NoDeviceError,
    OutOfMemoryError,
    QuotaExceededError,
    RouteError,
)
from pygpukit.graphs import CUDAGraph
from pygpukit.interop import from_dlpack
from pygpukit.jit import NvrtcError, get_nvrtc_path, is_nvrtc_available, jit
from pygpukit.ops import *  # noqa: F403  (the op functions; ops.__all__ lists them)
from pygpukit.ops import __all__ as _ops_all
from pygpukit.precision import get_matmul_precision, set_matmul_precision
from pygpukit.qweight import QuantizedWeight, quantize_weight
from pygpukit.routing import route, set_route
from pygpukit.runtime import (
    Context,
    Device,
    Event,
    Pool,
    Stream,
    context,
    current_context,
    current_stream,
    default_device,
    device,
    device_count,
    empty_cache,
    get_device_properties,
    is_cuda_available,
    memory_stats,
    set_default_device,
    set_stream,
    stream,
    synchronize,
)

__all__ = [
    "__version__",
    "GPUArray",
    "DataType",
    "dtypes",
    "runtime",
    "routing",
    "route",
    "set_route",
    "as_dtype",
    "result_type",
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool_",
    "int4",
    "empty",
    "zeros",
    "ones",
    "full",
    "arange",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "from_numpy",
    "asarray",
    "from_dlpack",
    "Device",
    "Stream",
    "Event",
    "CUDAGraph",
    "Pool",
    "Context",
    "device",
    "device_count",
    "is_cuda_available",
    "default_device",
    "set_default_device",
    "current_stream",
    "set_stream",
    "stream",
    "context",
    "current_context",
    "synchronize",
    "memory_stats",
    "empty_cache",
    "get_device_properties",
    "CaptureError",
    "CudaError",
    "NoDeviceError",
    "OutOfMemoryError",
    "QuotaExceededError",
    "BackendUnavailableError",
    "RouteError",
    "jit",
    "NvrtcError",
    "is_nvrtc_available",
    "get_nvrtc_path",
    "set_matmul_precision",
    "get_matmul_precision",
    "QuantizedWeight",
    "quantize_weight",
    *_ops_all,
]
