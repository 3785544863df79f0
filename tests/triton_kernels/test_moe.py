"""The Triton MoE kernels against the float64 references (tests/_moe_ref.py) and the NumPy twin:
router ids exactly, the grouping slot for slot (both the one-program and the chunked paths), the
grouped GEMM within the dtype's bound; float32 under the interpreter, half types on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from _assert import assert_close
from _moe_ref import check_align, moe_linear, router
from _tkutil import FLOATS, GPU, poisoned, up

from pygpukit.backends.cpu import moe as cm
from pygpukit.backends.triton_kernels import moe as tm


@pytest.mark.parametrize(("t", "e", "k"), [(1, 8, 2), (70, 6, 3), (9, 128, 8), (3, 300, 4)])
@pytest.mark.parametrize("normalize", [True, False])
def test_router(device: str, t: int, e: int, k: int, normalize: bool) -> None:
    logits = np.random.default_rng(t + e).standard_normal((t, e)).astype(np.float32) * 2
    logits[0, :2] = 5.0  # a tie at the top: the lower id first
    ids, w = tm.moe_router(up(logits, device), top_k=k, normalize=normalize)
    want_ids, want_w = router(logits, k, normalize)
    assert (ids.to_numpy() == want_ids).all()
    assert_close(w, want_w, "float32")


def test_router_strided_logits_and_nan(device: str) -> None:
    wide = np.random.default_rng(1).standard_normal((6, 16)).astype(np.float32)
    wide[2, ::2] = np.nan
    ids, _ = tm.moe_router(up(wide, device)[:, ::2], top_k=3, normalize=True)
    want, _ = cm.moe_router(wide[:, ::2], top_k=3, normalize=True)
    assert (ids.to_numpy() == want).all()


@pytest.mark.parametrize(
    ("t", "k", "e", "bm"),
    [(1, 2, 8, 16), (40, 2, 6, 16), (600, 2, 8, 64), (300, 8, 128, 32), (97, 3, 1000, 16)],
)
def test_align(device: str, t: int, k: int, e: int, bm: int) -> None:
    """t*k beyond a chunk takes the three-kernel path (e=128: 32-row chunks, 75 of them)."""
    experts = np.random.default_rng(t * k).integers(-1, e + 2, (t, k)).astype(np.int32)
    rows, be = tm.moe_align(up(experts, device), num_experts=e, block_m=bm)
    want_rows, want_be = cm.moe_align(experts, num_experts=e, block_m=bm)
    assert (rows.to_numpy() == want_rows).all() and (be.to_numpy() == want_be).all()
    check_align(rows.to_numpy(), be.to_numpy(), experts, e, bm)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("t", "k", "e", "bm"), [(1, 2, 4, 16), (45, 3, 5, 16), (200, 2, 3, 64), (150, 2, 2, 128)]
)
def test_grouped_linear(device: str, dtype: str, t: int, k: int, e: int, bm: int) -> None:
    import ml_dtypes

    np_dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    rng = np.random.default_rng(t)
    h, n = 72, 40  # K with a tail past one BLOCK_K, N with a tail past one BLOCK_N
    x = rng.standard_normal((t, h)).astype(np_dt)
    w = (rng.standard_normal((e, n, h)) * 0.2).astype(np_dt)
    wu = (rng.standard_normal((e, n, h)) * 0.2).astype(np_dt)
    scale = rng.random(t * k).astype(np.float32)
    experts = rng.integers(0, e + 1, (t, k)).astype(np.int32)  # id e: zero rows
    rows, be = cm.moe_align(experts, num_experts=e, block_m=bm)
    dev_rows, dev_be = up(rows, device), up(be, device)
    out = poisoned((t * k, n), dtype, device)
    y = tm.moe_linear(
        up(x, device), up(w, device), dev_rows, dev_be, up(wu, device), up(scale, device),
        top_k=k, block_m=bm, out=out,
    )  # fmt: skip
    assert y is out
    assert_close(y, moe_linear(x, w, experts, k, wu, scale), dtype)
    plain = tm.moe_linear(
        up(x, device), up(w, device), dev_rows, dev_be, None, None, top_k=k, block_m=bm
    )
    assert_close(plain, moe_linear(x, w, experts, k), dtype)


@GPU
def test_rows_are_batch_invariant_at_a_fixed_block_m(device: str) -> None:
    """With block_m fixed (16), a token's routed rows have the same bits alone and in a batch."""
    import ml_dtypes

    rng = np.random.default_rng(5)
    e, h, n, k = 8, 256, 128, 2
    x = rng.standard_normal((64, h)).astype(ml_dtypes.bfloat16)
    w = (rng.standard_normal((e, n, h)) * 0.1).astype(ml_dtypes.bfloat16)
    experts = rng.integers(0, e, (64, k)).astype(np.int32)

    def run(m: int) -> np.ndarray:
        rows, be = tm.moe_align(up(experts[:m], device), num_experts=e, block_m=16)
        return tm.moe_linear(
            up(x[:m], device), up(w, device), rows, be, None, None, top_k=k, block_m=16
        ).to_numpy()

    full = run(64)
    assert (run(1) == full[:k]).all() and (run(7) == full[: 7 * k]).all()


