"""The gemv family on the GPU (native/src/gemv): gp.gemv and gp.linear_quantized with the route
forced to native, against the float64 product of x with the DEQUANTIZED weight.

Every result is checked twice: the bound for its dtype (assert_close, docs/design.md), and the bound
each kernel documents at the top of its .cu file, element by element:
    |y - ref| <= u |ref| + (K/4 + 32) * 2^-24 * (|x| @ |W|^T + |bias|)
with u = 2^-8 (bfloat16) or 2^-11 (float16). Shapes: M = 1, 3, 16 (dense), 1, 3, 8, 9, 16
(quantized: x tiles of 8) and 40 (tiles of 16 rows);
K = 128 and 4096 + an odd multiple of the format's granule (partial warp-steps, a partial last
scale group); N = 1000 and 4097 (columns past the last 16-column tile). The shapes reach every
launch configuration the kernels pick by block count and K (gemv_kernel.cuh, gemv_wa.cuh): N =
1000 under 256 blocks of 16 columns, 4097 under 512, "wide" (K 1056, N 8200) under 1024 with
short rows, "many" (K 544, N 16400) from 1024 and "huge" (K 128, N 65552) from 4096 (the quantized
kernel's wide launches: gemv_wa.cuh's launch_few_rows, F::Wide and F::Wider). K 544 gives the
wide launch several warp-steps a warp and a partial last one (its streams advance, its ring
turns); "huge" only reaches F::Wider (its rows stay short to keep the float64 reference cheap).
At M = 1 the 4-bit formats read x staged in shared memory, zero-padded past K, in the decoders'
pair order: nvfp4 from 512 blocks ("wide", "many", "huge"; the gated product's "odd", "wide",
"many" and "huge" too), int4 at 512-1023 blocks up to K 4096 ("wide", plain and gated), and
nvfp4's plain product in bfloat16 in the Tail launch past the first wave ("tail": 1338 blocks, K
4128; a third ring stage). KN_LONG (K 16352) covers long rows read in the loop.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed
from _routes import native_impl

import pygpukit as gp

gpu = pytest.mark.gpu
HALF = ["bfloat16", "float16"]
ROUTE = (
    "gemv:native,gemv_fp8:native,gemv_int4:native,gemv_nvfp4:native,"
    "gemv_fp8_silu_mul:native,gemv_int4_silu_mul:native,gemv_nvfp4_silu_mul:native"
)
U = {"bfloat16": 2.0**-8, "float16": 2.0**-11}
# K = 4096 + an odd multiple of the 16-byte granule: 8 (dense), 16 (fp8), 32 (4-bit).
K_ODD = {"dense": 4104, "fp8": 4112, "int4": 4128, "nvfp4": 4128}
# 513 blocks of 16 columns, K <= 4096 (a multiple of every granule, a partial last int4 group):
# the kernels' configurations for many blocks and short rows.
KN_WIDE = (1056, 8200)
KN_MANY = (544, 16400)  # 1025 blocks of 16 columns; 17 int4 granules a row
KN_HUGE = (128, 65552)  # 4097 blocks of 16 columns
# 1338 blocks of 16 columns (the last of 8), K 4128 (a partial last warp-step and int4 group):
# gemv_wa.cuh's Tail at one row of bfloat16 x (nvfp4's plain product), the wide launches elsewhere
KN_TAIL = (K_ODD["nvfp4"], 21400)
# 257 blocks of 16 columns (plain; gated: I = 2049), K 16384 - a 4-bit granule: long rows (a
# partial last warp-step)
KN_LONG = (16352, 4098)
QUANT = [
    ("fp8", {}),
    ("fp8", {"block": 128}),
    ("int4", {}),
    ("int4", {"scale_dtype": "bfloat16"}),
    ("int4", {"scale_dtype": "float16"}),
    ("nvfp4", {}),
]


@pytest.fixture
def _native() -> object:
    with gp.route(ROUTE):
        yield


def _up(x: np.ndarray, layout: str = "contiguous") -> gp.GPUArray:
    if layout == "rows":  # every other row: read in place with a row stride
        tall = np.zeros((2 * x.shape[0], *x.shape[1:]), dtype=x.dtype)
        tall[::2] = x
        return gp.from_numpy(tall, device="cuda:0")[::2]
    if layout == "offset":  # rows start 2 elements into a wider buffer: not 16-byte aligned
        wide = np.zeros((*x.shape[:-1], x.shape[-1] + 8), dtype=x.dtype)
        wide[..., 2 : 2 + x.shape[-1]] = x
        return gp.from_numpy(wide, device="cuda:0")[..., 2 : 2 + x.shape[-1]]
    if layout == "transposed":
        t = gp.from_numpy(np.ascontiguousarray(np.swapaxes(x, -1, -2)), device="cuda:0")
        return t.swapaxes(-1, -2)
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


def _check(
    y: gp.GPUArray, x: np.ndarray, w64: np.ndarray, b: np.ndarray | None, dtype: str
) -> None:
    x64 = as64(x)
    b64 = None if b is None else as64(b)
    ref = x64 @ w64.T + (0.0 if b64 is None else b64)
    assert_close(y, ref, dtype)
    k = w64.shape[1]
    mag = np.abs(x64) @ np.abs(w64).T + (0.0 if b64 is None else np.abs(b64))
    bound = U[dtype] * np.abs(ref) + (k / 4 + 32) * 2.0**-24 * mag
    err = np.abs(as64(y.to_numpy()) - ref)
    bad = np.argwhere(~(err <= bound))
    assert not bad.size, (
        f"{len(bad)} elements beyond the documented bound, first at {tuple(bad[0])}: "
        f"err {err[tuple(bad[0])]:.3e} > bound {bound[tuple(bad[0])]:.3e}"
    )


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("layout", ["contiguous", "rows", "offset"])
@pytest.mark.parametrize("kn", [(128, 1000), (K_ODD["dense"], 4097), KN_WIDE], ids=str)
@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("dtype", HALF)
def test_gemv_dense(dtype: str, m: int, kn: tuple[int, int], layout: str) -> None:
    k, n = kn
    rng = np.random.default_rng(seed("ngemv", dtype, m, kn, layout))
    x, w, b = rand(rng, (m, k), dtype), rand(rng, (n, k), dtype), rand(rng, n, dtype)
    out = _poison((m, n), dtype)
    y = gp.gemv(_up(x, layout), _up(w), _up(b), out=out)
    assert y is out
    assert gp.routing.explain("gemv", _up(x), _up(w)).backend == "native"
    _check(y, x, as64(w), b, dtype)


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("wlayout", ["rows", "offset", "transposed"])
def test_gemv_dense_weight_views(wlayout: str) -> None:
    """A weight with a row stride is read in place; misaligned or transposed ones are copied."""
    rng = np.random.default_rng(seed("ngemv_w", wlayout))
    x, w = rand(rng, (5, 256), "bfloat16"), rand(rng, (77, 256), "bfloat16")
    y = gp.gemv(_up(x, "transposed"), _up(w, wlayout))
    assert y.shape == (5, 77)
    _check(y, x, as64(w), None, "bfloat16")


_QW: dict[tuple, tuple[gp.QuantizedWeight, np.ndarray]] = {}


def _quantized(fmt: str, kw: dict, n: int, k: int) -> tuple[gp.QuantizedWeight, np.ndarray]:
    """(weight quantized on the host, its float64 dequantization), cached across tests."""
    key = (fmt, str(kw), n, k)
    if key not in _QW:
        _QW.clear()  # keep one large weight alive at a time
        rng = np.random.default_rng(seed("nqw", *key))
        w = as64(rand(rng, (n, k), "float32")) * np.exp(rng.uniform(-2, 2, (n, 1)))
        qw = gp.quantize_weight(w, fmt, device="cuda:0", **kw)
        _QW[key] = (qw, qw.dequantize())
    return _QW[key]


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("m", [1, 3, 8, 9, 16])  # 8 | 9: the 4-bit kernels' x tiles of 8
@pytest.mark.parametrize("kn", ["small", "odd", "wide", "many", "huge", "tail"])
@pytest.mark.parametrize("fmt,kw", QUANT, ids=str)
def test_linear_quantized(dtype: str, fmt: str, kw: dict, m: int, kn: str) -> None:
    shapes = {"small": (128, 1000), "odd": (K_ODD[fmt], 4097), "wide": KN_WIDE, "many": KN_MANY,
              "huge": KN_HUGE, "tail": KN_TAIL}  # fmt: skip
    k, n = shapes[kn]
    qw, w64 = _quantized(fmt, kw, n, k)
    rng = np.random.default_rng(seed("nlq", dtype, fmt, str(kw), m, kn))
    x, b = rand(rng, (m, k), dtype), rand(rng, n, dtype)
    out = _poison((m, n), dtype)
    y = gp.linear_quantized(_up(x, "rows"), qw, _up(b), out=out)
    assert y is out
    _check(y, x, w64, b, dtype)


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("m", [1, 8, 9, 40])  # 40: the route takes any row count
@pytest.mark.parametrize("kn", ["small", "odd", "wide", "many", "huge", "tail", "tiny"])
@pytest.mark.parametrize("fmt,kw", QUANT, ids=str)
def test_gated_product(dtype: str, fmt: str, kw: dict, m: int, kn: str) -> None:
    """gp.linear_silu_mul with a quantized [Wg; Wu] on the native gated kernel: silu(g) * u of
    the float32 sums, one rounding. The bound adds each sum's documented error carried through
    silu(g) * u (|d/dg| <= 1.1 |u|, |d/du| = |silu(g)|) to one rounding of the result. W rows
    n = 2I: 1000 (63 blocks: 16 warps), 8194 (I = 4097, a partial last tile of 8 columns; 513
    blocks), 8200 (513 blocks, K 1056), 16400 and 65552 (the wide launches), 21400 (1338
    blocks, K 4128), 38 (I = 19); m = 9 and 40 the x tiles of 16."""
    shapes = {"small": (128, 1000), "odd": (K_ODD[fmt], 8194), "wide": KN_WIDE, "many": KN_MANY,
              "huge": KN_HUGE, "tail": KN_TAIL, "tiny": (96, 38)}  # fmt: skip
    k, n = shapes[kn]
    qw, w64 = _quantized(fmt, kw, n, k)
    rng = np.random.default_rng(seed("ngated", dtype, fmt, str(kw), m, kn))
    # x / 8: g * u grows as K (|g|, |u| ~ sqrt(K)) and would pass float16's 65504 at K ~ 4100
    x = rand(rng, (m, k), dtype) / 8
    _check_gated(x, qw, w64, fmt, dtype)


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("fmt,kw", QUANT, ids=str)
def test_long_rows(dtype: str, fmt: str, kw: dict) -> None:
    """K 16352 over 257 blocks of 16 columns (KN_LONG), plain and gated, at M = 1 and 3: long
    rows, a partial last warp-step (x read in the loop: no format stages x at 257 blocks)."""
    k, n = KN_LONG
    qw, w64 = _quantized(fmt, kw, n, k)
    for m in (1, 3):
        rng = np.random.default_rng(seed("nlong", dtype, fmt, str(kw), m))
        x, b = rand(rng, (m, k), dtype), rand(rng, n, dtype)
        out = _poison((m, n), dtype)
        assert gp.linear_quantized(_up(x, "rows"), qw, _up(b), out=out) is out
        _check(out, x, w64, b, dtype)
        _check_gated(x / 8, qw, w64, fmt, dtype)


def _check_gated(
    x: np.ndarray, qw: gp.QuantizedWeight, w64: np.ndarray, fmt: str, dtype: str
) -> None:
    """gp.linear_silu_mul(x, qw) on the native gated kernel against its float64 reference."""
    m, k = x.shape
    i = w64.shape[0] // 2
    out = _poison((m, i), dtype)
    gp.routing.reset_stats()
    y = gp.linear_silu_mul(_up(x, "rows"), qw, out=out)
    assert y is out
    assert gp.routing.stats()[f"gemv_{fmt}_silu_mul"] == {"native": 1}
    x64 = as64(x)
    g, u = x64 @ w64[:i].T, x64 @ w64[i:].T
    sg = g / (1.0 + np.exp(-g))
    ref = sg * u
    assert_close(y, ref, dtype)
    e = (k / 4 + 32) * 2.0**-24
    mg, mu = np.abs(x64) @ np.abs(w64[:i]).T, np.abs(x64) @ np.abs(w64[i:]).T
    bound = U[dtype] * np.abs(ref) + 1.1 * np.abs(u) * e * mg + np.abs(sg) * e * mu + 2.0**-24
    err = np.abs(as64(y.to_numpy()) - ref)
    bad = np.argwhere(~(err <= bound))
    assert not bad.size, f"{len(bad)} beyond the bound, first at {tuple(bad[0])}"


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("fmt,kw", QUANT, ids=str)
def test_linear_quantized_many_rows_and_lead_dims(fmt: str, kw: dict) -> None:
    """40 rows: three 16-row tiles, the last partial; x [2, 20, K] seen as 40 rows."""
    k = K_ODD[fmt]
    qw, w64 = _quantized(fmt, kw, 333, k)
    rng = np.random.default_rng(seed("nlq_rows", fmt, str(kw)))
    x = rand(rng, (2, 20, k), "bfloat16")
    y = gp.linear_quantized(_up(x, "offset"), qw)
    assert y.shape == (2, 20, 333)
    _check(y.reshape(40, 333), x.reshape(40, k), w64, None, "bfloat16")


@gpu
@pytest.mark.usefixtures("_native")
def test_results_are_deterministic_and_zero_rows_are_fine() -> None:
    rng = np.random.default_rng(9)
    x, w = _up(rand(rng, (7, 4104), "bfloat16")), _up(rand(rng, (2049, 4104), "bfloat16"))
    a, b = gp.gemv(x, w).to_numpy(), gp.gemv(x, w).to_numpy()
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    qw, _ = _quantized("int4", {}, 64, 256)
    y = gp.linear_quantized(_up(np.zeros((0, 256), rand(rng, 1, "bfloat16").dtype)), qw)
    assert y.shape == (0, 64)


def _bits(a: gp.GPUArray) -> np.ndarray:
    return a.to_numpy().view(np.uint16)


def _writer(rows: int, k: int, rng: np.random.Generator) -> tuple[gp.GPUArray, Any]:
    """A [rows, k] bf16 array and the kernel that fills it: gp.rmsnorm into it, whose contiguous
    Triton kernel releases the next kernel's early launch as it starts (its last blocks write
    the last rows while the next kernel may already run)."""
    src = _up(rand(rng, (rows, k), "bfloat16"))
    g = _up(np.ones(k, dtype=ml_dtypes.bfloat16))
    dst = gp.zeros((rows, k), dtype="bfloat16", device="cuda:0")
    return dst, lambda: gp.rmsnorm(src, g, 1e-6, out=dst)


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("kn", ["odd", "wide", "tail"])
@pytest.mark.parametrize("fmt,kw", [("dense", {}), *QUANT], ids=str)
def test_early_launch_waits_for_the_kernel_that_writes_x(fmt: str, kw: dict, kn: str) -> None:
    """Launched early (programmatic dependent launch, sm_90+), the kernel must read x only after
    the kernel ahead, which writes it, is done: x is the last row of a 64 MiB array that an
    RMSNorm which releases the next launch at its start writes right before the product, with
    the weight read before the wait (constant_weights) and after it, eagerly and replayed from
    a graph. The result is the product of the new x, bit for bit the same as without the early
    launch. "wide" (513 blocks) reaches nvfp4's x staged in shared memory by every block, "tail"
    (1338 blocks, K 4128) nvfp4's Tail, which stages it too."""
    from pygpukit.backends._support import pdl
    from pygpukit.backends._support.weights import constant_weights

    k, n = {"odd": (K_ODD[fmt], 4097), "wide": KN_WIDE, "tail": KN_TAIL}[kn]
    rng = np.random.default_rng(seed("pdl_x", fmt, str(kw), kn))
    if fmt == "dense":
        w = rand(rng, (n, k), "bfloat16")
        w64, wd = as64(w), _up(w)

        def product(x: gp.GPUArray) -> gp.GPUArray:
            return gp.gemv(x, wd)
    else:
        qw, w64 = _quantized(fmt, kw, n, k)

        def product(x: gp.GPUArray) -> gp.GPUArray:
            return gp.linear_quantized(x, qw)

    rows = (64 << 20) // (2 * k)
    big, write = _writer(rows, k, rng)
    x = big[rows - 1 :]  # a contiguous, 16-byte aligned row

    def step() -> gp.GPUArray:
        write()
        return product(x)

    ys = {}
    was = pdl.pdl_enabled(gp.device("cuda:0"))
    before = pdl._pdl_on[0]
    try:
        for early in (True, False):
            pdl.set_pdl(early)
            for const in (False, True):
                big.fill_(0)
                if const:
                    with constant_weights():
                        y = step()
                else:
                    y = step()
                _check(y, big.to_numpy()[rows - 1 :], w64, None, "bfloat16")
                ys[early, const] = _bits(y)
            g = gp.CUDAGraph()
            big.fill_(0)
            with g.capture(), constant_weights():
                yg = step()
            big.fill_(0)
            g.replay()
            gp.synchronize()
            _check(yg, big.to_numpy()[rows - 1 :], w64, None, "bfloat16")
            ys[early, "graph"] = _bits(yg)
    finally:
        pdl.set_pdl(before)
    first = next(iter(ys.values()))
    for key, got in ys.items():
        np.testing.assert_array_equal(got, first, err_msg=f"{key} (early launch on: {was})")


