"""NumPy backend: sdpa_varlen (packed sequences, per-sequence causal alignment, value checks)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _attention_ref import packed, varlen_ref
from _data import FLOATS, as64, np_dtype, seed

from pygpukit.backends import cpu

CASES = [
    # (lens_q, lens_k, H, Hkv, D, Dv)
    ([1], [1], 1, 1, 8, 8),
    ([5, 1, 17], [5, 1, 17], 4, 4, 16, 16),
    ([3, 9, 1], [30, 9, 4], 8, 2, 32, 32),  # chunked prefill: queries at the end of longer keys
    ([6, 0, 4], [2, 3, 0], 6, 1, 8, 24),  # MQA; Sk < Sq, an empty query and an empty key set
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_sdpa_varlen(case: tuple, causal: bool, dtype: str) -> None:
    lens_q, lens_k, h, hkv, d, dv = case
    rng = np.random.default_rng(seed("varlen", case, causal, dtype))
    q, k, v, cu_q, cu_k = packed(rng, lens_q, lens_k, h, hkv, d, dtype, dv)
    out = cpu.sdpa_varlen(
        q, k, v, cu_q, cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k), causal=causal
    )
    assert out.dtype == np_dtype(dtype) and out.shape == (q.shape[0], h, dv)
    assert_close(out, varlen_ref(q, k, v, cu_q, cu_k, causal), dtype)
    for b in range(len(lens_q)):  # no keys, or all keys after a query (causal): zeros
        seen = lens_k[b] if not causal else lens_k[b] - lens_q[b] + np.arange(lens_q[b]) + 1
        rows = np.arange(cu_q[b], cu_q[b + 1])[np.minimum(seen, lens_k[b]) <= 0]
        assert (out[rows] == 0).all()


def test_matches_dense_sdpa() -> None:
    """One sequence per batch entry of equal length: the same as sdpa on [B, H, S, D]."""
    rng = np.random.default_rng(3)
    q, k, v, cu_q, cu_k = packed(rng, [7, 7], [11, 11], 4, 2, 16, "float64")
    got = cpu.sdpa_varlen(q, k, v, cu_q, cu_k, max_seqlen_q=7, max_seqlen_k=11, scale=0.4)
    dense = cpu.sdpa(
        q.reshape(2, 7, 4, 16).transpose(0, 2, 1, 3),
        k.reshape(2, 11, 2, 16).transpose(0, 2, 1, 3),
        v.reshape(2, 11, 2, 16).transpose(0, 2, 1, 3),
        causal=True,
        scale=0.4,
    )
    np.testing.assert_allclose(got, dense.transpose(0, 2, 1, 3).reshape(14, 4, 16), rtol=1e-12)


def test_float64_exact_reference() -> None:
    rng = np.random.default_rng(4)
    q, k, v, cu_q, cu_k = packed(rng, [4, 2], [6, 2], 2, 1, 8, "float64")
    out = cpu.sdpa_varlen(q, k, v, cu_q, cu_k, max_seqlen_q=4, max_seqlen_k=6, causal=True)
    # query 0 of sequence 0 sees keys 0..2 (end-aligned: 0 + 6 - 4)
    s = as64(q[0, 0]) @ as64(k[:3, 0]).T / math.sqrt(8)
    p = np.exp(s - s.max())
    np.testing.assert_allclose(out[0, 0], p @ as64(v[:3, 0]) / p.sum(), rtol=1e-12)


def test_value_errors() -> None:
    rng = np.random.default_rng(5)
    q, k, v, cu_q, cu_k = packed(rng, [3, 4], [3, 4], 2, 1, 8, "float32")

    def call(cq: np.ndarray = cu_q, ck: np.ndarray = cu_k, mq: int = 4, mk: int = 4) -> None:
        cpu.sdpa_varlen(q, k, v, cq, ck, max_seqlen_q=mq, max_seqlen_k=mk)

    call()
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[-1\] = 6 must equal the 7 packed rows"):
        call(cq=np.array([0, 3, 6], np.int32))
    with pytest.raises(ValueError, match=r"cu_seqlens_k\[-1\] = 8 must be at most the 7"):
        call(ck=np.array([0, 4, 8], np.int32))
    with pytest.raises(ValueError, match="must start at 0 and never decrease"):
        call(cq=np.array([0, 5, 3, 7], np.int32), ck=np.array([0, 3, 3, 7], np.int32), mq=5)
    with pytest.raises(ValueError, match="a sequence has 4 rows in cu_seqlens_q but max_seqlen_q"):
        call(mq=3)
    with pytest.raises(ValueError, match="max_seqlen_k is 2"):
        call(mk=2)
    with pytest.raises(ValueError, match="cu_seqlens_q has 3 entries but cu_seqlens_k has 2"):
        call(ck=np.array([0, 7], np.int32))
    with pytest.raises(ValueError, match="packed"):
        cpu.sdpa_varlen(q[None], k, v, cu_q, cu_k, max_seqlen_q=4, max_seqlen_k=4)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        cpu.sdpa_varlen(q, k[:, [0, 0, 0]], v[:, [0, 0, 0]], cu_q, cu_k, max_seqlen_q=4,
                        max_seqlen_k=4)  # fmt: skip
    with pytest.raises(ValueError, match="incompatible"):
        cpu.sdpa_varlen(q, k, v[:5], cu_q, cu_k, max_seqlen_q=4, max_seqlen_k=4)
