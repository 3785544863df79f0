"""Decode attention over a KV cache and the KV-cache write, bf16, against torch in the same run.

sdpa_decode: one query token per sequence, 32 query / 8 KV heads, D128, every sequence at the
full context (4096, 16384, 32768), batch 1 and 16; bytes = the K and V read once. Rows: the
contiguous cache, paged caches of 16- and 64-slot blocks (vLLM's default and FlashInfer's common
size; the block table a random permutation, so pages are scattered), the same three with the
route forced to the native split-key kernel (native-*), the older gp.sdpa over cache views, torch
SDPA (enable_gqa) on the contiguous cache, and flash-attn's flash_attn_with_kvcache
when it is installed. Targets: >= 80% of the device copy bandwidth (the "copy 1 GiB"
group of benchmarks/test_copy.py, run in the same session) and paged within 10% of contiguous.
test_decode_graph times the same calls replayed back to back from a CUDA graph over rotated
caches, as the engine's graph decode runs them.

kv_cache_write: one new token per sequence; bytes = k and v read and written once. Fused RoPE
against gp.rope followed by the plain write, and torch eager (rope formula + index_put).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pygpukit as gp

try:  # the read-floor kernel below; benchmarks run on a GPU host, where Triton is installed
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - collection on a host without Triton
    triton = None

pytestmark = pytest.mark.gpu
H, HKV, D = 32, 8, 128
DECODE = [(b, s) for b in (1, 16) for s in (4096, 16384, 32768)]
LAYOUTS = ["contiguous", "paged16", "paged64"]
# The same calls with the route forced to the native twin (split_decode.cu).
NATIVE = [f"native-{x}" for x in LAYOUTS]


def _rand(shape: tuple[int, ...], seed: int = 0) -> gp.GPUArray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape, dtype=np.float32)
    return gp.from_numpy(x, device="cuda:0").astype("bfloat16")


def _cache(b: int, s: int, seed: int) -> gp.GPUArray:
    """[b, HKV, s, D] bf16: one random sequence copied to every row (values do not change the
    timing; it saves generating gigabytes on the host)."""
    row = _rand((1, HKV, s, D), seed)
    c = gp.empty((b, HKV, s, D), "bfloat16", device="cuda:0")
    for i in range(b):
        c[i : i + 1] = row
    return c


def _paged(c: gp.GPUArray, page: int) -> tuple[gp.GPUArray, gp.GPUArray]:
    """The cache's memory as [num_blocks, HKV, page, D] blocks and a random block table."""
    b, _, s, _ = c.shape
    per = s // page
    table = np.random.default_rng(1).permutation(b * per).reshape(b, per).astype(np.int32)
    return c.reshape(b * per, HKV, page, D), gp.from_numpy(table, device="cuda:0")


