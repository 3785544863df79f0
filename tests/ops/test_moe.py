"""The MoE ops through the public API (NumPy backend in CI; the GPU routes with
PYGPUKIT_TEST_DEVICE=cuda:0) against the float64 references of tests/_moe_ref.py, and their
argument checks."""

from __future__ import annotations

import numpy as np
import pytest
from _assert import assert_close
from _moe_ref import check_align, moe_linear, router

import pygpukit as gp
from ops._helpers import poisoned, up
from pygpukit.ops.moe import moe_align_sizes


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize(("t", "e", "k"), [(1, 8, 2), (37, 6, 2), (64, 128, 8), (5, 3, 3)])
def test_router_matches_the_reference(t: int, e: int, k: int, normalize: bool) -> None:
    logits = np.random.default_rng(t * e + k).standard_normal((t, e)).astype(np.float32) * 3
    ids, w = gp.moe_router(up(logits), k, normalize=normalize)
    want_ids, want_w = router(logits, k, normalize)
    assert ids.dtype is gp.int32 and w.dtype is gp.float32 and ids.shape == (t, k)
    assert (ids.to_numpy() == want_ids).all()
    assert_close(w, want_w, "float32")


def test_router_ties_nan_and_empty_rows() -> None:
    """Equal probabilities go to the lower id first; NaN ranks last; a row without a finite
    logit still names k distinct valid experts."""
    logits = np.array(
        [[1.0, 2.0, 2.0, 0.0], [np.nan, 0.0, 1.0, 2.0], [-np.inf] * 4, [0.0] * 4], np.float32
    )
    ids = gp.moe_router(up(logits), 2)[0].to_numpy()
    assert ids[0].tolist() == [1, 2] and ids[3].tolist() == [0, 1]
    assert ((ids >= 0) & (ids < 4)).all() and all(len(set(r)) == 2 for r in ids.tolist())


@pytest.mark.parametrize(
    ("t", "k", "e", "bm"), [(1, 2, 8, 16), (37, 2, 6, 16), (300, 8, 128, 32), (2000, 2, 8, 64)]
)
def test_align_layout(t: int, k: int, e: int, bm: int) -> None:
    experts = np.random.default_rng(t).integers(0, e, (t, k)).astype(np.int32)
    experts[0, 0] = e + 3  # out of range: the zero group
    if t > 1:
        experts[1, 0] = -1
    rows, block_expert = gp.moe_align(up(experts), e, bm)
    assert (rows.shape[0], block_expert.shape[0]) == moe_align_sizes(t * k, e, bm)
    check_align(rows.to_numpy(), block_expert.to_numpy(), experts, e, bm)


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize(("t", "k", "e", "bm"), [(1, 2, 4, 16), (33, 3, 5, 16), (70, 2, 3, 32)])
def test_linear_matches_the_reference(t: int, k: int, e: int, bm: int, gated: bool) -> None:
    rng = np.random.default_rng(t + k)
    h, n = 24, 40
    x = rng.standard_normal((t, h)).astype(np.float32)
    w = rng.standard_normal((e, n, h)).astype(np.float32) * 0.3
    wu = rng.standard_normal((e, n, h)).astype(np.float32) * 0.3
    scale = rng.random(t * k).astype(np.float32)
    experts = rng.integers(0, e, (t, k)).astype(np.int32)
    experts[0, -1] = e  # an out-of-range id: a zero row
    rows, be = gp.moe_align(up(experts), e, bm)
    kw = {"w_up": up(wu)} if gated else {}
    out = poisoned((t * k, n), "float32")
    y = gp.moe_linear(up(x), up(w), rows, be, k, row_scale=up(scale), out=out, **kw)
    assert y is out
    want = moe_linear(x, w, experts, k, wu if gated else None, scale)
    assert_close(y, want, "float32")
    # top_k 1: one x row per routed row (the down projection's form), x a strided view
    x2 = rng.standard_normal((t * k, 2 * h)).astype(np.float32)
    y2 = gp.moe_linear(up(x2)[:, ::2], up(w), rows, be, 1)
    assert_close(y2, moe_linear(x2[:, ::2], w, experts, 1), "float32")


