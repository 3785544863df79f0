"""NumPy backend: sdpa (causal aligned to the key end, GQA, 3-D and 4-D layouts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import FLOATS, as64, np_dtype, rand, seed

from pygpukit.backends import cpu


def _sdpa_ref(q, k, v, causal, scale):  # type: ignore[no-untyped-def]
    """Per (batch, head, query) loop in float64; fully masked rows give zeros."""
    q, k, v = as64(q), as64(k), as64(v)
    b, h, sq, _ = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    out = np.zeros((b, h, sq, v.shape[-1]))
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hkv)
            for i in range(sq):
                n = min(sk, i + sk - sq + 1) if causal else sk
                if n <= 0:
                    continue
                logits = [scale * math.fsum(q[bi, hi, i] * k[bi, kh, j]) for j in range(n)]
                m = max(logits)
                p = np.exp(np.array(logits) - m)
                out[bi, hi, i] = (p / math.fsum(p)) @ v[bi, kh, :n]
    return out


CASES = [
    # (B, H, Hkv, Sq, Sk, D, Dv)
    (1, 1, 1, 1, 1, 8, 8),
    (2, 4, 4, 7, 7, 16, 16),
    (1, 8, 2, 5, 33, 32, 32),  # GQA, decode-like Sq < Sk
    (1, 6, 1, 9, 4, 8, 8),  # MQA, Sq > Sk: first rows see no key
    (2, 2, 1, 33, 33, 64, 24),  # Dv != D
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_sdpa(case: tuple, causal: bool, dtype: str) -> None:
    b, h, hkv, sq, sk, d, dv = case
    rng = np.random.default_rng(seed("sdpa", case, causal, dtype))
    q, k, v = (
        rand(rng, (b, h, sq, d), dtype),
        rand(rng, (b, hkv, sk, d), dtype),
        rand(rng, (b, hkv, sk, dv), dtype),
    )
    out = cpu.sdpa(q, k, v, causal=causal)
    assert out.dtype == np_dtype(dtype) and out.shape == (b, h, sq, dv)
    ref = _sdpa_ref(q, k, v, causal, 1 / math.sqrt(d))
    assert_close(out, ref, dtype)
    if causal and sq > sk:
        assert (out[:, :, : sq - sk] == 0).all()


def test_sdpa_3d_and_scale() -> None:
    rng = np.random.default_rng(2)
    q, k, v = (
        rand(rng, (4, 7, 16), "float32"),
        rand(rng, (2, 7, 16), "float32"),
        rand(rng, (2, 7, 16), "float32"),
    )
    out = cpu.sdpa(q, k, v, causal=True, scale=0.3)
    assert out.shape == (4, 7, 16)
    ref = _sdpa_ref(q[None], k[None], v[None], True, 0.3)[0]
    assert_close(out, ref, "float32")


def test_sdpa_shape_errors() -> None:
    q = np.ones((1, 3, 4, 8), np.float32)
    with pytest.raises(ValueError, match="multiple"):
        cpu.sdpa(q, np.ones((1, 2, 4, 8), np.float32), np.ones((1, 2, 4, 8), np.float32))
    with pytest.raises(ValueError, match="incompatible"):
        cpu.sdpa(q, np.ones((1, 3, 4, 7), np.float32), np.ones((1, 3, 4, 8), np.float32))
    with pytest.raises(ValueError, match="must all be"):
        cpu.sdpa(q[0, 0], q[0, 0], q[0, 0])
