"""Rotary position embedding (RoFormer, Su et al. 2021): rope, rope_inplace, rope_tables.

x is token-major [..., S, H, D]; cos/sin tables are [max_pos, rotary_dim // 2] (rope_tables makes
them); positions are integers broadcastable to x.shape[:-2], default arange(S). style "neox"
rotates the pairs (x[i], x[i + r/2]) (GPT-NeoX / HF rotate_half); "gptj" the pairs
(x[2i], x[2i+1]). Dims past rotary_dim pass through.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.backends import cpu
from pygpukit.creation import from_numpy
from pygpukit.dtypes import as_dtype
from pygpukit.ops import _checks as chk
from pygpukit.routing.dispatch import run

__all__ = ["rope", "rope_inplace", "rope_tables"]

_STYLES = ("neox", "gptj")


def _check(
    op: str,
    x: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    positions: GPUArray | None,
    style: str,
    rotary_dim: int | None,
) -> dict[str, Any]:
    chk.array(op, "x", x)
    chk.array(op, "cos", cos)
    chk.array(op, "sin", sin)
    chk.floating(op, "x", x)
    chk.floating(op, "cos", cos)
    chk.floating(op, "sin", sin)
    chk.choice(op, "style", style, _STYLES)
    if x.ndim < 3:
        raise ValueError(f"{op}: x must be [..., S, H, D] (token-major), got {chk.desc(x)}")
    d = x.shape[-1]
    if rotary_dim is None:
        r = d
    elif isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise TypeError(f"{op}: rotary_dim must be an int or None, got {rotary_dim!r}")
    else:
        r = rotary_dim
    if r <= 0 or r % 2 or r > d:
        raise ValueError(f"{op}: rotary_dim must be even and in (0, {d}] (x's last dim), got {r}")
    if cos.ndim != 2 or cos.shape[1] != r // 2:
        raise ValueError(
            f"{op}: cos has shape {cos.shape} but must be [max_pos, {r // 2}] (rotary_dim {r} // 2)"
        )
    chk.rope_table_pair(op, cos, sin)
    if positions is not None:
        chk.array(op, "positions", positions)
        if not positions.dtype.is_integer:
            raise TypeError(f"{op}: positions must be an integer array, got {chk.desc(positions)}")
        try:
            ok = np.broadcast_shapes(positions.shape, x.shape[:-2]) == x.shape[:-2]
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{op}: positions has shape {positions.shape} but must broadcast to "
                f"x.shape[:-2] = {x.shape[:-2]}"
            )
    elif x.shape[-3] > cos.shape[0]:
        raise ValueError(
            f"{op}: x has {x.shape[-3]} tokens but the tables only cover {cos.shape[0]} positions"
        )
    return {"style": style, "rotary_dim": r}


def rope(
    x: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    positions: GPUArray | None = None,
    style: str = "neox",
    rotary_dim: int | None = None,
    *,
    out: GPUArray | None = None,
) -> GPUArray:
    """x rotated by the table rows at `positions`; a new array (or out=)."""
    params = _check("rope", x, cos, sin, positions, style, rotary_dim)
    chk.out_arg("rope", out, x.shape, x.dtype)
    return run("rope", (x, cos, sin, positions), params, out=out)


def rope_inplace(
    x: GPUArray,
    cos: GPUArray,
    sin: GPUArray,
    positions: GPUArray | None = None,
    style: str = "neox",
    rotary_dim: int | None = None,
) -> GPUArray:
    """Rotate x in place (0.2.x API); returns x."""
    params = _check("rope_inplace", x, cos, sin, positions, style, rotary_dim)
    return run("rope", (x, cos, sin, positions), params, out=x)


def rope_tables(
    max_pos: int,
    rotary_dim: int,
    base: float = 10000.0,
    scaling: dict[str, Any] | None = None,
    *,
    dtype: Any = "float32",
    device: Any = None,
) -> tuple[GPUArray, GPUArray]:
    """(cos, sin) tables [max_pos, rotary_dim // 2], angle p * base^(-2i / rotary_dim).

    scaling: None, or Llama 3.1 frequency scaling {"factor", "low_freq_factor",
    "high_freq_factor", "original_max_position_embeddings"} (HF rope_type "llama3"). The tables
    are computed once on the host in float64 and uploaded (a one-time setup cost).
    """
    op = "rope_tables"
    for name, v in (("max_pos", max_pos), ("rotary_dim", rotary_dim)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{op}: {name} must be a positive int, got {v!r}")
    if rotary_dim % 2:
        raise ValueError(f"{op}: rotary_dim must be even, got {rotary_dim}")
    chk.positive_float(op, "base", base)
    if scaling is not None and not isinstance(scaling, dict):
        raise TypeError(f"{op}: scaling must be a dict or None, got {type(scaling).__name__}")
    dt = as_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{op}: dtype must be a float type, got {dt.name}")
    cos, sin = cpu.rope_tables(max_pos, rotary_dim, base=float(base), scaling=scaling)
    return (
        from_numpy(cos, device=device, dtype=dt),
        from_numpy(sin, device=device, dtype=dt),
    )
