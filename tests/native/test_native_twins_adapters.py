"""The Python adapters of the native activation, softmax, rope and embedding twins, on the CPU.

No GPU is needed: the extension is replaced by a NumPy model of its documented contract
(native/src/<family>/<family>.h: raw pointers, row strides, token strides, in elements), which
reads and writes CPU-device arrays through their host addresses and computes with the NumPy
backend. The adapters' layout decisions (flat runs, row strides read in place, copies of other
layouts, out= written in place or through a temporary, in-place rope, broadcast positions,
converted operands) must then reproduce the NumPy backend exactly; a wrong stride or pointer
reads the wrong elements and fails. The kernels themselves are tested on the GPU
(test_native_<family>.py).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from _data import rand, seed
from _routes import native_impl

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import activation as nact
from pygpukit.backends.native import embedding as nemb
from pygpukit.backends.native import rope as nrope
from pygpukit.backends.native import softmax as nsm

LAYOUTS = ["contiguous", "rows", "strided", "transposed"]


def _np(name: str) -> np.dtype[Any]:
    return gp.as_dtype(name).np_dtype  # type: ignore[no-any-return]


def _mem(addr: int, dt: Any, shape: tuple[int, ...], estrides: tuple[int, ...]) -> np.ndarray:
    """A writable NumPy view of host memory at addr with element strides."""
    dt = np.dtype(dt)
    if 0 in shape:
        return np.empty(shape, dt)
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, estrides, strict=True))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, estrides, strict=True))
    buf = (ctypes.c_char * ((hi - lo + 1) * dt.itemsize)).from_address(addr + lo * dt.itemsize)
    base = np.frombuffer(buf, dtype=dt)[-lo:] if lo else np.frombuffer(buf, dtype=dt)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * dt.itemsize for s in estrides))


def _rows(addr: int, dt: Any, rows: int, n: int, stride: int, out: bool = False) -> np.ndarray:
    assert stride >= 0, "row strides are never negative"
    if out:
        assert rows <= 1 or stride >= n, "output rows must not overlap"
    return _mem(addr, dt, (rows, n), (stride, 1))


class FakeExtension:
    """The extension's functions, computed with the NumPy backend over host memory."""

    calls: list[str]

    def __init__(self) -> None:
        self.calls = []

    def activation(self, op, device, stream, dtype, rows, n, x, sx, up, su, y, sy):
        self.calls.append(op)
        dt = _np(dtype)
        a = _rows(x, dt, rows, n, sx)
        yv = _rows(y, dt, rows, n, sy, out=True)
        if op in ("silu_mul", "gelu_mul_none", "gelu_mul_tanh"):
            b = _rows(up, dt, rows, n, su)
            if op == "silu_mul":
                r = cpu.silu_mul(a, b, out_dtype=dt)
            else:
                r = cpu.gelu_mul(a, b, approximate=op.rsplit("_", 1)[1], out_dtype=dt)
        elif op.startswith("gelu_"):
            r = cpu.gelu(a, approximate=op[5:], out_dtype=dt)
        else:
            r = getattr(cpu, op)(a, out_dtype=dt)
        yv[...] = r

    def softmax(self, device, stream, dtype, rows, n, x, sx, y, sy, scale, causal, sq):
        self.calls.append("softmax")
        dt = _np(dtype)
        a = _rows(x, dt, rows, n, sx)
        yv = _rows(y, dt, rows, n, sy, out=True)
        if causal:
            r = cpu.softmax(a.reshape(rows // sq, sq, n), scale=scale, causal=True)
            yv[...] = r.reshape(rows, n)
        else:
            yv[...] = cpu.softmax(a, scale=scale)

    def softmax_cols(self, device, stream, dtype, outer, n, inner, x, y, scale):
        self.calls.append("softmax_cols")
        dt = _np(dtype)
        st = (n * inner, inner, 1)
        _mem(y, dt, (outer, n, inner), st)[...] = cpu.softmax(
            _mem(x, dt, (outer, n, inner), st), axis=1, scale=scale
        )

    def rope(
        self,
        device,
        stream,
        dtype,
        table_dtype,
        pos_dtype,
        tokens,
        s,
        heads,
        d,
        half,
        x,
        sxb,
        sxs,
        sxh,
        y,
        syb,
        sys,
        syh,
        pos,
        spb,
        sps,
        cos,
        sin,
        max_pos,
        scr,
        scc,
        ssr,
        ssc,
        gptj,
        copy_tail,
    ):
        self.calls.append("rope")
        dt, tdt = _np(dtype), _np(table_dtype)
        assert table_dtype in (dtype, "float32")
        c = _mem(cos, tdt, (max_pos, half), (scr, scc))
        sn = _mem(sin, tdt, (max_pos, half), (ssr, ssc))
        isz = dt.itemsize
        for t in range(tokens):
            b, si = divmod(t, s)
            p = si
            if pos:
                p = int(
                    _mem(
                        pos + (b * spb + si * sps) * _np(pos_dtype).itemsize, pos_dtype, (1,), (1,)
                    )[0]
                )
            xt = _mem(x + (b * sxb + si * sxs) * isz, dt, (heads, d), (sxh, 1))
            yt = _mem(y + (b * syb + si * sys) * isz, dt, (heads, d), (syh, 1))
            ok = 0 <= p < max_pos
            r = cpu.rope(
                xt[None, None].copy(), c, sn, np.array([[p if ok else 0]]),
                style="gptj" if gptj else "neox", rotary_dim=2 * half,
            )[0, 0]  # fmt: skip
            if not ok:
                r[:, : 2 * half] = np.nan
            yt[:, : (d if copy_tail else 2 * half)] = r[:, : (d if copy_tail else 2 * half)]

    def embedding(
        self,
        device,
        stream,
        ids_dtype,
        elem_bytes,
        n_ids,
        ids,
        ids_stride,
        table,
        num_rows,
        dim,
        table_row_stride,
        table_col_stride,
        y,
        y_row_stride,
        fill,
    ):
        self.calls.append("embedding")
        word = np.dtype(f"u{elem_bytes}")
        idv = _mem(ids, _np(ids_dtype), (n_ids,), (ids_stride,)).astype(np.int64)
        tab = _mem(table, word, (num_rows, dim), (table_row_stride, table_col_stride))
        yv = _rows(y, word, n_ids, dim, y_row_stride, out=True)
        ok = (idv >= 0) & (idv < num_rows)
        yv[...] = fill
        yv[ok] = tab[idv[ok]]

    def bias_add(self, device, stream, dtype, bias_dtype, rows, n, x, sx, bias, y, sy):
        self.calls.append("bias_add")
        dt = _np(dtype)
        ct = np.float64 if dtype == "float64" else np.float32
        assert bias_dtype in (dtype, np.dtype(ct).name)
        a = _rows(x, dt, rows, n, sx)
        b = _mem(bias, _np(bias_dtype), (n,), (1,))
        _rows(y, dt, rows, n, sy, out=True)[...] = (a.astype(ct) + b.astype(ct)).astype(dt)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeExtension:
    ext = FakeExtension()
    for mod in (nact, nsm, nrope, nemb):
        monkeypatch.setattr(mod, "extension", lambda: ext)
    return ext


def _h(x: np.ndarray) -> gp.GPUArray:
    """A CPU-device array, whatever device is the default (the fake reads host memory)."""
    return gp.from_numpy(x, device="cpu")


def _view(x: np.ndarray, layout: str) -> gp.GPUArray:
    if layout == "transposed" and x.ndim >= 2:
        return _h(np.ascontiguousarray(np.swapaxes(x, -1, -2))).swapaxes(-1, -2)
    if layout == "strided":
        wide = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        wide[..., ::2] = x
        return _h(wide)[..., ::2]
    if layout == "rows" and x.ndim >= 2:
        tall = np.zeros((2 * x.shape[0], *x.shape[1:]), dtype=x.dtype)
        tall[::2] = x
        return _h(tall)[::2]
    return _h(np.ascontiguousarray(x))


def _eq(got: Any, ref: np.ndarray) -> None:
    g = got.to_numpy() if hasattr(got, "to_numpy") else np.asarray(got)
    assert g.dtype == ref.dtype and g.shape == ref.shape
    g, ref = np.ascontiguousarray(g), np.ascontiguousarray(ref)
    np.testing.assert_array_equal(g.view(np.uint8), ref.view(np.uint8))


@pytest.mark.parametrize("out_layout", ["none", "contiguous", "rows", "strided"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(7,), (5, 9), (2, 3, 8)], ids=str)
def test_activation(
    fake: FakeExtension, shape: tuple[int, ...], layout: str, out_layout: str
) -> None:
    rng = np.random.default_rng(seed("ad-act", shape, layout, out_layout))
    x, u = rand(rng, shape, "bfloat16", scale=2.0), rand(rng, shape, "bfloat16")
    for op, fn, ref in (
        ("silu", lambda o: nact.silu(_view(x, layout), out=o), cpu.silu(x)),
        ("gelu_tanh", lambda o: nact.gelu(_view(x, layout), approximate="tanh", out=o),
         cpu.gelu(x, approximate="tanh")),
        ("silu_mul", lambda o: nact.silu_mul(_view(x, layout), _view(u, "rows"), out=o),
         cpu.silu_mul(x, u)),
    ):  # fmt: skip
        out = None if out_layout == "none" else _view(np.full(shape, np.nan, x.dtype), out_layout)
        r = fn(out)
        assert out is None or r is out
        _eq(r, ref)
        assert fake.calls[-1] == op


def test_activation_halves_and_dtypes(fake: FakeExtension) -> None:
    rng = np.random.default_rng(3)
    gu = rand(rng, (6, 2 * 9), "float16")
    d = _h(gu)
    _eq(nact.silu_mul(d[:, :9], d[:, 9:]), cpu.silu_mul(gu[:, :9], gu[:, 9:]))
    xi = rand(rng, (4, 5), "int32")
    _eq(nact.relu(_h(xi)), cpu.relu(xi))
    _eq(nact.sigmoid(_h(xi)), cpu.sigmoid(xi))  # converted to float32 first
    u32 = rand(rng, (6, 9), "float32")
    _eq(nact.gelu_mul(d[:, :9], _h(u32)), cpu.gelu_mul(gu[:, :9], u32))
    ub = rand(rng, 9, "float16")  # up broadcast over the rows: read with row stride 0
    _eq(nact.silu_mul(d[:, :9], _h(ub)), cpu.silu_mul(gu[:, :9], ub))
    with pytest.raises(TypeError, match="float16 result from float16 inputs only"):
        nact.silu(_h(u32), out_dtype=np.float16)
    with pytest.raises(TypeError, match="computes float results, not int32"):
        nact.silu(_h(xi), out_dtype=np.int32)
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        nact.gelu(d, approximate="fast")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_softmax(fake: FakeExtension, layout: str, causal: bool) -> None:
    rng = np.random.default_rng(seed("ad-sm", layout, causal))
    x = rand(rng, (2, 5, 7), "float32")
    ref = cpu.softmax(x, scale=0.5, causal=causal)
    _eq(nsm.softmax(_view(x, layout), scale=0.5, causal=causal), ref)
    for ol in ("contiguous", "rows", "strided"):
        out = _view(np.full(x.shape, np.nan, np.float32), ol)
        assert nsm.softmax(_view(x, layout), scale=0.5, causal=causal, out=out) is out
        _eq(out, ref)


@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_other_axes(fake: FakeExtension, axis: int) -> None:
    rng = np.random.default_rng(seed("ad-sm-ax", axis))
    x = rand(rng, (4, 6, 5), "float32")
    for layout in ("contiguous", "transposed"):
        _eq(nsm.softmax(_view(x, layout), axis=axis), cpu.softmax(x, axis=axis))
        assert fake.calls[-1] == "softmax_cols"
        out = _view(np.full(x.shape, np.nan, np.float32), "strided")
        assert nsm.softmax(_view(x, layout), axis=axis, out=out) is out
        _eq(out, cpu.softmax(x, axis=axis))
    x1 = rand(rng, (3, 8, 1), "float32")  # only size-1 dims after the axis: the row kernel
    _eq(nsm.softmax(_h(x1), axis=1), cpu.softmax(x1, axis=1))
    assert fake.calls[-1] == "softmax"


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_rope(fake: FakeExtension, style: str) -> None:
    rng = np.random.default_rng(seed("ad-rope", style))
    t, h, d, r = 5, 3, 16, 12
    qkv = rand(rng, (2, t, 3 * h, d), "float32")
    cos, sin = cpu.rope_tables(9, r)
    pos = rng.integers(0, 9, (2, t)).astype(np.int32)
    dq = _h(qkv)
    q = dq[:, :, h : 2 * h]
    ref = cpu.rope(qkv[:, :, h : 2 * h], cos, sin, pos, style=style, rotary_dim=r)
    args = (_h(cos), _h(sin), _h(pos))
    _eq(nrope.rope(q, *args, style=style, rotary_dim=r), ref)
    out = _view(np.full(ref.shape, np.nan, np.float32), "strided")  # through a temporary
    assert nrope.rope(q, *args, style=style, rotary_dim=r, out=out) is out
    _eq(out, ref)
    # batch window of a cache (batch and token strides differ), positions [S] broadcast
    win = dq[:, 1:4]
    ps = pos[0, :3].astype(np.int16)  # int16 positions: converted to int64
    ref_w = cpu.rope(qkv[:, 1:4], cos, sin, ps, style=style, rotary_dim=r)
    _eq(nrope.rope(win, args[0], args[1], _h(ps), style=style, rotary_dim=r), ref_w)
    # strided tables of another dtype (float64 -> float32, x's compute type)
    wc, ws = np.repeat(cos, 2, axis=1).astype(np.float64), np.repeat(sin, 2, axis=1)
    got = nrope.rope(q, _h(wc)[:, ::2], _h(ws)[:, ::2], args[2],
                     style=style, rotary_dim=r)  # fmt: skip
    _eq(got, ref)
    # in place: the pass-through dims and the rest of the buffer are left alone
    assert nrope.rope(q, *args, style=style, rotary_dim=r, out=q) is q
    got_all = dq.to_numpy()
    _eq(got_all[:, :, h : 2 * h], ref)
    _eq(got_all[:, :, :h], qkv[:, :, :h])
    _eq(got_all[:, :, 2 * h :], qkv[:, :, 2 * h :])
    # in place on an array the kernel cannot write (last dim strided): through a temporary,
    # pass-through dims copied along
    wide = np.zeros((t, h, 2 * d), np.float32)
    wide[..., ::2] = qkv[0, :, :h]
    dw = _h(wide)
    xs = dw[..., ::2]
    assert nrope.rope(xs, *args[:2], style=style, rotary_dim=r, out=xs) is xs
    _eq(dw.to_numpy()[..., ::2], cpu.rope(qkv[0, :, :h], cos, sin, style=style, rotary_dim=r))
    assert (dw.to_numpy()[..., 1::2] == 0).all()


def test_embedding_and_bias_add(fake: FakeExtension) -> None:
    rng = np.random.default_rng(7)
    table = rand(rng, (11, 2 * 6), "bfloat16")
    ids = rng.integers(0, 11, (4, 3)).astype(np.int64)
    ref = table[:, ::2][ids]
    t = _h(table)[:, ::2]
    _eq(nemb.embedding(_view(ids, "transposed"), t), ref)
    for ol in ("contiguous", "rows", "strided"):
        out = _view(np.zeros(ref.shape, ref.dtype), ol)
        assert nemb.embedding(_view(ids, "strided"), t, out=out) is out
        _eq(out, ref)
    bad = nemb.embedding(_h(np.array([0, 11, -1], np.int8)), t).to_numpy()
    assert (
        np.isnan(bad[1:].astype(np.float32)).all() and not np.isnan(bad[0].astype(np.float32)).any()
    )
    x, b = rand(rng, (5, 7), "float16"), rand(rng, 7, "float16")
    for layout in LAYOUTS:
        _eq(nemb.bias_add(_view(x, layout), _view(b, "strided")), cpu.bias_add(x, b))
    b64 = rand(rng, 7, "float64")
    _eq(nemb.bias_add(_h(x), _h(b64)), cpu.bias_add(x, b64))
    d = _h(x)
    assert nemb.bias_add(d, _h(b), out=d) is d
    _eq(d, cpu.bias_add(x, b))
    assert fake.calls[-1] == "bias_add"


def test_empty_arrays_skip_the_extension(fake: FakeExtension) -> None:
    z = _h(np.zeros((0, 4), np.float32))
    assert nact.silu(z).shape == (0, 4)
    assert nsm.softmax(z).shape == (0, 4)
    assert nemb.bias_add(z, _h(np.ones(4, np.float32))).shape == (0, 4)
    ids = _h(np.zeros((0,), np.int32))
    assert nemb.embedding(ids, _h(np.ones((3, 4), np.float32))).shape == (0, 4)
    assert fake.calls == []


def test_same_names_and_signatures_as_the_triton_modules() -> None:
    # The routing table calls the native candidate exactly as it calls the Triton one.
    pytest.importorskip("triton")
    import importlib
    import inspect

    from pygpukit.routing.table import TABLE

    ops = [r for r in TABLE.values() if r.family in ("activation", "softmax", "rope", "embedding")]
    assert len(ops) == 11  # 7 activations (softplus included), softmax, rope, embedding, bias_add
    for route in ops:
        tri = getattr(
            importlib.import_module(f"pygpukit.backends.triton_kernels.{route.family}"), route.op
        )
        nat = getattr(importlib.import_module(f"pygpukit.backends.native.{route.family}"), route.op)
        assert inspect.signature(nat) == inspect.signature(tri), route.op
        fn, why = native_impl(route.op)
        assert fn is nat or (fn is None and "not built" in why), (route.op, why)


def test_shared_row_helpers_see_a_strided_vector() -> None:
    # A 1-D view with a step is not one contiguous row (the norm adapters copy it first).
    from pygpukit.backends._support.rows import rows_of

    v = _h(np.arange(10, dtype=np.float32))
    assert rows_of(v) == (1, 10, 10)
    assert rows_of(v[::2]) is None
    assert rows_of(v[3:4:2]) == (1, 1, 1)
    from pygpukit.backends._support.rows import row_stride

    assert row_stride(v[::2]) is None and row_stride(v) == 10
