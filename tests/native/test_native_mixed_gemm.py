"""CUTLASS's int4 mixed-input GEMM (native/src/mixed_gemm, sm_90a), op qgemm_int4_dense, on the
GPU: against the float64 product with the weight rounded to x's dtype (the dense path's weight)
for both x dtypes and every scale dtype, both tile widths (64 and 128 rows), N off the 128-row
weight tile, a deep K split across CTAs, bias; x with a row stride and leading dims and a column
slice as out= through gp.linear_quantized's dense rows; the same bits as the dense path's
weight; run-to-run bits and graph replay equal to eager; the routing (which rows and weights it
serves, the deterministic mode's refusal) and the extension's refusals.

The bound (mixed_gemm.h: each weight's product in float32 rounded to x's dtype, float32 sums,
one rounding), against ref = x @ round_x(float32(W))^T:
    |y - ref| <= u |ref| + (K + 32) 2^-24 (|x| @ |round_x(W)|^T + |bias|)
with u = 2^-8 (bfloat16) or 2^-11 (float16).
"""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, np_dtype, seed

import pygpukit as gp
from pygpukit.backends.cpu.gemv import round_to
from pygpukit.routing.crossovers import QDENSE_FUSED_MAX_ROWS, QDENSE_MIN_ROWS
from pygpukit.routing.dispatch import run

OP = "qgemm_int4_dense"

pytestmark = pytest.mark.gpu
DEV = "cuda:0"
U = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def _hopper_with_the_family() -> str:
    """Why these tests cannot run here, or "" when they can."""
    from pygpukit.backends.native._libs import extension, status

    ok, why = status()
    if not ok:
        return why
    if not hasattr(extension(), "mixed_gemm"):
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


# int4 with each scale dtype, fp8 with per-channel and 128-block scales
KINDS = ["float32", "bfloat16", "float16", "fp8", "fp8_b128"]


def _weight(n: int, k: int, kind: str, tag: str) -> gp.QuantizedWeight:
    """int4 with scales of dtype ``kind``, or fp8 ("fp8": per-channel, "fp8_b128": 128-blocks)."""
    w = np.random.default_rng(seed("nmixed", tag, n, k)).standard_normal((n, k)) * 0.05
    if kind.startswith("fp8"):
        return gp.quantize_weight(w, "fp8", block=128 if kind == "fp8_b128" else 0, device=DEV)
    return gp.quantize_weight(w, "int4", scale_dtype=kind, device=DEV)


def _call(x: gp.GPUArray, qw: gp.QuantizedWeight, b: gp.GPUArray | None = None,
          scales: gp.GPUArray | None = None) -> gp.GPUArray:  # fmt: skip
    """The routed op qgemm_<format>_dense on x and qw (scales: in place of qw's)."""
    params = {"group": qw.block} if qw.format == "int4" else {"block": qw.block}
    s = qw.scales if scales is None else scales
    return run(f"qgemm_{qw.format}_dense", (x, qw.data, s, b), params)  # type: ignore[no-any-return]


def _x(shape: tuple[int, ...], dtype: str, tag: str) -> np.ndarray:
    return np.random.default_rng(seed("nmixed-x", tag, *shape)).standard_normal(shape)


def _check(y: gp.GPUArray, x: gp.GPUArray, qw: gp.QuantizedWeight, b: gp.GPUArray | None,
           dtype: str) -> None:  # fmt: skip
    x64 = as64(x.to_numpy()).reshape(-1, qw.shape[1])
    # The kernel's weight: code * scale rounded to float32, then to x's dtype (mixed_gemm.h).
    # The exact product fits float64, so rounding it to float32 is the float32 multiply's result.
    w64 = as64(round_to(qw.dequantize().astype(np.float32), np_dtype(dtype)))
    b64 = None if b is None else as64(b.to_numpy())
    ref = x64 @ w64.T + (0.0 if b64 is None else b64)
    got = as64(y.to_numpy()).reshape(ref.shape)
    assert_close(got, ref, dtype)
    k = w64.shape[1]
    mag = np.abs(x64) @ np.abs(w64).T + (0.0 if b64 is None else np.abs(b64))
    bound = U[dtype] * np.abs(ref) + (k + 32) * 2.0**-24 * mag
    bad = np.argwhere(~(np.abs(got - ref) <= bound))
    assert not bad.size, f"{len(bad)} elements beyond the documented bound, first {bad[0]}"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("m", "n", "k"), [(33, 72, 128), (64, 4104, 384), (65, 256, 4224),
                                           (300, 1000, 2048), (40, 256, 14336)])  # fmt: skip
