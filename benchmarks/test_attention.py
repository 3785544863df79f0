"""Attention against torch SDPA (flash backend on Hopper), bf16, same run.

Prefill: causal, B1 H32 S4096 D128 and B4 H16 S4096 D64; FLOPs counted as torch does for causal
attention (half of 4*B*H*S^2*D). Decode: one query per sequence, 32 query / 8 KV heads, D128,
contexts 4096 and 32768, batch 1 and 16; bytes = the K and V read once. Targets (issue 5):
prefill >= 85% of torch's TFLOP/s, decode >= 80% of the device copy bandwidth.
"""

from __future__ import annotations

from typing import Any

import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu

PREFILL = [(1, 32, 4096, 128), (4, 16, 4096, 64)]
DECODE = [(1, 4096), (1, 32768), (16, 4096), (16, 32768)]


def _torch_inputs(torch: Any, b: int, h: int, hkv: int, sq: int, sk: int, d: int) -> Any:
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda hh, s: torch.randn(b, hh, s, d, device="cuda", dtype=torch.bfloat16, generator=g)  # noqa: E731
    return mk(h, sq), mk(hkv, sk), mk(hkv, sk)


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
        bench(lambda: f(q, k, v, is_causal=True), group=group, flops=flops, rounds=20)
    else:
        gq, gk, gv = (gp.from_dlpack(t) for t in (q, k, v))
        out = gp.empty_like(gq)
        bench(lambda: gp.sdpa(gq, gk, gv, True, out=out), group=group, flops=flops, rounds=20)


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
