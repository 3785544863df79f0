"""The Triton rmsnorm_qkv_rope_write (backends/triton_kernels/qkv_write.py): the qkv decode
GEMV with the RMSNorm read in, RoPE on q and k and the KV-cache store in its epilogue, against
the two launches it replaces (gemv_dense.rmsnorm_linear, then kv_write.kv_cache_write) bit for
bit, and against the float64 reference (backends/cpu/qkv_write.py); neox and gptj pairs, GQA,
a bias, a residual, several sequences and tokens, strided x, poisoned caches (only the rows'
slots change), positions outside the cache (nothing stored) and outside the tables (NaN)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _tkutil import GPU, poisoned, up

import pygpukit as gp
from pygpukit.backends.cpu import qkv_write as cpu_qkv
from pygpukit.backends.triton_kernels import gemv_dense, kv_write, qkv_write

HALF = ["float16", pytest.param("bfloat16", marks=GPU)]
# (B, S, H, Hkv, D, K): a one-row decode step, GQA with several sequences and tokens, a row
# past 2048 (the RMSNorm GEMV's rule takes two columns a program there, the one launch four),
# and the Llama-3.2-1B and Llama-3.1-8B shapes (GPU only: the interpreter would take minutes
# over their programs).
SHAPES = [
    (1, 1, 4, 2, 8, 40),
    (2, 3, 6, 2, 16, 72),
    (1, 1, 2, 1, 8, 2304),
    pytest.param(1, 1, 32, 8, 64, 2048, marks=GPU),
    pytest.param(1, 1, 32, 8, 128, 4096, marks=GPU),
]


def _inputs(device: str, dtype: str, b: int, s: int, h: int, hkv: int, d: int, k: int,
            seed: int) -> dict:  # fmt: skip
    rng = np.random.default_rng(seed)
    n = (h + 2 * hkv) * d
    cos, sin = gp.rope_tables(64, d, device=device)
    return {
        "x": up(rng.standard_normal((b, s, k)), device).astype(dtype),
        "r": up(rng.standard_normal((b, s, k)), device).astype(dtype),
        "g": up(1 + rng.standard_normal(k) / 4, device).astype(dtype),
        "w": up(rng.standard_normal((n, k)) / np.sqrt(k), device).astype(dtype),
        "bias": up(rng.standard_normal(n), device).astype(dtype),
        "pos": up(rng.integers(0, 20 - s, b).astype(np.int32), device),
        "cos": cos,
        "sin": sin,
        "cache": (b, hkv, 24, d),
    }


def _bits(a: gp.GPUArray) -> np.ndarray:
    return np.ascontiguousarray(a.to_numpy()).view(np.uint16)


def _two_launches(c: dict, h: int, res: bool, bias: bool, style: str, device: str, dtype: str):
    """q [B, S, H, D], the caches and h as rmsnorm_linear then kv_cache_write leave them."""
    x, w, hkv = c["x"], c["w"], c["cache"][1]
    b, s, _ = x.shape
    d = c["cache"][3]
    y = gemv_dense.rmsnorm_linear(x, c["g"], w, c["bias"] if bias else None,
                                  c["r"] if res else None, eps=1e-5)  # fmt: skip
    y, hh = y if res else (y, None)
    heads = y.reshape(b, s, h + 2 * hkv, d)
    kc, vc = poisoned(c["cache"], dtype, device), poisoned(c["cache"], dtype, device)
    q = heads[:, :, :h]
    kv_write.kv_cache_write(
        kc, vc, heads[:, :, h : h + hkv].transpose(0, 2, 1, 3),
        heads[:, :, h + hkv :].transpose(0, 2, 1, 3), c["pos"], None, c["cos"], c["sin"],
        q.transpose(0, 2, 1, 3), rope_style=style,
    )  # fmt: skip
    return q, kc, vc, hh


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize(("res", "bias"), [(False, False), (True, True)])
@pytest.mark.parametrize(("b", "s", "h", "hkv", "d", "k"), SHAPES)
@pytest.mark.parametrize("dtype", HALF)
def test_bits_of_the_two_launches(
    device: str, dtype: str, b: int, s: int, h: int, hkv: int, d: int, k: int, res: bool,
    bias: bool, style: str,
) -> None:  # fmt: skip
    c = _inputs(device, dtype, b, s, h, hkv, d, k, seed=b * 100 + k)
    q0, kc0, vc0, h0 = _two_launches(c, h, res, bias, style, device, dtype)
    kc, vc = poisoned(c["cache"], dtype, device), poisoned(c["cache"], dtype, device)
    got = qkv_write.rmsnorm_qkv_rope_write(
        c["x"], c["g"], c["w"], kc, vc, c["pos"], c["cos"], c["sin"],
        c["bias"] if bias else None, c["r"] if res else None, num_heads=h, eps=1e-5,
        rope_style=style,
    )  # fmt: skip
    q, hh = got if res else (got, None)
    assert q.shape == (b, s, h, d) and q.dtype.name == dtype
    np.testing.assert_array_equal(_bits(q), _bits(q0))
    # The caches bit for bit, the NaN of the slots no row writes included.
    np.testing.assert_array_equal(_bits(kc), _bits(kc0))
    np.testing.assert_array_equal(_bits(vc), _bits(vc0))
    written = np.zeros(c["cache"], bool)
    for i, p in enumerate(c["pos"].to_numpy()):
        written[i, :, p : p + s] = True
    assert not np.isnan(kc.to_numpy()[written]).any()
    assert np.isnan(kc.to_numpy()[~written]).all() and np.isnan(vc.to_numpy()[~written]).all()
    if res:
        assert hh is not None and h0 is not None
        np.testing.assert_array_equal(_bits(hh), _bits(h0))


@pytest.mark.parametrize("dtype", HALF)
def test_against_float64(device: str, dtype: str) -> None:
    """The float64 reference: the norm and product in float64, one rounding, the rotation in
    float64, one rounding (the kernel's float32 sums and rotation within the dtype's bound);
    x a strided view."""
    b, s, h, hkv, d, k = 2, 2, 4, 2, 16, 96
    c = _inputs(device, dtype, b, s, h, hkv, d, k, seed=7)
    wide = up(np.zeros((b, s, 2 * k)), device).astype(dtype)
    wide[..., ::2] = c["x"]
    xs = wide[..., ::2]
    assert not xs.is_contiguous()
    kc, vc = poisoned(c["cache"], dtype, device), poisoned(c["cache"], dtype, device)
    q, hh = qkv_write.rmsnorm_qkv_rope_write(
        xs, c["g"], c["w"], kc, vc, c["pos"], c["cos"], c["sin"], c["bias"], c["r"],
        num_heads=h, eps=1e-5,
    )  # fmt: skip
    f64 = {n: c[n].astype("float32").to_numpy().astype(np.float64) for n in "xrgw"}
    f64["bias"] = c["bias"].astype("float32").to_numpy().astype(np.float64)
    kr, vr = np.full(c["cache"], np.nan), np.full(c["cache"], np.nan)
    qr, hr = cpu_qkv.rmsnorm_qkv_rope_write(
        f64["x"], f64["g"], f64["w"], kr, vr, c["pos"].to_numpy(), c["cos"].to_numpy(),
        c["sin"].to_numpy(), f64["bias"], f64["r"], num_heads=h, eps=1e-5,
    )  # fmt: skip
    assert_close(q, qr, dtype)
    assert_close(hh, hr, dtype)
    m = ~np.isnan(kr)
    assert_close(kc.to_numpy().astype(np.float64)[m], kr[m], dtype)
    assert_close(vc.to_numpy().astype(np.float64)[m], vr[m], dtype)
    assert np.isnan(kc.to_numpy()[~m]).all()


@pytest.mark.parametrize("dtype", HALF)
def test_positions_outside_the_cache_and_the_tables(device: str, dtype: str) -> None:
    """A cache of 48 slots. Tables of 64 positions: sequence 0 writes at 50, past the cache:
    nothing of it is stored, its q still rotated. Tables of 40 positions: sequence 1 at 44,
    inside the cache but past the tables: NaN in its rotated q and k, v stored as it is."""
    b, s, h, hkv, d, k = 2, 1, 2, 1, 8, 32
    c = _inputs(device, dtype, b, s, h, hkv, d, k, seed=11)
    c["cache"] = (b, hkv, 48, d)
    y = gemv_dense.rmsnorm_linear(c["x"], c["g"], c["w"], eps=1e-5).to_numpy()
    for tables, pos in ((64, [50, 10]), (40, [3, 44])):
        cos, sin = gp.rope_tables(tables, d, device=device)
        kc, vc = poisoned(c["cache"], dtype, device), poisoned(c["cache"], dtype, device)
        p = up(np.array(pos, np.int32), device)
        q = qkv_write.rmsnorm_qkv_rope_write(
            c["x"], c["g"], c["w"], kc, vc, p, cos, sin, num_heads=h, eps=1e-5
        )
        kh, vh, qh = kc.to_numpy(), vc.to_numpy(), q.to_numpy()
        if tables == 64:
            assert np.isnan(kh[0]).all() and np.isnan(vh[0]).all()
            assert not np.isnan(qh).any() and not np.isnan(kh[1, :, 10]).any()
        else:
            assert not np.isnan(qh[0]).any() and not np.isnan(kh[0, :, 3]).any()
            assert np.isnan(qh[1]).all() and np.isnan(kh[1, :, 44]).all()
            np.testing.assert_array_equal(vh[1, 0, 44], y[1, 0, (h + hkv) * d :])


@pytest.mark.parametrize("dtype", HALF)
def test_position_loaded_before_the_wait_changes_nothing(device: str, dtype: str) -> None:
    """Inside constant_weights() (the engine's forward) the row's position is loaded before the
    program waits on the kernel ahead: the q and caches of the two launches, bit for bit, as
    outside."""
    from pygpukit.backends._support.weights import constant_weights

    b, s, h, hkv, d, k = 2, 1, 4, 2, 8, 40
    c = _inputs(device, dtype, b, s, h, hkv, d, k, seed=3)
    q0, kc0, vc0, _ = _two_launches(c, h, False, False, "neox", device, dtype)
    want = [_bits(t) for t in (q0, kc0, vc0)]
    for constant in (False, True):
        kc, vc = poisoned(c["cache"], dtype, device), poisoned(c["cache"], dtype, device)
        args = (c["x"], c["g"], c["w"], kc, vc, c["pos"], c["cos"], c["sin"])
        if constant:
            with constant_weights():
                q = qkv_write.rmsnorm_qkv_rope_write(*args, num_heads=h, eps=1e-5)
        else:
            q = qkv_write.rmsnorm_qkv_rope_write(*args, num_heads=h, eps=1e-5)
        for a, w in zip([_bits(t) for t in (q, kc, vc)], want, strict=True):
            np.testing.assert_array_equal(a, w)


@pytest.mark.parametrize("dtype", HALF)
def test_strided_caches(device: str, dtype: str) -> None:
    """Caches that are views (every other head dim of a wider buffer; the batch and heads
    swapped in memory): the bits of the two launches into the same views, the rest of the
    buffers untouched."""
    b, s, h, hkv, d, k = 2, 1, 4, 2, 8, 40
    c = _inputs(device, dtype, b, s, h, hkv, d, k, seed=5)

    def caches() -> tuple[gp.GPUArray, ...]:
        kb = poisoned((hkv, b, 24, 2 * d), dtype, device)
        vb = poisoned((hkv, b, 24, 2 * d), dtype, device)
        return kb, vb, kb.transpose(1, 0, 2, 3)[..., ::2], vb.transpose(1, 0, 2, 3)[..., ::2]

    kb0, vb0, kc0, vc0 = caches()
    y = gemv_dense.rmsnorm_linear(c["x"], c["g"], c["w"], eps=1e-5)
    heads = y.reshape(b, s, h + 2 * hkv, d)
    q0 = heads[:, :, :h]
    kv_write.kv_cache_write(
        kc0, vc0, heads[:, :, h : h + hkv].transpose(0, 2, 1, 3),
        heads[:, :, h + hkv :].transpose(0, 2, 1, 3), c["pos"], None, c["cos"], c["sin"],
        q0.transpose(0, 2, 1, 3),
    )  # fmt: skip
    kb, vb, kc, vc = caches()
    assert not kc.is_contiguous()
    q = qkv_write.rmsnorm_qkv_rope_write(
        c["x"], c["g"], c["w"], kc, vc, c["pos"], c["cos"], c["sin"], num_heads=h, eps=1e-5
    )
    np.testing.assert_array_equal(_bits(q), _bits(q0))
    np.testing.assert_array_equal(_bits(kb), _bits(kb0))  # the skipped head dims still NaN
    np.testing.assert_array_equal(_bits(vb), _bits(vb0))


def test_head_dim_not_a_multiple_of_4_is_refused(device: str) -> None:
    """A program's four columns are two rotated pairs: a head dim of 6 is refused before the
    launch (the routing table does not send such a call here), the caches untouched."""
    c = _inputs(device, "float16", 1, 1, 2, 1, 6, 16, seed=9)
    kc, vc = poisoned(c["cache"], "float16", device), poisoned(c["cache"], "float16", device)
    with pytest.raises(ValueError, match="multiple of 4, got 6"):
        qkv_write.rmsnorm_qkv_rope_write(
            c["x"], c["g"], c["w"], kc, vc, c["pos"], c["cos"], c["sin"], num_heads=2,
            eps=1e-5,
        )  # fmt: skip
    assert np.isnan(kc.to_numpy()).all() and np.isnan(vc.to_numpy()).all()
