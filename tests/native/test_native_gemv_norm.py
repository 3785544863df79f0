"""The quantized decode GEMV with the RMSNorm before it read in, on the GPU (ops
rmsnorm_gemv_<format>, native/src/gemv/gemv_wa.cuh: norm_row, then the plain product's loop with
x in shared memory): gp.rmsnorm_linear with a QuantizedWeight and one row of x, routed to the
native kernel, against the float64 product of the EXACTLY normalised row h / sqrt(mean(h^2) +
eps) * norm_weight with the dequantized weight. The kernel rounds the normalised row to x's
dtype (the mma's operand; its rstd comes from a float32 sum of K squares), so the bound adds
(u + K 2^-24) |n| @ |W|^T to the GEMV's documented one:
    |y - ref| <= u |ref| + (u + (5K/4 + 32) 2^-24) (|n| @ |W|^T) + (K/4 + 32) 2^-24 |bias|
h = x + residual must have gp.rmsnorm(residual=)'s bits. Shapes reach every launch
configuration of one row (gemv_wa.cuh's launch_few_rows: 16, 8 and 4 warps, the wide ones), K up
to the form's 16384 (the row then needs the dynamic shared memory opt-in above 48 KiB)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _data import as64, rand, seed

import pygpukit as gp

gpu = pytest.mark.gpu
HALF = ["bfloat16", "float16"]
U = {"bfloat16": 2.0**-8, "float16": 2.0**-11}
QUANT = [("fp8", {}), ("fp8", {"block": 128}), ("int4", {}), ("int4", {"scale_dtype": "float16"}),
         ("nvfp4", {})]  # fmt: skip
# (K, N): 63 blocks of 16 columns (16 warps), 257 (8), 513 (4), 1025 and 4097 (the formats' wide
# launches, F::Wide and F::Wider), and the largest K the form takes.
SHAPES = {"small": (128, 1000), "odd": (4128, 4097), "wide": (1056, 8200), "many": (544, 16400),
          "huge": (128, 65552), "deep": (16384, 64)}  # fmt: skip


def _route(fmt: str) -> gp.route:
    return gp.route(**{f"rmsnorm_gemv_{fmt}": "native"})


def _dev(a: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(a), device="cuda:0")


def _quantized(fmt: str, kw: dict, n: int, k: int, rng: np.random.Generator) -> gp.QuantizedWeight:
    w = as64(rand(rng, (n, k), "float32")) * np.exp(rng.uniform(-2, 2, (n, 1)))
    return gp.quantize_weight(w, fmt, device="cuda:0", **kw)


def _check(y: np.ndarray, h: np.ndarray, g: np.ndarray, w64: np.ndarray, b: np.ndarray | None,
           eps: float, dtype: str) -> None:  # fmt: skip
    h64, k = as64(h), w64.shape[1]
    n64 = h64 / np.sqrt(np.mean(h64 * h64, axis=-1, keepdims=True) + eps) * as64(g)
    b64 = 0.0 if b is None else as64(b)
    ref = n64 @ w64.T + b64
    mag = np.abs(n64) @ np.abs(w64).T
    bound = U[dtype] * np.abs(ref) + (U[dtype] + (1.25 * k + 32) * 2.0**-24) * mag
    bound += (k / 4 + 32) * 2.0**-24 * np.abs(b64)
    err = np.abs(as64(y) - ref)
    bad = np.argwhere(~(err <= bound))
    assert not bad.size, (
        f"{len(bad)} elements beyond the bound, first at {tuple(bad[0])}: "
        f"err {err[tuple(bad[0])]:.3e} > bound {bound[tuple(bad[0])]:.3e}"
    )


@gpu
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("kn", list(SHAPES))
@pytest.mark.parametrize("fmt,kw", QUANT, ids=str)
@pytest.mark.parametrize("dtype", HALF)
def test_rmsnorm_form(dtype: str, fmt: str, kw: dict, kn: str, residual: bool) -> None:
    """x [1, 1, K] (one row with lead dims), a bias, out= a poisoned array; the same bits on a
    second call."""
    k, n = SHAPES[kn]
    rng = np.random.default_rng(seed("nrmsq", dtype, fmt, str(kw), kn, residual))
    qw = _quantized(fmt, kw, n, k, rng)
    x, r = rand(rng, (1, 1, k), dtype) * 3, rand(rng, (1, 1, k), dtype)
    g = (1 + rand(rng, k, "float64") / 4).astype(x.dtype)
    b = rand(rng, n, dtype)
    eps = 1e-5
    out = gp.full((1, 1, n), float("nan"), dtype=dtype, device="cuda:0")
    args = (_dev(x), _dev(g), qw, _dev(b))
    gp.routing.reset_stats()
    with _route(fmt):
        if residual:
            y, h = gp.rmsnorm_linear(*args, eps=eps, residual=_dev(r))
            y2, h2 = gp.rmsnorm_linear(*args, eps=eps, residual=_dev(r))
            np.testing.assert_array_equal(
                h.to_numpy().view(np.uint16), h2.to_numpy().view(np.uint16)
            )
            want = (as64(x) + as64(r)).astype(np.float32).astype(x.dtype)
            np.testing.assert_array_equal(h.to_numpy().view(np.uint16), want.view(np.uint16))
            hh = h.to_numpy()
        else:
            y = gp.rmsnorm_linear(*args, eps=eps, out=out)
            assert y is out
            y2 = gp.rmsnorm_linear(*args, eps=eps)
            hh = x
    assert gp.routing.stats()[f"rmsnorm_gemv_{fmt}"] == {"native": 2}
    assert y.shape == (1, 1, n)
    np.testing.assert_array_equal(y.to_numpy().view(np.uint16), y2.to_numpy().view(np.uint16))
    _check(y.to_numpy().reshape(1, n), hh.reshape(1, k), g, qw.dequantize(), b, eps, dtype)


@gpu
@pytest.mark.parametrize("fmt,kw", QUANT, ids=str)
def test_rmsnorm_form_in_the_decode_step_order(fmt: str, kw: dict) -> None:
    """Launched early (programmatic dependent launch, sm_90+) after the kernel that writes x and
    the residual, with the weight read before the wait (constant_weights), eagerly and from a
    CUDA graph: the result is that of the new x, with the bits of a plain launch."""
    from pygpukit.backends._support import pdl
    from pygpukit.backends._support.weights import constant_weights

    k, n = 4128, 4097
    rng = np.random.default_rng(seed("nrmsq_pdl", fmt, str(kw)))
    qw = _quantized(fmt, kw, n, k, rng)
    rows = (32 << 20) // (2 * k)
    src = _dev(rand(rng, (rows, k), "bfloat16"))
    ones = _dev(np.ones(k, dtype=ml_dtypes.bfloat16))
    big = gp.zeros((rows, k), dtype="bfloat16", device="cuda:0")
    res = _dev(rand(rng, (1, k), "bfloat16"))
    g = _dev((1 + rand(rng, k, "float64") / 4).astype(ml_dtypes.bfloat16))

    def step() -> gp.GPUArray:
        gp.rmsnorm(src, ones, 1e-6, out=big)  # releases the next launch as it starts
        y, _ = gp.rmsnorm_linear(big[rows - 1 :], g, qw, eps=1e-6, residual=res)
        return y  # type: ignore[no-any-return]

    bits = {}
    before = pdl._pdl_on[0]
    try:
        with _route(fmt):
            for early in (False, True):
                pdl.set_pdl(early)
                big.fill_(0)
                with constant_weights():
                    bits[early, "eager"] = step().to_numpy().view(np.uint16)
                graph = gp.CUDAGraph()
                with graph.capture(), constant_weights():
                    yg = step()
                big.fill_(0)
                graph.replay()
                gp.synchronize()
                bits[early, "graph"] = yg.to_numpy().view(np.uint16)
    finally:
        pdl.set_pdl(before)
    h = (as64(big.to_numpy()[rows - 1 :]) + as64(res.to_numpy())).astype(np.float32)
    first = bits[False, "eager"]
    hb = h.astype(ml_dtypes.bfloat16)
    _check(
        first.view(ml_dtypes.bfloat16), hb, g.to_numpy(), qw.dequantize(), None, 1e-6, "bfloat16"
    )
    for key, got in bits.items():
        np.testing.assert_array_equal(got, first, err_msg=str(key))
