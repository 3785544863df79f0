"""assert_close: compare a result with a float64 reference under docs/design.md's per-dtype bounds.

The check (docs/design.md, Tests): relative norm ||out - ref|| / ||ref|| <= rtol, and every
element within rtol * (|ref_i| + scale) where scale = max |ref| (so the max abs error is bounded
relative to the data's magnitude, and values near zero after cancellation do not fail on a
meaningless elementwise relative error). NaN where the reference is finite, or a NaN/inf that
the reference does not have at the same place, always fails. Integer and bool results must
match exactly. The failure message names the first mismatched indices with both values and
counts NaN/inf in each array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# docs/design.md bounds; fp8 has none by design: each fp8 test passes its documented rtol.
BOUNDS = {
    "float64": 1e-12,
    "float32": 1e-5,
    "tf32": 5e-4,
    "float16": 2e-3,
    "bfloat16": 1e-2,
}

_MAX_REPORTED = 8


def _name(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    if hasattr(dtype, "name") and not isinstance(dtype, np.dtype):
        return str(dtype.name)  # pygpukit DataType
    return np.dtype(dtype).name


def _host(x: Any) -> np.ndarray:
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    return np.asarray(x)


def _fmt_indices(idx: np.ndarray, out: np.ndarray, ref: np.ndarray) -> str:
    lines = []
    for i in idx[:_MAX_REPORTED]:
        t = tuple(int(v) for v in i)
        lines.append(f"    at {t}: out={out[t]!r} ref={ref[t]!r}")
    more = len(idx) - _MAX_REPORTED
    if more > 0:
        lines.append(f"    ... and {more} more")
    return "\n".join(lines)


def assert_close(
    out: Any,
    ref: Any,
    dtype: Any = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    name: str = "",
) -> None:
    """Assert `out` matches the float64 reference `ref`.

    dtype: the dtype whose bound applies (str, numpy dtype or pygpukit DataType); default
    out's dtype. rtol overrides the bound; atol overrides the elementwise slack scale
    (default rtol * max |ref|).
    """
    o = _host(out)
    r = _host(ref)
    label = f"{name}: " if name else ""
    if o.shape != r.shape:
        raise AssertionError(f"{label}shape {o.shape} != reference shape {r.shape}")
    dname = _name(o.dtype if dtype is None else dtype)

    if o.dtype.kind in "biu" and rtol is None:
        bad = np.argwhere(o != r)
        if bad.size:
            raise AssertionError(
                f"{label}{len(bad)} of {o.size} {dname} elements differ (exact match expected)\n"
                + _fmt_indices(bad, o, r)
            )
        return

    if rtol is None:
        if dname not in BOUNDS:
            raise ValueError(f"assert_close: no default bound for {dname}; pass rtol=")
        rtol = BOUNDS[dname]
    of = o.astype(np.float64)
    rf = r.astype(np.float64)

    # Non-finite values must appear exactly where the reference has them.
    o_nan, r_nan = np.isnan(of), np.isnan(rf)
    o_inf, r_inf = np.isinf(of), np.isinf(rf)
    nonfinite_bad = (o_nan != r_nan) | (o_inf != r_inf) | (o_inf & r_inf & (of != rf))
    finite = np.isfinite(rf) & np.isfinite(of)
    diff = np.where(finite, np.abs(of - rf), 0.0)
    ref_abs = np.where(finite, np.abs(rf), 0.0)
    scale = float(ref_abs.max()) if ref_abs.size else 0.0
    slack = rtol * scale if atol is None else atol
    elem_bad = diff > rtol * ref_abs + slack
    ref_norm = float(np.linalg.norm(ref_abs))
    err_norm = float(np.linalg.norm(diff))
    rel_norm = err_norm / ref_norm if ref_norm > 0 else err_norm
    max_abs = float(diff.max()) if diff.size else 0.0

    if nonfinite_bad.any() or elem_bad.any() or rel_norm > rtol:
        bad_idx = np.argwhere(nonfinite_bad | elem_bad)
        arg = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
        msg = [
            f"{label}{dname} result does not match the reference (rtol={rtol:g})",
            f"  relative norm {rel_norm:.3e}, max abs error {max_abs:.3e} at {arg}"
            f" (max |ref| {scale:.3e}, elementwise slack {slack:.3e})",
            f"  out: {int(o_nan.sum())} NaN, {int(o_inf.sum())} inf; "
            f"ref: {int(r_nan.sum())} NaN, {int(r_inf.sum())} inf",
        ]
        if bad_idx.size:
            msg.append(f"  {len(bad_idx)} mismatched elements, first ones:")
            msg.append(_fmt_indices(bad_idx, o, r))
        raise AssertionError("\n".join(msg))
