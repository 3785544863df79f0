"""Rotary position embedding (Su et al. 2021, RoFormer) and its cos/sin tables (NumPy reference).

For frequency index i < r/2 (r = rotary_dim) and position p, angle = p * inv_freq[i] with
inv_freq[i] = base^(-2i/r). A pair (a, b) rotates to (a cos - b sin, b cos + a sin).
- style "neox" (GPT-NeoX, Llama/HF `rotate_half`): pair i is (x[i], x[i + r/2]).
- style "gptj" (GPT-J, Meta's original Llama): pair i is (x[2i], x[2i + 1]).
Dimensions r..D-1 pass through unchanged (partial rotary, e.g. GPT-NeoX rotary_pct, Phi).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import Array, finish, float_compute_dtype, float_result

__all__ = ["rope", "rope_tables"]

_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def _llama3_inv_freq(inv_freq: Array, scaling: dict[str, Any]) -> Array:
    """Llama 3.1 frequency scaling, following HF transformers
    modeling_rope_utils._compute_llama3_parameters step for step: wavelengths longer than
    original_max_position_embeddings / low_freq_factor are divided by `factor`, those shorter than
    original_max_position_embeddings / high_freq_factor are kept, and the band between is
    interpolated with smooth = (old_len / wavelen - low) / (high - low)."""
    missing = [k for k in _LLAMA3_KEYS if k not in scaling]
    if missing:
        raise ValueError(
            f"rope_tables: scaling is missing {missing} (llama3 scaling needs {_LLAMA3_KEYS})"
        )
    rope_type = scaling.get("rope_type", scaling.get("type", "llama3"))
    if rope_type != "llama3":
        raise ValueError(
            f"rope_tables: only llama3 scaling is supported, got rope_type={rope_type!r}"
        )
    factor = float(scaling["factor"])
    low_freq_factor = float(scaling["low_freq_factor"])
    high_freq_factor = float(scaling["high_freq_factor"])
    old_context_len = float(scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
        high_freq_factor - low_freq_factor
    )
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(is_medium, smoothed, inv_freq_llama)


def rope_tables(
    max_pos: int,
    rotary_dim: int,
    *,
    base: float = 10000.0,
    scaling: dict[str, Any] | None = None,
) -> tuple[Array, Array]:
    """(cos, sin), each float32 [max_pos, rotary_dim // 2], row p = position p.

    Angles are computed in float64 and rounded once. (HF computes inv_freq and p * inv_freq in
    float32; at p ~ 1e5 that angle is off by ~1e-2 rad, so these tables are the more accurate
    of the two and agree with HF to float32 rounding for short contexts.)
    """
    if rotary_dim <= 0 or rotary_dim % 2:
        raise ValueError(
            f"rope_tables: rotary_dim must be a positive even number, got {rotary_dim}"
        )
    if max_pos <= 0:
        raise ValueError(f"rope_tables: max_pos must be positive, got {max_pos}")
    inv_freq = 1.0 / (float(base) ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim))
    if scaling is not None:
        inv_freq = _llama3_inv_freq(inv_freq, scaling)
    angles = np.outer(np.arange(max_pos, dtype=np.float64), inv_freq)
    return finish(np.cos(angles), np.float32), finish(np.sin(angles), np.float32)


def rope(
    x: Array,
    cos: Array,
    sin: Array,
    positions: Array | None = None,
    *,
    style: str = "neox",
    rotary_dim: int | None = None,
) -> Array:
    """Rotate x [..., S, H, D] (token-major) by the table rows at `positions`.

    cos/sin: [max_pos, rotary_dim // 2]; positions: integers broadcastable to x.shape[:-2]
    (default arange(S)). Computes in float32 (float64 for float64 x), rounds once to x's dtype.
    Each product is rounded here, as in the native kernels; the Triton kernels fuse one product
    of each output (triton_kernels/rope.rotate_pair), so their compute-type results may differ
    from these by that product's rounding.
    """
    x, cos, sin = np.asarray(x), np.asarray(cos), np.asarray(sin)
    if x.ndim < 3:
        raise ValueError(f"rope: x must be [..., S, H, D], got shape {x.shape}")
    d = x.shape[-1]
    r = d if rotary_dim is None else int(rotary_dim)
    if r <= 0 or r % 2 or r > d:
        raise ValueError(f"rope: rotary_dim must be even and in (0, {d}], got {r}")
    half = r // 2
    if cos.shape[-1] != half or sin.shape != cos.shape:
        raise ValueError(
            f"rope: cos/sin must be [max_pos, {half}], got {cos.shape} and {sin.shape}"
        )
    if style not in ("neox", "gptj"):
        raise ValueError(f"rope: style must be 'neox' or 'gptj', got {style!r}")
    lead = x.shape[:-2]
    pos = np.arange(x.shape[-3]) if positions is None else np.asarray(positions)
    if pos.dtype.kind not in "iu":
        raise TypeError(f"rope: positions must be integers, got dtype {pos.dtype}")
    pos = np.broadcast_to(pos, lead)
    if pos.size and (int(pos.min()) < 0 or int(pos.max()) >= cos.shape[0]):
        raise IndexError(
            f"rope: positions must lie in [0, {cos.shape[0]}), "
            f"got {int(pos.min())}..{int(pos.max())}"
        )
    rd = float_result(x.dtype)
    ct = float_compute_dtype(rd)
    # [..., S, 1, r/2]: one angle per (token, frequency), shared by all heads.
    c = cos.astype(ct)[pos][..., None, :]
    s = sin.astype(ct)[pos][..., None, :]
    y = x.astype(ct)  # a fresh copy: the pass-through dims r..D-1 are already in place
    if style == "neox":
        a, b = y[..., :half].copy(), y[..., half:r].copy()
        y[..., :half] = a * c - b * s
        y[..., half:r] = b * c + a * s
    else:
        a, b = y[..., 0:r:2].copy(), y[..., 1:r:2].copy()
        y[..., 0:r:2] = a * c - b * s
        y[..., 1:r:2] = b * c + a * s
    return finish(y, rd)
