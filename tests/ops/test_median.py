"""gp.median_filter through the public API (NumPy backend in CI; the GPU routes with
PYGPUKIT_TEST_DEVICE=cuda:0) against a float64 reference, and its argument checks.

The reference is the definition: each window's indices reflected at the ends (scipy.ndimage's
'reflect', repeated where the window outgrows the axis) and np.median over it, in float64. A
median of an odd count is one of the window's values, so every dtype must match it exactly after
the cast to float64; scipy.ndimage.median_filter (librosa's call) must match too wherever it
reads inside the array.
"""

from __future__ import annotations

import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pygpukit as gp
from ops._helpers import DEVICE, LAYOUTS, poisoned, up, view
from pygpukit.ops.median import MAX_SIZE

_NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
}
DTYPES = list(_NP)
_NO_OP_ROUTE = "*:native" if DEVICE == "cpu" else "*:cpu"


def reflected(i: int, n: int) -> int:
    """Index i folded into [0, n) by half-sample reflection at both ends, repeated as often as
    needed (d c b a | a b c d | d c b a)."""
    while not 0 <= i < n:
        i = -1 - i if i < 0 else 2 * n - 1 - i
    return i


def reference(x: np.ndarray, size: int, axis: int) -> np.ndarray:
    """float64 running median along ``axis`` over explicitly reflected windows; NaN windows
    give NaN (np.median's rule)."""
    a = np.moveaxis(x.astype(np.float64), axis, -1)
    n, h = a.shape[-1], size // 2
    idx = np.array([[reflected(i + k - h, n) for k in range(size)] for i in range(n)])
    med = np.median(a[..., idx], axis=-1)
    return np.moveaxis(med, -1, axis)


def assert_exact(out: gp.GPUArray, ref: np.ndarray, dtype: str) -> None:
    """out equals the float64 reference exactly (NaN where it is NaN); the first mismatches are
    named on failure."""
    o = out.to_numpy()
    assert o.dtype == np.dtype(_NP[dtype]) and o.shape == ref.shape
    of = o.astype(np.float64)
    bad = np.argwhere(~((of == ref) | (np.isnan(of) & np.isnan(ref))))
    assert bad.size == 0, f"{len(bad)} of {o.size} elements differ, first at " + ", ".join(
        f"{tuple(int(v) for v in i)}: {of[tuple(i)]!r} != {ref[tuple(i)]!r}" for i in bad[:5]
    )


