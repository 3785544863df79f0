"""Attention against torch SDPA (flash backend on Hopper), bf16, same run.

Prefill: causal, B1 H32 S4096 D128 and B4 H16 S4096 D64 (the issue-5 targets), plus the other
head dims (D80, D96: B2 H32; D256: B1 H16); FLOPs counted as torch does for causal attention
(half of 4*B*H*S^2*D). torch runs with the flash backend forced (sdpa_kernel), the peer the
target names. Varlen prefill: 8 causal sequences of mixed lengths (64 to 4096, 16384 tokens)
packed in one gp.sdpa_varlen call, H32 Hkv8 D128, against torch's flash SDPA called once per
sequence (what an engine without a varlen kernel does); FLOPs = the sum over sequences.
Decode: one query per sequence, 32 query / 8 KV heads, D128, contexts 4096 and 32768, batch 1
and 16; bytes = the K and V read once. Targets: prefill >= 85% of torch's TFLOP/s,
decode >= 80% of the device copy bandwidth.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu

PREFILL = [
    (1, 32, 4096, 128),
    (4, 16, 4096, 64),
    (2, 32, 4096, 80),
    (2, 32, 4096, 96),
    (1, 16, 4096, 256),
]
DECODE = [(1, 4096), (1, 32768), (16, 4096), (16, 32768)]
VARLEN = [4096, 64, 1000, 2048, 3000, 17, 2500, 3659]  # 16384 tokens


def _torch_inputs(torch: Any, b: int, h: int, hkv: int, sq: int, sk: int, d: int) -> Any:
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda hh, s: torch.randn(b, hh, s, d, device="cuda", dtype=torch.bfloat16, generator=g)  # noqa: E731
    return mk(h, sq), mk(hkv, sk), mk(hkv, sk)


def _flash(torch: Any) -> AbstractContextManager[Any]:
    """torch SDPA restricted to its flash backend (the issue's peer)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # older torch: whatever it dispatches to
        return nullcontext()
    return sdpa_kernel(SDPBackend.FLASH_ATTENTION)  # type: ignore[no-any-return]


@pytest.mark.parametrize("shape", PREFILL, ids=lambda s: "B{}-H{}-S{}-D{}".format(*s))
@pytest.mark.parametrize("impl", ["pygpukit", "torch"])
def test_prefill(bench: Any, shape: tuple[int, int, int, int], impl: str) -> None:
    torch = pytest.importorskip("torch")
    b, h, s, d = shape
    q, k, v = _torch_inputs(torch, b, h, h, s, s, d)
    flops = 2 * b * h * s * s * d  # 4*B*H*S^2*D / 2 for the causal half
    group = f"sdpa prefill causal B{b} H{h} S{s} D{d} bf16"
    if impl == "torch":
        f = torch.nn.functional.scaled_dot_product_attention
        with _flash(torch):
            bench(lambda: f(q, k, v, is_causal=True), group=group, flops=flops, rounds=20)
    else:
        gq, gk, gv = (gp.from_dlpack(t) for t in (q, k, v))
        out = gp.empty_like(gq)
        bench(lambda: gp.sdpa(gq, gk, gv, True, out=out), group=group, flops=flops, rounds=20)


@pytest.mark.parametrize("impl", ["pygpukit", "torch"])
def test_prefill_varlen(bench: Any, impl: str) -> None:
    torch = pytest.importorskip("torch")
    h, hkv, d = 32, 8, 128
    total = sum(VARLEN)
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(total, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(total, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    cu = np.concatenate([[0], np.cumsum(VARLEN)]).astype(np.int32)
    flops = sum(2 * h * s * s * d for s in VARLEN)
    group = f"sdpa varlen prefill causal {len(VARLEN)} seqs T{total} Hq{h} Hkv{hkv} D{d} bf16"
    if impl == "torch":
        f = torch.nn.functional.scaled_dot_product_attention
        # K/V heads expanded once, outside the timing (the flash backend's GQA support varies
        # by torch version; FlashAttention-2 reads kv head h // group either way).
        ke, ve = (t.repeat_interleave(h // hkv, dim=1) for t in (k, v))
        views = [
            tuple(t[cu[i] : cu[i + 1]].transpose(0, 1)[None] for t in (q, ke, ve))
            for i in range(len(VARLEN))
        ]

        def run() -> None:
            for qs, ks, vs in views:
                f(qs, ks, vs, is_causal=True)

        with _flash(torch):
            bench(run, group=group, flops=flops, rounds=20)
    else:
        gq, gk, gv = (gp.from_dlpack(t) for t in (q, k, v))
        gcu = gp.from_numpy(cu, device="cuda:0")
        out = gp.empty_like(gq)
        m = max(VARLEN)

        def run_gp() -> None:
            gp.sdpa_varlen(gq, gk, gv, gcu, gcu, max_seqlen_q=m, max_seqlen_k=m, out=out)

        bench(run_gp, group=group, flops=flops, rounds=20)


@pytest.mark.parametrize("case", DECODE, ids=lambda c: "B{}-S{}".format(*c))
@pytest.mark.parametrize("impl", ["pygpukit", "torch"])
def test_decode(bench: Any, case: tuple[int, int], impl: str) -> None:
    torch = pytest.importorskip("torch")
    b, s = case
    q, k, v = _torch_inputs(torch, b, 32, 8, 1, s, 128)
    nbytes = 2 * b * 8 * s * 128 * 2
    group = f"sdpa decode B{b} Hq32 Hkv8 S{s} D128 bf16"
    if impl == "torch":
        f = torch.nn.functional.scaled_dot_product_attention
        bench(lambda: f(q, k, v, enable_gqa=True), group=group, bytes=nbytes, rounds=20)
    else:
        gq, gk, gv = (gp.from_dlpack(t) for t in (q, k, v))
        out = gp.empty_like(gq)
        bench(lambda: gp.sdpa(gq, gk, gv, False, out=out), group=group, bytes=nbytes, rounds=20)
