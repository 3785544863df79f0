"""GPUArray semantics against NumPy on the CPU device: factories, views, strides, copies, errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pygpukit as gp
from pygpukit.dtypes import ALL_DTYPES

RNG = np.random.default_rng(1234)


def _random(shape: tuple[int, ...], dt: gp.DataType) -> np.ndarray:
    if dt.is_packed:
        return RNG.integers(-8, 8, size=shape).astype(dt.np_dtype)
    if dt.kind == "b":
        return np.asarray(RNG.random(shape) < 0.5)
    if dt.is_integer:
        info = np.iinfo(dt.np_dtype)
        return RNG.integers(max(info.min, -100), min(info.max, 100), size=shape).astype(dt.np_dtype)
    if dt.is_complex:
        return np.asarray(RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape), dt.np_dtype)
    return RNG.standard_normal(shape).astype(dt.np_dtype)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (4, 6), (3, 1, 8)])
def test_round_trip_every_dtype(dt: gp.DataType, shape: tuple[int, ...]) -> None:
    if dt.is_packed and (not shape or shape[-1] % 2):
        pytest.skip("packed int4 needs an even last dim")
    host = _random(shape, dt)
    a = gp.from_numpy(host, device="cpu")
    assert a.shape == shape and a.dtype is dt and a.device == gp.device("cpu")
    back = a.to_numpy()
    assert back.dtype == host.dtype
    if dt.is_complex:
        np.testing.assert_array_equal(back, host)
        return
    np.testing.assert_array_equal(back.astype(np.float64), host.astype(np.float64))


def test_factories() -> None:
    assert gp.zeros((2, 3)).to_numpy().tolist() == [[0.0] * 3] * 2
    np.testing.assert_array_equal(gp.ones((5,), "bfloat16").to_numpy(), np.ones(5, "bfloat16"))
    f = gp.full((3,), 7, device="cpu")
    assert f.dtype is gp.int64 and f.to_numpy().tolist() == [7, 7, 7]
    assert gp.full((2,), 1.5, dtype="float16").to_numpy().tolist() == [1.5, 1.5]
    np.testing.assert_array_equal(gp.arange(5).to_numpy(), np.arange(5))
    np.testing.assert_allclose(gp.arange(0.0, 1.0, 0.25).to_numpy(), [0, 0.25, 0.5, 0.75])
    e = gp.empty((4, 4), gp.float16)
    assert e.shape == (4, 4) and e.dtype is gp.float16 and e.nbytes == 32
    like = gp.zeros_like(e)
    assert like.shape == e.shape and like.dtype is e.dtype
    assert gp.full_like(e, 2.0).to_numpy().sum() == 32.0
    assert gp.ones_like(e, dtype="float32").dtype is gp.float32
    assert gp.empty_like(e).shape == (4, 4)
    assert gp.zeros((0, 3)).size == 0


def test_asarray_is_zero_copy_for_gpuarrays_and_copies_numpy() -> None:
    a = gp.arange(4)
    assert gp.asarray(a) is a
    h = np.arange(3.0)
    b = gp.asarray(h)
    h[0] = 100.0
    assert b.to_numpy()[0] == 0.0
    assert gp.asarray([1, 2, 3], dtype="int32").dtype is gp.int32


def test_int4_packs_two_per_byte() -> None:
    vals = np.array([[-8, 7, 0, -1], [3, -3, 5, 1]], dtype=ml_dtypes.int4)
    a = gp.from_numpy(vals, device="cpu")
    assert a.nbytes == 4 and a.dtype is gp.int4
    np.testing.assert_array_equal(a.to_numpy(), vals)
    np.testing.assert_array_equal(a[1].to_numpy(), vals[1])
    with pytest.raises(ValueError, match="whole bytes"):
        a[:, 1:]
    with pytest.raises(TypeError, match="byte strides"):
        _ = a.strides
    with pytest.raises(ValueError, match="even last dimension"):
        gp.empty((3,), gp.int4)


def test_strides_and_offsets_match_numpy() -> None:
    host = RNG.standard_normal((5, 6, 7)).astype(np.float32)
    a = gp.from_numpy(host, device="cpu")
    assert a.strides == host.strides
    v, hv = a[1:, ::2, 3:1:-1], host[1:, ::2, 3:1:-1]
    assert v.shape == hv.shape and v.strides == hv.strides
    assert v.byte_offset == (1 * 42 + 3) * 4
    assert v.data_ptr() == a.data_ptr() + v.byte_offset
    assert v.owner is a.owner
    assert not v.is_contiguous() and a.is_contiguous()


def test_views_share_memory() -> None:
    a = gp.zeros((4, 4), device="cpu")
    v = a.T[1:3]
    v[...] = 5.0
    ref = np.zeros((4, 4), np.float32)
    ref.T[1:3] = 5.0
    np.testing.assert_array_equal(a.to_numpy(), ref)
    a[0, :] = gp.arange(4.0, 8.0)
    assert a.to_numpy()[0].tolist() == [4.0, 5.0, 6.0, 7.0]
    a[:, 0] = np.array([1, 2, 3, 4])
    assert a.to_numpy()[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]


# Random chains of view operations applied to NumPy and GPUArray alike.
@st.composite
def _view_chains(draw: st.DrawFn) -> tuple[tuple[int, ...], list[tuple[str, object]]]:
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    ops: list[tuple[str, object]] = []
    cur = list(shape)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["slice", "transpose", "reshape", "broadcast", "index"]))
        if kind == "slice":
            ax = draw(st.integers(0, len(cur) - 1))
            step = draw(st.sampled_from([1, 2, 3, -1, -2]))
            start = draw(st.integers(0, cur[ax] - 1))
            sl = slice(start, None, step)
            ops.append(("slice", (ax, sl)))
            cur[ax] = len(range(*sl.indices(cur[ax])))
            if cur[ax] == 0:
                break
        elif kind == "transpose":
            perm = draw(st.permutations(range(len(cur))))
            ops.append(("transpose", tuple(perm)))
            cur = [cur[p] for p in perm]
        elif kind == "reshape":
            ops.append(("reshape", (-1,)))
            cur = [int(np.prod(cur))]
        elif kind == "broadcast":
            ops.append(("broadcast", (2, *cur)))
            cur = [2, *cur]
        elif len(cur) > 1:
            ops.append(("index", cur[0] - 1))
            cur = cur[1:]
    return shape, ops


def _apply(x, op: tuple[str, object]):  # type: ignore[no-untyped-def]
    kind, arg = op
    if kind == "slice":
        ax, sl = arg  # type: ignore[misc]
        key = (slice(None),) * ax + (sl,)
        return x[key]
    if kind == "transpose":
        return x.transpose(arg)
    if kind == "reshape":
        return x.reshape(arg)
    if kind == "broadcast":
        return np.broadcast_to(x, arg) if isinstance(x, np.ndarray) else x.broadcast_to(arg)
    return x[arg]


@settings(max_examples=150, deadline=None)
@given(_view_chains())
def test_random_view_chains_match_numpy(case: tuple[tuple[int, ...], list]) -> None:  # type: ignore[type-arg]
    shape, ops = case
    host = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ref, arr = host, gp.from_numpy(host, device="cpu")
    for op in ops:
        ref, arr = _apply(ref, op), _apply(arr, op)
        assert arr.shape == ref.shape
    np.testing.assert_array_equal(arr.to_numpy(), ref)
    np.testing.assert_array_equal(arr.contiguous().to_numpy(), ref)
    assert arr.contiguous().is_contiguous()


def test_reshape_views_when_possible_and_copies_otherwise() -> None:
    a = gp.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4), device="cpu")
    v = a.reshape(6, 4)
    assert v.owner is a.owner and v.byte_offset == 0
    t = a.transpose(1, 0, 2)  # (3, 2, 4): the last dim stays contiguous
    assert t.reshape(3, 8).owner is not a.owner  # needs a copy
    assert t.reshape(6, 4).owner is not a.owner
    with pytest.raises(ValueError, match="without a copy"):
        t.view(6, 4)
    assert t.view(3, 2, 2, 2).owner is a.owner
    np.testing.assert_array_equal(
        t.reshape(3, 8).to_numpy(), np.arange(24).reshape(2, 3, 4).transpose(1, 0, 2).reshape(3, 8)
    )
    assert a.reshape(-1).shape == (24,)
    assert a.unsqueeze(0).shape == (1, 2, 3, 4) and a.unsqueeze(-1).squeeze(-1).shape == a.shape


def test_astype_and_copy() -> None:
    h = RNG.standard_normal((3, 5)).astype(np.float32)
    a = gp.from_numpy(h, device="cpu")
    b = a.astype("bfloat16")
    assert b.dtype is gp.bfloat16
    np.testing.assert_array_equal(b.to_numpy(), h.astype(ml_dtypes.bfloat16))
    c = a.copy()
    c[0, 0] = 99.0
    assert a.to_numpy()[0, 0] == h[0, 0]


def test_numpy_conversion_and_scalars() -> None:
    a = gp.from_numpy(np.array([[1.5]], np.float32), device="cpu")
    assert float(a) == 1.5 and a.item() == 1.5
    assert np.asarray(a).tolist() == [[1.5]]
    assert int(gp.full((1,), 3)) == 3 and bool(gp.ones((1,), "bool"))
    with pytest.raises(ValueError, match="one element"):
        gp.zeros((2,)).item()
    assert "GPUArray" in repr(a) and "float32" in repr(a)


@pytest.mark.parametrize(
    ("call", "exc", "msg"),
    [
        (lambda: gp.zeros((2, -1)), ValueError, r"negative dimension"),
        (lambda: gp.zeros((2.5, 3)), TypeError, r"holds 2.5 of type float"),
        (lambda: gp.zeros("abc"), TypeError, r"holds 'a'"),
        (lambda: gp.zeros((2,), dtype="float128"), TypeError, r"unknown dtype 'float128'"),
        (lambda: gp.zeros((2,), device="tpu"), ValueError, r"invalid device 'tpu'"),
        (lambda: gp.from_numpy([1, 2]), TypeError, r"expects a numpy.ndarray, got list"),
        (lambda: gp.from_numpy(np.zeros(2, "complex256")), TypeError, r"complex256"),
        (lambda: gp.zeros((2, 3)).reshape(4, 2), ValueError, r"size 6 into shape \(4, 2\)"),
        (lambda: gp.zeros((2, 3))[2], IndexError, r"index 2 is out of bounds for axis 0"),
        (lambda: gp.zeros((2, 3))[0, 0, 0], IndexError, r"too many indices"),
        (lambda: gp.zeros((2,))[np.array([0])], TypeError, r"advanced"),
        (lambda: gp.zeros((2, 3)).broadcast_to((4, 3)), ValueError, r"broadcast"),
        (lambda: gp.zeros((2, 3)).permute(0, 0), ValueError, r"not a permutation"),
        (lambda: gp.full((2,), 300, dtype="int8"), ValueError, r"300 is out of range for int8"),
        (lambda: gp.GPUArray(), TypeError, r"not constructed directly"),
    ],
)
def test_bad_inputs_name_the_problem(call, exc: type[Exception], msg: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=msg):
        call()


# ----- complex storage ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [gp.complex64, gp.complex128], ids=lambda d: d.name)
def test_complex_views_copies_and_fills(dt: gp.DataType) -> None:
    host = _random((4, 6), dt)
    a = gp.from_numpy(host, device="cpu")
    assert a.itemsize == dt.itemsize and a.strides == host.strides
    for key in [(slice(None), slice(None, None, 2)), (1,), (slice(None, None, -1), 3)]:
        np.testing.assert_array_equal(a[key].to_numpy(), host[key])
    np.testing.assert_array_equal(a.T.contiguous().to_numpy(), host.T)
    np.testing.assert_array_equal(a.T.copy().to_numpy(), host.T)
    np.testing.assert_array_equal(a.reshape(3, 8).to_numpy(), host.reshape(3, 8))
    np.testing.assert_array_equal(a[:, ::2].reshape(-1).to_numpy(), host[:, ::2].reshape(-1))
    assert a[1, 2].item() == complex(host[1, 2])
    b = gp.zeros((3, 2), dt, device="cpu")
    b[1] = 2 - 3j
    b[2, 0] = gp.from_numpy(host[0, :1], device="cpu")[0]
    want = np.zeros((3, 2), dt.np_dtype)
    want[1] = 2 - 3j
    want[2, 0] = host[0, 0]
    np.testing.assert_array_equal(b.to_numpy(), want)
    np.testing.assert_array_equal(gp.full((2,), 1.5 + 2j, dt).to_numpy(), [1.5 + 2j] * 2)
    other = gp.complex128 if dt is gp.complex64 else gp.complex64
    np.testing.assert_array_equal(a.astype(other).to_numpy(), host.astype(other.np_dtype))


def test_view_as_real_and_complex_share_memory() -> None:
    host = _random((3, 5), gp.complex64)
    z = gp.from_numpy(host, device="cpu")
    r = gp.view_as_real(z)
    assert r.dtype is gp.float32 and r.shape == (3, 5, 2) and r.element_strides == (10, 2, 1)
    np.testing.assert_array_equal(r.to_numpy(), np.stack([host.real, host.imag], -1))
    rs = gp.view_as_real(z[:, 1::2])  # any strides: the pair dim keeps stride 1
    assert rs.element_strides == (10, 4, 1)
    np.testing.assert_array_equal(rs.to_numpy()[..., 1], host[:, 1::2].imag)
    back = gp.view_as_complex(r)
    assert back.dtype is gp.complex64 and back.shape == (3, 5) and back.data_ptr() == z.data_ptr()
    r[0, 0, 1] = 7.0  # writes through
    assert z[0, 0].item() == complex(host[0, 0].real, 7.0)
    sub = gp.view_as_complex(r[1:, ::2])
    np.testing.assert_array_equal(sub.to_numpy(), z.to_numpy()[1:, ::2])
    f64 = gp.from_numpy(np.arange(8.0).reshape(4, 2), device="cpu")
    np.testing.assert_array_equal(
        gp.view_as_complex(f64).to_numpy(), [0 + 1j, 2 + 3j, 4 + 5j, 6 + 7j]
    )
    assert gp.view_as_complex(f64).dtype is gp.complex128


@pytest.mark.parametrize(
    ("call", "exc", "msg"),
    [
        (lambda: gp.view_as_real(gp.zeros((2,))), TypeError, r"complex64 or complex128.*float32"),
        (lambda: gp.view_as_real(np.zeros(2, np.complex64)), TypeError, r"GPUArray"),
        (lambda: gp.view_as_complex(gp.zeros((2, 2), "float16")), TypeError, r"float16"),
        (lambda: gp.view_as_complex(gp.zeros((2, 3))), ValueError, r"size 2 and stride 1"),
        (lambda: gp.view_as_complex(gp.zeros((2, 2)).T), ValueError, r"size 2 and stride 1"),
        (lambda: gp.view_as_complex(gp.zeros((3, 3))[:, 1:]), ValueError, r"whole"),
        (lambda: gp.view_as_complex(gp.zeros((7,))[1:].reshape(3, 2)), ValueError, r"whole"),
        (lambda: gp.zeros((2,), "complex64") + 1.0, TypeError, r"storage type complex64"),
        (lambda: gp.zeros((2,), "complex64").astype("float32"), TypeError, r"complex64"),
        (lambda: gp.cast(gp.zeros((2,)), "complex64"), TypeError, r"complex"),
        (lambda: gp.zeros((2,), "float32").fill_(1j), gp.ConversionError, r"float32"),
        (
            lambda: gp.from_numpy(np.array([1e300 + 0j]), dtype="complex64"),
            gp.ConversionError,
            r"out of range for complex64",
        ),
        (
            lambda: gp.from_numpy(np.array([1 + 1j]), dtype="float64"),
            gp.ConversionError,
            r"imaginary part",
        ),
    ],
)
def test_complex_misuse_names_the_problem(call, exc: type[Exception], msg: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=msg):
        call()
