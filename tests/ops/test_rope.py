"""Public rope, rope_inplace and rope_tables on the test device (ops._helpers.DEVICE, CPU by
default)."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view


def _ref(x: np.ndarray, pos: np.ndarray, r: int, style: str, base: float = 10000.0) -> np.ndarray:
    """Complex-multiplication form with angles from the exact formula, float64."""
    x = as64(x)
    out = x.copy()
    half = r // 2
    theta = pos[..., None] * base ** (-2.0 * np.arange(half) / r)  # [..., S, half]
    rot = np.exp(1j * theta)[..., None, :]  # broadcast over heads
    if style == "neox":
        z = (x[..., :half] + 1j * x[..., half:r]) * rot
        out[..., :half], out[..., half:r] = z.real, z.imag
    else:
        z = (x[..., 0:r:2] + 1j * x[..., 1:r:2]) * rot
        out[..., 0:r:2], out[..., 1:r:2] = z.real, z.imag
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rope(dtype: str, style: str, layout: str) -> None:
    rng = np.random.default_rng(seed("rope", dtype, style, layout))
    a = rand(rng, (2, 7, 3, 64), dtype)
    cos, sin = gp.rope_tables(128, 64, device=DEVICE)
    out = poisoned(a.shape, dtype)
    r = gp.rope(view(a, layout), cos, sin, style=style, out=out)
    assert r is out
    # The tables are float32; the reference uses exact angles, so the bound covers both roundings.
    assert_close(r, _ref(a, np.broadcast_to(np.arange(7), (2, 7)), 64, style), dtype)


def test_rope_positions_and_partial() -> None:
    rng = np.random.default_rng(2)
    a = rand(rng, (2, 5, 4, 96), "float32")
    pos = rng.integers(0, 300, size=(2, 5))
    cos, sin = gp.rope_tables(300, 32, base=500000.0, device=DEVICE)
    r = gp.rope(up(a), cos, sin, up(pos), rotary_dim=32)
    assert_close(r, _ref(a, pos, 32, "neox", 500000.0), "float32")
    np.testing.assert_array_equal(r.to_numpy()[..., 32:], a[..., 32:])


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_rope_inplace(layout: str) -> None:
    a = rand(np.random.default_rng(3), (9, 2, 16), "bfloat16")
    x = view(a, layout)
    cos, sin = gp.rope_tables(32, 16, device=DEVICE)
    pos = up(np.arange(20, 29, dtype=np.int32))
    assert gp.rope_inplace(x, cos, sin, pos, "gptj") is x
    assert_close(x, _ref(a, np.arange(20, 29), 16, "gptj"), "bfloat16")


def test_rope_tables() -> None:
    cos, sin = gp.rope_tables(4097, 128, device=DEVICE)
    assert cos.dtype is gp.float32 and cos.shape == (4097, 64) and cos.device == gp.device(DEVICE)
    theta = np.arange(4097)[:, None] * 10000.0 ** (-np.arange(0, 128, 2) / 128)
    assert_close(cos, np.cos(theta), "float32")
    assert_close(sin, np.sin(theta), "float32")
    c16, _ = gp.rope_tables(8, 8, dtype="bfloat16", device=DEVICE)
    assert c16.dtype is gp.bfloat16
    sc = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192, "rope_type": "llama3"}  # fmt: skip
    c, _ = gp.rope_tables(16, 128, 500000.0, sc, device=DEVICE)
    # Lowest frequencies (wavelength > 8192) are divided by the factor.
    inv_last = 500000.0 ** (-126 / 128) / 8.0
    assert_close(c.to_numpy()[:, -1], np.cos(np.arange(16) * inv_last), "float32")


def test_errors() -> None:
    x = up(np.ones((4, 2, 8), np.float32))
    cos, sin = gp.rope_tables(16, 8, device=DEVICE)
    with pytest.raises(
        ValueError, match=r"rope: cos has shape \(16, 4\) but must be \[max_pos, 2\]"
    ):
        gp.rope(x, cos, sin, rotary_dim=4)
    with pytest.raises(ValueError, match=r"rope: x must be \[\.\.\., S, H, D\]"):
        gp.rope(up(np.ones((4, 8), np.float32)), cos, sin)
    with pytest.raises(ValueError, match="rope: style must be one of"):
        gp.rope(x, cos, sin, style="llama")
    with pytest.raises(ValueError, match="rope_inplace: rotary_dim must be even"):
        gp.rope_inplace(x, cos, sin, rotary_dim=3)
    with pytest.raises(TypeError, match="rope: positions must be an integer array"):
        gp.rope(x, cos, sin, up(np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match=r"positions has shape \(3,\) but must broadcast"):
        gp.rope(x, cos, sin, up(np.zeros(3, np.int32)))
    bad_pos = up(np.array([0, 1, 2, 16], np.int32))
    if DEVICE == "cpu":
        with pytest.raises(IndexError, match="positions"):
            gp.rope(x, cos, sin, bad_pos)
    else:
        # On a GPU positions stay on the device (no host sync to check them): the token with an
        # out-of-range position gets NaN in its rotated dims, never an out-of-bounds read.
        y = gp.rope(x, cos, sin, bad_pos).to_numpy()
        assert np.all(np.isfinite(y[:3])) and np.all(np.isnan(y[3]))
    with pytest.raises(ValueError, match="rope: x has 32 tokens but the tables only cover 16"):
        gp.rope(up(np.ones((32, 1, 8), np.float32)), cos, sin)
    empty = up(np.zeros((0, 4), np.float32))
    with pytest.raises(ValueError, match=r"rope: cos has shape \(0, 4\): the tables cover no"):
        gp.rope(x, empty, empty, up(np.zeros(4, np.int32)))
    with pytest.raises(ValueError, match="rope_tables: rotary_dim must be even"):
        gp.rope_tables(8, 7, device=DEVICE)
    with pytest.raises(TypeError, match="rope: sin must be a GPUArray"):
        gp.rope(x, cos, sin.to_numpy())
