"""Public gp.rmsnorm_qkv_rope_write on the test device (ops._helpers.DEVICE): the one call equals
gp.rmsnorm_linear then gp.kv_cache_write (bit for bit where both run the same backend's
arithmetic: the NumPy backend composes the two ops, the GPU's one launch keeps their bits); a
route naming the op against the float64 reference; argument checks before anything runs."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up
from pygpukit.backends.cpu import qkv_write as cpu_qkv

OP = "rmsnorm_qkv_rope_write"


def _case(dtype: str, b: int, s: int, h: int, hkv: int, d: int, k: int) -> dict:
    rng = np.random.default_rng(seed(OP, dtype, b, s, h, hkv, d, k))
    n = (h + 2 * hkv) * d
    return {
        "x": rand(rng, (b, s, k), dtype),
        "r": rand(rng, (b, s, k), dtype),
        "g": (1 + rand(rng, k, "float32") / 4).astype(rand(rng, 1, dtype).dtype),
        "w": rand(rng, (n, k), dtype, scale=1 / np.sqrt(k)),
        "bias": rand(rng, n, dtype),
        "pos": rng.integers(0, 20 - s, b).astype(np.int32),
        "cache": (b, hkv, 24, d),
        "h": h,
    }


def _tables(d: int) -> tuple[gp.GPUArray, gp.GPUArray]:
    return gp.rope_tables(64, d, device=DEVICE)


def _bits(a: gp.GPUArray) -> np.ndarray:
    return np.ascontiguousarray(a.to_numpy()).view(np.uint8)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize(
    ("b", "s", "h", "hkv", "d", "k"), [(1, 1, 4, 2, 16, 64), (2, 3, 6, 3, 8, 40)]
)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_one_call_equals_two(dtype: str, b: int, s: int, h: int, hkv: int, d: int, k: int,
                             residual: bool) -> None:  # fmt: skip
    c = _case(dtype, b, s, h, hkv, d, k)
    cos, sin = _tables(d)
    x, g, w, bias, r = up(c["x"]), up(c["g"]), up(c["w"]), up(c["bias"]), up(c["r"])
    pos = up(c["pos"])
    kc, vc = poisoned(c["cache"], dtype), poisoned(c["cache"], dtype)
    got = gp.rmsnorm_qkv_rope_write(
        x, g, w, kc, vc, pos, cos, sin, num_heads=h, bias=bias,
        residual=r if residual else None, eps=1e-5,
    )  # fmt: skip
    q, hh = got if residual else (got, None)
    assert q.shape == (b, s, h, d) and q.dtype.name == dtype
    y = gp.rmsnorm_linear(x, g, w, bias, eps=1e-5, residual=r if residual else None)
    y, h0 = y if residual else (y, None)
    heads = y.reshape(b, s, h + 2 * hkv, d)
    kc0, vc0 = poisoned(c["cache"], dtype), poisoned(c["cache"], dtype)
    q0 = heads[:, :, :h]
    gp.kv_cache_write(
        kc0, vc0, heads[:, :, h : h + hkv].transpose(0, 2, 1, 3),
        heads[:, :, h + hkv :].transpose(0, 2, 1, 3), pos, cos=cos, sin=sin,
        q=q0.transpose(0, 2, 1, 3),
    )  # fmt: skip
    np.testing.assert_array_equal(_bits(q), _bits(q0))
    np.testing.assert_array_equal(_bits(kc), _bits(kc0))  # NaN where unwritten
    np.testing.assert_array_equal(_bits(vc), _bits(vc0))
    if residual:
        assert hh is not None and h0 is not None
        np.testing.assert_array_equal(_bits(hh), _bits(h0))


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_routed_op_against_float64(dtype: str, style: str) -> None:
    """A route naming the op runs it on the device's backend (the Triton kernel on a GPU for
    half types, the NumPy reference on the CPU) at every row count: the float64 reference."""
    if DEVICE != "cpu" and dtype == "float32":
        pytest.skip("the one launch serves half types; float32 takes the two ops")
    c = _case(dtype, 2, 2, 4, 2, 8, 48)
    cos, sin = _tables(8)
    kc, vc = poisoned(c["cache"], dtype), poisoned(c["cache"], dtype)
    backend = "cpu" if DEVICE == "cpu" else "triton"
    with gp.route(**{OP: backend}):
        q, hh = gp.rmsnorm_qkv_rope_write(
            up(c["x"]), up(c["g"]), up(c["w"]), kc, vc, up(c["pos"]), cos, sin, num_heads=4,
            bias=up(c["bias"]), residual=up(c["r"]), eps=1e-5, rope_style=style,
        )  # fmt: skip
    kr, vr = np.full(c["cache"], np.nan), np.full(c["cache"], np.nan)
    qr, hr = cpu_qkv.rmsnorm_qkv_rope_write(
        as64(c["x"]), as64(c["g"]), as64(c["w"]), kr, vr, c["pos"], cos.to_numpy(),
        sin.to_numpy(), as64(c["bias"]), as64(c["r"]), num_heads=4, eps=1e-5, rope_style=style,
    )  # fmt: skip
    assert_close(q, qr, dtype)
    assert_close(hh, hr, dtype)
    m = ~np.isnan(kr)
    assert_close(as64(kc.to_numpy())[m], kr[m], dtype)
    assert_close(as64(vc.to_numpy())[m], vr[m], dtype)
    assert np.isnan(kc.to_numpy()[~m]).all() and np.isnan(vc.to_numpy()[~m]).all()


def test_rejects_bad_arguments() -> None:
    """Each wrong argument raises before anything runs, naming it; the caches stay unwritten."""
    c = _case("float32", 2, 1, 4, 2, 8, 32)
    cos, sin = _tables(8)
    x, g, w, pos = up(c["x"]), up(c["g"]), up(c["w"]), up(c["pos"])
    kc, vc = poisoned(c["cache"], "float32"), poisoned(c["cache"], "float32")

    def call(**kw: object) -> None:
        a = {"x": x, "norm_weight": g, "w_qkv": w, "k_cache": kc, "v_cache": vc,
             "positions": pos, "cos": cos, "sin": sin} | kw  # fmt: skip
        opts = {
            n: a.pop(n) for n in ("num_heads", "bias", "residual", "eps", "rope_style") if n in a
        }
        opts.setdefault("num_heads", 4)
        gp.rmsnorm_qkv_rope_write(*a.values(), **opts)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match=r"x must be \[B, S, K\]"):
        call(x=x[0])
    with pytest.raises(ValueError, match="norm_weight"):
        call(norm_weight=g[:8])
    with pytest.raises(TypeError, match=r"k_cache has .* but x has dtype float32"):
        call(k_cache=kc.astype("float16"), v_cache=vc.astype("float16"))
    with pytest.raises(ValueError, match="num_heads=3 must be a positive multiple"):
        call(num_heads=3)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        call(num_heads=4.0)
    with pytest.raises(ValueError, match=r"w_qkv has .* but must be \[64, 32\]"):
        call(w_qkv=w[:40])
    with pytest.raises(TypeError, match=r"w_qkv has .* but x has dtype"):
        call(w_qkv=w.astype("float16"))
    with pytest.raises(ValueError, match="bias"):
        call(bias=up(c["bias"][:5]))
    with pytest.raises((TypeError, ValueError), match="positions"):
        call(positions=up(c["pos"].astype(np.int64)))
    with pytest.raises(ValueError, match="positions"):
        call(positions=up(c["pos"][:1]))
    with pytest.raises(ValueError, match="tables over the whole head"):
        call(cos=cos[:, :2], sin=sin[:, :2])
    with pytest.raises(ValueError, match="rope_style"):
        call(rope_style="llama")
    with pytest.raises(ValueError, match="residual"):
        call(residual=x[:1])
    with pytest.raises(ValueError, match=r"k_cache has .* whose batch 1 differs"):
        call(k_cache=kc[:1], v_cache=vc[:1])
    with pytest.raises(ValueError, match="v_cache"):
        call(v_cache=vc[:, :1])
    with pytest.raises(ValueError, match="eps"):
        call(eps=-1.0)
    with pytest.raises(ValueError, match="k_cache and v_cache share elements"):
        call(v_cache=kc)
    with pytest.raises(ValueError, match="k_cache shares elements with x"):
        call(x=kc.reshape(2, -1)[:, None, :32])
    assert np.isnan(kc.to_numpy()).all() and np.isnan(vc.to_numpy()).all()


@pytest.mark.skipif(DEVICE != "cpu", reason="the NumPy backend's host-side check")
def test_position_outside_the_cache_raises_on_the_numpy_backend() -> None:
    c = _case("float32", 1, 1, 2, 1, 8, 16)
    cos, sin = _tables(8)
    kc, vc = poisoned(c["cache"], "float32"), poisoned(c["cache"], "float32")
    with gp.route(**{OP: "cpu"}), pytest.raises(IndexError, match="cache holds 24"):
        gp.rmsnorm_qkv_rope_write(
            up(c["x"]), up(c["g"]), up(c["w"]), kc, vc, up(np.array([24], np.int32)), cos, sin,
            num_heads=2,
        )  # fmt: skip
    assert np.isnan(kc.to_numpy()).all()


@pytest.mark.skipif(DEVICE == "cpu", reason="the Triton kernel's routing rule, on a GPU")
def test_route_forcing_the_kernel_needs_a_head_dim_multiple_of_4() -> None:
    from pygpukit.errors import RouteError

    c = _case("bfloat16", 1, 1, 2, 1, 6, 16)
    cos, sin = _tables(6)
    kc, vc = poisoned(c["cache"], "bfloat16"), poisoned(c["cache"], "bfloat16")
    with gp.route(**{OP: "triton"}), pytest.raises(RouteError, match="multiple of 4, got 6"):
        gp.rmsnorm_qkv_rope_write(
            up(c["x"]), up(c["g"]), up(c["w"]), kc, vc, up(c["pos"]), cos, sin, num_heads=2
        )
    assert np.isnan(kc.to_numpy().astype(np.float32)).all()
