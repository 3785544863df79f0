"""The one path from a validated op to a backend.

Every op validates its arguments and then calls ``run(op_name, inputs, params, out=out)``, which
asks the routing table for the backend (cached per op, override, device, dtypes and shape class),
counts the call under the backend that runs it, and calls it (inside the current scheduler
context's launch gate, if any: a Guaranteed context marks the device active, a paced one waits
for its budget). Nothing falls back silently: when no backend can serve the call, the error
names every candidate and why it failed.
"""

from __future__ import annotations

from functools import partial
from time import perf_counter
from typing import Any

from pygpukit._memory import check_target, copy_into, may_share_memory, same_view
from pygpukit.array import GPUArray
from pygpukit.routing.select import _stats, _times, _timing, select
from pygpukit.routing.table import TABLE
from pygpukit.runtime import Device, alloc_target, gated, launch_gate

__all__ = ["run", "device_of"]

# Families whose kernels read each element of an input before writing the same element of out,
# so out may be exactly an input (x += y), and single ops whose kernels both homes document as
# safe in place (rope_inplace, bias_add_inplace); any other overlap goes through a fresh result.
_IN_PLACE_FAMILIES = frozenset({"elementwise", "unary", "activation", "copy"})
_IN_PLACE_OPS = frozenset({"rope", "bias_add"})


def device_of(op: str, inputs: tuple[Any, ...]) -> Device:
    """The one device all GPUArray inputs live on (ValueError naming the op otherwise)."""
    dev: Device | None = None
    for a in inputs:
        if isinstance(a, GPUArray):
            if dev is None:
                dev = a._device
            elif a._device is not dev:
                raise ValueError(f"{op}: inputs are on different devices ({dev} and {a.device})")
    if dev is None:
        raise TypeError(f"{op}: needs at least one GPUArray input")
    return dev


def _clashes(op: str, out: GPUArray, inputs: tuple[Any, ...]) -> bool:
    """out shares memory with an input in a way the kernel cannot write in place: any overlap,
    except out being exactly that input for the element-by-element families."""
    route = TABLE.get(op)
    exact_ok = op in _IN_PLACE_OPS or (route is not None and route.family in _IN_PLACE_FAMILIES)
    for a in inputs:
        if isinstance(a, GPUArray) and may_share_memory(out, a):
            if not (exact_ok and same_view(out, a)):
                return True
    return False


def run(
    op: str,
    inputs: tuple[Any, ...],
    params: dict[str, Any] | None = None,
    out: GPUArray | None = None,
) -> Any:
    """Run ``op`` on the routed backend; returns a GPUArray or a tuple of them."""
    dev = device_of(op, inputs)
    if out is not None:
        if out._device is not dev:
            raise ValueError(f"{op}: out is on {out.device} but the inputs are on {dev}")
        check_target(out, f"{op}: out")
    # NumPy's rule: the result is as if the inputs were read before out is written. When out
    # overlaps an input otherwise than in place, the kernel writes a fresh array that is then
    # copied into out (one extra pass, only for such calls).
    dest = out
    if out is not None and _clashes(op, out, inputs):
        dest = None
    p = params or {}
    backend, impl = select(op, dev, inputs, p)
    _stats[op][backend] += 1
    pacer = launch_gate(dev)
    if pacer is not None:  # a scheduler context: its launch gate (pygpukit.scheduler)
        impl = partial(gated, pacer, alloc_target(dev)[1], impl)
    if not _timing[0]:
        res = impl(*inputs, out=dest, **p)
    else:
        t0 = perf_counter()
        res = impl(*inputs, out=dest, **p)
        _times[op][backend] += perf_counter() - t0
    if dest is not out and isinstance(res, GPUArray):
        copy_into(out, res)  # type: ignore[arg-type]
        return out
    return res  # an Unfinished product: ops/_epilogue.py delivers it into out
