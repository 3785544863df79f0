"""The STFT synthesis steps: ``phase_project`` (Griffin-Lim's projection) and
``overlap_add`` (the inverse STFT's windowed overlap-add).

``phase_project(z, magnitude, prev=None, *, prev_scale=0.0, eps=...)``:

    est = z - prev_scale * prev          (est = z without prev)
    y   = est * (magnitude / (|est| + eps))

The value of magnitude ``magnitude`` with est's phase: Griffin-Lim's projection onto the target
magnitudes, with the "fast Griffin-Lim" momentum step (Perraudin et al. 2013) folded in through
``prev`` (the previous iteration's rebuilt spectrum) and ``prev_scale`` = momentum / (1 +
momentum). librosa.griffinlim computes est / (|est| + eps) * magnitude, within an ulp of this.
|est| is sqrt(re^2 + im^2); eps > 0 keeps zero bins finite (est = 0 gives 0; eps = 0 gives NaN
there, as 0 / 0). The GPU kernel computes in float64 as the reference does.

- z, prev: complex64 or complex128, one shape; magnitude: the matching real dtype (float32 /
  float64), the same shape. The result has z's dtype.
- prev_scale, eps: finite floats, eps >= 0.
- ``out``: an optional buffer of z's shape and dtype.

``overlap_add(frames, hop, *, window=None, envelope=None, start=0, length=None)``:

    y[b, s] = envelope[s] * sum_f frames[b, f, s + start - f hop] * window[s + start - f hop]

over the frames f that cover sample s + start (0 <= s + start - f hop < n), summed in order of
f: the frames [batch, F, n] placed hop apart, each multiplied by the window [n] (the istft's
synthesis window), the sum over the span [start, start + length) (default the whole sum,
n + hop (F - 1) samples, less start), each sample multiplied by envelope [length] (the istft's
1 / window sum-square). Samples no frame covers are 0. float32 or float64 frames; window and
envelope of the same dtype; the result [batch, length] of that dtype.

Routing (pygpukit/routing/table.py): one Triton kernel each (phase_project a single pass over
the three arrays, where the element-wise ops took ten; overlap_add reads each output's frames
in one program, where the element-wise ops took a zero fill, ceil(n / hop) strided adds and two
multiplies), NumPy on the CPU (the references: phase_project in float64, overlap_add in the
frames' dtype, each sample's frames added in the kernel's order; the kernel may fuse the
window's product into the sum, a last-bit difference). No native twins.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from pygpukit.array import GPUArray
from pygpukit.dtypes import complex128, float32, float64
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["overlap_add", "phase_project"]


def _finite(op: str, name: str, v: Any, lo: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float, got {type(v).__name__}")
    f = float(v)
    if not math.isfinite(f) or (lo is not None and f < lo):
        bound = "" if lo is None else f" and >= {lo}"
        raise ValueError(f"{op}: {name} must be finite{bound}, got {v!r}")
    return f


def _like(
    op: str,
    name: str,
    a: GPUArray,
    dtype: Any,
    dtype_is: str,
    shape: tuple[int, ...],
    shape_is: str,
) -> None:
    """a is a GPUArray of ``dtype`` (else TypeError, saying it is ``dtype_is``) and ``shape``
    (else ValueError: "name must <shape_is>")."""
    chk.array(op, name, a)
    if a.dtype is not dtype:
        raise TypeError(f"{op}: {name} must be {dtype.name} ({dtype_is}), got {chk.desc(a)}")
    if a.shape != shape:
        raise ValueError(f"{op}: {name} must {shape_is}, got {chk.desc(a)}")


def phase_project(
    z: GPUArray,
    magnitude: GPUArray,
    prev: GPUArray | None = None,
    *,
    prev_scale: float = 0.0,
    eps: float = 1.1754943508222875e-38,
    out: GPUArray | None = None,
) -> GPUArray:
    """est * (magnitude / (|est| + eps)) with est = z - prev_scale * prev (see the module
    docstring); eps defaults to float32's smallest normal, librosa's for float32."""
    op = "phase_project"
    chk.array(op, "z", z)
    if not z.dtype.is_complex:
        raise TypeError(f"{op}: z must be complex64 or complex128, got {chk.desc(z)}")
    real = float64 if z.dtype is complex128 else float32
    _like(op, "magnitude", magnitude, real, "z's real dtype", z.shape,
          f"have z's shape {z.shape}")  # fmt: skip
    inputs: tuple[Any, ...] = (z, magnitude)
    if prev is not None:
        _like(op, "prev", prev, z.dtype, "z's dtype", z.shape, f"have z's shape {z.shape}")
        inputs = (z, magnitude, prev)
    c = _finite(op, "prev_scale", prev_scale)
    e = _finite(op, "eps", eps, 0.0)
    chk.out_arg(op, out, z.shape, z.dtype)
    return run(op, inputs, {"prev_scale": c, "eps": e}, out=out)  # type: ignore[no-any-return]


def overlap_add(
    frames: GPUArray,
    hop: int,
    *,
    window: GPUArray | None = None,
    envelope: GPUArray | None = None,
    start: int = 0,
    length: int | None = None,
    out: GPUArray | None = None,
) -> GPUArray:
    """The windowed overlap-add of frames [batch, F, n] placed ``hop`` apart, over samples
    [start, start + length), times ``envelope`` (see the module docstring) -> [batch, length]."""
    op = "overlap_add"
    chk.array(op, "frames", frames)
    if frames.dtype not in (float32, float64):
        raise TypeError(f"{op}: frames must be float32 or float64, got {chk.desc(frames)}")
    if frames.ndim != 3:
        raise ValueError(f"{op}: frames must be [batch, frames, n] (3 dims), got "
                         f"{chk.desc(frames)}")  # fmt: skip
    b, f, n = frames.shape
    if n < 1:
        raise ValueError(f"{op}: frames must have at least 1 value each, got {chk.desc(frames)}")
    h = chk.int_arg(op, "hop", hop, 1)
    st = chk.int_arg(op, "start", start, 0)
    total = n + h * (f - 1) if f else 0
    ln = max(total - st, 0) if length is None else chk.int_arg(op, "length", length, 0)
    inputs: list[GPUArray] = [frames]
    if window is not None:
        _like(op, "window", window, frames.dtype, "the frames' dtype", (n,),
              f"be [{n}] (a frame's length)")  # fmt: skip
        inputs.append(window)
    if envelope is not None:
        _like(op, "envelope", envelope, frames.dtype, "the frames' dtype", (ln,),
              f"be [{ln}] (the output length)")  # fmt: skip
        inputs.append(envelope)
    chk.out_arg(op, out, (b, ln), frames.dtype)
    params = {"hop": h, "start": st, "length": ln, "windowed": window is not None,
              "enveloped": envelope is not None}  # fmt: skip
    return run(op, tuple(inputs), params, out=out)  # type: ignore[no-any-return]