if triton is not None:

    @triton.jit
    def _read_kv(K, V, Out, n, per, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        # Program p reads elements [p * per, (p + 1) * per) of K and of V (a sum keeps the loads
        # live) and stores one float: the bytes of a decode call and nothing else.
        base = tl.program_id(0).to(tl.int64) * per
        acc = tl.zeros([BLOCK], tl.float32)
        for i in range(0, per, BLOCK):
            offs = base + i + tl.arange(0, BLOCK)
            m = offs < n
            acc += tl.load(K + offs, mask=m, other=0.0).to(tl.float32)
            acc += tl.load(V + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(Out + tl.program_id(0), tl.sum(acc, axis=0))


# Read-floor variants: (elements of K and of V per iteration, warps, programs per SM); loads go
# straight to registers (num_stages=1), each thread keeping BLOCK / (32 * warps) / 8 16-byte
# loads of each tensor in flight. "b" requests all of a 4096-key call's bytes at once (128 KiB
# an SM); "c" and "d" run two or four programs per SM instead of one.
READ_FLOORS = {
    "read-floor-a": (16384, 8, 1),
    "read-floor-b": (32768, 16, 1),
    "read-floor-c": (8192, 8, 2),
    "read-floor-d": (4096, 4, 4),
}


def _read_floor_fn(impl: str, kc: Any, vc: Any) -> Any:
    """A kernel that only reads the K and V bytes of a decode call: what a call of that size
    takes with the best read kernel measured, launch and ramp-up included, timed the same way.
    Shares are whole BLOCKs: at batch 1 a few programs get none (4 of 132 on an H200 with "b").
    Shares of 16 or 64 elements (every program busy, with an ``offs < min(end, n)`` mask) made
    "b" slower at every size on the H200, so they were not kept."""
    pytest.importorskip("triton")
    from pygpukit.backends.triton_kernels._common import cdiv, sm_count
    from pygpukit.backends.triton_kernels.driver import launch

    block, warps, per_sm = READ_FLOORS[impl]
    progs = per_sm * sm_count(kc)
    sink = gp.empty((progs,), "float32", device=kc.device)
    n = kc.size
    per = cdiv(cdiv(n, progs), block) * block
    return lambda: launch(
        _read_kv, (progs,), kc, vc, sink, n, per, BLOCK=block, num_warps=warps, num_stages=1
    )


def _decode_fn(impl: str, q: Any, kc: Any, vc: Any, lens: Any, out: Any) -> Any:
    """One decode-attention call of impl over one cache, as a closure."""
    if impl in READ_FLOORS:
        return _read_floor_fn(impl, kc, vc)
    if impl.startswith("native-"):
        call = _decode_fn(impl.replace("native-", "pygpukit-"), q, kc, vc, lens, out)

        def native() -> Any:
            with gp.route("sdpa_decode:native"):
                return call()

        return native
    if impl.startswith("pygpukit-paged"):
        page = int(impl.removeprefix("pygpukit-paged"))
        (kp, table), (vp, _) = _paged(kc, page), _paged(vc, page)
        return lambda: gp.sdpa_decode(q, kp, vp, lens, block_table=table, out=out)
    if impl == "pygpukit-contiguous":
        return lambda: gp.sdpa_decode(q, kc, vc, lens, out=out)
    if impl == "pygpukit-sdpa":  # the prefill kernel's split path over [:length] views
        return lambda: gp.sdpa(q, kc, vc, False, out=out)
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.from_dlpack(t) for t in (q, kc, vc))
    if impl == "torch-sdpa":
        f = torch.nn.functional.scaled_dot_product_attention
        return lambda: f(tq, tk, tv, enable_gqa=True)
    fa = pytest.importorskip("flash_attn")
    # Token-major views [B, S, Hkv, D] of the same memory (flash-attn needs only the last dim
    # contiguous).
    qt, kt, vt = tq.transpose(1, 2), tk.transpose(1, 2), tv.transpose(1, 2)
    tl_ = torch.from_dlpack(lens)
    return lambda: fa.flash_attn_with_kvcache(qt, kt, vt, cache_seqlens=tl_)


@pytest.mark.parametrize("case", DECODE, ids=lambda c: "B{}-S{}".format(*c))
@pytest.mark.parametrize(
    "impl",
    [f"pygpukit-{x}" for x in LAYOUTS]
    + NATIVE
    + ["pygpukit-sdpa", "torch-sdpa", "torch+flash_attn"],
)
def test_decode(bench: Any, case: tuple[int, int], impl: str) -> None:
    b, s = case
    group = f"sdpa_decode B{b} Hq{H} Hkv{HKV} S{s} D{D} bf16"
    nbytes = 2 * b * HKV * s * D * 2
    q = _rand((b, H, 1, D), 2)
    lens = gp.from_numpy(np.full(b, s, np.int32), device="cuda:0")
    fn = _decode_fn(impl, q, _cache(b, s, 3), _cache(b, s, 4), lens, gp.empty_like(q))
    bench(fn, group=group, bytes=nbytes, rounds=20)


ROTATE_BYTES = 256 << 20  # K+V bytes per replay: over 4x any Hopper L2


@pytest.mark.parametrize("case", DECODE, ids=lambda c: "B{}-S{}".format(*c))
@pytest.mark.parametrize(
    "impl", [f"pygpukit-{x}" for x in LAYOUTS] + NATIVE + ["torch-sdpa", *READ_FLOORS]
)
def test_decode_graph(bench: Any, case: tuple[int, int], impl: str) -> None:
    """The same calls back to back in one CUDA graph over n distinct caches (METHOD.md: "for
    many small launches, capture a graph and time its replays"; rotate inputs that fit in L2).

    This is how the engine runs a decode step (StepGraph): each layer's attention is a graph
    node behind the previous kernel, so the per-launch host cost and the event floor (2.7 us for
    an empty kernel, tuning/diag_decode.py) are out of the number, and every call reads its
    keys from HBM (n caches of over 256 MiB in all, and the L2 flush before each replay).
    The per-call column of the summary is the time of one attention call. The read-floor rows
    time a kernel that only reads the same K and V bytes (one wave, in four shapes), captured the
    same way: how close to the copy rate a call of this size gets with nothing else to do."""
    b, s = case
    nbytes = 2 * b * HKV * s * D * 2
    n = max(1, -(-ROTATE_BYTES // nbytes))
    q = _rand((b, H, 1, D), 2)
    lens = gp.from_numpy(np.full(b, s, np.int32), device="cuda:0")
    out = gp.empty_like(q)
    k1, v1 = _cache(b, s, 3), _cache(b, s, 4)
    caches = [(k1, v1)] + [(k1.copy(), v1.copy()) for _ in range(n - 1)]
    fns = [_decode_fn(impl, q, k, v, lens, out) for k, v in caches]
    for f in fns:  # warm-up: compilation, autotune and library handles stay out of the capture
        f()
    if impl.startswith("torch"):
        torch = pytest.importorskip("torch")
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for f in fns:
                f()
    else:
        gp.synchronize()
        graph = gp.CUDAGraph(device="cuda:0")
        with graph.capture():
            for f in fns:
                f()
    group = f"sdpa_decode graph x{n} B{b} Hq{H} Hkv{HKV} S{s} D{D} bf16"
    bench(graph.replay, group=group, bytes=n * nbytes, calls=n, rounds=20)


# ----- KV-cache write ---------------------------------------------------------------------------

S_MAX = 4096
WRITE = [1, 16, 128]


def _write_inputs(b: int) -> dict[str, Any]:
    kc = gp.empty((b, HKV, S_MAX, D), "bfloat16", device="cuda:0")
    vc = gp.empty((b, HKV, S_MAX, D), "bfloat16", device="cuda:0")
    k_tok = _rand((b, 1, HKV, D), 5)  # a projection's output, token-major
    v = _rand((b, 1, HKV, D), 6).transpose(0, 2, 1, 3)
    pos = np.random.default_rng(7).integers(0, S_MAX, b).astype(np.int32)
    cos, sin = gp.rope_tables(S_MAX, D, device="cuda:0")
    return {
        "kc": kc, "vc": vc, "k_tok": k_tok, "k": k_tok.transpose(0, 2, 1, 3), "v": v,
        "pos": gp.from_numpy(pos, device="cuda:0"),
        "pos2": gp.from_numpy(pos[:, None], device="cuda:0"),  # [B, Sq] for gp.rope
        "cos": cos, "sin": sin, "k_rot": gp.empty((b, 1, HKV, D), "bfloat16", device="cuda:0"),
    }  # fmt: skip


def _torch_write(torch: Any, a: dict[str, Any], rope: bool) -> Any:
    kc, vc = torch.from_dlpack(a["kc"]), torch.from_dlpack(a["vc"])
    k, v = torch.from_dlpack(a["k"]), torch.from_dlpack(a["v"])
    pos = torch.from_dlpack(a["pos"]).long()
    cos, sin = torch.from_dlpack(a["cos"]), torch.from_dlpack(a["sin"])
    rows = torch.arange(pos.shape[0], device=pos.device)
    half = D // 2

    def write() -> None:
        kk = k[:, :, 0]
        if rope:
            c, s = cos[pos][:, None, :], sin[pos][:, None, :]
            x1, x2 = kk[..., :half].float(), kk[..., half:].float()
            kk = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(kk.dtype)
        kc[rows, :, pos] = kk
        vc[rows, :, pos] = v[:, :, 0]

    return write


@pytest.mark.parametrize("b", WRITE, ids=lambda b: f"B{b}")
@pytest.mark.parametrize("impl", ["pygpukit-fused", "pygpukit-rope-then-write", "torch-eager"])
def test_write_rope(bench: Any, b: int, impl: str) -> None:
    """Fused RoPE + write (one launch) against gp.rope then the plain write (two launches)."""
    a = _write_inputs(b)
    if impl == "pygpukit-fused":

        def fn() -> None:
            gp.kv_cache_write(a["kc"], a["vc"], a["k"], a["v"], a["pos"], cos=a["cos"],
                              sin=a["sin"])  # fmt: skip

    elif impl == "pygpukit-rope-then-write":

        def fn() -> None:
            gp.rope(a["k_tok"], a["cos"], a["sin"], a["pos2"], out=a["k_rot"])
            k = a["k_rot"].transpose(0, 2, 1, 3)
            gp.kv_cache_write(a["kc"], a["vc"], k, a["v"], a["pos"])

    else:
        fn = _torch_write(pytest.importorskip("torch"), a, rope=True)
    group = f"kv_cache_write+rope B{b} Hkv{HKV} D{D} bf16"
    bench(fn, group=group, bytes=4 * b * HKV * D * 2, rounds=30)


@pytest.mark.parametrize("b", WRITE, ids=lambda b: f"B{b}")
@pytest.mark.parametrize("impl", ["pygpukit", "torch-eager"])
def test_write(bench: Any, b: int, impl: str) -> None:
    a = _write_inputs(b)
    if impl == "pygpukit":

        def fn() -> None:
            gp.kv_cache_write(a["kc"], a["vc"], a["k"], a["v"], a["pos"])

    else:
        fn = _torch_write(pytest.importorskip("torch"), a, rope=False)
    group = f"kv_cache_write B{b} Hkv{HKV} D{D} bf16"
    bench(fn, group=group, bytes=4 * b * HKV * D * 2, rounds=30)
