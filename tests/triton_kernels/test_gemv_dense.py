"""The Triton dense decode GEMV and its gated twin (backends/triton_kernels/gemv_dense.py):
x @ W^T + bias and silu(x @ Wg^T) * (x @ Wu^T) against float64, at K below, at and across the
1024-value K tile (a partial last tile), on the 2048-value tiles from K = 4096 on, N with a
partial column block, several rows, strided x, a strided bias, out as a column slice of a
poisoned array; a row's bits do not depend on the other rows."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _tkutil import GPU, poisoned, up

from pygpukit.backends.triton_kernels import gemv_dense

HALF = ["float16", pytest.param("bfloat16", marks=GPU)]


def _f64(a: object) -> np.ndarray:
    """A half-precision GPUArray's values as float64 (through float32: exact)."""
    out: np.ndarray = a.astype("float32").to_numpy().astype(np.float64)  # type: ignore[attr-defined]
    return out


def _silu_mul(h: np.ndarray) -> np.ndarray:
    i = h.shape[-1] // 2
    g = h[..., :i]
    out: np.ndarray = g / (1.0 + np.exp(-g)) * h[..., i:]
    return out


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    ("m", "n", "k"), [(1, 19, 40), (1, 64, 1024), (3, 24, 2056), (1, 21, 4096), (2, 12, 6152)]
)
def test_gemv_against_float64(device: str, dtype: str, m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    w = up(rng.standard_normal((n, k)) / np.sqrt(k), device).astype(dtype)
    x = up(rng.standard_normal((m, k)), device).astype(dtype)
    y = gemv_dense.gemv(x, w)
    assert y.shape == (m, n) and y.dtype.name == dtype
    assert_close(y, _f64(x) @ _f64(w).T, dtype)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(("m", "i", "k"), [(1, 13, 48), (2, 40, 2056), (1, 9, 4104)])
def test_gated_against_float64(device: str, dtype: str, m: int, i: int, k: int) -> None:
    """w [2I, K]: gate rows then up rows; silu(g) * u of the float32 sums, one rounding."""
    rng = np.random.default_rng(i)
    w = up(rng.standard_normal((2 * i, k)) / np.sqrt(k) * 2, device).astype(dtype)
    x = up(rng.standard_normal((m, k)), device).astype(dtype)
    y = gemv_dense.linear_silu_mul(x, w)
    assert y.shape == (m, i) and y.dtype.name == dtype
    assert_close(y, _silu_mul(_f64(x) @ _f64(w).T), dtype)


@pytest.mark.parametrize("dtype", HALF)
def test_strided_x_bias_and_out_slice(device: str, dtype: str) -> None:
    """x a column slice of a wider array, bias every other element, out a column slice of a
    poisoned wider array (the columns around it untouched)."""
    n, k = 21, 64
    rng = np.random.default_rng(5)
    w = up(rng.standard_normal((n, k)) / 8, device).astype(dtype)
    x = up(rng.standard_normal((2, k + 16)), device).astype(dtype)[:, 8 : 8 + k]
    bias = up(rng.standard_normal(2 * n), device).astype(dtype)[::2]
    big = poisoned((2, n + 8), dtype, device)
    before = big.to_numpy().copy().view(np.uint16)
    out = big[:, 4 : 4 + n]
    y = gemv_dense.gemv(x, w, bias, out=out)
    assert y is out
    assert_close(out, _f64(x) @ _f64(w).T + _f64(bias), dtype)
    after = big.to_numpy().view(np.uint16)
    np.testing.assert_array_equal(after[:, :4], before[:, :4])
    np.testing.assert_array_equal(after[:, 4 + n :], before[:, 4 + n :])


@pytest.mark.parametrize("gated", [False, True])
def test_rows_do_not_depend_on_each_other(device: str, gated: bool) -> None:
    """Row r of a 5-row call has the bits of the same row alone."""
    n, k = 32, 1040
    rng = np.random.default_rng(9)
    w = up(rng.standard_normal((n, k)) / 32, device).astype("float16")
    x = up(rng.standard_normal((5, k)), device).astype("float16")
    fn = gemv_dense.linear_silu_mul if gated else gemv_dense.gemv
    whole = fn(x, w).to_numpy().view(np.uint16)
    for r in (0, 3):
        np.testing.assert_array_equal(
            fn(x[r : r + 1], w).to_numpy().view(np.uint16), whole[r : r + 1]
        )


@GPU
@pytest.mark.parametrize("gated", [False, True])
def test_weight_written_by_the_kernel_before(device: str, gated: bool) -> None:
    """The weight rewritten in place by the kernel just before each call (scaled by 1..12 into
    one buffer): every call reads the new values (outside constant_weights() the GEMV waits
    before it loads anything), and inside constant_weights() on a constant weight the bits are
    those of the plain call."""
    import pygpukit as gp
    from pygpukit.backends._support.weights import constant_weights

    n, k = 2048, 2048
    rng = np.random.default_rng(17)
    base = up(rng.standard_normal((2 * n if gated else n, k)) / 64, device).astype("bfloat16")
    x = up(rng.standard_normal((1, k)), device).astype("bfloat16")
    fn = gemv_dense.linear_silu_mul if gated else gemv_dense.gemv
    w = gp.empty(base.shape, "bfloat16", device)
    for s in range(1, 13):
        gp.mul(base, float(s), out=w)
        got = fn(x, w).to_numpy().view(np.uint16)
        want = fn(x, gp.mul(base, float(s))).to_numpy().view(np.uint16)
        np.testing.assert_array_equal(got, want, err_msg=f"scale {s}")
    plain = fn(x, base).to_numpy().view(np.uint16)
    with constant_weights():
        np.testing.assert_array_equal(fn(x, base).to_numpy().view(np.uint16), plain)


def _early_loads_on_cpu(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No PDL under the interpreter: there the early loads are forced inside
    constant_weights() for a weight read in place (they then only come first), so the
    kernel's PREFETCH path runs in CI too."""
    if device == "cpu":

        def forced(x: object, copied: bool) -> tuple[bool, bool]:
            return False, gemv_dense.weights_are_constant() and not copied

        monkeypatch.setattr(gemv_dense, "_early", forced)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("g_early", [True, False])
@pytest.mark.parametrize(("n", "k"), [(40, 2048), (9, 3000), (24, 6152), (12, 8192)])
def test_early_loads_in_constant_weights_same_bits(
    device: str, dtype: str, n: int, k: int, g_early: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside constant_weights() each program loads its first weight tile and (the RMSNorm
    form, NORM_WEIGHT_EARLY) the norm weight before its wait: the plain, gated and RMSNorm
    forms (with a residual; one partly masked tile at K 3000, several tiles past K 4096) give
    the bits of the calls outside it. The interpreter has no early launch: there the early
    loads are forced (they then only come first), so the kernel's path runs in CI too. A norm
    weight that is a strided view is copied first and is read after the wait."""
    import pygpukit as gp
    from pygpukit.backends._support.weights import constant_weights

    monkeypatch.setattr(gemv_dense, "NORM_WEIGHT_EARLY", g_early)
    early, launch = gemv_dense._early, gemv_dense.launch
    _early_loads_on_cpu(device, monkeypatch)
    seen: list[bool] = []

    def spy(kernel: object, grid: object, *args: object, **c: object) -> object:
        if "G_EARLY" in c:
            seen.append(bool(c["G_EARLY"]))
        return launch(kernel, grid, *args, **c)

    monkeypatch.setattr(gemv_dense, "launch", spy)
    rng = np.random.default_rng(n + k)
    w = up(rng.standard_normal((2 * n, k)) / 64, device).astype(dtype)
    x = up(rng.standard_normal((1, k)), device).astype(dtype)
    r = up(rng.standard_normal((1, k)), device).astype(dtype)
    g2 = up(1 + rng.standard_normal(2 * k) / 4, device).astype(dtype)
    g = g2[::2].contiguous()

    def calls(norm: object) -> list[np.ndarray]:
        y, h = gemv_dense.rmsnorm_linear(x, norm, w, None, r, eps=1e-5)
        outs = [gemv_dense.gemv(x, w), gemv_dense.linear_silu_mul(x, w), y, h]
        gp.synchronize()
        return [o.to_numpy().view(np.uint16) for o in outs]

    plain = calls(g)
    assert seen == [False]
    with constant_weights():
        got = calls(g)
        strided = calls(g2[::2])
        expect = g_early and (device == "cpu" or early(x, False)[1])
    assert seen == [False, expect, False]
    for i, (a, b) in enumerate(zip(got, plain, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"output {i}")
    for i, (a, b) in enumerate(zip(strided, plain, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"strided norm weight, output {i}")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("refuse_gated", [True, False])
def test_early_tile_hook(
    device: str, dtype: str, refuse_gated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gemv_dense.early_tile decides, product by product (asked with the product's n, k, form),
    whether the programs load their first weight tile and the norm weight before the wait
    inside constant_weights(): a refused launch takes neither early load, the others keep
    them, and the bits are those of the calls outside constant_weights()."""
    from pygpukit.backends._support.weights import constant_weights

    n, k = 24, 6152
    rng = np.random.default_rng(5)
    w = up(rng.standard_normal((2 * n, k)) / 64, device).astype(dtype)
    x = up(rng.standard_normal((1, k)), device).astype(dtype)
    g = up(1 + rng.standard_normal(k) / 4, device).astype(dtype)
    _early_loads_on_cpu(device, monkeypatch)
    if device != "cpu" and not gemv_dense._early(x, False)[0]:
        pytest.skip("no programmatic dependent launch on this device")
    monkeypatch.setattr(gemv_dense, "NORM_WEIGHT_EARLY", True)
    asked: list[tuple[int, int, bool, bool]] = []

    def rule(n_: int, k_: int, gated: bool, norm: bool = False) -> bool:
        asked.append((n_, k_, gated, norm))
        return gated != refuse_gated

    monkeypatch.setattr(gemv_dense, "early_tile", rule)
    launch, seen = gemv_dense.launch, []

    def spy(kernel: object, grid: object, *args: object, **c: object) -> object:
        seen.append((bool(c["PREFETCH"]), bool(c.get("G_EARLY", False))))
        return launch(kernel, grid, *args, **c)

    monkeypatch.setattr(gemv_dense, "launch", spy)

    def calls() -> list[np.ndarray]:
        outs = [gemv_dense.gemv(x, w), gemv_dense.linear_silu_mul(x, w),
                gemv_dense.rmsnorm_linear(x, g, w, eps=1e-5)]  # fmt: skip
        return [o.to_numpy().view(np.uint16) for o in outs]

    plain = calls()
    with constant_weights():
        got = calls()
    assert asked == [(2 * n, k, False, False), (n, k, True, False), (2 * n, k, False, True)]
    inside = [(True, False), (False, False), (True, True)]
    if not refuse_gated:
        inside = [(False, False), (True, False), (False, False)]
    assert seen == [(False, False)] * 3 + inside
    for i, (a, b) in enumerate(zip(got, plain, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"output {i}")


def test_early_tile_rule() -> None:
    """Every product loads its first tile early but a plain square one from K 4096 (the 8B
    shapes' output projection, after decode attention); the RMSNorm-read form keeps it."""
    assert not gemv_dense.early_tile(4096, 4096, False)
    assert not gemv_dense.early_tile(8192, 8192, False)
    assert gemv_dense.early_tile(4096, 4096, False, norm=True)  # follows a GEMV
    assert gemv_dense.early_tile(2048, 2048, False)  # Llama-3.2-1B's output projection
    assert gemv_dense.early_tile(4096, 4096, True)
    assert gemv_dense.early_tile(6144, 4096, False)  # qkv
    assert gemv_dense.early_tile(4096, 12288, False)  # down
    assert gemv_dense.early_tile(12288, 4096, True)  # gate/up


def test_wide_tiles_from_k_4096() -> None:
    """The tile choice the K cases above rely on: [4, 2048] tiles at twice the warps from
    K = 4096, the 1024-value tiles below."""
    assert gemv_dense.tile(4096, False) == (4, 8, 2048)
    assert gemv_dense.tile(4096, True) == (4, 4, 2048)
    assert gemv_dense.tile(4095, False) == (4, 4, 1024)
    assert gemv_dense.tile(40, True) == (4, 2, 64)


def test_norm_form_takes_the_whole_row_up_to_k_4096() -> None:
    """rmsnorm_linear's tiles: the whole row as one tile to K = 4096 (8192 weights a program
    at K / 512 warps, at least 4), the plain rule past it."""
    assert gemv_dense.tile(2048, False, 3072, norm=True) == (4, 4, 2048)
    assert gemv_dense.tile(4096, False, 6144, norm=True) == (2, 8, 4096)
    assert gemv_dense.tile(3000, False, norm=True) == (2, 8, 4096)
    assert gemv_dense.tile(576, False, norm=True) == (4, 4, 1024)
    assert gemv_dense.tile(8192, False, norm=True) == gemv_dense.tile(8192, False)


def _rms64(h: np.ndarray, g: np.ndarray, eps: float) -> np.ndarray:
    out: np.ndarray = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps) * g
    return out


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize(
    ("m", "n", "k"), [(1, 19, 40), (1, 64, 1024), (3, 24, 2056), (1, 8, 4096), (2, 12, 6152)]
)
def test_rmsnorm_fused_against_float64(device: str, dtype: str, m: int, n: int, k: int) -> None:
    """rmsnorm(x + r) @ W^T + bias against the float64 product of the unrounded normalised
    row, with the whole row one tile (K 40 to 4096, part of the tile masked or not) and on the
    2048-value tiles past it; h = x + r
    stored rounded to x's dtype, exactly. x and r are column slices of wider arrays (row
    strides differ from K), the norm weight a strided view."""
    rng = np.random.default_rng(n * k)
    eps = 1e-5
    w = up(rng.standard_normal((n, k)) / np.sqrt(k) * 2, device).astype(dtype)
    x = up(rng.standard_normal((m, k + 8)) * 3, device).astype(dtype)[:, :k]
    r = up(rng.standard_normal((m, k + 24)), device).astype(dtype)[:, 16 : 16 + k]
    g = up(1 + rng.standard_normal(2 * k) / 4, device).astype(dtype)[::2]
    bias = up(rng.standard_normal(n), device).astype(dtype)
    h64 = _f64(x) + _f64(r)
    y, h = gemv_dense.rmsnorm_linear(x, g, w, bias, r, eps=eps)
    assert y.shape == (m, n) and h.shape == (m, k)
    n64 = _rms64(gp_round(h64, dtype).astype(np.float64), _f64(g), eps)
    assert_close(y, n64 @ _f64(w).T + _f64(bias), dtype)
    np.testing.assert_array_equal(
        h.to_numpy().view(np.uint16), gp_round(h64, dtype).view(np.uint16)
    )
    # Without a residual: the norm of x itself, no h.
    plain = gemv_dense.rmsnorm_linear(x, g, w, eps=eps)
    assert_close(plain, _rms64(_f64(x), _f64(g), eps) @ _f64(w).T, dtype)


def gp_round(a: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded once to dtype (the reference's round_to)."""
    from pygpukit.backends.cpu.gemv import round_to

    out: np.ndarray = round_to(a, np.dtype(dtype) if dtype != "bfloat16" else _bf16())
    return out


def _bf16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def test_rmsnorm_fused_rows_and_h_written_once(device: str) -> None:
    """A row's bits do not depend on the other rows; h is written whole although only the first
    column block's program stores it (N spans several blocks); N == 0 still returns h."""
    n, k = 37, 1040
    rng = np.random.default_rng(21)
    w = up(rng.standard_normal((n, k)) / 32, device).astype("float16")
    g = up(rng.standard_normal(k), device).astype("float16")
    x = up(rng.standard_normal((5, k)), device).astype("float16")
    r = up(rng.standard_normal((5, k)), device).astype("float16")
    y, h = gemv_dense.rmsnorm_linear(x, g, w, None, r, eps=1e-6)
    for i in (0, 4):
        yi, hi = gemv_dense.rmsnorm_linear(x[i : i + 1], g, w, None, r[i : i + 1], eps=1e-6)
        np.testing.assert_array_equal(
            yi.to_numpy().view(np.uint16), y.to_numpy()[i : i + 1].view(np.uint16)
        )
        np.testing.assert_array_equal(hi.to_numpy(), h.to_numpy()[i : i + 1])
    want = (x.to_numpy().astype(np.float32) + r.to_numpy().astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(h.to_numpy(), want)
    y0, h0 = gemv_dense.rmsnorm_linear(x, g, w[:0], None, r, eps=1e-6)
    assert y0.shape == (5, 0)
    np.testing.assert_array_equal(h0.to_numpy(), want)
