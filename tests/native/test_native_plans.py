"""The Python side of the native elementwise/unary/copy/reduce twins, checked on any machine.

pygpukit/backends/native/{elementwise,unary,copy,reduce}.py turn an op call into
extension calls: collapsed dims, element strides (0 = broadcast), pointers, scalars, the dtype
a launch takes (inputs converted first), the [A, K, B] view, thread layout and split of a
reduction with its workspace. Here the extension is replaced by a NumPy emulation of its
documented contract (native/include/pygpukit_native/map_args.h, native/src/*/*.h), reading and
writing host memory of CPU-device arrays and refusing the dtype combinations the C++ dispatch
refuses. Results must equal the NumPy backend's for every layout, so the plumbing is proven
without a GPU; the GPU tests (test_native_<family>.py) then prove the kernels.
"""

from __future__ import annotations

import ctypes
import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _data import rand, seed
from _routes import native_impl

import pygpukit as gp
from pygpukit.backends import cpu

FLOATS = {"float32", "float16", "bfloat16", "float64"}
INTS = {"int64", "int32", "int16", "int8", "uint8"}
NUMERIC = FLOATS | INTS
BOOL_ARITH = {"add", "mul", "maximum", "minimum"}
ARITH = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "clamp"}
CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
       "gt": np.greater, "ge": np.greater_equal}  # fmt: skip
UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: 1 / np.sqrt(v),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
}


def _npd(name: str) -> np.dtype:
    return gp.as_dtype(name).np_dtype


def _compute(name: str) -> str:
    if name in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return "float32"
    return "int32" if name == "bool" else name


