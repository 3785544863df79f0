"""CUTLASS's int4 mixed-input GEMM (native/src/mixed_gemm, sm_90a) on the GPU: gp.linear_quantized
on an int4 weight past the decode GEMV's rows, against the float64 product with the dequantized
weight, for both x dtypes and every scale dtype, both tile widths (64 and 128 rows), N off the
128-row weight tile, bias, x with a row stride and leading dims, a column slice as out=; the
documented error bound element by element; run-to-run bits and graph replay equal to eager; the
routing (which calls it serves, the deterministic mode's refusal) and the extension's refusals.

The bound (mixed_gemm.h: each weight rounded once to x's dtype, float32 sums, one rounding):
    |y - ref| <= u |ref| + (u + (K + 32) 2^-24) (|x| @ |W|^T + |bias|)
with u = 2^-8 (bfloat16) or 2^-11 (float16).
"""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, seed

import pygpukit as gp
from pygpukit.routing.dispatch import run

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
U = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def _hopper_with_the_family() -> str:
    """Why these tests cannot run here, or "" when they can."""
    from pygpukit.backends.native._libs import extension, status

    ok, why = status()
    if not ok:
        return why
    if not hasattr(extension(), "mixed_gemm_int4"):
        return "the extension was built without the mixed_gemm family (needs sm_90a)"
    props = gp.runtime.device(DEV).properties
    if (props["major"], props["minor"]) != (9, 0):
        return (
            f"CUTLASS's mixed-input GEMM needs sm_90, device has {props['major']}.{props['minor']}"
        )
    return ""


@pytest.fixture(autouse=True)
def _needs_hopper() -> None:
    why = _hopper_with_the_family()
    if why:
        pytest.skip(why)


def _weight(n: int, k: int, scale_dtype: str, tag: str) -> gp.QuantizedWeight:
    w = np.random.default_rng(seed("nmixed", tag, n, k)).standard_normal((n, k)) * 0.05
    return gp.quantize_weight(w, "int4", scale_dtype=scale_dtype, device=DEV)


def _x(shape: tuple[int, ...], dtype: str, tag: str) -> np.ndarray:
    return np.random.default_rng(seed("nmixed-x", tag, *shape)).standard_normal(shape)


def _check(y: gp.GPUArray, x: gp.GPUArray, qw: gp.QuantizedWeight, b: gp.GPUArray | None,
           dtype: str) -> None:  # fmt: skip
    x64 = as64(x.to_numpy()).reshape(-1, qw.shape[1])
    w64 = qw.dequantize()
    b64 = None if b is None else as64(b.to_numpy())
    ref = x64 @ w64.T + (0.0 if b64 is None else b64)
    got = as64(y.to_numpy()).reshape(ref.shape)
    assert_close(got, ref, dtype)
    k = w64.shape[1]
    mag = np.abs(x64) @ np.abs(w64).T + (0.0 if b64 is None else np.abs(b64))
    bound = U[dtype] * np.abs(ref) + (U[dtype] + (k + 32) * 2.0**-24) * mag
    bad = np.argwhere(~(np.abs(got - ref) <= bound))
    assert not bad.size, f"{len(bad)} elements beyond the documented bound, first {bad[0]}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("scale_dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize(("m", "n", "k"), [(33, 72, 128), (64, 4104, 384), (65, 256, 4224),
                                           (300, 1000, 2048), (40, 256, 14336)])  # fmt: skip
