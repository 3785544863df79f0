"""The Triton median filter kernel against its NumPy twin, bit for bit (a median is a selection,
so there is no rounding to allow for), and through the routed op with the triton route forced.

Under the interpreter every dtype runs too: the kernel compares integer keys built from the
bits, so the 16-bit paths are exercised on the CPU. Sizes stay small (the interpreter is slow).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("triton")

from _tkutil import poisoned, poisoned_strided, up, view

import pygpukit as gp
from pygpukit.backends.cpu import median as cm
from pygpukit.backends.triton_kernels import median as tm

_NP: dict[str, Any] = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
}
_BITS = {"float32": np.uint32, "float64": np.uint64, "float16": np.uint16, "bfloat16": np.uint16}


def draw(shape: tuple[int, ...], dtype: str, seed: int, specials: bool = True) -> np.ndarray:
    """Random values of ``dtype`` with repeats and, when asked, NaN (both signs), infinities and
    signed zeros sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 4
    x[..., ::3] = np.round(x[..., ::3])
    if specials:
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=min(flat.size, 6), replace=False)
        for i, v in zip(picks, (np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0), strict=False):
            flat[i] = v
    return x.astype(_NP[dtype])


def assert_same_bits(out: gp.GPUArray, want: np.ndarray, dtype: str) -> None:
    got = out.to_numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    gb, wb = got.view(_BITS[dtype]), want.view(_BITS[dtype])
    bad = np.argwhere(gb != wb)
    assert bad.size == 0, f"{len(bad)} of {got.size} differ, first at " + ", ".join(
        f"{tuple(int(v) for v in i)}: {got[tuple(i)]!r} != {want[tuple(i)]!r}" for i in bad[:5]
    )


@pytest.mark.parametrize("dtype", list(_NP))
@pytest.mark.parametrize(
    ("shape", "size"),
    [((1,), 3), ((7,), 5), ((3, 130), 31), ((2, 3, 40), 7), ((2, 300), 255), ((4, 9), 1)],
)
def test_matches_the_twin(device: str, dtype: str, shape: tuple[int, ...], size: int) -> None:
    """The last axis contiguous (positions-first tiles), every dtype's keys, NaN and signed
    zeros included; 255 is the largest window (a 256-key tile row)."""
    x = draw(shape, dtype, size + shape[-1])
    out = tm.median_filter(up(x, device), size=size)
    assert_same_bits(out, cm.median_filter(x, size=size), dtype)


@pytest.mark.parametrize(("n", "size"), [(1, 31), (2, 31), (4, 31), (9, 255), (15, 31)])
def test_windows_longer_than_the_axis(device: str, n: int, size: int) -> None:
    """n < size // 2 folds indices with period 2n (WRAP); n = 15 is the last single-reflection
    case for size 31."""
    x = draw((3, n), "float32", n, specials=False)
    assert_same_bits(
        tm.median_filter(up(x, device), size=size), cm.median_filter(x, size=size), "float32"
    )


@pytest.mark.parametrize("layout", ["strided", "transposed"])
def test_strided_inputs_and_outs(device: str, layout: str) -> None:
    """A strided last axis takes the rows-first tile; out= any layout, written in place."""
    x = draw((6, 45), "float32", 1)
    want = cm.median_filter(x, size=9)
    out = poisoned_strided((6, 45), "float32", device)
    res = tm.median_filter(view(x, layout, device), size=9, out=out)
    assert res is out
    assert_same_bits(out, want, "float32")


def test_leading_dims_that_do_not_collapse(device: str) -> None:
    """Three leading dims decomposed per row in place; four that do not merge are copied
    first; an out whose leading dims do not decompose is written through a fresh array."""
    x = draw((2, 3, 4, 5, 21), "float32", 2)
    want = cm.median_filter(x, size=5)
    perm = up(np.ascontiguousarray(x.transpose(3, 1, 0, 2, 4)), device).permute(2, 1, 3, 0, 4)
    assert_same_bits(tm.median_filter(perm, size=5), want, "float32")
    three = up(np.ascontiguousarray(x[0].transpose(2, 0, 1, 3)), device).permute(1, 2, 0, 3)
    assert_same_bits(tm.median_filter(three, size=5), want[0], "float32")
    wide = poisoned((5, 4, 3, 2, 21), "float32", device)
    out = wide.permute(3, 2, 1, 0, 4)  # reversed leading dims: no pair merges
    tm.median_filter(up(x, device), size=5, out=out)
    assert_same_bits(out, want, "float32")


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_routed_calls_reach_the_kernel(device: str, axis: int) -> None:
    """gp.median_filter with the triton route forced: another axis moved last as a view, the
    result written through the same view of a C-contiguous array."""
    x = draw((5, 17, 33), "float32", 3)
    with gp.route("median_filter:triton"):
        out = gp.median_filter(up(x, device), 7, axis=axis)
    assert out.is_contiguous()
    want = np.moveaxis(cm.median_filter(np.moveaxis(x, axis, -1), size=7), -1, axis)
    assert_same_bits(out, want, "float32")


def test_empty_input(device: str) -> None:
    x = np.zeros((0, 4), np.float32)
    assert tm.median_filter(up(x, device), size=3).shape == (0, 4)
