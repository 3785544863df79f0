"""Triton rope (neox / gptj, partial rotary_dim, device positions) against a float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _data import as64, rand, seed
from _tkutil import FLOATS64, poisoned, poisoned_strided, up

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.triton_kernels.rope import rope


def _ref(x, cos, sin, pos, style, r):
    """Float64 rotation written from the definition (pairs by index, no slicing tricks)."""
    half = r // 2
    s = x.shape[-3]
    p = np.broadcast_to(np.arange(s) if pos is None else pos, x.shape[:-2])
    c, sn = cos[p][..., None, :], sin[p][..., None, :]  # [..., S, 1, half]
    y = x.copy()
    i = np.arange(half)
    ia, ib = (2 * i, 2 * i + 1) if style == "gptj" else (i, i + half)
    a, b = x[..., ia], x[..., ib]
    y[..., ia] = a * c - b * sn
    y[..., ib] = b * c + a * sn
    return y


CASES = [  # (x shape [..., S, H, D], rotary_dim)
    ((1, 1, 2), None),
    ((7, 3, 16), None),
    ((7, 3, 16), 8),
    ((2, 5, 4, 34), 30),
    ((33, 2, 128), None),
    ((3, 33, 5, 66), 64),
]


@pytest.mark.parametrize(("shape", "rdim"), CASES, ids=str)
@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("dtype", FLOATS64)
def test_rope(device: str, dtype: str, style: str, shape: tuple, rdim: int | None) -> None:
    rng = np.random.default_rng(seed("rope", dtype, style, shape, rdim))
    r = shape[-1] if rdim is None else rdim
    cos, sin = cpu.rope_tables(97, r, base=500.0)
    x = rand(rng, shape, dtype)
    per_token = rng.integers(0, 97, shape[:-2]).astype(np.int32)
    per_s = rng.integers(0, 97, shape[-3:-2]).astype(np.int64)  # broadcast over leading dims
    for pos in (None, per_token, per_s):
        dpos = None if pos is None else up(pos, device)
        y = rope(
            up(x, device), up(cos, device), up(sin, device), dpos, style=style, rotary_dim=rdim
        )
        assert y.dtype is gp.as_dtype(dtype) and y.shape == x.shape
        ref = _ref(as64(x), as64(cos), as64(sin), pos, style, r)
        assert_close(y, ref, dtype, name=f"pos {None if pos is None else pos.shape}")


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_strided_x_out_and_inplace(device: str, style: str) -> None:
    # q as a slice of a fused [T, 3H, D] qkv buffer (token and head strides of the buffer).
    rng = np.random.default_rng(seed("rope-qkv", style))
    t, h, d, r = 9, 4, 32, 24
    qkv = rand(rng, (t, 3 * h, d), "float32")
    cos, sin = cpu.rope_tables(16, r)
    pos = rng.integers(0, 16, t).astype(np.int64)
    dq = up(qkv, device)
    q = dq[:, h : 2 * h]
    ref = _ref(as64(qkv[:, h : 2 * h]), as64(cos), as64(sin), pos, style, r)
    args = (up(cos, device), up(sin, device), up(pos, device))
    out = poisoned((t, h, d), "float32", device)
    assert rope(q, *args, style=style, rotary_dim=r, out=out) is out
    assert_close(out, ref, "float32")
    out2 = poisoned_strided((t, h, d), "float32", device)
    rope(q, *args, style=style, rotary_dim=r, out=out2)
    assert_close(out2, ref, "float32")
    # tables as strided views (every other column of a wider table)
    wide_c, wide_s = np.repeat(cos, 2, axis=1), np.repeat(sin, 2, axis=1)
    y = rope(
        q,
        up(wide_c, device)[:, ::2],
        up(wide_s, device)[:, ::2],
        args[2],
        style=style,
        rotary_dim=r,
    )
    assert_close(y, ref, "float32")
    # in place on the strided slice: the rest of the buffer is untouched
    assert rope(q, *args, style=style, rotary_dim=r, out=q) is q
    got = dq.to_numpy()
    assert_close(got[:, h : 2 * h], ref, "float32")
    np.testing.assert_array_equal(got[:, :h], qkv[:, :h])
    np.testing.assert_array_equal(got[:, 2 * h :], qkv[:, 2 * h :])


def test_out_of_range_positions_give_nan(device: str) -> None:
    rng = np.random.default_rng(2)
    x = rand(rng, (5, 2, 8), "float32")
    cos, sin = cpu.rope_tables(10, 4)
    pos = np.array([0, 10, 3, -1, 9], np.int32)
    y = rope(
        up(x, device), up(cos, device), up(sin, device), up(pos, device), rotary_dim=4
    ).to_numpy()
    bad = np.isnan(y[..., :4]).all(axis=(1, 2))
    np.testing.assert_array_equal(bad, [False, True, False, True, False])
    np.testing.assert_array_equal(y[..., 4:], x[..., 4:])  # pass-through dims stay finite
    ok = pos >= 0
    ok &= pos < 10
    ref = _ref(as64(x[ok]), as64(cos), as64(sin), pos[ok], "neox", 4)
    assert_close(y[ok], ref, "float32")
