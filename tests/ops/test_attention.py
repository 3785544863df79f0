"""Public sdpa and sdpa_causal on the CPU device (GQA, causal alignment, layouts, errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _assert import assert_close
from _data import as64, rand, seed

import pygpukit as gp
from ops._helpers import poisoned, up


def _ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, scale: float) -> np.ndarray:
    q, k, v = as64(q), as64(k), as64(v)
    b, h, sq, _ = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    out = np.zeros((b, h, sq, v.shape[-1]))
    for bi, hi, i in np.ndindex(b, h, sq):
        kh = hi // (h // hkv)
        n = min(sk, i + sk - sq + 1) if causal else sk
        if n > 0:
            s = scale * (k[bi, kh, :n] @ q[bi, hi, i])
            p = np.exp(s - s.max())
            out[bi, hi, i] = p @ v[bi, kh, :n] / math.fsum(p)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", [(2, 4, 2, 7, 7, 16), (1, 8, 1, 3, 33, 32)], ids=str)
def test_sdpa_token_major_views(case: tuple, dtype: str) -> None:
    # q/k/v stored token-major [B, S, H, D] and viewed as [B, H, S, D]: the usual layout.
    b, h, hkv, sq, sk, d = case
    rng = np.random.default_rng(seed("sdpa", case, dtype))
    q, k, v = (rand(rng, (b, s, n, d), dtype) for s, n in ((sq, h), (sk, hkv), (sk, hkv)))
    qv, kv, vv = (up(t).transpose(0, 2, 1, 3) for t in (q, k, v))
    assert not qv.is_contiguous()
    out = poisoned((b, h, sq, d), dtype)
    r = gp.sdpa(qv, kv, vv, out=out)
    assert r is out
    qh, kh, vh = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    assert_close(r, _ref(qh, kh, vh, True, 1 / math.sqrt(d)), dtype)
    r = gp.sdpa(qv, kv, vv, causal=False, scale=0.2)
    assert_close(r, _ref(qh, kh, vh, False, 0.2), dtype)


def test_sdpa_causal_legacy_and_3d() -> None:
    rng = np.random.default_rng(1)
    q, k, v = (
        rand(rng, (4, 9, 8), "float32"),
        rand(rng, (2, 5, 8), "float32"),
        rand(rng, (2, 5, 8), "float32"),
    )
    r = gp.sdpa_causal(up(q), up(k), up(v))
    ref = _ref(q[None], k[None], v[None], True, 1 / math.sqrt(8))[0]
    assert_close(r, ref, "float32")
    assert (r.to_numpy()[:, :4] == 0).all()  # queries before the first key see nothing


def test_errors() -> None:
    q = up(np.ones((1, 6, 4, 8), np.float32))
    kv4 = up(np.ones((1, 4, 4, 8), np.float32))
    with pytest.raises(ValueError, match=r"sdpa: k has 4 heads, which must divide q's 6 heads"):
        gp.sdpa(q, kv4, kv4)
    with pytest.raises(
        TypeError, match=r"sdpa: k has shape .* dtype float16 but q has dtype float32"
    ):
        gp.sdpa(q, kv4.astype("float16"), kv4)
    with pytest.raises(ValueError, match=r"sdpa: q must be \[B, H, S, D\] or \[H, S, D\]"):
        gp.sdpa(up(np.ones((4, 8), np.float32)), kv4, kv4)
    kd = up(np.ones((1, 2, 4, 7), np.float32))
    with pytest.raises(ValueError, match="sdpa: k has head dim 7 but q has 8"):
        gp.sdpa(q, kd, up(np.ones((1, 2, 4, 8), np.float32)))
    with pytest.raises(ValueError, match="sdpa: v has 3 keys but k has 4"):
        gp.sdpa(q, up(np.ones((1, 2, 4, 8), np.float32)), up(np.ones((1, 2, 3, 8), np.float32)))
    with pytest.raises(TypeError, match="sdpa: q must be a GPUArray"):
        gp.sdpa_causal(np.ones((1, 1, 1, 1)), kv4, kv4)