def draw(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Random values exactly representable in ``dtype`` (with repeats: ties must select too)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    x[..., ::5] = np.round(x[..., ::5])  # some equal values
    return x.astype(_NP[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "size", "axis"),
    [
        ((1,), 3, 0),
        ((7,), 5, -1),
        ((4097,), 31, 0),
        ((13, 101), 31, -1),
        ((13, 101), 17, -2),
        ((3, 7, 11), 3, 0),
        ((3, 7, 11), 9, 1),
        ((2, 3, 5, 67), 31, 3),
    ],
)
def test_matches_the_reference(shape: tuple[int, ...], size: int, axis: int, dtype: str) -> None:
    x = draw(shape, dtype, sum(shape) + size)
    out = gp.median_filter(up(x), size, axis)
    assert_exact(out, reference(x, size, axis), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("axis", [-1, -2])
def test_non_contiguous_inputs(layout: str, axis: int) -> None:
    x = draw((5, 19, 43), "float32", 3)
    out = gp.median_filter(view(x, layout), 7, axis=axis)
    assert out.is_contiguous()
    assert_exact(out, reference(x, 7, axis), "float32")


def test_a_frame_major_spectrogram_view() -> None:
    """The layout gp.audio.stft returns: [freq, frames] over [frames, freq] storage."""
    frames_major = np.abs(draw((57, 129), "float32", 4))
    spec = up(frames_major).swapaxes(-1, -2)
    for axis, size in ((-1, 31), (-2, 31)):
        out = gp.median_filter(spec, size, axis=axis)
        assert_exact(out, reference(frames_major.T, size, axis), "float32")


@pytest.mark.parametrize("axis", [0, 1])
def test_out_buffers(axis: int) -> None:
    x = draw((9, 40), "float32", 5)
    ref = reference(x, 5, axis)
    out = poisoned((9, 40), "float32")
    assert gp.median_filter(up(x), 5, axis=axis, out=out) is out
    assert_exact(out, ref, "float32")
    wide = poisoned((9, 80), "float32")
    strided = wide[:, ::2]
    gp.median_filter(up(x), 5, axis=axis, out=strided)
    assert_exact(strided, ref, "float32")
    assert np.isnan(wide.to_numpy()[:, 1::2]).all()  # the gaps between out's elements untouched


@pytest.mark.parametrize(("n", "size"), [(1, 31), (2, 31), (3, 255), (5, 31), (15, 31), (16, 31)])
def test_windows_longer_than_the_axis(n: int, size: int) -> None:
    """The axis reflects again and again (np.pad 'symmetric'), on both axes."""
    x = draw((4, n), "float32", n)
    assert_exact(gp.median_filter(up(x), size), reference(x, size, -1), "float32")
    assert_exact(gp.median_filter(up(x.T.copy()), size, 0), reference(x.T, size, 0), "float32")


@pytest.mark.parametrize("size", [1, 3, MAX_SIZE])
def test_edge_sizes(size: int) -> None:
    x = draw((3, 300), "float64", size)
    out = gp.median_filter(up(x), size)
    assert_exact(out, reference(x, size, -1), "float64")
    if size == 1:
        assert (out.to_numpy() == x).all()


@pytest.mark.parametrize(("shape", "size", "axis"), [((20, 90), 31, -1), ((40, 30), 17, -2)])
def test_matches_scipy(shape: tuple[int, ...], size: int, axis: int) -> None:
    """librosa's call: scipy.ndimage.median_filter(S, size=(1, w)) / (w, 1), mode 'reflect'."""
    ndimage = pytest.importorskip("scipy.ndimage")
    x = np.abs(draw(shape, "float32", 7))
    kernel = [1, 1]
    kernel[axis] = size
    want = ndimage.median_filter(x, size=kernel, mode="reflect")
    got = gp.median_filter(up(x), size, axis=axis).to_numpy()
    np.testing.assert_array_equal(got, want)


def test_nan_windows_give_nan_and_others_do_not() -> None:
    x = draw((3, 50), "float32", 8)
    x[0, 20] = np.nan
    x[2, 0] = -np.nan
    out = gp.median_filter(up(x), 5).to_numpy()
    nan_at = np.zeros_like(x, dtype=bool)
    nan_at[0, 18:23] = True
    nan_at[2, :3] = True  # x[2, 0] is in the windows of 0..2 (twice in 0 and 1: reflection)
    assert (np.isnan(out) == nan_at).all()
    assert_exact(gp.median_filter(up(x), 5), reference(x, 5, -1), "float32")


def test_signed_zeros_and_infinities_order_as_numbers() -> None:
    """-0.0 ranks below +0.0, so the median's bits are defined; infinities are ordinary ends."""
    neg, pos = -0.0, 0.0
    x = np.array([[neg, pos, pos, neg, neg, np.inf, -np.inf, 1.0, np.inf]], np.float32)
    out = gp.median_filter(up(x), 3).to_numpy()
    want = np.array([[neg, pos, pos, neg, neg, neg, 1.0, 1.0, np.inf]], np.float32)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


def test_empty_arrays() -> None:
    x = np.zeros((0, 5), np.float32)
    assert gp.median_filter(up(x), 3).shape == (0, 5)
    assert gp.median_filter(up(x), 3, axis=0).shape == (0, 5)


def _x() -> gp.GPUArray:
    return up(np.ones((4, 6), np.float32))


BAD: list[tuple[str, Any, type[Exception], str]] = [
    (
        "numpy x",
        lambda: gp.median_filter(np.ones(5, np.float32), 3),
        TypeError,
        "x must be a GPUArray",
    ),
    (
        "int x",
        lambda: gp.median_filter(up(np.arange(5, dtype=np.int32)), 3),
        TypeError,
        "x must be a float16",
    ),
    (
        "0-d x",
        lambda: gp.median_filter(gp.from_numpy(np.array(1.0, np.float32), device=DEVICE), 1),
        ValueError,
        "at least 1 dim",
    ),
    ("even size", lambda: gp.median_filter(_x(), 4), ValueError, "size must be odd"),
    (
        "size 0",
        lambda: gp.median_filter(_x(), 0),
        ValueError,
        "size must be an odd int in [1, 255]",
    ),
    ("size -3", lambda: gp.median_filter(_x(), -3), ValueError, "size must be an odd int in"),
    ("size past the cap", lambda: gp.median_filter(_x(), 257), ValueError, "got 257"),
    ("float size", lambda: gp.median_filter(_x(), 3.0), TypeError, "size must be an odd int"),
    ("bool size", lambda: gp.median_filter(_x(), True), TypeError, "size must be an odd int"),
    (
        "axis 2 of 2 dims",
        lambda: gp.median_filter(_x(), 3, axis=2),
        ValueError,
        "axis 2 is out of range",
    ),
    ("axis -3", lambda: gp.median_filter(_x(), 3, axis=-3), ValueError, "axis -3 is out of range"),
    ("float axis", lambda: gp.median_filter(_x(), 3, axis=1.0), TypeError, "axis must be an int"),
    (
        "out shape",
        lambda: gp.median_filter(_x(), 3, out=up(np.ones((4, 5), np.float32))),
        ValueError,
        "out has shape (4, 5)",
    ),
    (
        "out dtype",
        lambda: gp.median_filter(_x(), 3, out=up(np.ones((4, 6), np.float64))),
        TypeError,
        "result dtype is float32",
    ),
]


@pytest.mark.parametrize(("case", "call", "exc", "match"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_raises_before_any_op(case: str, call: Any, exc: type, match: str) -> None:
    """Under a route no backend can serve, a call that reached the dispatcher would raise a
    RouteError instead."""
    with gp.route(_NO_OP_ROUTE), pytest.raises(exc, match=re.escape(match)):
        call()


def test_the_no_op_route_does_stop_a_valid_call() -> None:
    """The premise of the test above: the forced route refuses a well-formed call."""
    with gp.route(_NO_OP_ROUTE), pytest.raises(gp.RouteError):
        gp.median_filter(_x(), 3)
