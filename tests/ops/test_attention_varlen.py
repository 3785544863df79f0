"""Public sdpa_varlen on the test device (ops._helpers.DEVICE, CPU by default): results, views of
a packed qkv buffer, out=, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _attention_ref import packed, varlen_ref
from _data import rand, seed

import pygpukit as gp
from ops._helpers import DEVICE, poisoned, up

# float64 attention runs on the NumPy backend only (no GPU route).
F64 = pytest.param("float64", marks=pytest.mark.skipif(DEVICE != "cpu", reason="CPU only"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", F64])
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_varlen(causal: bool, dtype: str) -> None:
    rng = np.random.default_rng(seed("varlen-op", causal, dtype))
    lens_q, lens_k = [1, 17, 5], [1, 20, 5]
    q, k, v, cu_q, cu_k = packed(rng, lens_q, lens_k, 8, 2, 16, dtype)
    out = poisoned(q.shape, dtype)
    r = gp.sdpa_varlen(
        up(q), up(k), up(v), up(cu_q), up(cu_k), max_seqlen_q=17, max_seqlen_k=20,
        causal=causal, scale=0.3, out=out,
    )  # fmt: skip
    assert r is out
    assert_close(r, varlen_ref(q, k, v, cu_q, cu_k, causal, 0.3), dtype)


def test_views_of_a_packed_qkv_buffer() -> None:
    """q, k, v as head slices of one [T, H + 2 Hkv, D] projection output (non-contiguous)."""
    rng = np.random.default_rng(7)
    h, hkv, d = 4, 2, 8
    cu = np.array([0, 3, 10], np.int32)
    qkv = rand(rng, (10, h + 2 * hkv, d), "float32")
    dev = up(qkv)
    qd, kd, vd = dev[:, :h], dev[:, h : h + hkv], dev[:, h + hkv :]
    assert not qd.is_contiguous()
    r = gp.sdpa_varlen(qd, kd, vd, up(cu), up(cu), max_seqlen_q=7, max_seqlen_k=7)
    ref = varlen_ref(qkv[:, :h], qkv[:, h : h + hkv], qkv[:, h + hkv :], cu, cu, True)
    assert_close(r, ref, "float32")


def test_errors() -> None:
    q = up(np.ones((5, 4, 8), np.float32))
    kv = up(np.ones((6, 2, 8), np.float32))
    cu = up(np.array([0, 2, 5], np.int32))
    cuk = up(np.array([0, 3, 6], np.int32))

    def call(**kw: object) -> None:
        args = {"q": q, "k": kv, "v": kv, "cu_seqlens_q": cu, "cu_seqlens_k": cuk}
        args.update({k: v for k, v in kw.items() if k in args})
        opts = {"max_seqlen_q": 3, "max_seqlen_k": 3}
        opts.update({k: v for k, v in kw.items() if k not in args})
        gp.sdpa_varlen(*args.values(), **opts)  # type: ignore[arg-type]

    call()
    with pytest.raises(ValueError, match=r"q must be packed \[total_tokens, heads, head_dim\]"):
        call(q=up(np.ones((1, 5, 4, 8), np.float32)))
    with pytest.raises(TypeError, match=r"k has shape .* dtype float16 but q has dtype float32"):
        call(k=kv.astype("float16"))
    with pytest.raises(ValueError, match="k has 3 heads, which must divide q's 4 heads"):
        k3 = up(np.ones((6, 3, 8), np.float32))
        call(k=k3, v=k3)
    with pytest.raises(ValueError, match="v has 1 heads but k has 2"):
        call(v=up(np.ones((6, 1, 8), np.float32)))
    with pytest.raises(ValueError, match="k has head dim 4 but q has 8"):
        call(k=up(np.ones((6, 2, 4), np.float32)))
    with pytest.raises(ValueError, match="v has 5 tokens but k has 6"):
        call(v=up(np.ones((5, 2, 8), np.float32)))
    with pytest.raises(TypeError, match="cu_seqlens_q must be an int32 array"):
        call(cu_seqlens_q=up(np.array([0, 2, 5], np.int64)))
    with pytest.raises(ValueError, match="cu_seqlens_k must be 1-D with B \\+ 1 offsets"):
        call(cu_seqlens_k=up(np.zeros((1, 3), np.int32)))
    with pytest.raises(ValueError, match="cu_seqlens_k has 2 entries but cu_seqlens_q has 3"):
        call(cu_seqlens_k=up(np.array([0, 6], np.int32)))
    with pytest.raises(TypeError, match="max_seqlen_q must be a Python int, got float"):
        call(max_seqlen_q=3.0)
    with pytest.raises(TypeError, match="max_seqlen_k must be a Python int, got bool"):
        call(max_seqlen_k=True)
    with pytest.raises(ValueError, match="max_seqlen_q must be >= 0"):
        call(max_seqlen_q=-1)
    with pytest.raises(TypeError, match="scale must be a number or None"):
        call(scale="0.5")
    with pytest.raises(ValueError, match=r"out has shape \(5, 4, 4\) .* result has shape"):
        call(out=up(np.ones((5, 4, 4), np.float32)))
    with pytest.raises(TypeError, match="q must be a GPUArray"):
        call(q=np.ones((5, 4, 8), np.float32))
    with pytest.raises(TypeError, match="cu_seqlens_q must be a GPUArray"):
        call(cu_seqlens_q=np.array([0, 2, 5], np.int32))
    if DEVICE == "cpu":  # values only the NumPy backend checks (the GPU would need a host sync)
        with pytest.raises(ValueError, match="max_seqlen_q is 2"):
            call(max_seqlen_q=2)