@gpu
@pytest.mark.usefixtures("_native")
def test_early_launch_reads_a_weight_written_ahead_after_the_wait() -> None:
    """Outside constant_weights() the weight may be what the kernel ahead writes: a dense W
    rewritten by an RMSNorm that releases the product's early launch as it starts is read
    after the wait."""
    k, n = 4104, 8200
    rng = np.random.default_rng(seed("pdl_w"))
    x = rand(rng, (1, k), "bfloat16")
    w, write = _writer(n, k, rng)
    for _ in range(3):
        w.fill_(0)
        write()
        y = gp.gemv(_up(x), w)
        _check(y, x, as64(w.to_numpy()), None, "bfloat16")


@gpu
@pytest.mark.usefixtures("_native")
def test_extreme_fp8_and_nvfp4_codes_are_exact() -> None:
    """Every fp8 code (subnormals, +-448) and every e2m1 code under the smallest subnormal, the
    smallest normal, 1 and the largest e4m3 scale: one-hot rows of x pick single weights, so y
    holds the dequantized weights themselves (exact in bf16 and fp16)."""
    k = 256
    onehot = np.zeros((16, k), np.float32)
    onehot[np.arange(16), np.arange(16) * 17] = 1.0
    codes = np.arange(256, dtype=np.uint8)
    codes[codes == 0x7F], codes[codes == 0xFF] = 0x7E, 0xFE  # no NaN codes
    data8 = np.tile(codes.reshape(256, 1), (1, k)).view(ml_dtypes.float8_e4m3fn)
    ones = gp.from_numpy(np.ones(256, np.float32), device="cuda:0")
    qw8 = gp.QuantizedWeight("fp8", gp.from_numpy(data8, device="cuda:0"), ones)
    data4 = ((np.arange(64 * 128) % 256).astype(np.uint8)).reshape(64, 128)  # every byte
    scales = np.tile(np.array([0x01, 0x08, 0x38, 0x7E], np.uint8), (64, 4))  # 2^-9 .. 448
    qw4 = gp.QuantizedWeight(
        "nvfp4",
        gp.from_numpy(data4, device="cuda:0"),
        gp.from_numpy(scales.view(ml_dtypes.float8_e4m3fn), device="cuda:0"),
        global_scale=0.75,
    )
    for dtype in HALF:
        x = onehot.astype(rand(np.random.default_rng(0), 1, dtype).dtype)
        for qw in (qw8, qw4):
            y = gp.linear_quantized(_up(x), qw)
            want = qw.dequantize()[:, np.arange(16) * 17].T
            np.testing.assert_array_equal(as64(y.to_numpy()), want)