def _host(ptr: int, dtype: np.dtype, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    assert all(s >= 0 for s in strides), "negative strides are not expected here"
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
    buf = (ctypes.c_char * (extent * dtype.itemsize)).from_address(ptr)
    # as_strided does not take ml_dtypes types: stride a same-width carrier, then view it.
    carrier = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    flat = np.frombuffer(buf, dtype=carrier)
    v = np.lib.stride_tricks.as_strided(
        flat, shape, tuple(s * dtype.itemsize for s in strides), writeable=True
    )
    return v.view(dtype)


def _conv(x: Any, name: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return cpu.cast(np.asarray(x), dtype=_npd(name))


def _ipow(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    a, e = np.broadcast_arrays(a, e)
    out = np.ones_like(a)
    with np.errstate(all="ignore"):
        pos = np.where(e > 0, e, 0)
        out = np.power(a, pos)
    neg = np.where(a == 1, 1, np.where(a == -1, 1 - 2 * (e & 1), 0)).astype(a.dtype)
    return np.where(e < 0, neg, out)


def _clamp(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, has: int) -> np.ndarray:
    if has & 1:
        x = np.maximum(x, lo)
    return np.minimum(x, hi) if has & 2 else x


class FakeExt:
    """The extension's contract in NumPy (map engine and reduce kernel)."""

    def __init__(self) -> None:
        self.families = ["copy", "elementwise", "reduce", "unary"]
        self.calls: list[tuple[Any, ...]] = []

    # ----- map engine --------------------------------------------------------------------------
    def _operands(self, in0: str, ind: str, sizes, ptrs, strides, fs, ints, ct):
        vals = []
        for k in (1, 2, 3):
            name = in0 if k == 1 else ind
            if ptrs[k]:
                vals.append(_conv(_host(ptrs[k], _npd(name), sizes, strides[k]), ct))
            elif ct in ("float32", "float64"):
                vals.append(np.asarray(fs[k]).astype(_npd(ct)))
            else:
                vals.append(np.asarray(ints[k]).astype(np.int64).astype(_npd(ct)))
        return vals

    def _check_map(self, sizes, ptrs, strides, fs, ints) -> tuple[int, ...]:
        if not 1 <= len(sizes) <= 6:
            raise ValueError("map: between 1 and 6 collapsed dims")
        assert len(ptrs) == len(strides) == len(fs) == len(ints) == 4 and ptrs[0]
        assert all(len(s) == len(sizes) for s in strides)
        return tuple(sizes)

    def _map(self, op, ind, outd, flags, sizes, ptrs, strides, fs, ints, fn, ct, in0=None):
        shape = self._check_map(sizes, ptrs, strides, fs, ints)
        self.calls.append((op, ind, outd, tuple(sizes)))
        a, b, c = self._operands(in0 or ind, ind, shape, ptrs, strides, fs, ints, ct)
        with np.errstate(all="ignore"):
            r = fn(a, b, c)
        y = _host(ptrs[0], _npd(outd), shape, strides[0])
        y[...] = _conv(np.broadcast_to(r, shape), outd)

    @staticmethod
    def _same_or_f32(op: str, ind: str, outd: str, ok: set[str]) -> None:
        if ind == outd and outd in ok:
            return
        if ind == "float32" and outd in ("float16", "bfloat16"):
            return
        raise ValueError(f"{op}: no kernel for inputs of dtype {ind} and output {outd}")

    def elementwise(
        self, device, stream, op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fs, ints
    ):
        if op in ARITH:
            ok = {"div": FLOATS}.get(op, NUMERIC | ({"bool"} if op in BOOL_ARITH else set()))
            self._same_or_f32(op, in_dtype, out_dtype, ok)
            ct = _compute(out_dtype)
            fns = {
                "add": lambda a, b, c: a + b,
                "sub": lambda a, b, c: a - b,
                "mul": lambda a, b, c: a * b,
                "div": lambda a, b, c: np.true_divide(a, b),
                "maximum": lambda a, b, c: np.maximum(a, b),
                "minimum": lambda a, b, c: np.minimum(a, b),
                "pow": lambda a, b, c: np.power(a, b) if ct in FLOATS else _ipow(a, b),
                "clamp": lambda a, b, c: _clamp(a, b, c, flags),
            }
            self._map(op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fs, ints, fns[op], ct)
        elif op in CMP:
            if out_dtype != "bool" or in_dtype not in NUMERIC | {"bool"}:
                raise ValueError(f"{op}: no kernel for {in_dtype} -> {out_dtype}")
            f = CMP[op]
            self._map(op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fs, ints,
                      lambda a, b, c: f(a, b), _compute(in_dtype))  # fmt: skip
        elif op == "where":
            if in_dtype != out_dtype:
                raise ValueError("where: in != out")
            bits = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}[_npd(out_dtype).itemsize]
            shape = self._check_map(sizes, ptrs, strides, fs, ints)
            self.calls.append((op, in_dtype, out_dtype, tuple(sizes)))
            cond = _host(ptrs[1], _npd("bool"), shape, strides[1])
            ab = [
                _host(ptrs[k], _npd(out_dtype), shape, strides[k]).view(_npd(bits))
                if ptrs[k]
                else np.asarray(ints[k]).astype(np.int64).astype(_npd(bits))
                for k in (2, 3)
            ]
            y = _host(ptrs[0], _npd(out_dtype), shape, strides[0]).view(_npd(bits))
            y[...] = np.where(cond, ab[0], ab[1])
        else:
            raise ValueError(f"elementwise: unknown op '{op}'")

    def unary(self, device, stream, op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fs, ints):
        ok = NUMERIC if op in ("neg", "abs") else FLOATS
        self._same_or_f32(op, in_dtype, out_dtype, ok)
        f = UNARY[op]
        self._map(op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fs, ints,
                  lambda a, b, c: f(a), _compute(out_dtype))  # fmt: skip

    def copy(self, device, stream, op, in_dtype, out_dtype, flags, sizes, ptrs, strides, fs, ints):
        if (op == "copy") != (in_dtype == out_dtype):
            raise ValueError(f"{op}: {in_dtype} -> {out_dtype}")
        shape = self._check_map(sizes, ptrs, strides, fs, ints)
        self.calls.append((op, in_dtype, out_dtype, tuple(sizes)))
        x = _host(ptrs[1], _npd(in_dtype), shape, strides[1])
        y = _host(ptrs[0], _npd(out_dtype), shape, strides[0])
        y[...] = x if op == "copy" else _conv(x, out_dtype)

    # ----- reduce --------------------------------------------------------------------------------
    def reduce(self, device, stream, op, in_dtype, out_dtype, A, K, B, sa, sk, sb, x, xi, y, yi,
               kt, bt, kfast, splits, k_chunk, count, final):  # fmt: skip
        pow2 = lambda v: v > 0 and v & (v - 1) == 0  # noqa: E731
        if A < 1 or B < 1 or K < 0 or not (pow2(kt) and pow2(bt)) or kt * bt > 256:
            raise ValueError("reduce: bad shape or layout")
        if splits < 1 or k_chunk < 1 or (splits > 1 and k_chunk * (splits - 1) >= max(K, 1)):
            raise ValueError("reduce: bad split")
        if in_dtype not in NUMERIC | {"bool"}:
            raise ValueError("reduce: storage type")
        assert final or op != "argmax" or yi
        self.calls.append(("reduce", op, in_dtype, out_dtype, A, K, B, splits, final))
        if not x and K > 0:
            raise ValueError("reduce: x must be a device pointer")
        xs = _host(x, _npd(in_dtype), (A, K, B), (sa, sk, sb)) if K else np.zeros(
            (A, 0, B), _npd(in_dtype))  # fmt: skip
        xis = _host(xi, np.dtype(np.int64), (A, K, B), (sa, sk, sb)) if xi else None
        if op in ("sum", "mean"):
            acc = _compute(in_dtype) if in_dtype in FLOATS else (
                "float64" if op == "mean" else "int64")  # fmt: skip
        else:
            acc = _compute(in_dtype)
        xc = _conv(xs, acc)
        parts = []
        for s in range(splits):
            lo, hi = s * k_chunk, min(K, (s + 1) * k_chunk)
            chunk = xc[:, lo:hi, :]
            with np.errstate(all="ignore"):
                if op in ("sum", "mean"):
                    v = np.sum(chunk, axis=1, dtype=_npd(acc))
                    i = None
                elif op == "argmax":
                    j = np.argmax(chunk, axis=1)
                    v = np.take_along_axis(chunk, j[:, None, :], 1)[:, 0, :]
                    i = (j + lo) if xis is None else np.take_along_axis(
                        xis[:, lo:hi, :], j[:, None, :], 1)[:, 0, :]  # fmt: skip
                else:
                    v = (np.min if op == "min" else np.max)(chunk, axis=1)
                    i = None
            parts.append((v, i))
        if final:
            assert splits == 1
            v, i = parts[0]
            if op == "argmax":
                _host(y, np.dtype(np.int64), (A * B,), (1,))[...] = i.reshape(-1)
            else:
                if op == "mean":
                    v = (v / np.asarray(count).astype(_npd(acc))).astype(_npd(acc))
                _host(y, _npd(out_dtype), (A * B,), (1,))[...] = _conv(v, out_dtype).reshape(-1)
            return
        ws = _host(y, _npd(out_dtype), (A, splits, B), (splits * B, B, 1))
        for s, (v, i) in enumerate(parts):
            ws[:, s, :] = _conv(v, out_dtype)
            if op == "argmax":
                _host(yi, np.dtype(np.int64), (A, splits, B), (splits * B, B, 1))[:, s, :] = i


MODULES = ["elementwise", "unary", "copy", "reduce"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeExt]:
    ext = FakeExt()
    for m in MODULES:
        mod = importlib.import_module(f"pygpukit.backends.native.{m}")
        monkeypatch.setattr(mod, "extension", lambda: ext)
    yield ext


def nk(family: str) -> Any:
    return importlib.import_module(f"pygpukit.backends.native.{family}")


def up(x: Any) -> gp.GPUArray:
    return gp.from_numpy(np.array(x, order="C"), device="cpu")  # keeps 0-d arrays 0-d


def view(x: np.ndarray, layout: str) -> gp.GPUArray:
    if x.ndim == 0:
        return up(x)
    if layout == "transposed" and x.ndim >= 2:
        return up(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return up(wide)[..., ::2]
    return up(x)


def poisoned_strided(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    wide = np.zeros((*shape[:-1], 2 * shape[-1]), dtype=_npd(dtype))
    if dtype in FLOATS:
        wide[...] = np.nan
    return up(wide)[..., ::2]


def same(got: Any, ref: Any) -> None:
    g, r = np.asarray(got), np.asarray(ref)
    assert g.dtype == r.dtype and g.shape == r.shape, (g.dtype, r.dtype, g.shape, r.shape)
    if g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, r)
    else:
        np.testing.assert_array_equal(g.astype(np.float64), r.astype(np.float64))


SHAPES = [
    ((4097,), (4097,)),
    ((7, 33), (33,)),
    ((7, 33), (7, 1)),
    ((1,), (1,)),
    ((), ()),
    ((3, 5, 7), (5, 1)),
]


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
@pytest.mark.parametrize("op", ["add", "sub", "div", "maximum", "pow"])
def test_binary(fake: FakeExt, op: str, dtype: str, shapes: tuple, layout: str) -> None:
    if dtype == "bool" and op in ("sub", "pow"):
        pytest.skip("the reference has no bool subtraction or power")
    rng = np.random.default_rng(seed("plan", op, dtype, shapes, layout))
    a = rand(rng, shapes[0], dtype, positive=op == "pow", low=1, high=5)
    b = rand(rng, shapes[1], dtype, scale=0.5, low=0, high=4)
    a, b = np.asarray(a), np.asarray(b)
    rd = _npd("float32" if dtype != "float16" else dtype) if op == "div" else _npd(dtype)
    r = getattr(nk("elementwise"), op)(view(a, layout), up(b), out_dtype=rd)
    same(r.to_numpy(), getattr(cpu, op)(a, b, out_dtype=rd))


def test_scalars_out_and_aliasing(fake: FakeExt) -> None:
    ew = nk("elementwise")
    rng = np.random.default_rng(1)
    a = rand(rng, (5, 33), "float16")
    s = np.asarray(0.1, np.float32)  # the op layer's compute-dtype scalar
    same(ew.add(up(a), s, out_dtype=np.float16).to_numpy(), cpu.add(a, s, out_dtype=np.float16))
    same(ew.sub(1.7, up(a), out_dtype=np.float16).to_numpy(),
         cpu.sub(np.float32(1.7), a, out_dtype=np.float16))  # fmt: skip
    out = poisoned_strided((5, 33), "float16")
    assert ew.mul(view(a, "transposed"), up(a[0]), out=out) is out
    same(out.to_numpy(), cpu.mul(a, a[0], out_dtype=np.float16))
    x = up(a)
    ew.add(x, x, out=x)
    same(x.to_numpy(), cpu.add(a, a, out_dtype=np.float16))
    i = up(np.arange(-5, 5, dtype=np.int32))
    same(ew.add(i, 2**40 + 3, out_dtype=np.int64).to_numpy(),
         np.arange(-5, 5, dtype=np.int64) + 2**40 + 3)  # fmt: skip
    f64 = rand(rng, 9, "float64")
    same(ew.add(up(f64), 0.1, out_dtype=np.float64).to_numpy(), f64 + 0.1)  # 53 bits kept


def test_mixed_dtypes_take_one_launch_dtype(fake: FakeExt) -> None:
    ew = nk("elementwise")
    rng = np.random.default_rng(2)
    i32, i8 = rand(rng, (7, 33), "int32", low=-3000, high=3000), rand(rng, 33, "int8")
    h, f = rand(rng, (7, 33), "float16"), rand(rng, 33, "float32")
    # int32 + float16 -> float16: both to float32, one rounding (as the reference)
    same(ew.add(up(i32), up(h), out_dtype=np.float16).to_numpy(),
         cpu.add(i32, h, out_dtype=np.float16))  # fmt: skip
    assert fake.calls[-1][:3] == ("add", "float32", "float16")
    # int8 + float16 -> float16: int8 is exact in float16, cast to it
    same(ew.mul(up(h), up(i8), out_dtype=np.float16).to_numpy(),
         cpu.mul(h, i8, out_dtype=np.float16))  # fmt: skip
    assert fake.calls[-1][:3] == ("mul", "float16", "float16")
    same(ew.add(up(h), up(f)).to_numpy(), cpu.add(h, f))
    same(ew.lt(up(h), up(i32)).to_numpy(), cpu.lt(h, i32))
    assert fake.calls[-1][:3] == ("lt", "float32", "bool")
    same(ew.ge(up(i8), np.asarray(3, np.int8)).to_numpy(), cpu.ge(i8, np.int8(3)))
    b = rng.random(33) < 0.5
    same(ew.add(up(b), up(i8), out_dtype=np.int8).to_numpy(), cpu.add(b, i8, out_dtype=np.int8))
    # results the kernels do not write directly: computed in the compute dtype, then cast
    # (bool subtraction: the Triton twin's int32 arithmetic, != 0 at the store)
    same(ew.sub(up(b), up(b[::-1].copy()), out_dtype=np.bool_).to_numpy(),
         b.astype(np.int32) - b[::-1] != 0)  # fmt: skip
    same(ew.add(up(i32), up(i32), out_dtype=np.bool_).to_numpy(),
         cpu.add(i32, i32, out_dtype=np.bool_))  # fmt: skip


def test_many_dims_split_on_host(fake: FakeExt) -> None:
    rng = np.random.default_rng(7)
    a = rand(rng, (2, 3, 2, 3, 2, 3, 4), "float32")
    b = rand(rng, (1, 3, 1, 3, 1, 3, 1), "float32")
    out = up(np.full(a.shape, np.nan, np.float32))
    nk("elementwise").add(view(a, "strided"), up(b), out=out)
    same(out.to_numpy(), cpu.add(a, b, out_dtype=np.float32))
    assert all(len(c[3]) <= 6 for c in fake.calls) and len(fake.calls) == 2


def test_where_and_clamp(fake: FakeExt) -> None:
    ew = nk("elementwise")
    rng = np.random.default_rng(3)
    cond = rng.random((7, 33)) < 0.5
    a, b = rand(rng, (7, 33), "float16"), rand(rng, 33, "float16")
    out = poisoned_strided((7, 33), "float16")
    ew.where(view(cond, "transposed"), view(a, "strided"), up(b), out=out)
    same(out.to_numpy(), cpu.where(cond, a, b))
    s = np.asarray(2.5, np.float16)
    same(ew.where(up(cond[:, :1]), s, up(b)).to_numpy(), cpu.where(cond[:, :1], s, b))
    ai, af = rand(rng, (7, 33), "int32"), rand(rng, (7, 33), "float32")
    same(ew.where(up(cond), up(ai), up(af)).to_numpy(), cpu.where(cond, ai, af))
    same(ew.where(up(cond), 1e6, -2, out_dtype=np.float16).to_numpy(),
         np.where(cond, np.float16(np.inf), np.float16(-2)))  # fmt: skip
    x = rand(rng, (7, 33), "bfloat16", scale=2.0)
    lo, hi = rand(rng, 33, "bfloat16"), rand(rng, (7, 1), "bfloat16")
    for mn, mx in ((np.float32(-0.5), np.float32(0.7)), (None, up(hi)), (up(lo), None)):
        r = ew.clamp(view(x, "strided"), mn, mx)
        h = [v.to_numpy() if isinstance(v, gp.GPUArray) else v for v in (mn, mx)]
        same(r.to_numpy(), cpu.clamp(x, h[0], h[1]))
    xi = rand(rng, (7, 33), "int32", low=-20, high=20)
    same(ew.clamp(up(xi), np.int32(-3), np.int32(5)).to_numpy(), cpu.clamp(xi, -3, 5))


@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(fake: FakeExt, op: str, layout: str) -> None:
    rng = np.random.default_rng(seed("un", op, layout))
    for dtype in ("float32", "bfloat16", "int32"):
        x = rand(rng, (5, 33), dtype, positive=op in ("log", "sqrt", "rsqrt"), low=1, high=9)
        r = getattr(nk("unary"), op)(view(x, layout))
        same(r.to_numpy(), getattr(cpu, op)(x))
    x = rand(rng, (5, 33), "float32", positive=True)
    out = poisoned_strided((5, 33), "float16")
    getattr(nk("unary"), op)(view(x, layout), out_dtype=np.float16, out=out)
    same(out.to_numpy(), getattr(cpu, op)(x, out_dtype=np.float16))


ALL = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
       "int64", "int32", "int16", "int8", "uint8", "bool"]  # fmt: skip


@pytest.mark.parametrize("dtype", ALL)
def test_copy_and_cast_layouts(fake: FakeExt, dtype: str) -> None:
    cp = nk("copy")
    rng = np.random.default_rng(seed("cp", dtype))
    x = _conv(rng.standard_normal((7, 33)) * 20, dtype)
    d = up(x)
    bcast = (d[:1].broadcast_to((4, 7, 33)), np.broadcast_to(x[:1], (4, 7, 33)))
    for src, ref in ((d.T, x.T), (d[::2, ::3], x[::2, ::3]), bcast):
        r = cp.copy(src)
        assert r.is_contiguous()
        same(r.to_numpy().view(np.uint8), np.ascontiguousarray(ref).view(np.uint8))
        for dst in ("float32", "int8", "float8_e5m2", "bool"):
            same(cp.cast(src, dtype=dst).to_numpy(), _conv(np.ascontiguousarray(ref), dst))
    out = up(np.zeros((66, 7), _npd(dtype)))[::2]
    assert cp.copy(d.T, out=out) is out
    same(out.to_numpy().view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))
    assert cp.contiguous(d) is d
    with pytest.raises(ValueError, match="copy: out has"):
        cp.copy(d, out=up(np.zeros((7, 33), np.int16 if dtype != "int16" else np.int8)))


CASES = [
    ((1,), None),
    ((7,), 0),
    ((4097,), None),
    ((20011,), None),
    ((7, 33), None),
    ((7, 33), 0),
    ((7, 33), 1),
    ((3, 9001), 1),
    ((9001, 3), 0),
    ((3, 5, 7), (0, 2)),
    ((3, 5, 7), (1, 2)),
    ((3, 5, 7), 1),
    ((), None),
    ((4, 0, 3), 1),
]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "argmax"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_reduce(fake: FakeExt, dtype: str, op: str, shape: tuple, axis: Any, keepdims: bool):
    if op == "argmax" and isinstance(axis, tuple):
        pytest.skip("argmax takes one axis")
    if op != "sum" and 0 in shape:
        pytest.skip("only sum reduces an empty axis")
    rng = np.random.default_rng(seed("red", op, dtype, shape, axis))
    x = rand(rng, shape, dtype, low=-5, high=5)
    ref = getattr(cpu, op)(x, axis=axis, keepdims=keepdims)
    for layout in ("strided", "transposed"):
        r = getattr(nk("reduce"), op)(view(x, layout), axis=axis, keepdims=keepdims)
        if op in ("sum", "mean") and dtype in FLOATS:
            # the emulation sums chunk by chunk: float sums differ from NumPy's pairwise order
            np.testing.assert_allclose(r.to_numpy().astype(np.float64),
                                       ref.astype(np.float64), rtol=2e-3, atol=1e-5)  # fmt: skip
            assert r.dtype.np_dtype == ref.dtype and r.shape == ref.shape
        else:
            same(r.to_numpy(), ref)


def test_reduce_splits_out_and_out_dtype(fake: FakeExt) -> None:
    red = nk("reduce")
    rng = np.random.default_rng(4)
    x = rand(rng, (4, 20011), "float32")
    x[1, 17] = x[1, 19000] = np.nan
    x[3, 5000] = np.inf
    for op in ("max", "min", "argmax"):
        fake.calls.clear()
        for axis in (None, 1):
            same(getattr(red, op)(up(x), axis=axis).to_numpy(), getattr(cpu, op)(x, axis=axis))
        assert any(c[0] == "reduce" and not c[-1] for c in fake.calls), "no split path taken"
    xi = rand(rng, (7, 33), "int32")
    same(red.sum(up(xi), axis=1, out_dtype=np.int32).to_numpy(),
         cpu.sum(xi, axis=1, out_dtype=np.int32))  # fmt: skip
    big = rand(rng, (5, 4099), "int64")
    big[0, :7] = 2**62
    same(red.sum(up(big), axis=1).to_numpy(), cpu.sum(big, axis=1))
    np.testing.assert_allclose(red.mean(up(big), axis=None).to_numpy(), big.astype(float).mean(),
                               rtol=1e-6)  # fmt: skip
    f = rand(rng, (33, 7), "float32")
    out = poisoned_strided((33,), "float32")
    assert red.max(up(f), axis=1, out=out) is out
    same(out.to_numpy(), cpu.max(f, axis=1))
    h = rand(rng, (9, 300), "float16")
    np.testing.assert_allclose(red.sum(up(h), axis=1, out_dtype=np.float64).to_numpy(),
                               h.astype(np.float64).sum(1), rtol=1e-12)  # fmt: skip
    b = up(x[:1, :33]).broadcast_to((9, 33))
    np.testing.assert_allclose(red.sum(b, axis=0).to_numpy(), x[0, :33].astype(np.float64) * 9,
                               rtol=1e-6)  # fmt: skip


def test_lookup_and_no_driver_messages() -> None:

    for op, fam in (("add", "elementwise"), ("neg", "unary"), ("cast", "copy"), ("sum", "reduce")):
        fn, why = native_impl(op)
        if fn is not None:
            assert fn.__module__.endswith(f"backends.native.{fam}")
        else:
            assert "_pygpukit_native" in why or "family" in why, why


def _built(*families: str) -> Any:
    ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")
    missing = [f for f in families if f not in ext.families]
    if missing:
        pytest.skip(f"_pygpukit_native built without {missing}")
    return ext


def _map_call(fn: Any, op: str, ind: str, outd: str, **kw: Any) -> None:
    args = dict(sizes=[4], ptrs=[8, 8, 8, 0], strides=[[1]] * 4, fs=[0.0] * 4, ints=[0] * 4)
    args.update(kw)
    fn(0, 0, op, ind, outd, 0, args["sizes"], args["ptrs"], args["strides"], args["fs"],
       args["ints"])  # fmt: skip


def test_extension_rejects_bad_calls_before_launch() -> None:
    ext = _built("elementwise", "unary", "copy", "reduce")
    with pytest.raises(ValueError, match="between 1 and 6 collapsed dims"):
        _map_call(ext.elementwise, "add", "float32", "float32", sizes=[2] * 7,
                  strides=[[1] * 7] * 4)  # fmt: skip
    with pytest.raises(ValueError, match="the output must be a device pointer"):
        _map_call(ext.elementwise, "add", "float32", "float32", ptrs=[0, 8, 8, 0])
    with pytest.raises(ValueError, match="one entry per operand"):
        _map_call(ext.unary, "exp", "float32", "float32", ptrs=[8, 8])
    with pytest.raises(ValueError, match="unknown op 'fma'"):
        _map_call(ext.elementwise, "fma", "float32", "float32")
    with pytest.raises(ValueError, match="unknown dtype 'bfloat17'"):
        _map_call(ext.unary, "exp", "bfloat17", "float32")
    with pytest.raises(ValueError, match="div: no kernel for inputs of dtype int32"):
        _map_call(ext.elementwise, "div", "int32", "int32")
    with pytest.raises(ValueError, match="add: no kernel for inputs of dtype float16 and output"):
        _map_call(ext.elementwise, "add", "float16", "float32")
    with pytest.raises(ValueError, match="exp: no kernel for input dtype int32"):
        _map_call(ext.unary, "exp", "int32", "int32")
    with pytest.raises(ValueError, match="copy needs equal dtypes"):
        _map_call(ext.copy, "copy", "float32", "float16")
    with pytest.raises(ValueError, match="same dtype is a copy"):
        _map_call(ext.copy, "cast", "float16", "float16")
    red = dict(A=1, K=8, B=1, sa=0, sk=1, sb=0, x=8, xi=0, y=8, yi=0, kt=8, bt=1, kfast=True,
               splits=1, k_chunk=8, count=8.0, final=True)  # fmt: skip
    for bad, msg in ((dict(kt=3), "powers of two"), (dict(kt=64, bt=8), "kt \\* bt <= 256"),
                     (dict(splits=4, k_chunk=4), "every split"), (dict(x=0), "device pointers"),
                     (dict(B=0), "A and B must be >= 1")):  # fmt: skip
        with pytest.raises(ValueError, match=msg):
            ext.reduce(0, 0, "sum", "float32", "float32", **{**red, **bad})
    with pytest.raises(ValueError, match="storage type"):
        ext.reduce(0, 0, "max", "float8_e4m3fn", "float8_e4m3fn", **red)


@pytest.mark.skipif(gp.is_cuda_available(), reason="checks the no-driver path")
def test_extension_without_driver_raises_cuda_error() -> None:
    ext = _built("elementwise", "reduce")
    with pytest.raises(gp.CudaError, match="cudaGetDevice"):
        _map_call(ext.elementwise, "add", "float32", "float32")
    with pytest.raises(gp.CudaError, match="cudaGetDevice"):
        ext.reduce(0, 0, "sum", "float32", "float32", 1, 8, 1, 0, 1, 0, 8, 0, 8, 0, 8, 1, True,
                   1, 8, 8.0, True)  # fmt: skip