def test_matches_float64(dtype: str, scale_dtype: str, m: int, n: int, k: int) -> None:
    """The routed op qgemm_int4 (whatever rows linear_quantized hands it): rows on both sides of
    the 64-row tile's limit, N off the 128-row weight tile, K an odd number of 64-value K tiles
    (4224 = 33 groups), a deep K on few weight tiles (split across CTAs); with a bias."""
    qw = _weight(n, k, scale_dtype, "ref")
    x = gp.from_numpy(_x((m, k), dtype, "ref"), device=DEV).astype(dtype)
    b = gp.from_numpy(_x((n,), dtype, "bias"), device=DEV).astype(dtype)
    gp.routing.reset_stats()
    y = run("qgemm_int4", (x, qw.data, qw.scales, b), {"group": 128})
    assert y.shape == (m, n) and y.dtype.name == dtype
    _check(y, x, qw, b, dtype)
    assert gp.routing.stats()["qgemm_int4"] == {"native": 1}
    _check(run("qgemm_int4", (x, qw.data, qw.scales, None), {"group": 128}), x, qw, None, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m", [40, 130])
def test_scales_of_x_dtype_and_widened_give_the_same_bits(dtype: str, m: int) -> None:
    """Scales of x's dtype take the instances that read them as they are; the same scales as
    float32 take the widened ones. Both round q * s once: the bits agree."""
    qw = _weight(256, 1024, dtype, "same")
    x = gp.from_numpy(_x((m, 1024), dtype, "same"), device=DEV).astype(dtype)
    assert qw.scales is not None
    own = run("qgemm_int4", (x, qw.data, qw.scales, None), {"group": 128})
    wide = run("qgemm_int4", (x, qw.data, qw.scales.astype("float32"), None), {"group": 128})
    np.testing.assert_array_equal(own.to_numpy().view(np.uint16), wide.to_numpy().view(np.uint16))
    _check(own, x, qw, None, dtype)


@pytest.mark.parametrize("m", [96, 512])
def test_linear_quantized_takes_it_past_the_gemv_rows(m: int) -> None:
    """gp.linear_quantized on an int4 weight with more rows than the decode GEMV serves, up to
    the CUTLASS family's own dense crossover (past the Triton kernel's)."""
    qw = _weight(512, 1024, "float32", "lq")
    x = gp.from_numpy(_x((m, 1024), "bfloat16", "lq"), device=DEV).astype("bfloat16")
    gp.routing.reset_stats()
    _check(gp.linear_quantized(x, qw), x, qw, None, "bfloat16")
    assert gp.routing.stats() == {"qgemm_int4": {"native": 1}}


def test_dense_path_from_the_cutlass_crossover_and_the_triton_one() -> None:
    """QDENSE_MIN_ROWS_BY_FAMILY rows of a weight CUTLASS serves expand it for cuBLASLt; a weight
    only Triton serves (K off the 128-groups) expands from QDENSE_MIN_ROWS."""
    from pygpukit.routing.table import QDENSE_MIN_ROWS, QDENSE_MIN_ROWS_BY_FAMILY

    late = QDENSE_MIN_ROWS_BY_FAMILY[("int4", "mixed_gemm")]
    for k, m in ((1024, late), (4128, QDENSE_MIN_ROWS["int4"])):
        qw = _weight(256, k, "bfloat16", f"dense{k}")
        x = gp.from_numpy(_x((m, k), "bfloat16", f"dense{k}"), device=DEV).astype("bfloat16")
        gp.routing.reset_stats()
        y = gp.linear_quantized(x, qw)
        ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
        assert {"dequantize_weight", "linear"} <= ran and "qgemm_int4" not in ran, ran
        assert_close(y, as64(x.to_numpy()) @ qw.dequantize().T, "bfloat16")


def test_strided_x_lead_dims_and_an_out_slice() -> None:
    """x every other row of a wider array with [2, 40] leading dims; out a column slice of a
    NaN-filled wider array, the columns around it untouched."""
    n, k = 200, 512
    qw = _weight(n, k, "float32", "strided")
    wide = gp.from_numpy(_x((2, 80, k), "bfloat16", "strided"), device=DEV).astype("bfloat16")
    x = wide[:, ::2]
    big = gp.full((2, 40, n + 16), float("nan"), dtype="bfloat16", device=DEV)
    out = big[..., 8 : 8 + n]
    y = gp.linear_quantized(x, qw, out=out)
    assert y is out
    _check(out, x, qw, None, "bfloat16")
    around = big.to_numpy().astype(np.float32)
    assert np.isnan(around[..., :8]).all() and np.isnan(around[..., 8 + n :]).all()


def test_same_bits_and_graph_replay() -> None:
    """Run to run the same bits; a captured call replays to the eager call's bits, and follows
    new x values written into the captured buffer."""
    n, k, m = 512, 1024, 96
    qw = _weight(n, k, "bfloat16", "det")
    x = gp.from_numpy(_x((m, k), "bfloat16", "det"), device=DEV).astype("bfloat16")
    a = gp.linear_quantized(x, qw).to_numpy().view(np.uint16)
    b = gp.linear_quantized(x, qw).to_numpy().view(np.uint16)
    np.testing.assert_array_equal(a, b)
    g = gp.CUDAGraph(DEV)
    with g.capture():
        res = gp.linear_quantized(x, qw)
    g.replay()
    gp.synchronize()
    np.testing.assert_array_equal(res.to_numpy().view(np.uint16), a)
    x2 = gp.from_numpy(_x((m, k), "bfloat16", "det2"), device=DEV).astype("bfloat16")
    x[...] = x2
    g.replay()
    gp.synchronize()
    _check(res, x2, qw, None, "bfloat16")


def test_agrees_with_the_triton_twin() -> None:
    """The two kernels dequantize and round the same way: results within the dtype's bound of
    each other (the sums' order differs)."""
    n, k, m = 384, 2048, 128
    qw = _weight(n, k, "float32", "twin")
    x = gp.from_numpy(_x((m, k), "bfloat16", "twin"), device=DEV).astype("bfloat16")
    y_native = gp.linear_quantized(x, qw)
    with gp.route("qgemm_int4:triton"):
        y_triton = gp.linear_quantized(x, qw)
    assert_close(y_native, as64(y_triton.to_numpy()), "bfloat16")


def test_routing_sends_it_only_what_it_serves() -> None:
    """K off the 128-groups goes to Triton (the forced route names the reason); the
    deterministic mode refuses it (not batch invariant) and Triton serves; the decode GEMV keeps
    its rows."""
    qw = _weight(64, 4128, "float32", "route")  # K = 4128: a partial group
    x = gp.from_numpy(_x((40, 4128), "bfloat16", "route"), device=DEV).astype("bfloat16")
    gp.routing.reset_stats()
    gp.linear_quantized(x, qw)
    assert gp.routing.stats()["qgemm_int4"] == {"triton": 1}
    with gp.route("qgemm_int4:native"):  # the GEMV twin serves it then
        gp.linear_quantized(x, qw)
    assert gp.routing.stats()["qgemm_int4"] == {"triton": 1, "native": 1}
    qw = _weight(64, 1024, "float32", "route2")
    x = gp.from_numpy(_x((40, 1024), "bfloat16", "route2"), device=DEV).astype("bfloat16")
    gp.routing.reset_stats()
    with gp.deterministic():
        gp.linear_quantized(x, qw)
    gp.linear_quantized(x[:4], qw)
    assert gp.routing.stats() == {"qgemm_int4": {"triton": 1}, "gemv_int4": {"native": 1}}


@pytest.mark.parametrize(
    ("bad", "msg"),
    [
        ({"group": 64}, "group must be 128"),
        ({"k": 4160}, "multiple of 128"),
        ({"n": 12}, "multiple of 8"),
        ({"dtype": "float32"}, "float16 or bfloat16"),
        ({"scale_dtype": "int8"}, "scales must be float32"),
        ({"x": 2}, "16-byte aligned"),
        ({"x_row_stride": 100}, "16-byte aligned"),
        ({"workspace": 64}, "256-byte aligned"),
        ({"workspace_bytes": 16}, "workspace has 16 bytes"),
    ],
)
def test_extension_rejects_bad_arguments(bad: dict, msg: str) -> None:
    """Each argument the entry checks, named in a ValueError before anything launches; the
    runtime stays usable after."""
    from pygpukit.backends.native._libs import extension

    ext = extension()
    n, k, m = 64, 256, 40
    ws = gp.empty((1 << 20,), "uint8", device=DEV)
    base = -(-ws.data_ptr() // 256) * 256
    args = {
        "device": 0, "stream": 0, "dtype": "bfloat16", "x": base + 4096, "m": m, "k": k,
        "x_row_stride": k, "data": base + 65536, "n": n, "scales": base + 131072,
        "scale_dtype": "float32", "group": 128, "bias": 0, "y": base + 196608,
        "workspace": base + 262144, "workspace_bytes": 1 << 19,
    }  # fmt: skip
    for key, v in bad.items():
        args[key] = v if key not in ("x", "workspace") else args[key] + v
    with pytest.raises(ValueError, match=msg):
        ext.mixed_gemm_int4(**args)
    qw = _weight(n, k, "float32", "after")
    x = gp.from_numpy(_x((m, k), "bfloat16", "after"), device=DEV).astype("bfloat16")
    _check(gp.linear_quantized(x, qw), x, qw, None, "bfloat16")


def test_forced_native_route_takes_the_gemv_twin_where_cutlass_cannot() -> None:
    """ROUTE=qgemm_int4:native: the CUTLASS kernel where its constraints hold, else the native
    GEMV twin (N = 60: off TMA's 16-byte rows); both as the table orders them."""
    from pygpukit.routing.select import select

    dev = gp.runtime.device(DEV)
    for n, module in ((64, "mixed_gemm"), (60, "gemv")):
        qw = _weight(n, 256, "float16", f"n{n}")
        x = gp.from_numpy(_x((40, 256), "float16", f"n{n}"), device=DEV).astype("float16")
        with gp.route("qgemm_int4:native"):
            backend, impl = select("qgemm_int4", dev, (x, qw.data, qw.scales, None), {"group": 128})
            y = gp.linear_quantized(x, qw)
        assert backend == "native" and impl.__module__.endswith(f"native.{module}"), impl
        _check(y, x, qw, None, "float16")
