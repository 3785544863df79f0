"""gp.matmul_fp8, gp.quantize_fp8 and gp.dequantize_fp8 on the CPU device (the NumPy backend),
against independent float64 references, and their argument checks (which run before any
backend, so they hold on the GPU too)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from _assert import assert_close
from _data import seed

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up

FP8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}
FMAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _rtol(out_dtype: str) -> float | None:
    """The NumPy backend is exact to docs/design.md's bounds; on a GPU the cuBLASLt FP8 product's
    documented bounds apply (tests/native/test_fp8_matmul.py: Hopper's FP8 MMA accumulates in
    reduced precision, measured 1.1e-4 relative for e5m2 x e4m3 with a float32 result)."""
    if DEVICE == "cpu":
        return None
    return {"float32": 2e-3, "bfloat16": 1e-2, "float16": 3e-3}[out_dtype]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _fp8(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random fp8 values spread over the format's range (no NaN)."""
    return (rng.standard_normal(shape) * 8).astype(np.float32).astype(FP8[dtype])


def _per_element(scale: np.ndarray, rows: int, k: int, kind: str) -> np.ndarray:
    """The multiplier of every element of a [rows, k] operand, by explicit loops."""
    s = np.asarray(scale, np.float64)
    out = np.empty((rows, k))
    for i, j in itertools.product(range(rows), range(k)):
        if kind == "tensor":
            out[i, j] = s.reshape(-1)[0]
        elif kind == "row":
            out[i, j] = s.reshape(rows)[i]
        elif kind == "block1x128":
            out[i, j] = s[i, j // 128]
        else:
            out[i, j] = s[i // 128, j // 128]
    return out


def _scale(rng: np.random.Generator, kind: str, rows: int, k: int) -> np.ndarray:
    shape = {
        "tensor": (1,),
        "row": (rows, 1),
        "block1x128": (rows, _cdiv(k, 128)),
        "block128x128": (_cdiv(rows, 128), _cdiv(k, 128)),
    }[kind]
    return (rng.random(shape) * 2 + 0.05).astype(np.float32)


CASES = [
    ("tensor", "tensor"),
    ("row", "row"),
    ("tensor", "row"),
    ("block1x128", "block128x128"),
    ("block1x128", "block1x128"),
    ("row", "block128x128"),
    ("block1x128", "tensor"),
]


@pytest.mark.parametrize(("kind_a", "kind_b"), CASES)
@pytest.mark.parametrize(
    ("ta", "tb", "out_dtype"),
    [
        ("float8_e4m3fn", "float8_e4m3fn", "bfloat16"),
        ("float8_e5m2", "float8_e4m3fn", "float32"),
        ("float8_e4m3fn", "float8_e5m2", "float16"),
    ],
)
def test_matmul_fp8_reference(kind_a: str, kind_b: str, ta: str, tb: str, out_dtype: str) -> None:
    m, n, k = 7, 131, 272  # odd M and N, K not a multiple of 128 (a partial last K block)
    rng = np.random.default_rng(seed("mmfp8", kind_a, kind_b, ta, tb, out_dtype))
    a, b = _fp8(rng, (m, k), ta), _fp8(rng, (n, k), tb)
    sa, sb = _scale(rng, kind_a, m, k), _scale(rng, kind_b, n, k)
    bias = rng.standard_normal(n).astype(NP[out_dtype]) if out_dtype != "float32" else None
    a64 = a.astype(np.float64) * _per_element(sa, m, k, kind_a)
    b64 = b.astype(np.float64) * _per_element(sb, n, k, kind_b)
    ref = np.einsum("ik,jk->ij", a64, b64)
    if bias is not None:
        ref = ref + bias.astype(np.float64)
    out = poisoned((m, n), out_dtype)
    # Operands as strided views (every other row of a wider buffer) and a transposed scale.
    a_wide = np.zeros((2 * m, k), a.dtype)
    a_wide[::2] = a
    r = gp.matmul_fp8(
        up(a_wide)[::2],
        up(b),
        scale_a=up(sa.T).T if sa.ndim == 2 else up(sa),
        scale_b=up(sb),
        out_dtype=out_dtype,
        bias=None if bias is None else up(bias),
        out=out,
    )
    assert r is out and r.dtype.name == out_dtype
    assert_close(r, ref, out_dtype, rtol=_rtol(out_dtype))


def test_matmul_fp8_scale_shapes_and_defaults() -> None:
    rng = np.random.default_rng(1)
    m, n, k = 3, 16, 32
    a, b = _fp8(rng, (m, k), "float8_e4m3fn"), _fp8(rng, (n, k), "float8_e4m3fn")
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    for s in (np.float32(2.0).reshape(()), np.float32([2.0]), np.float32([[2.0]])):
        r = gp.matmul_fp8(up(a), up(b), scale_a=up(s), scale_b=up(np.float32([0.5])))
        assert r.dtype is gp.bfloat16 and r.shape == (m, n)
        assert_close(r, ref, "bfloat16")
    # (M,) and (N,) per-row vectors; zero-sized M gives an empty result.
    sa, sb = np.float32([1, 2, 3]), np.full(n, 0.25, np.float32)
    r = gp.matmul_fp8(up(a), up(b), scale_a=up(sa), scale_b=up(sb), out_dtype="float32")
    assert_close(r, ref * sa[:, None] * 0.25, "float32", rtol=_rtol("float32"))
    e = gp.matmul_fp8(
        up(a[:0]), up(b), scale_a=up(np.float32([1])), scale_b=up(sb), out_dtype="float32"
    )
    assert e.shape == (0, n)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("src", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize(
    ("granularity", "block", "group"),
    [
        ("tensor", 128, None),
        ("row", 128, (1, None)),
        ("block", 128, (1, 128)),
        ("block", 64, (1, 64)),
        ("block", (128, 128), (128, 128)),
        ("block", (2, 32), (2, 32)),
    ],
)
def test_quantize_fp8_reference(
    dtype: str, src: str, granularity: str, block: object, group: tuple | None
) -> None:
    rows, cols = 131, 300
    rng = np.random.default_rng(seed("q8", dtype, src, granularity, block))
    x = (rng.standard_normal((rows, cols)) * rng.choice([1e-3, 1.0, 50.0])).astype(np.float32)
    x[:, 130:140] = 0.0  # zero columns: a 1x64 / 2x32 group of zeros in some rows
    x = x.astype(NP[src])
    q, s = gp.quantize_fp8(up(x), dtype, granularity=granularity, block=block)
    br, bc = (rows, cols) if group is None else (group[0], group[1] or cols)
    xf = x.astype(np.float32)
    fmax = np.float32(FMAX[dtype])
    want_s = np.empty((_cdiv(rows, br), _cdiv(cols, bc)), np.float32)
    want_q = np.empty((rows, cols), FP8[dtype])
    for gi, gj in itertools.product(range(want_s.shape[0]), range(want_s.shape[1])):
        sl = (slice(gi * br, (gi + 1) * br), slice(gj * bc, (gj + 1) * bc))
        amax = np.abs(xf[sl]).max()
        sc = np.float32(amax / fmax) if amax > 0 else np.float32(1.0)
        want_s[gi, gj] = sc
        want_q[sl] = np.clip(xf[sl] / sc, -fmax, fmax).astype(FP8[dtype])
        if amax > 0:  # the group's largest element maps to the format's largest value
            assert np.abs(want_q[sl].astype(np.float32)).max() == fmax
    shape = {"tensor": (1,), "row": (rows, 1)}.get(granularity, want_s.shape)
    assert q.dtype.name == dtype and q.shape == x.shape and s.shape == shape
    assert s.dtype is gp.float32
    np.testing.assert_array_equal(s.to_numpy().reshape(want_s.shape), want_s)
    np.testing.assert_array_equal(q.to_numpy().view(np.uint8), want_q.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_quantize_round_trip_error_bound(dtype: str) -> None:
    """|x - dequantize(quantize(x))| <= half an fp8 ulp: 2^-4 |x| (e4m3, 3 mantissa bits) or
    2^-3 |x| (e5m2) for normals, plus half the smallest subnormal times the scale."""
    rng = np.random.default_rng(seed("rt", dtype))
    x = (rng.standard_normal((5, 7, 96)) * np.exp(rng.standard_normal((5, 7, 1)) * 3)).astype(
        np.float32
    )
    rel, sub = (2.0**-4, 2.0**-10) if dtype == "float8_e4m3fn" else (2.0**-3, 2.0**-17)
    for gran in ("tensor", "row", "block"):
        q, s = gp.quantize_fp8(up(x), dtype, granularity=gran, block=32)
        d = gp.dequantize_fp8(q, s, out_dtype="float32", block=32).to_numpy()
        scale = np.repeat(s.to_numpy(), 96 // s.shape[-1], axis=-1) if gran == "block" else None
        scale = s.to_numpy() if scale is None else scale
        bound = rel * np.abs(x) + sub * np.broadcast_to(scale, x.shape)
        assert np.all(np.abs(d - x) <= bound), gran


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
def test_dequantize_fp8_reference(out_dtype: str) -> None:
    rng = np.random.default_rng(seed("dq", out_dtype))
    q = _fp8(rng, (130, 260), "float8_e4m3fn")
    cases = [
        (np.float32([0.3]), 128, lambda s: s[0]),
        (rng.random((130, 1)).astype(np.float32), 128, lambda s: s),
        (rng.random((130, 3)).astype(np.float32), 128, lambda s: np.repeat(s, 128, 1)[:, :260]),
        (
            rng.random((2, 3)).astype(np.float32),
            (128, 128),
            lambda s: np.repeat(np.repeat(s, 128, 0), 128, 1)[:130, :260],
        ),
    ]
    for s, block, expand in cases:
        want = (q.astype(np.float32) * expand(s)).astype(NP[out_dtype])
        out = poisoned(q.shape, out_dtype)
        r = gp.dequantize_fp8(up(q), up(s), out_dtype=out_dtype, block=block, out=out)
        assert r is out
        np.testing.assert_array_equal(r.to_numpy(), want)


def test_quantize_zeros_and_tiny_groups() -> None:
    x = np.zeros((4, 16), np.float32)
    x[1, 3] = -1e-30
    q, s = gp.quantize_fp8(up(x), granularity="row")
    assert list(s.to_numpy().reshape(-1)[[0, 2, 3]]) == [1.0, 1.0, 1.0]
    assert np.all(q.to_numpy().astype(np.float32)[[0, 2, 3]] == 0)
    assert q.to_numpy().astype(np.float32)[1, 3] == -448.0
    assert s.to_numpy()[1, 0] == np.float32(np.float32(1e-30) / np.float32(448))


# ----- argument checks -----------------------------------------------------------------------


def _mm_args() -> dict:
    rng = np.random.default_rng(2)
    return dict(
        a=up(_fp8(rng, (4, 32), "float8_e4m3fn")),
        b=up(_fp8(rng, (16, 32), "float8_e4m3fn")),
        scale_a=up(np.float32([1.0])),
        scale_b=up(np.float32([1.0])),
    )


def _call(**over: object) -> None:
    args = _mm_args()
    args.update(over)
    a, b = args.pop("a"), args.pop("b")
    gp.matmul_fp8(a, b, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("over", "exc", "match"),
    [
        (dict(a=np.zeros((4, 32))), TypeError, r"a must be a GPUArray.*gp.from_numpy"),
        (dict(a=up(np.zeros((4, 32), np.float32))), TypeError, r"a must be float8.*float32"),
        (dict(b=up(np.zeros((2, 16, 32), FP8["float8_e4m3fn"]))), ValueError, "b must be 2-D"),
        (dict(b=up(np.zeros((16, 48), FP8["float8_e4m3fn"]))), ValueError, "K 48 must equal"),
        (
            dict(
                a=up(np.zeros((4, 24), FP8["float8_e4m3fn"])),
                b=up(np.zeros((16, 24), FP8["float8_e4m3fn"])),
            ),
            ValueError,
            "K = 24 must be a positive multiple of 16",
        ),
        (
            dict(
                a=up(np.zeros((4, 32), FP8["float8_e5m2"])),
                b=up(np.zeros((16, 32), FP8["float8_e5m2"])),
            ),
            TypeError,
            "e5m2 x float8_e5m2",
        ),
        (dict(scale_a=up(np.float16([1.0]))), TypeError, "scale_a must be a float32 array"),
        (dict(scale_a=1.0), TypeError, "scale_a must be a GPUArray"),
        (dict(scale_a=up(np.ones(5, np.float32))), ValueError, r"\(4,\) or \(4, 1\) per row"),
        (dict(scale_b=up(np.ones((16, 2), np.float32))), ValueError, r"\(1, 1\) per 128x128"),
        (dict(out_dtype="float64"), ValueError, "out_dtype must be one of"),
        (dict(out_dtype="int8"), ValueError, "out_dtype must be one of"),
        (dict(fast_accum=1), TypeError, "fast_accum must be a bool"),
        (dict(bias=up(np.ones(16, np.float32))), ValueError, "result dtype bfloat16"),
        (dict(bias=up(np.ones(8, ml_dtypes.bfloat16))), ValueError, r"shape \(16,\)"),
        (dict(out=up(np.ones((4, 16), np.float32))), TypeError, "result dtype is bfloat16"),
        (dict(out=up(np.ones((4, 8), ml_dtypes.bfloat16))), ValueError, r"shape \(4, 16\)"),
    ],
)
def test_matmul_fp8_argument_errors(over: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        _call(**over)


def test_matmul_fp8_fast_accum_needs_coarse_scales() -> None:
    rng = np.random.default_rng(3)
    a, b = _fp8(rng, (4, 256), "float8_e4m3fn"), _fp8(rng, (16, 256), "float8_e4m3fn")
    one = up(np.float32([1.0]))
    with pytest.raises(ValueError, match="fast_accum is not available with block"):
        gp.matmul_fp8(
            up(a), up(b), scale_a=up(np.ones((4, 2), np.float32)), scale_b=one, fast_accum=True
        )
    sb = np.linspace(0.5, 2, 16).astype(np.float32)
    r = gp.matmul_fp8(up(a), up(b), scale_a=one, scale_b=up(sb), fast_accum=True)
    ref = (a.astype(np.float64) @ b.astype(np.float64).T) * sb
    assert_close(r, ref, "bfloat16")  # the reference is exact; fast_accum is a GPU matter


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: gp.quantize_fp8(up(np.ones(4, np.int32))), TypeError, "x must be one of"),
        (lambda: gp.quantize_fp8(up(np.ones(4))), TypeError, "float64"),
        (lambda: gp.quantize_fp8(up(np.ones(4, np.float32)), "float16"), ValueError, "dtype"),
        (
            lambda: gp.quantize_fp8(up(np.ones(4, np.float32)), granularity="channel"),
            ValueError,
            "granularity must be one of",
        ),
        (
            lambda: gp.quantize_fp8(
                up(np.ones((2, 2, 4), np.float32)), granularity="block", block=(2, 2)
            ),
            ValueError,
            "2-D blocks",
        ),
        (
            lambda: gp.quantize_fp8(up(np.ones(4, np.float32)), granularity="block", block=0),
            ValueError,
            "block sizes must be >= 1",
        ),
        (
            lambda: gp.quantize_fp8(up(np.ones(4, np.float32)), granularity="block", block="x"),
            ValueError,
            "block must be an int or a pair",
        ),
        (lambda: gp.quantize_fp8(up(np.ones((3, 0), np.float32))), ValueError, "one element"),
        (
            lambda: gp.dequantize_fp8(up(np.ones(4, np.float32)), up(np.float32([1]))),
            TypeError,
            "q must be float8",
        ),
        (
            lambda: gp.dequantize_fp8(
                up(np.ones((4, 256), FP8["float8_e4m3fn"])), up(np.ones((4, 4), np.float32))
            ),
            ValueError,
            r"\(4, 2\) for blocks of \(1, 128\)",
        ),
        (
            lambda: gp.dequantize_fp8(
                up(np.ones(4, FP8["float8_e4m3fn"])), up(np.float32([1])), out_dtype="int8"
            ),
            ValueError,
            "out_dtype must be one of",
        ),
    ],
)
def test_quantize_argument_errors(call: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        call()  # type: ignore[operator]
