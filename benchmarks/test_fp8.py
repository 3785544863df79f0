"""FP8 against torch in the same run, on shared data (DLPack views of torch's tensors).

GEMM, 8192^3, e4m3 x e4m3 -> bf16 (flops = 2*M*N*K): gp.matmul_fp8 against torch._scaled_mm
with the same scales: per tensor (default accumulation, and fast_accum on both sides), per row
(torch: scale_a (M, 1), scale_b (1, N)), and DeepSeek-V3 blocks (1x128 activations x 128x128
weights; torch 2.11 takes them through cuBLASLt as well). Target: per tensor
>= 1200 TFLOP/s on an H200 (torch._scaled_mm measured 1273).

Quantize, 8192x8192 bf16 -> e4m3, per tensor / per row / 1x128 blocks: bytes = 2 read + 1
written per element (the logical traffic; the per-tensor path reads x twice, amax then codes),
against torch eager (abs-amax, divide, clamp, cast) and a bf16 copy of the same array.
"""

from __future__ import annotations

from typing import Any

import pytest

import pygpukit as gp

pytestmark = pytest.mark.gpu

M = N = K = 8192
FLOPS = 2 * M * N * K
GEMMS = ["tensor", "tensor fast_accum", "row", "block 1x128 x 128x128"]


def _operands(torch: Any, kind: str) -> tuple[Any, Any, Any, Any]:
    """a [M, K], w [N, K] e4m3 and torch-layout scales of ``kind`` (values in [0.5, 1.5))."""
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
    w = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn)

    def rnd(*shape: int) -> Any:
        return torch.rand(*shape, device="cuda", generator=g) + 0.5

    if kind.startswith("tensor"):
        return a, w, rnd(1), rnd(1)
    if kind == "row":
        return a, w, rnd(M, 1), rnd(N, 1)
    return a, w, rnd(M, K // 128), rnd(N // 128, K // 128)


@pytest.mark.parametrize("kind", GEMMS)
@pytest.mark.parametrize("impl", ["pygpukit", "torch"])
def test_matmul_fp8(bench: Any, kind: str, impl: str) -> None:
    torch = pytest.importorskip("torch")
    a, w, sa, sw = _operands(torch, kind)
    fast = kind.endswith("fast_accum")
    group = f"matmul_fp8 8192^3 e4m3 {kind} -> bf16"
    sa_t, sb_t = sa, sw
    if kind == "row":
        sb_t = sw.t()  # torch: (1, N)
    elif kind.startswith("block"):
        sa_t = sa.t().contiguous().t()  # 1x128 scales outer-dim-major (cuBLASLt's order)
        sb_t = sw.t()  # for b = w.t(): its transpose is w's [N/128, K/128] grid
    if impl == "torch":
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)

        def run() -> Any:
            return torch._scaled_mm(
                a, w.t(), scale_a=sa_t, scale_b=sb_t, out_dtype=torch.bfloat16,
                use_fast_accum=fast, out=out,
            )  # fmt: skip

        try:
            run()
        except (RuntimeError, NotImplementedError) as exc:
            pytest.skip(f"torch._scaled_mm does not take {kind} scales here: {exc}")
        bench(run, group=group, flops=FLOPS, rounds=20)
        return
    # The same scale tensors (1x128 scales in the outer-dim-major order torch needs, which is
    # also cuBLASLt's, so neither side rearranges them per call).
    ga, gw, gsa, gsw = (gp.from_dlpack(t) for t in (a, w, sa_t, sw))
    out_g = gp.empty((M, N), "bfloat16", device="cuda:0")
    bench(
        lambda: gp.matmul_fp8(ga, gw, scale_a=gsa, scale_b=gsw, fast_accum=fast, out=out_g),
        group=group, flops=FLOPS, rounds=20,
    )  # fmt: skip


QUANT = ["tensor", "row", "block"]
QBYTES = 3 * M * K


@pytest.mark.parametrize("gran", QUANT)
@pytest.mark.parametrize("impl", ["pygpukit", "torch", "copy bf16"])
def test_quantize_fp8(bench: Any, gran: str, impl: str) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    group = f"quantize_fp8 8192x8192 bf16 -> e4m3 {gran}"
    if impl == "copy bf16":
        gx = gp.from_dlpack(x)
        y = gp.empty_like(gx)

        def copy() -> None:
            y[...] = gx  # a device-to-device copy of the bf16 array

        bench(copy, group=group, bytes=2 * 2 * M * K, rounds=20)
        return
    if impl == "torch":
        f8 = torch.float8_e4m3fn

        def tq() -> Any:
            if gran == "tensor":
                amax = x.abs().amax().float()
            elif gran == "row":
                amax = x.abs().amax(dim=1, keepdim=True).float()
            else:
                amax = x.view(M, K // 128, 128).abs().amax(dim=2, keepdim=True).float()
            s = torch.where(amax == 0, 1.0, amax / 448.0)
            xv = x if gran != "block" else x.view(M, K // 128, 128)
            return (xv.float() / s).clamp(-448.0, 448.0).to(f8), s

        bench(tq, group=group, bytes=QBYTES, rounds=20)
        return
    gx = gp.from_dlpack(x)
    bench(
        lambda: gp.quantize_fp8(gx, granularity=gran, block=128),
        group=group, bytes=QBYTES, rounds=20,
    )  # fmt: skip
