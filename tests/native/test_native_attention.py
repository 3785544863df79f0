"""Native twins of sdpa, sdpa_varlen, sdpa_decode and kv_cache_write (native/src/attention,
native/src/attention_decode) through the public ops with the route forced to native, against
float64 references (tests/_attention_ref.py, tests/_kvcache.py); plus, without a GPU, the
adapters' signatures and argument checks and the C++ re-checks."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _attention_ref import packed, sdpa_ref, varlen_ref
from _data import as64, rand, seed
from _kvcache import decode_inputs, ref_decode, ref_rope_k, ref_write, to_paged
from _routes import native_impl

import pygpukit as gp
from pygpukit.backends import cpu
from pygpukit.backends.native import attention as nat
from pygpukit.backends.native import attention_decode as natd

FLOATS = ["float32", "float16", "bfloat16", "float64"]
OPS = "sdpa:native,sdpa_varlen:native,sdpa_decode:native,kv_cache_write:native"
gpu = pytest.mark.gpu


def _up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device="cuda:0")


def _tm(x: np.ndarray) -> gp.GPUArray:
    """x [B, H, S, D] stored token-major [B, S, H, D], viewed back as [B, H, S, D]."""
    return _up(np.swapaxes(x, 1, 2)).transpose(0, 2, 1, 3)


def _poison(shape: tuple[int, ...], dtype: str) -> gp.GPUArray:
    return gp.full(shape, float("nan"), dtype=dtype, device="cuda:0")


@pytest.fixture
def forced() -> Any:
    with gp.route(OPS):
        yield


# ----- sdpa ------------------------------------------------------------------------------------

# (B, H, Hkv, Sq, Sk, D, Dv): lengths 1, 17, 1000; GQA groups 1, 4, 8; head dims 64/80/128/256;
# Sq > Sk (causal rows that see no key are zero) and Sq < Sk (end-aligned causal prefix).
SDPA_CASES = [
    (2, 4, 4, 1, 1, 64, 64),
    (1, 8, 2, 17, 17, 80, 80),
    (2, 8, 1, 17, 1000, 128, 128),
    (1, 4, 4, 1000, 17, 256, 256),
    (1, 8, 1, 1000, 1000, 64, 64),
    (1, 4, 2, 7, 33, 96, 40),
]


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("case", SDPA_CASES, ids=str)
@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa(dtype: str, case: tuple[int, ...], causal: bool) -> None:
    b, h, hkv, sq, sk, d, dv = case
    rng = np.random.default_rng(seed("nsdpa", dtype, case, causal))
    q, k = rand(rng, (b, h, sq, d), dtype), rand(rng, (b, hkv, sk, d), dtype)
    v = rand(rng, (b, hkv, sk, dv), dtype)
    out = _poison((b, h, sq, dv), dtype)
    r = gp.sdpa(_up(q), _up(k), _up(v), causal=causal, out=out)
    assert r is out
    assert gp.routing.explain("sdpa", _up(q[:, :, :1]), _up(k), _up(v)).backend == "native"
    assert_close(r, sdpa_ref(q, k, v, causal), dtype)


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("dtype", FLOATS)
def test_sdpa_token_major_views_3d_and_strided_out(dtype: str) -> None:
    rng = np.random.default_rng(seed("nsdpa-views", dtype))
    b, h, hkv, sq, sk, d = 2, 8, 2, 33, 45, 64
    q, k, v = (rand(rng, (b, n, s, d), dtype) for n, s in ((h, sq), (hkv, sk), (hkv, sk)))
    # out= a token-major view too (not contiguous): written in place through its strides.
    wide = _poison((b, sq, h, d), dtype)
    out = wide.transpose(0, 2, 1, 3)
    r = gp.sdpa(_tm(q), _tm(k), _tm(v), causal=True, scale=-0.3, out=out)
    assert r is out and not out.is_contiguous()
    assert_close(r, sdpa_ref(q, k, v, True, -0.3), dtype)
    assert_close(wide, np.swapaxes(sdpa_ref(q, k, v, True, -0.3), 1, 2), dtype)
    r3 = gp.sdpa(_up(q[0]), _up(k[0]), _up(v[0]), causal=False)
    assert_close(r3, sdpa_ref(q[0], k[0], v[0], False), dtype)


@gpu
@pytest.mark.usefixtures("forced")
def test_sdpa_long_4097_32_heads() -> None:
    rng = np.random.default_rng(seed("nsdpa-long"))
    h, hkv, s, d = 32, 8, 4097, 128
    q, k, v = (rand(rng, (1, n, s, d), "bfloat16") for n in (h, hkv, hkv))
    r = gp.sdpa(_tm(q), _tm(k), _tm(v), causal=True)
    assert_close(r, sdpa_ref(q, k, v, True), "bfloat16")


@gpu
def test_float64_on_cuda_routes_to_native_by_default() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rand(rng, (1, 2, 5, 16), "float64") for _ in range(3))
    assert gp.routing.explain("sdpa", _up(q), _up(k), _up(v)).backend == "native"
    assert_close(gp.sdpa(_up(q), _up(k), _up(v)), sdpa_ref(q, k, v, True), "float64")


# ----- sdpa_varlen -----------------------------------------------------------------------------


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("dtype", FLOATS)
def test_varlen(dtype: str, group: int, causal: bool) -> None:
    rng = np.random.default_rng(seed("nvarlen", dtype, group, causal))
    # Mixed lengths, a sequence with more queries than keys and one with no keys at all.
    lens_q, lens_k = [1, 17, 1000, 9, 4], [1, 40, 1000, 3, 0]
    hkv, d = 2, 80
    q, k, v, cu_q, cu_k = packed(rng, lens_q, lens_k, hkv * group, hkv, d, dtype, dv=64)
    out = _poison((q.shape[0], hkv * group, 64), dtype)
    r = gp.sdpa_varlen(
        _up(q), _up(k), _up(v), _up(cu_q), _up(cu_k), max_seqlen_q=1000, max_seqlen_k=1000,
        causal=causal, out=out,
    )  # fmt: skip
    assert r is out
    assert_close(r, varlen_ref(q, k, v, cu_q, cu_k, causal), dtype)


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_varlen_views_of_a_packed_qkv_buffer(dtype: str) -> None:
    rng = np.random.default_rng(seed("nvarlen-qkv", dtype))
    h, hkv, d = 8, 2, 128
    cu = np.array([0, 5, 22, 23], np.int32)
    qkv = rand(rng, (23, h + 2 * hkv, d), dtype)
    dev = _up(qkv)
    qd, kd, vd = dev[:, :h], dev[:, h : h + hkv], dev[:, h + hkv :]
    r = gp.sdpa_varlen(qd, kd, vd, _up(cu), _up(cu), max_seqlen_q=17, max_seqlen_k=17, scale=0.2)
    ref = varlen_ref(qkv[:, :h], qkv[:, h : h + hkv], qkv[:, h + hkv :], cu, cu, True, 0.2)
    assert_close(r, ref, dtype)


# ----- sdpa_decode -----------------------------------------------------------------------------


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("page", [None, 16], ids=["contiguous", "paged16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("group", [1, 4, 8])
@pytest.mark.parametrize("dtype", FLOATS)
def test_decode(dtype: str, group: int, causal: bool, page: int | None) -> None:
    rng = np.random.default_rng(seed("ndecode", dtype, group, causal, page))
    lens = np.array([1000, 17, 1, 4, 0], np.int32)  # 1 < Sq: causal rows without keys are zero
    q, kc, vc, table = decode_inputs(rng, lens.size, 2, group, 4, 128, 1003, dtype, page)
    out = _poison(q.shape, dtype)
    bt = None if table is None else _up(table)
    r = gp.sdpa_decode(_tm(q), _up(kc), _up(vc), _up(lens), block_table=bt, causal=causal, out=out)
    assert r is out
    assert_close(r, ref_decode(q, kc, vc, lens, table, causal), dtype)


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("d", [64, 80, 256])
def test_decode_head_dims_and_long_paged(d: int) -> None:
    rng = np.random.default_rng(seed("ndecode-d", d))
    q = rand(rng, (2, 8, 1, d), "float16")
    kc, vc = rand(rng, (2, 1, 4097, d), "float16"), rand(rng, (2, 1, 4097, d), "float16")
    kp, vp, table = to_paged(rng, 64, kc, vc)
    lens = np.array([4097, 2049], np.int32)
    r = gp.sdpa_decode(_up(q), _up(kp), _up(vp), _up(lens), block_table=_up(table), scale=0.05)
    assert_close(r, ref_decode(q, kp, vp, lens, table, True, 0.05), "float16")


@gpu
@pytest.mark.usefixtures("forced")
def test_decode_bad_lengths_and_blocks_give_nan() -> None:
    rng = np.random.default_rng(11)
    q = rand(rng, (4, 4, 1, 32), "float32")
    kc, vc = rand(rng, (4, 2, 32, 32), "float32"), rand(rng, (4, 2, 32, 32), "float32")
    kp, vp, table = to_paged(rng, 8, kc, vc)
    lens = np.array([32, 33, -1, 20], np.int32)
    table[3, 1] = kp.shape[0]  # sequence 3 reads block 1 (keys 8..15): out of the cache
    r = gp.sdpa_decode(_up(q), _up(kp), _up(vp), _up(lens), block_table=_up(table)).to_numpy()
    assert np.isnan(r[1:]).all()
    assert_close(r[:1], ref_decode(q[:1], kp, vp, lens[:1], table[:1], True), "float32")


# ----- kv_cache_write --------------------------------------------------------------------------


@gpu
@pytest.mark.usefixtures("forced")
@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
@pytest.mark.parametrize("rope", [None, ("neox", 128), ("gptj", 128), ("neox", 64), ("gptj", 32)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_kv_write(dtype: str, rope: tuple[str, int] | None, paged: bool) -> None:
    rng = np.random.default_rng(seed("nkvw", dtype, rope, paged))
    b, hkv, sq, s_max, d = 3, 4, 5, 64, 128
    kc, vc = rand(rng, (b, hkv, s_max, d), dtype), rand(rng, (b, hkv, s_max, d), dtype)
    k, v = rand(rng, (b, hkv, sq, d), dtype), rand(rng, (b, hkv, sq, d), dtype)
    start = np.array([0, 17, s_max - sq], np.int32)
    table = None
    if paged:
        kc, vc, table = to_paged(rng, 16, kc, vc)
    dk, dv = _up(kc), _up(vc)
    bt = None if table is None else _up(table)
    kw: dict[str, Any] = {}
    if rope is not None:
        cos, sin = cpu.rope_tables(80, rope[1], base=500.0)
        kw = {"cos": _up(cos), "sin": _up(sin), "rope_style": rope[0]}
    assert gp.kv_cache_write(dk, dv, _tm(k), _tm(v), _up(start), block_table=bt, **kw) is None
    np.testing.assert_array_equal(as64(dv.to_numpy()), ref_write(vc, v, start, table))
    if rope is None:
        np.testing.assert_array_equal(as64(dk.to_numpy()), ref_write(kc, k, start, table))
        return
    r = rope[1]
    pos = start[:, None] + np.arange(sq)
    rot = np.concatenate(
        [ref_rope_k(k[..., :r], pos, cos, sin, rope[0]), as64(k[..., r:])], axis=-1
    )
    assert_close(dk, ref_write(kc, rot, start, table), dtype)
    # The same arithmetic as the NumPy backend (products rounded apart, one final rounding).
    host = kc.copy()
    cpu.kv_cache_write(host, vc.copy(), k, v, start, table, cos, sin, rope_style=rope[0])
    np.testing.assert_array_equal(dk.to_numpy(), host)
    # q (two heads per kv head, a view of a token-major buffer) rotated at the same positions;
    # the caches written as without it.
    q = rand(rng, (b, 2 * hkv, sq, d), dtype)
    dq = _tm(q)
    dk, dv = _up(kc), _up(vc)
    gp.kv_cache_write(dk, dv, _tm(k), _tm(v), _up(start), block_table=bt, q=dq, **kw)
    qrot = np.concatenate(
        [ref_rope_k(q[..., :r], pos, cos, sin, rope[0]), as64(q[..., r:])], axis=-1
    )
    assert_close(dq, qrot, dtype)
    np.testing.assert_array_equal(dk.to_numpy(), host)


@gpu
@pytest.mark.usefixtures("forced")
def test_kv_write_skips_slots_outside_the_cache() -> None:
    rng = np.random.default_rng(12)
    kc = rand(rng, (2, 1, 8, 16), "float32")
    k = rand(rng, (2, 1, 3, 16), "float32")
    dk, dv = _up(kc), _up(kc)
    gp.kv_cache_write(dk, dv, _up(k), _up(k), _up(np.array([6, -2], np.int32)))
    want = kc.copy()
    want[0, :, 6:8] = k[0, :, :2]  # slot 8 is past the cache; sequence 1 writes slot 0 only
    want[1, :, 0] = k[1, :, 2]
    np.testing.assert_array_equal(dk.to_numpy(), want)


# ----- without a GPU: signatures, adapter checks, C++ re-checks ---------------------------------


def test_same_names_and_signatures_as_the_triton_modules() -> None:
    pytest.importorskip("triton")
    import importlib

    from pygpukit.routing.table import TABLE

    ops = [r for r in TABLE.values() if r.family in ("attention", "attention_decode")]
    assert {r.op for r in ops} == {
        "sdpa", "sdpa_varlen", "sdpa_decode", "kv_cache_write", "sdpa_decode_append",
    }  # fmt: skip
    for route in ops:
        tri = getattr(
            importlib.import_module(f"pygpukit.backends.triton_kernels.{route.family}"), route.op
        )
        mod = nat if route.family == "attention" else natd
        assert inspect.signature(getattr(mod, route.op)) == inspect.signature(tri), route.op
        fn, why = native_impl(route.op)
        assert fn is getattr(mod, route.op) or (fn is None and "not built" in why), why
        cand = [c for c in route.candidates if c.backend == "native"]
        assert cand and "float64" in cand[0].dtypes


def _h(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(x, device="cpu")


def test_adapter_checks_before_the_extension() -> None:
    f = lambda *s: _h(np.ones(s, np.float32))  # noqa: E731
    q = f(1, 2, 3, 8)
    with pytest.raises(TypeError, match=r"sdpa \(native\): dtype int32 is not supported"):
        nat.sdpa(_h(np.ones((1, 2, 3, 8), np.int32)), q, q)
    with pytest.raises(ValueError, match="q has head dim 300, more than 256"):
        big = f(1, 2, 3, 300)
        nat.sdpa(big, big, big)
    with pytest.raises(ValueError, match="v has head dim 257"):
        nat.sdpa(q, q, f(1, 2, 3, 257))
    with pytest.raises(TypeError, match="k is float16 but q is float32"):
        nat.sdpa(q, q.astype("float16"), q)
    cu = _h(np.array([0, 3], np.int32))
    with pytest.raises(ValueError, match="config= is a Triton launch configuration"):
        nat.sdpa_varlen(f(3, 2, 8), f(3, 2, 8), f(3, 2, 8), cu, cu, max_seqlen_q=3,
                        max_seqlen_k=3, config=object())  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(TypeError, match="cache_seqlens must be an int32 array"):
        natd.sdpa_decode(q, q, q, _h(np.ones(1, np.int64)))
    kc = f(1, 2, 8, 8)
    k1 = f(1, 2, 1, 8)
    pos = _h(np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="takes no out="):
        natd.kv_cache_write(kc, kc, k1, k1, pos, out=kc)
    with pytest.raises(ValueError, match="rope_style must be 'neox' or 'gptj'"):
        natd.kv_cache_write(kc, kc, k1, k1, pos, rope_style="half")
    with pytest.raises(ValueError, match="pass both cos and sin"):
        natd.kv_cache_write(kc, kc, k1, k1, pos, cos=f(4, 2))
    with pytest.raises(TypeError, match="positions must be an int32 array"):
        natd.kv_cache_write(kc, kc, k1, k1, _h(np.zeros(1, np.int64)))


def _ext() -> Any:
    ext = pytest.importorskip("_pygpukit_native", reason="native/ is not built")
    if "attention" not in ext.families or "attention_decode" not in ext.families:
        pytest.skip("this build lacks the attention families")
    return ext


def _sdpa_call(ext: Any, **kw: Any) -> None:
    args: dict[str, Any] = dict(
        device=0, stream=0, dtype="float32", mode="dense", units=1, heads=4, kv_heads=2, sq=3,
        sk=3, d=8, dv=8, q=1, k=1, v=1, out=1, sq_s=(0, 0, 0, 1), sk_s=(0, 0, 0, 1),
        sv_s=(0, 0, 0, 1), so_s=(0, 0, 0, 1), cu_q=0, cu_q_stride=0, cu_k=0, cu_k_stride=0,
        scale=1.0, causal=True,
    )  # fmt: skip
    args.update(kw)
    ext.sdpa(**args)


def test_cpp_rechecks_raise_value_error_before_any_cuda_call() -> None:
    ext = _ext()
    with pytest.raises(ValueError, match="mode must be 'dense' or 'varlen'"):
        _sdpa_call(ext, mode="decode")
    # The shared row launcher names the op it serves (sdpa, sdpa_varlen, sdpa_decode).
    with pytest.raises(ValueError, match=r"^sdpa: kv heads must divide the query heads$"):
        _sdpa_call(ext, kv_heads=3)
    with pytest.raises(ValueError, match=r"^sdpa: head dims must lie in \[0, 256\]"):
        _sdpa_call(ext, d=300)
    with pytest.raises(ValueError, match=r"^sdpa: q and out must be device pointers$"):
        _sdpa_call(ext, q=0)
    with pytest.raises(ValueError, match=r"^sdpa_varlen: varlen needs cu_seqlens$"):
        _sdpa_call(ext, mode="varlen")
    with pytest.raises(ValueError, match="unknown dtype"):
        _sdpa_call(ext, dtype="float17")
    _sdpa_call(ext, units=0)  # nothing to do: returns before touching the device
    with pytest.raises(ValueError, match="rotary_dim must lie in"):
        ext.kv_cache_write(0, 0, "float32", "float32", 1, 1, 1, 8, 5, False, 1, 1, 1, 1,
                           (0, 0, 0, 1), (0, 0, 0, 1), (0, 0, 0, 1), (0, 0, 0, 1), 1, 1, 0, 0, 0,
                           0, 0, 8, 1, 1, 4, (1, 1), (1, 1))  # fmt: skip
    with pytest.raises(ValueError, match="cos/sin must be float32"):
        ext.kv_cache_write(0, 0, "float16", "float16", 1, 1, 1, 8, 2, False, 1, 1, 1, 1,
                           (0, 0, 0, 1), (0, 0, 0, 1), (0, 0, 0, 1), (0, 0, 0, 1), 1, 1, 0, 0, 0,
                           0, 0, 8, 1, 1, 4, (1, 1), (1, 1))  # fmt: skip
    with pytest.raises(ValueError, match=r"^sdpa_decode: paged: page and nblocks > 0$"):
        ext.sdpa_decode(0, 0, "float32", 1, 2, 1, 1, 8, 1, 1, 1, 1, (0, 0, 0, 1), (0, 0, 0, 1),
                        (0, 0, 0, 1), (0, 0, 0, 1), 1, 1, 1, 1, 1, 0, 0, 8, 1.0, True)  # fmt: skip


class _FakeExt:
    """The kernels' documented addressing (native/src/attention/attention.h) in NumPy over
    host memory: a wrong stride or offset in the adapters reads the wrong elements."""

    families = ("attention", "attention_decode")

    @staticmethod
    def _row(addr: int, dt: Any, n: int, stride: int, off: int) -> np.ndarray:
        from test_native_twins_adapters import _mem

        return as64(_mem(int(addr + off * np.dtype(dt).itemsize), dt, (n,), (stride,)))

    def _run(self, a: dict[str, Any], lens: Any = None) -> None:
        dt = gp.as_dtype(a["dtype"]).np_dtype
        g = a["heads"] // a["kv_heads"]
        sq_s, sk_s, sv_s, so_s = a["sq_s"], a["sk_s"], a["sv_s"], a["so_s"]
        for b, h, i in np.ndindex(a["units"], a["heads"], a["sq"]):
            hk, qoff, koff, lq, lk = h // g, 0, 0, a["sq"], a["sk"]
            if lens is not None:
                lq, lk, qoff, koff = lens(b)
            if i >= lq:
                continue
            kend = min(lk, i + lk - lq + 1) if a["causal"] else lk
            q = self._row(
                a["q"], dt, a["d"], sq_s[3], b * sq_s[0] + h * sq_s[1] + (qoff + i) * sq_s[2]
            )
            out = np.zeros(a["dv"])
            if kend > 0:
                ks = np.stack(
                    [
                        self._row(
                            a["k"],
                            dt,
                            a["d"],
                            sk_s[3],
                            b * sk_s[0] + hk * sk_s[1] + (koff + j) * sk_s[2],
                        )
                        for j in range(kend)
                    ]
                )
                vs = np.stack(
                    [
                        self._row(
                            a["v"],
                            dt,
                            a["dv"],
                            sv_s[3],
                            b * sv_s[0] + hk * sv_s[1] + (koff + j) * sv_s[2],
                        )
                        for j in range(kend)
                    ]
                )
                s = ks @ q * a["scale"]
                p = np.exp(s - s.max())
                out = p @ vs / p.sum()
            from test_native_twins_adapters import _mem

            o = _mem(
                int(a["out"])
                + (b * so_s[0] + h * so_s[1] + (qoff + i) * so_s[2]) * np.dtype(dt).itemsize,
                dt,
                (a["dv"],),
                (so_s[3],),
            )
            o[...] = out

    def sdpa(self, **a: Any) -> None:
        if a["mode"] == "dense":
            return self._run(a)
        n = a["units"] + 1
        cq = _FakeExt._row(a["cu_q"], np.int32, n, a["cu_q_stride"], 0).astype(int).tolist()
        n = a["units"] + 1
        ck = _FakeExt._row(a["cu_k"], np.int32, n, a["cu_k_stride"], 0).astype(int).tolist()
        return self._run(a, lambda b: (cq[b + 1] - cq[b], ck[b + 1] - ck[b], cq[b], ck[b]))


def _kw(fn: Any) -> Any:
    order = ["device", "stream", "dtype", "mode", "units", "heads", "kv_heads", "sq", "sk", "d",
             "dv", "q", "k", "v", "out", "sq_s", "sk_s", "sv_s", "so_s", "cu_q", "cu_q_stride",
             "cu_k", "cu_k_stride", "scale", "causal"]  # fmt: skip
    return lambda *args: fn(**dict(zip(order, args, strict=True)))


def test_adapter_strides_through_a_numpy_model(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeExt()
    monkeypatch.setattr(
        nat, "extension", lambda: type("E", (), {"sdpa": staticmethod(_kw(fake.sdpa))})()
    )
    rng = np.random.default_rng(21)
    b, h, hkv, sq, sk, d, dv = 2, 4, 2, 5, 7, 8, 6
    q, k = rand(rng, (b, sq, h, d), "float32"), rand(rng, (b, sk, hkv, d), "float32")
    v = rand(rng, (b, sk, hkv, dv), "float32")
    qv, kv, vv = (_h(t).transpose(0, 2, 1, 3) for t in (q, k, v))
    out = _h(np.full((b, sq, h, dv), np.nan, np.float32)).transpose(0, 2, 1, 3)
    r = nat.sdpa(qv, kv, vv, causal=True, scale=0.4, out=out)
    ref = sdpa_ref(*(np.swapaxes(t, 1, 2) for t in (q, k, v)), True, 0.4)
    assert_close(r.to_numpy(), ref, "float32")
    qp, kp, vp, cu_q, cu_k = packed(rng, [3, 1, 4], [5, 0, 4], h, hkv, d, "float32", dv=dv)
    r = nat.sdpa_varlen(_h(qp), _h(kp), _h(vp), _h(cu_q), _h(cu_k), max_seqlen_q=4, max_seqlen_k=5)
    assert_close(r.to_numpy(), varlen_ref(qp, kp, vp, cu_q, cu_k, True), "float32")