def test_moe_block_equals_per_token_experts() -> None:
    """The engine's MoE block (pygpukit.models.moe) against each token's experts in float64."""
    from pygpukit.models import moe
    from pygpukit.models.config import QWEN3_MOE_SPEC, ModelConfig
    from pygpukit.models.weights import LayerWeights

    rng = np.random.default_rng(7)
    t, h, i, e, k = 9, 16, 12, 5, 2
    cfg = ModelConfig(QWEN3_MOE_SPEC, 10, h, 1, 2, 2, 8, 32, 64, 1e-6, num_experts=e,
                      num_experts_per_tok=k, moe_intermediate_size=i)  # fmt: skip
    wr = rng.standard_normal((e, h))
    wg, wu, wd = (rng.standard_normal(s) for s in ((e, i, h), (e, i, h), (e, h, i)))
    x = rng.standard_normal((1, t, h))
    f32 = [a.astype(np.float32) for a in (wr, wg, wu, wd, x)]
    one = up(f32[0][:1])
    lw = LayerWeights(one, one, one, one, w_router=up(f32[0]), w_experts_gate=up(f32[1]),
                      w_experts_up=up(f32[2]), w_experts_down=up(f32[3]))  # fmt: skip
    got = moe.moe_forward(up(f32[4]), lw, cfg)
    ids, wts = router(f32[4][0] @ f32[0].T, k, True)
    want = np.zeros((t, h))
    for tok in range(t):
        for j in range(k):
            ex = ids[tok, j]
            g, u = wg[ex] @ x[0, tok], wu[ex] @ x[0, tok]
            want[tok] += wts[tok, j] * (wd[ex] @ (g / (1 + np.exp(-g)) * u))
    assert_close(got.reshape(t, h), want, "float32", rtol=2e-5)


def _bad(match: str, fn: object, *args: object, **kw: object) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        fn(*args, **kw)  # type: ignore[operator]


def test_bad_inputs_are_named() -> None:
    logits = up(np.zeros((3, 4), np.float32))
    _bad("logits must be", gp.moe_router, up(np.zeros(4, np.float32)), 1)
    _bad("top_k must be an int in", gp.moe_router, logits, 5)
    _bad("top_k must be an int in", gp.moe_router, logits, 0)
    _bad("top_k must be an int in", gp.moe_router, logits, 2.0)
    assert gp.moe_router(logits, np.int64(2))[0].shape == (3, 2)  # NumPy integers are ints
    _bad("normalize must be", gp.moe_router, logits, 1, normalize=1)
    _bad("logits must be a float16", gp.moe_router, up(np.zeros((3, 4), np.int32)), 1)
    ids = up(np.zeros((3, 2), np.int32))
    _bad("experts must be an int32", gp.moe_align, up(np.zeros((3, 2), np.int64)), 4)
    _bad("num_experts must be", gp.moe_align, ids, 0)
    _bad("block_m must be a power of two", gp.moe_align, ids, 4, 24)
    _bad("block_m must be an int in", gp.moe_align, ids, 4, 8)
    rows, be = gp.moe_align(ids, 4)
    x, w = up(np.zeros((3, 8), np.float32)), up(np.zeros((4, 6, 8), np.float32))
    _bad("x has K=8", gp.moe_linear, x, up(np.zeros((4, 6, 5), np.float32)), rows, be, 2)
    _bad("w must have x's dtype", gp.moe_linear, x, up(np.zeros((4, 6, 8))), rows, be, 2)
    bad_up, bad_scale = up(np.zeros((4, 6, 7), np.float32)), up(np.zeros(5, np.float32))
    _bad("w_up must match w", gp.moe_linear, x, w, rows, be, 2, w_up=bad_up)
    _bad("row_scale must be", gp.moe_linear, x, w, rows, be, 2, row_scale=bad_scale)
    _bad("rows \\(", gp.moe_linear, x, w, rows[:-1], be, 2)
    huge = up(np.zeros(512, np.int32))  # one block of 512 slots: past the largest row tile
    _bad("power of two in \\[16, 256\\]", gp.moe_linear, x, w, huge, up(np.zeros(1, np.int32)), 2)
    _bad("top_k must be", gp.moe_linear, x, w, rows, be, 9)
    _bad("out must be contiguous", gp.moe_linear, x, w, rows, be, 2,
         out=up(np.zeros((6, 12), np.float32))[:, ::2])  # fmt: skip
    # the runtime stays usable after the refusals
    assert gp.moe_linear(x, w, rows, be, 2).shape == (6, 6)


def test_config_refuses_more_experts_than_the_router_serves() -> None:
    from pygpukit.models.config import config_from_dict
    from pygpukit.models.errors import ModelLoadError

    cfg = {"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4,
           "num_hidden_layers": 1, "intermediate_size": 32, "vocab_size": 10,
           "max_position_embeddings": 32, "num_local_experts": 2048,
           "num_experts_per_tok": 2}  # fmt: skip
    with pytest.raises(ModelLoadError, match=r"num_experts.*at most 1024"):
        config_from_dict(cfg)
