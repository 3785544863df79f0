"""NumPy backend: rope (neox / gptj, partial rotary, positions) and rope_tables (llama3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed
from hypothesis import given, settings
from hypothesis import strategies as st

from pygpukit.backends import cpu


def _angles(max_pos: int, r: int, base: float = 10000.0) -> np.ndarray:
    return np.array([[p * base ** (-2.0 * i / r) for i in range(r // 2)] for p in range(max_pos)])


def _tables(max_pos: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    a = _angles(max_pos, r)
    return np.cos(a).astype(np.float32), np.sin(a).astype(np.float32)


def _rope_ref(x, cos, sin, pos, style, r):  # type: ignore[no-untyped-def]
    """Rotation as complex multiplication z * e^{i theta} (pairs per style), float64."""
    x = as64(x)
    out = x.copy()
    half = r // 2
    c = as64(cos)[pos][..., None, :]  # [..., S, 1, half]
    s = as64(sin)[pos][..., None, :]
    rot = c + 1j * s
    if style == "neox":
        z = (x[..., :half] + 1j * x[..., half:r]) * rot
        out[..., :half], out[..., half:r] = z.real, z.imag
    else:
        z = (x[..., 0:r:2] + 1j * x[..., 1:r:2]) * rot
        out[..., 0:r:2], out[..., 1:r:2] = z.real, z.imag
    return out


CASES = [
    # (x shape [..., S, H, D], rotary_dim)
    ((1, 1, 2), None),
    ((7, 3, 8), None),
    ((2, 33, 4, 64), None),
    ((2, 5, 2, 96), 32),  # partial rotary: dims 32..95 pass through
    ((1, 17, 1, 6), 4),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_rope(case: tuple, style: str, dtype: str) -> None:
    shape, rotary_dim = case
    r = shape[-1] if rotary_dim is None else rotary_dim
    rng = np.random.default_rng(seed("rope", case, style, dtype))
    x = rand(rng, shape, dtype)
    cos, sin = _tables(64, r)
    out = cpu.rope(x, cos, sin, style=style, rotary_dim=rotary_dim)
    assert out.dtype == np_dtype(dtype) and out.shape == x.shape
    pos = np.broadcast_to(np.arange(shape[-3]), shape[:-2])
    assert_close(out, _rope_ref(x, cos, sin, pos, style, r), dtype)
    np.testing.assert_array_equal(out[..., r:], x[..., r:])  # pass-through dims untouched


def test_rope_explicit_positions_broadcast() -> None:
    rng = np.random.default_rng(1)
    x = rand(rng, (3, 5, 2, 16), "float32")
    cos, sin = _tables(100, 16)
    pos = rng.integers(0, 100, size=(3, 5))
    out = cpu.rope(x, cos, sin, pos)
    assert_close(out, _rope_ref(x, cos, sin, pos, "neox", 16), "float32")
    pos1 = np.array([40, 41, 42, 43, 44])  # one row of positions shared by the batch
    out = cpu.rope(x, cos, sin, pos1, style="gptj")
    assert_close(out, _rope_ref(x, cos, sin, np.broadcast_to(pos1, (3, 5)), "gptj", 16), "float32")


def test_rope_errors() -> None:
    cos, sin = _tables(8, 8)
    x = np.ones((4, 2, 8), np.float32)
    with pytest.raises(IndexError, match="positions"):
        cpu.rope(x, cos, sin, np.array([0, 1, 2, 8]))
    with pytest.raises(IndexError, match="positions"):
        cpu.rope(x, cos, sin, np.array([-1, 0, 1, 2]))
    with pytest.raises(ValueError, match="style"):
        cpu.rope(x, cos, sin, style="llama")
    with pytest.raises(ValueError, match="rotary_dim"):
        cpu.rope(x, cos, sin, rotary_dim=7)
    with pytest.raises(ValueError, match="cos/sin"):
        cpu.rope(x, cos[:, :3], sin[:, :3])


def test_rope_tables_default() -> None:
    cos, sin = cpu.rope_tables(4097, 128, base=500000.0)
    assert cos.dtype == sin.dtype == np.float32 and cos.shape == (4097, 64)
    a = _angles(4097, 128, 500000.0)
    assert_close(cos, np.cos(a), "float32")
    assert_close(sin, np.sin(a), "float32")
    # Each entry is the float32 rounding of the exact value (one rounding).
    assert np.abs(as64(cos) - np.cos(a)).max() <= 2.0**-25


def _llama3_inv_freq_ref(r: int, base: float, sc: dict) -> list[float]:
    """Scalar transcription of HF's _compute_llama3_parameters, one frequency at a time."""
    old = sc["original_max_position_embeddings"]
    lo_wl, hi_wl = old / sc["low_freq_factor"], old / sc["high_freq_factor"]
    out = []
    for i in range(r // 2):
        f = 1.0 / base ** (2 * i / r)
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(f)
        elif wl > lo_wl:
            out.append(f / sc["factor"])
        else:
            s = (old / wl - sc["low_freq_factor"]) / (
                sc["high_freq_factor"] - sc["low_freq_factor"]
            )
            out.append((1 - s) * f / sc["factor"] + s * f)
    return out


def test_rope_tables_llama3_scaling() -> None:
    sc = {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    inv = _llama3_inv_freq_ref(64, 500000.0, sc)
    # The three bands are all present for Llama 3.2's parameters.
    plain = [1.0 / 500000.0 ** (2 * i / 64) for i in range(32)]
    kinds = {
        "keep" if a == b else "div" if math.isclose(a, b / 32) else "mid"
        for a, b in zip(inv, plain, strict=True)
    }
    assert kinds == {"keep", "div", "mid"}
    cos, sin = cpu.rope_tables(300, 64, base=500000.0, scaling=sc)
    a = np.outer(np.arange(300), inv)
    assert_close(cos, np.cos(a), "float32")
    assert_close(sin, np.sin(a), "float32")
    with pytest.raises(ValueError, match="missing"):
        cpu.rope_tables(8, 8, scaling={"factor": 8.0})
    with pytest.raises(ValueError, match="llama3"):
        cpu.rope_tables(8, 8, scaling={**sc, "rope_type": "yarn"})
    with pytest.raises(ValueError, match="even"):
        cpu.rope_tables(8, 7)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 4),
    st.sampled_from([2, 4, 8, 10, 64]),
    st.sampled_from(["neox", "gptj"]),
    st.integers(0, 2**32 - 1),
)
def test_rope_preserves_pair_norms(s: int, h: int, d: int, style: str, sd: int) -> None:
    rng = np.random.default_rng(sd)
    x = rng.standard_normal((s, h, d))
    cos, sin = cpu.rope_tables(64, d)
    pos = rng.integers(0, 64, size=s)
    out = cpu.rope(x, cos.astype(np.float64), sin.astype(np.float64), pos, style=style)
    if style == "neox":
        n_in = x[..., : d // 2] ** 2 + x[..., d // 2 :] ** 2
        n_out = out[..., : d // 2] ** 2 + out[..., d // 2 :] ** 2
    else:
        n_in = x[..., 0::2] ** 2 + x[..., 1::2] ** 2
        n_out = out[..., 0::2] ** 2 + out[..., 1::2] ** 2
    # cos^2 + sin^2 = 1 up to the float32 rounding of the tables.
    np.testing.assert_allclose(n_out, n_in, rtol=3e-7, atol=1e-12)