@gpu
@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize("dtype", HALF)
def test_linear_takes_the_gemv_kernel_when_the_crossover_says_so(dtype: str) -> None:
    """native.set_gemv_max_m(16, 16): gp.linear's small-M products run on the GEMV kernel (the
    bias fused; counted through a spy on the kernel's entry), an activation or M = 17 still on
    cuBLASLt; results hold the kernel's bound."""
    from pygpukit.backends.native import matmul as native
    from pygpukit.backends.native.gemv import linear_rows

    calls: list[int] = []

    def spy(x: gp.GPUArray, w: gp.GPUArray, y: gp.GPUArray, m: int, *rest: object) -> None:
        calls.append(m)
        linear_rows(x, w, y, m, *rest)  # type: ignore[arg-type]

    rng = np.random.default_rng(seed("ncross", dtype))
    w, b = rand(rng, (1000, 4104), dtype), rand(rng, 1000, dtype)
    saved, saved_fn = dict(native.GEMV_MAX_M), list(native._gemv_rows_fn)
    native.set_gemv_max_m(small=16, large=16)
    native._gemv_rows_fn[:] = [spy]
    try:
        with gp.route("linear:native"):
            for m in (1, 5, 16, 17):
                x = rand(rng, (m, 4104), dtype)
                _check(gp.linear(_up(x), _up(w), _up(b)), x, as64(w), b, dtype)
            assert calls == [1, 5, 16]
            y = gp.linear(_up(x[:3]), _up(w), _up(b), activation="relu")
            assert calls == [1, 5, 16]
            ref = np.maximum(as64(x[:3]) @ as64(w).T + as64(b), 0.0)
            assert_close(y, ref, dtype)
    finally:
        native.set_gemv_max_m(**saved)
        native._gemv_rows_fn[:] = saved_fn