def test_matches_float64(dtype: str, kind: str, m: int, n: int, k: int) -> None:
    """The routed op at any rows: both sides of the 64-row tile's limit, N off the 128-row
    weight tile, an odd number of 128-groups (4224 = 33), a deep K on few weight tiles (split
    across CTAs); with a bias."""
    qw = _weight(n, k, kind, "ref")
    op = f"qgemm_{qw.format}_dense"
    x = gp.from_numpy(_x((m, k), dtype, "ref"), device=DEV).astype(dtype)
    b = gp.from_numpy(_x((n,), dtype, "bias"), device=DEV).astype(dtype)
    gp.routing.reset_stats()
    y = _call(x, qw, b)
    assert y.shape == (m, n) and y.dtype.name == dtype
    _check(y, x, qw, b, dtype)
    assert gp.routing.stats()[op] == {"native": 1}
    _check(_call(x, qw), x, qw, None, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("m", [40, 130])
def test_scales_of_x_dtype_and_widened_give_the_same_bits(dtype: str, m: int) -> None:
    """Scales of x's dtype take the instances that read them as they are; the same scales as
    float32 take the widened ones. Both round q * s once: the bits agree."""
    qw = _weight(256, 1024, dtype, "same")
    x = gp.from_numpy(_x((m, 1024), dtype, "same"), device=DEV).astype(dtype)
    assert qw.scales is not None
    own = _call(x, qw)
    wide = _call(x, qw, scales=qw.scales.astype("float32"))
    np.testing.assert_array_equal(own.to_numpy().view(np.uint16), wide.to_numpy().view(np.uint16))
    _check(own, x, qw, None, dtype)


@pytest.mark.parametrize("kind", ["float32", "fp8"])
def test_linear_quantized_takes_it_on_the_dense_rows_only(kind: str) -> None:
    """gp.linear_quantized on an int4 / fp8 weight: the exact-weight kernels below
    QDENSE_MIN_ROWS rows, this op from there below QDENSE_FUSED_MAX_ROWS, the expanded weight
    from there; a weight it cannot serve (K off 128) expands from QDENSE_MIN_ROWS."""
    fmt = "fp8" if kind == "fp8" else "int4"
    op, exact, dense = f"qgemm_{fmt}_dense", f"qgemm_{fmt}", "dequantize_weight"
    lo, hi = QDENSE_MIN_ROWS[fmt], QDENSE_FUSED_MAX_ROWS[fmt]
    for k, m, want in ((1024, lo - 1, exact), (1024, lo, op), (1024, hi - 1, op),
                       (1024, hi, dense), (4128, lo, dense)):  # fmt: skip
        qw = _weight(256, k, kind, f"lq{k}")
        x = gp.from_numpy(_x((m, k), "bfloat16", f"lq{k}"), device=DEV).astype("bfloat16")
        gp.routing.reset_stats()
        y = gp.linear_quantized(x, qw)
        ran = {o for o, n in gp.routing.stats().items() if sum(n.values())}
        assert want in ran and not ({op, exact, dense} - {want}) & ran, (m, k, ran)
        if want != exact:
            _check(y, x, qw, None, "bfloat16")


def test_strided_x_lead_dims_and_an_out_slice() -> None:
    """gp.linear_quantized with x every other row of a wider array, [2, 150] leading dims; out a
    column slice of a NaN-filled wider array, the columns around it untouched."""
    n, k = 200, 512
    qw = _weight(n, k, "float32", "strided")
    wide = gp.from_numpy(_x((2, 300, k), "bfloat16", "strided"), device=DEV).astype("bfloat16")
    x = wide[:, ::2]  # 2 x 150 rows: the dense path's
    big = gp.full((2, 150, n + 16), float("nan"), dtype="bfloat16", device=DEV)
    out = big[..., 8 : 8 + n]
    gp.routing.reset_stats()
    y = gp.linear_quantized(x, qw, out=out)
    assert y is out and gp.routing.stats()[OP] == {"native": 1}
    _check(out, x, qw, None, "bfloat16")
    around = big.to_numpy().astype(np.float32)
    assert np.isnan(around[..., :8]).all() and np.isnan(around[..., 8 + n :]).all()


def test_same_bits_and_graph_replay() -> None:
    """Run to run the same bits; a captured call replays to the eager call's bits, and follows
    new x values written into the captured buffer."""
    n, k, m = 256, 14336, 40  # 2 weight tiles, deep K: split across CTAs (stream-K)

    def call() -> gp.GPUArray:
        return _call(x, qw)

    qw = _weight(n, k, "bfloat16", "det")
    x = gp.from_numpy(_x((m, k), "bfloat16", "det"), device=DEV).astype("bfloat16")
    a = call().to_numpy().view(np.uint16)
    b = call().to_numpy().view(np.uint16)
    np.testing.assert_array_equal(a, b)
    g = gp.CUDAGraph(DEV)
    with g.capture():
        res = call()
    g.replay()
    gp.synchronize()
    np.testing.assert_array_equal(res.to_numpy().view(np.uint16), a)
    x2 = gp.from_numpy(_x((m, k), "bfloat16", "det2"), device=DEV).astype("bfloat16")
    x[...] = x2
    g.replay()
    gp.synchronize()
    _check(res, x2, qw, None, "bfloat16")


def test_agrees_with_the_expanded_weight_path() -> None:
    """The same rounded weight as dequantize_weight (bit for bit, checked on its values) then
    gp.linear: the two products differ only in the order of their float32 sums."""
    n, k, m = 384, 2048, 300
    qw = _weight(n, k, "bfloat16", "twin")  # q * s exact in float32: one rounding on both sides
    x = gp.from_numpy(_x((m, k), "bfloat16", "twin"), device=DEV).astype("bfloat16")
    y = _call(x, qw)
    params = {"fmt": "int4", "block": 128, "global_scale": 1.0, "out_dtype": x.dtype.np_dtype}
    w = run("dequantize_weight", (qw.data, qw.scales), params)
    np.testing.assert_array_equal(
        w.to_numpy().view(np.uint16),
        round_to(qw.dequantize(), np_dtype("bfloat16")).view(np.uint16),
    )
    assert_close(y, as64(gp.linear(x, w).to_numpy()), "bfloat16")


def test_routing_sends_it_only_what_it_serves() -> None:
    """K off the 128-groups: no backend serves the op on CUDA (the table's reasons name the
    constraint); the deterministic mode refuses it (not batch invariant), and
    gp.linear_quantized then expands the weight."""
    qw = _weight(64, 4128, "float32", "route")
    x = gp.from_numpy(_x((40, 4128), "bfloat16", "route"), device=DEV).astype("bfloat16")
    with pytest.raises(gp.errors.BackendUnavailableError, match="multiple of 128"):
        run(OP, (x, qw.data, qw.scales, None), {"group": 128})
    qw = _weight(64, 1024, "float32", "route2")
    x = gp.from_numpy(_x((300, 1024), "bfloat16", "route2"), device=DEV).astype("bfloat16")
    gp.routing.reset_stats()
    with gp.deterministic():
        with pytest.raises(gp.errors.BackendUnavailableError, match="batch invariant"):
            run(OP, (x, qw.data, qw.scales, None), {"group": 128})
        gp.linear_quantized(x, qw)
    ran = {op for op, n in gp.routing.stats().items() if sum(n.values())}
    assert OP not in ran and "qgemm_int4" in ran, ran


@pytest.mark.parametrize(
    ("bad", "msg"),
    [
        ({"block": 64}, "per group of 128"),
        ({"format": "nvfp4"}, "unknown weight format 'nvfp4'"),
        ({"format": "fp8", "block": 64}, "per output channel .block 0. or per block of 128"),
        ({"format": "fp8", "scale_dtype": "bfloat16"}, "fp8 scales must be float32"),
        ({"format": "fp8", "block": 0, "scales": 4}, "per-channel scales too"),
        ({"k": 4160}, "multiple of 128"),
        ({"n": 12}, "multiple of 8"),
        ({"dtype": "float32"}, "float16 or bfloat16"),
        ({"scale_dtype": "int8"}, "int4 scales must be float32"),
        ({"x": 2}, "16-byte aligned"),
        ({"y": 0}, "device pointers"),
        ({"k": 1 << 27}, "below 2\\^27"),
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
        "device": 0, "stream": 0, "format": "int4", "dtype": "bfloat16", "x": base + 4096,
        "m": m, "k": k, "x_row_stride": k, "data": base + 65536, "n": n,
        "scales": base + 131072, "scale_dtype": "float32", "block": 128, "bias": 0,
        "y": base + 196608, "workspace": base + 262144, "workspace_bytes": 1 << 19,
    }  # fmt: skip
    for key, v in bad.items():
        args[key] = args[key] + v if key in ("x", "workspace", "scales") else v
    with pytest.raises(ValueError, match=msg):
        ext.mixed_gemm(**args)
    qw = _weight(n, k, "float32", "after")
    x = gp.from_numpy(_x((m, k), "bfloat16", "after"), device=DEV).astype("bfloat16")
    _check(_call(x, qw), x, qw, None, "bfloat16")