def test_routed_calls_reach_the_kernels(device: str) -> None:
    """Through the public ops with the triton route forced (the dispatcher's calling
    convention, out= included), the results equal the NumPy twin's."""
    import pygpukit as gp

    rng = np.random.default_rng(2)
    logits = rng.standard_normal((5, 8)).astype(np.float32)
    x = rng.standard_normal((5, 32)).astype(np.float32)
    w = rng.standard_normal((8, 16, 32)).astype(np.float32)
    with gp.route("moe_router:triton,moe_align:triton,moe_linear:triton"):
        ids, _ = gp.moe_router(up(logits, device), 2)
        rows, be = gp.moe_align(ids, 8)
        y = gp.moe_linear(up(x, device), up(w, device), rows, be, 2)
    want_ids, _ = cm.moe_router(logits, top_k=2, normalize=True)
    assert (ids.to_numpy() == want_ids).all()
    assert_close(y, moe_linear(x, w, want_ids, 2), "float32")


@GPU
def test_moe_layer_replays_from_a_cuda_graph(device: str) -> None:
    """Router, grouping (the chunked three-kernel path: 128 experts, 40 tokens x 8) and both
    grouped products captured in one CUDA graph; replays with new router logits and inputs
    equal the eager calls bit for bit."""
    import ml_dtypes

    import pygpukit as gp

    rng = np.random.default_rng(9)
    t, e, k, h, i = 40, 128, 8, 256, 64
    bf = ml_dtypes.bfloat16
    wg, wu = (up((rng.standard_normal((e, i, h)) * 0.1).astype(bf), device) for _ in range(2))
    wd = up((rng.standard_normal((e, h, i)) * 0.1).astype(bf), device)
    x = up(rng.standard_normal((t, h)).astype(bf), device)
    logits = up(rng.standard_normal((t, e)).astype(np.float32), device)

    def layer() -> gp.GPUArray:
        ids, wts = gp.moe_router(logits, k)
        rows, be = gp.moe_align(ids, e, 16)
        a = gp.moe_linear(x, wg, rows, be, k, w_up=wu)
        y = gp.moe_linear(a, wd, rows, be, 1, row_scale=wts.reshape(t * k))
        return gp.sum(y.reshape(t, k, h), axis=1)

    layer()  # compiles before the capture
    g = gp.CUDAGraph(device)
    with g.capture():
        out = layer()
    for _ in range(2):
        logits[:] = up(rng.standard_normal((t, e)).astype(np.float32), device)
        x[:] = up(rng.standard_normal((t, h)).astype(bf), device)
        g.replay()
        assert (out.to_numpy().view(np.uint16) == layer().to_numpy().view(np.uint16)).all()