# ----- the extension's own checks, without a GPU -------------------------------------------------


def _ext() -> object:
    ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")
    if "gemv" not in ext.families:
        pytest.skip("the gemv family is not in this build")
    return ext


def _args(**kw: object) -> dict[str, object]:
    """Valid arguments of ext.gemv (int4, bf16, M 2, N 5, K 64), with overrides."""
    a: dict[str, object] = dict(
        device=0, stream=0, format="int4", dtype="bfloat16", sdtype="float32", m=2, n=5, k=64,
        x=4096, x_row_stride=64, w=8192, w_row_bytes=32, scales=16384, s_row_stride=1,
        block=128, global_scale=1.0, bias=0, y=32768,
    )  # fmt: skip
    a.update(kw)
    return a


@pytest.mark.parametrize(
    "bad,msg",
    [
        ({"format": "int8"}, "^gemv: unknown weight format 'int8'"),
        # The checks every format shares name the format's launcher, like its own checks.
        ({"dtype": "float32"}, "^gemv_int4: x, bias and y must be float16 or bfloat16$"),
        ({"k": 48}, "^gemv_int4: k must be a multiple of the 16-byte granule"),
        # 2^27 + 1 granules of 16 bytes: past the quantized kernel's 32-bit row offsets
        ({"k": 2**32 + 32}, r"^gemv_int4: k is too large \(at most 2\^27 granules"),
        ({"x": 4098}, "^gemv_int4: x and w must be 16-byte aligned$"),
        ({"x_row_stride": 68}, "^gemv_int4: x's row stride must be a multiple of 8 elements"),
        ({"w_row_bytes": 16}, "^gemv_int4: w's row stride .* hold k values$"),
        ({"sdtype": "float64"}, "^gemv_int4: int4 scales must be float32, bfloat16 or float16$"),
        ({"block": 64}, "^gemv_int4: int4 scales are per group of 128"),
        ({"format": "fp8", "w_row_bytes": 64, "block": 64}, "^gemv_fp8: .* per block of 128"),
        ({"format": "fp8", "w_row_bytes": 64, "sdtype": "bfloat16"}, "^gemv_fp8: .*float32 scales"),
        ({"format": "nvfp4", "sdtype": "float8_e4m3fn", "block": 16, "s_row_stride": 3},
         "^gemv_nvfp4: .* even row stride"),
        ({"format": "dense", "w_row_bytes": 128, "y": 0}, "^gemv_dense: y must be a device"),
        ({"gated": True}, "^gemv_int4: a gated product needs an even n"),
        ({"gated": True, "n": 6, "bias": 65536}, "^gemv_int4: a gated product .* no bias$"),
        ({"format": "dense", "w_row_bytes": 128, "gated": True, "n": 6},
         "^gemv_dense: the dense gemv has no gated product$"),
        ({"norm": True, "m": 1, "gated": True, "n": 6},
         "^gemv_int4: the RMSNorm form has no gated product$"),
        ({"norm": True, "norm_w": 65536}, "^gemv_int4: the RMSNorm form takes one row of x$"),
        ({"norm": True, "m": 1, "k": 16416, "w_row_bytes": 8208, "s_row_stride": 129},
         "^gemv_int4: the RMSNorm form takes k <= 16384$"),
        ({"norm": True, "m": 1, "norm_w": 65536, "residual": 131072},
         "^gemv_int4: residual and h are given together"),
        ({"norm": True, "m": 1, "norm_w": 65538}, "^gemv_int4: norm_w, residual and h must be"),
        ({"norm": True, "m": 1}, "^gemv_int4: norm_w, residual and h must be"),
        ({"norm": True, "m": 1, "norm_w": 65536, "eps": -1.0}, "^gemv_int4: eps must be >= 0$"),
        ({"format": "dense", "w_row_bytes": 128, "norm": True, "m": 1, "norm_w": 65536},
         "^gemv_dense: the dense gemv has no RMSNorm form$"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else "",
)  # fmt: skip
def test_extension_rejects_bad_arguments(bad: dict, msg: str) -> None:
    ext = _ext()
    with pytest.raises(ValueError, match=msg):
        ext.gemv(**_args(**bad))  # type: ignore[attr-defined]


@pytest.mark.skipif(gp.is_cuda_available(), reason="checks the no-driver path")
def test_extension_without_a_driver_raises_cuda_error() -> None:
    ext = _ext()
    with pytest.raises(gp.CudaError, match="cudaGetDevice"):
        ext.gemv(**_args())  # type: ignore[attr-defined]
    ext.gemv(**_args(m=0))  # type: ignore[attr-defined]  # nothing to do: no launch, no error


def test_lookup_finds_the_gemv_adapters() -> None:

    _ext()
    for op in ("gemv", "gemv_fp8", "gemv_int4", "gemv_nvfp4", "gemv_int4_silu_mul",
               "rmsnorm_gemv_int4"):  # fmt: skip
        fn, why = native_impl(op)
        assert why == "" and fn is not None and fn.__module__.endswith("backends.native.gemv")
