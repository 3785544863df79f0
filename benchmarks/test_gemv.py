"""Decode GEMV: y[M, N] = x[M, K] @ W^T for M = 1..16, bf16 activations, L2 flushed
before every round (a 256 MiB read, benchmarks/conftest.py), weight bytes as the bytes moved.

Groups (read with .ci/gpu/summary.py, which adds GB/s, % of the copy ceiling measured in the
same run - the "copy 1 GiB" row below - and the ratio to the torch row of each group):
- "gemv bf16 K.. N.. M..": the native GEMV kernel (gp.gemv) against gp.linear's cuBLASLt path
  (the native GEMV crossover held off, op linear forced to the native backend), gp.linear as
  routed ("linear": one row goes to the Triton decode GEMV) and torch.nn.functional.linear, M
  in 1, 2, 4, 8, 16: the
  crossover table of pygpukit/backends/native/matmul.py (GEMV_MAX_M) is read off these rows (K2048
  N2048 for its "small" class, the two large shapes for "large").
- "gemv quant K.. N.. M..": gp.linear_quantized for each weight format against the bf16 GEMV
  and torch bf16 at M = 1, 4, 16; bytes are each format's own (codes + scales).
- "gemv gated K.. 2I.. M..": gp.linear_silu_mul over a stacked [Wg; Wu] in bf16 and quantized
  (one launch, op gemv_<format>_silu_mul, against linear_quantized + silu_mul), torch's
  F.linear + silu * up as the peer, at a 1B and an 8B model's MLP shape.
Shapes: K8192 N29568 (the target: bf16 >= 3.4 TB/s, W8A16 >= 1.7x and W4A16 >= 2.8x
faster than bf16 at M = 1) and K4096 N14336. Weight values are random bytes (speed does not
depend on them; fp8 NaN codes avoided).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

import pygpukit as gp
from pygpukit import _core

pytestmark = pytest.mark.gpu

SHAPES = [(8192, 29568), (4096, 14336)]  # (K, N)
# + one weight of the crossover table's "small" class (< 2^24 elements: a 1B model's attention
# projection), where launch latency rather than bandwidth decides
BF16_SHAPES = [*SHAPES, (2048, 2048)]
BF16_MS = [1, 2, 4, 8, 16]
QUANT_MS = [1, 4, 16]
QUANT_IMPLS = [
    "torch_bf16",
    "gemv_bf16",
    "fp8_channel",
    "fp8_block128",
    "int4_f32",
    "int4_bf16",
    "nvfp4",
]
_cache: dict[Any, Any] = {}


def _shape_id(s: tuple[int, int]) -> str:
    return f"K{s[0]}-N{s[1]}"


def _bytes_into(torch: Any, t: Any, shape: tuple[int, ...], dtype: Any) -> gp.GPUArray:
    """A GPUArray of ``dtype`` holding the raw bytes of the uint8 tensor t (same byte count)."""
    g = gp.empty(shape, dtype, device="cuda:0")
    assert g.nbytes == t.numel()
    _core.memcpy_dtod(g.data_ptr(), t.data_ptr(), t.numel(), gp.current_stream("cuda:0"))
    return g


def _weights(torch: Any, k: int, n: int) -> dict[str, Any]:
    """bf16 W (torch and pygpukit views of one buffer) and every quantized format, built once."""
    key = (k, n)
    if key in _cache:
        return _cache[key]
    _cache.clear()  # one shape at a time on the device
    g = torch.Generator(device="cuda").manual_seed(0)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)

    def rbytes(*shape: int) -> Any:
        return torch.randint(0, 256, shape, device="cuda", dtype=torch.uint8, generator=g)

    c8 = rbytes(n, k)
    c8[(c8 & 0x7F) == 0x7F] = 0x7E  # no NaN codes
    fp8 = _bytes_into(torch, c8, (n, k), gp.float8_e4m3fn)
    s_ch = gp.from_dlpack(torch.rand(n, device="cuda", generator=g) + 0.5)
    s_blk = gp.from_dlpack(torch.rand(n, -(-k // 128), device="cuda", generator=g) + 0.5)
    i4 = _bytes_into(torch, rbytes(n, k // 2), (n, k), gp.int4)
    s4 = torch.rand(n, -(-k // 128), device="cuda", generator=g) + 0.5
    f4 = gp.from_dlpack(rbytes(n, k // 2))
    s_f4 = rbytes(n, k // 16) % 0x70 + 0x08  # positive normal e4m3 scales
    out = {
        "torch_w": w,
        "w": gp.from_dlpack(w),
        "fp8_channel": gp.QuantizedWeight("fp8", fp8, s_ch),
        "fp8_block128": gp.QuantizedWeight("fp8", fp8, s_blk),
        "int4_f32": gp.QuantizedWeight("int4", i4, gp.from_dlpack(s4)),
        "int4_bf16": gp.QuantizedWeight("int4", i4, gp.from_dlpack(s4.to(torch.bfloat16))),
        "nvfp4": gp.QuantizedWeight(
            "nvfp4",
            f4,
            _bytes_into(torch, s_f4, (n, k // 16), gp.float8_e4m3fn),
            global_scale=0.01,
        ),
    }
    _cache[key] = out
    return out


def _call(impl: str, torch: Any, wts: dict[str, Any], m: int, k: int, n: int) -> Callable[[], Any]:
    tx = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    if impl in ("torch", "torch_bf16"):
        f = torch.nn.functional.linear
        tw = wts["torch_w"]
        return lambda: f(tx, tw)
    x = gp.from_dlpack(tx)
    y = gp.empty((m, n), gp.bfloat16, device="cuda:0")
    if impl in ("gemv", "gemv_bf16"):
        w = wts["w"]
        return lambda: gp.gemv(x, w, out=y)
    if impl == "cublaslt":
        w = wts["w"]

        def on_cublaslt() -> None:
            with gp.route(linear="native"):  # no one-row diversion to the decode GEMV
                gp.linear(x, w, out=y)

        return on_cublaslt
    if impl == "linear":
        w = wts["w"]
        return lambda: gp.linear(x, w, out=y)
    qw = wts[impl]
    return lambda: gp.linear_quantized(x, qw, out=y)


@pytest.mark.parametrize("impl", ["torch", "gemv", "cublaslt", "linear"])
@pytest.mark.parametrize("m", BF16_MS)
@pytest.mark.parametrize("shape", BF16_SHAPES, ids=_shape_id)
def test_gemv_bf16(bench: Any, monkeypatch: Any, shape: tuple[int, int], m: int, impl: str) -> None:
    torch = pytest.importorskip("torch")
    from pygpukit.backends.native import matmul as native

    monkeypatch.setattr(native, "_gemv_top", [0])  # gp.linear stays on cuBLASLt (the peer row)
    k, n = shape
    fn = _call(impl, torch, _weights(torch, k, n), m, k, n)
    bench(fn, group=f"gemv bf16 K{k} N{n} M{m}", bytes=n * k * 2)


@pytest.mark.parametrize("impl", QUANT_IMPLS)
@pytest.mark.parametrize("m", QUANT_MS)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_gemv_quant(bench: Any, shape: tuple[int, int], m: int, impl: str) -> None:
    torch = pytest.importorskip("torch")
    k, n = shape
    wts = _weights(torch, k, n)
    nbytes = n * k * 2 if impl in ("torch_bf16", "gemv_bf16") else wts[impl].nbytes
    fn = _call(impl, torch, wts, m, k, n)
    bench(fn, group=f"gemv quant K{k} N{n} M{m}", bytes=nbytes)


# The gated MLP's gate/up product, silu(x Wg^T) * (x Wu^T) over the stacked [Wg; Wu] (K, 2I):
# a 1B model's (Llama-3.2-1B: K2048, I8192) and an 8B model's (Llama-3-8B: K4096, I14336).
GATED_SHAPES = [(2048, 16384), (4096, 28672)]
GATED_IMPLS = [
    "torch",  # F.linear, then F.silu(g) * u
    "bf16",  # gp.linear_silu_mul: one row the Triton decode GEMV (silu(g) * u in its epilogue),
    # more rows cuBLASLt then silu_mul
    *(f"{q}_{how}" for q in ("fp8_channel", "int4_bf16", "nvfp4") for how in ("fused", "unfused")),
]


@pytest.mark.parametrize("impl", GATED_IMPLS)
@pytest.mark.parametrize("m", [1, 4])
@pytest.mark.parametrize("shape", GATED_SHAPES, ids=_shape_id)
def test_gemv_gated(bench: Any, shape: tuple[int, int], m: int, impl: str) -> None:
    """gp.linear_silu_mul with a quantized weight: one launch (op gemv_<format>_silu_mul,
    "_fused": ops/gemv.QUANT_GATED_GEMV on, shipped for one int4 row) against
    linear_quantized + silu_mul ("_unfused", shipped for the rest), the bf16 weight and torch
    in the same group. Eager calls, each its host cost included where it exceeds the device
    time: benchmarks/tuning/gated_gemv_ab.py times the same products as graph-replayed
    chains."""
    torch = pytest.importorskip("torch")
    # the module (pygpukit.ops.gemv the attribute is the function gp.gemv)
    ops_gemv = importlib.import_module("pygpukit.ops.gemv")

    k, n = shape
    wts = _weights(torch, k, n)
    tx = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    x = gp.from_dlpack(tx)
    y = gp.empty((m, n // 2), gp.bfloat16, device="cuda:0")
    if impl == "torch":
        f, silu, tw = torch.nn.functional.linear, torch.nn.functional.silu, wts["torch_w"]

        def fn() -> Any:
            h = f(tx, tw)
            return silu(h[:, : n // 2]) * h[:, n // 2 :]

        nbytes = n * k * 2
    elif impl == "bf16":
        w = wts["w"]
        nbytes = n * k * 2

        def fn() -> Any:
            return gp.linear_silu_mul(x, w, out=y)
    else:
        q, how = impl.rsplit("_", 1)
        qw = wts[q]
        nbytes = qw.nbytes

        shipped = ops_gemv.QUANT_GATED_GEMV

        def fn() -> Any:
            ops_gemv.QUANT_GATED_GEMV = how == "fused"
            try:
                return gp.linear_silu_mul(x, qw, out=y)
            finally:
                ops_gemv.QUANT_GATED_GEMV = shipped

    bench(fn, group=f"gemv gated K{k} 2I{n} M{m}", bytes=nbytes)


def test_copy_ceiling(copy_ceiling: Callable[[], None]) -> None:
    """The bandwidth ceiling of this run (the summary's "%copy" column divides by it)."""
    copy_ceiling()
