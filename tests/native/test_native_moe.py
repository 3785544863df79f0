"""Native twin of moe_linear (native/src/moe: CUTLASS's Hopper grouped GEMM) on the GPU: the
public op with the route forced to native, against the float64 reference of tests/_moe_ref.py,
gated and plain, with routing weights, out-of-range expert ids, both tile widths (block_m 16
and 128), strided x, a poisoned out=, experts no token chose, zero tokens; run-to-run bits,
graph replay equal to eager, agreement with the Triton twin; and the routing of calls it does
not serve."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from _data import np_dtype, seed
from _moe_ref import moe_linear as ref_linear

import pygpukit as gp
from pygpukit import ops
from pygpukit.errors import RouteError

pytestmark = pytest.mark.gpu
DEV = "cuda:0"


def up(x: np.ndarray) -> gp.GPUArray:
    return gp.from_numpy(np.ascontiguousarray(x), device=DEV)


def _problem(
    t: int, k: int, e: int, h: int, n: int, dtype: str, tag: str, hit: int | None = None
) -> tuple[np.ndarray, ...]:
    """x [t, h], w and w_up [e, n, h], routing scales [t k], expert ids [t, k] in [0, e] (e:
    the out-of-range group, zeros) or, with ``hit``, drawn from the first ``hit`` experts only
    (the others get no rows: groups of M = 0)."""
    rng = np.random.default_rng(seed("nmoe", tag, t, k, e))
    dt = np_dtype(dtype)
    x = rng.standard_normal((t, h)).astype(dt)
    w = (rng.standard_normal((e, n, h)) / np.sqrt(h)).astype(dt)
    wu = (rng.standard_normal((e, n, h)) / np.sqrt(h)).astype(dt)
    scale = rng.random(t * k).astype(np.float32)
    top = e + 1 if hit is None else hit
    experts = rng.integers(0, top, (t, k)).astype(np.int32)
    return x, w, wu, scale, experts


@pytest.fixture(autouse=True)
def _native() -> Any:
    with gp.route("moe_linear:native"):
        yield


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(
    ("t", "k", "e", "bm", "h", "n"),
    [(1, 2, 8, 16, 64, 40), (45, 3, 5, 16, 136, 200), (300, 2, 4, 128, 264, 520),
     (7, 8, 128, 16, 128, 96), (600, 2, 3, 64, 512, 264)],
)  # fmt: skip
def test_matches_the_reference(dtype: str, t: int, k: int, e: int, bm: int, h: int, n: int) -> None:
    """Gated with routing weights, and plain; K and N not multiples of the tiles (64, 128/256)."""
    x, w, wu, scale, experts = _problem(t, k, e, h, n, dtype, "ref")
    rows, be = ops.moe_align(up(experts), e, bm)
    gp.routing.reset_stats()
    out = gp.full((t * k, n), float("nan"), dtype=getattr(gp, dtype), device=DEV)
    y = ops.moe_linear(up(x), up(w), rows, be, k, w_up=up(wu), row_scale=up(scale), out=out)
    assert y is out
    assert_close(y, ref_linear(x, w, experts, k, wu, scale), dtype, name="gated")
    plain = ops.moe_linear(up(x), up(w), rows, be, k)
    assert_close(plain, ref_linear(x, w, experts, k), dtype, name="plain")
    assert gp.routing.stats()["moe_linear"] == {"native": 2}


def test_idle_experts_strided_x_and_the_down_projection() -> None:
    """Only 3 of 16 experts get rows (13 groups of M = 0); x a column-strided view; then the
    down projection form (top_k 1 over the routed rows, with their weights), as the engine calls
    it."""
    t, k, e, h, n = 33, 2, 16, 96, 48
    x, w, wu, scale, experts = _problem(t, k, e, 2 * h, n, "bfloat16", "idle", hit=3)
    xs = up(x)[:, ::2]  # [t, h] with a row stride of 2h and a column stride of 2
    w, wu = w[:, :, ::2], wu[:, :, ::2]
    rows, be = ops.moe_align(up(experts), e, 16)
    a = ops.moe_linear(xs, up(w), rows, be, k, w_up=up(wu))
    want_a = ref_linear(x[:, ::2], w, experts, k, wu)
    assert_close(a, want_a, "bfloat16", name="gate/up")
    rng = np.random.default_rng(seed("nmoe-down"))
    wd = (rng.standard_normal((e, h, n)) / np.sqrt(n)).astype(np_dtype("bfloat16"))
    y = ops.moe_linear(a, up(wd), rows, be, 1, row_scale=up(scale))
    flat = experts.reshape(-1, 1)
    assert_close(y, ref_linear(a.to_numpy(), wd, flat, 1, None, scale), "bfloat16", name="down")


def test_agrees_with_triton_and_zero_tokens() -> None:
    x, w, wu, scale, experts = _problem(200, 2, 6, 128, 72, "bfloat16", "twin")
    rows, be = ops.moe_align(up(experts), 6, 64)
    args = (up(x), up(w), rows, be, 2)
    nat = ops.moe_linear(*args, w_up=up(wu), row_scale=up(scale)).to_numpy().astype(np.float64)
    with gp.route("moe_linear:triton"):
        tri = ops.moe_linear(*args, w_up=up(wu), row_scale=up(scale)).to_numpy()
    # Both round the same float32 sums once; only the summation order differs.
    assert_close(nat, tri.astype(np.float64), "bfloat16")
    empty_x = gp.empty((0, 128), gp.bfloat16, device=DEV)
    r0, b0 = ops.moe_align(up(np.zeros((1, 2), np.int32)), 6, 16)
    assert ops.moe_linear(empty_x, up(w), r0, b0, 2).shape == (0, 72)
    # K = 0: empty sums, zeros in every routed row (as the twins give).
    x0 = gp.empty((200, 0), gp.bfloat16, device=DEV)
    w0 = gp.empty((6, 72, 0), gp.bfloat16, device=DEV)
    z = ops.moe_linear(x0, w0, rows, be, 2, w_up=w0)
    assert z.shape == (400, 72) and not z.to_numpy().astype(np.float64).any()


def test_same_bits_and_graph_replay() -> None:
    """Run to run the same bits; a captured call replays to the eager call's bits (the groups'
    sizes are built on the device: nothing is read on the host)."""
    x, w, wu, scale, experts = _problem(64, 2, 8, 256, 128, "bfloat16", "det")
    dx, dw, dwu, ds, dex = up(x), up(w), up(wu), up(scale), up(experts)

    def call() -> gp.GPUArray:
        rows, be = ops.moe_align(dex, 8, 16)
        return ops.moe_linear(dx, dw, rows, be, 2, w_up=dwu, row_scale=ds)

    a, b = call().to_numpy(), call().to_numpy()
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16))
    g = gp.CUDAGraph(DEV)
    with g.capture():
        res = call()
    g.replay()
    gp.synchronize()
    assert np.array_equal(res.to_numpy().view(np.uint16), a.view(np.uint16))
    # New routing in the same buffers, replayed: the graph follows the device's routing.
    dex[...] = np.roll(experts, 1, axis=0)
    g.replay()
    gp.synchronize()
    want = ref_linear(x, w, np.roll(experts, 1, axis=0), 2, wu, scale)
    assert_close(res, want, "bfloat16", name="replay with new routing")


def test_refusals_name_the_reason() -> None:
    """K or N off the 16-byte rows, and float32 x, are refused by the forced route with the
    reason; the default route serves them with Triton."""
    rng = np.random.default_rng(seed("nmoe-refuse"))
    experts = rng.integers(0, 4, (5, 2)).astype(np.int32)
    rows, be = ops.moe_align(up(experts), 4, 16)
    for h, n, dt in ((60, 32, "bfloat16"), (64, 36, "bfloat16"), (64, 32, "float32")):
        npdt = np_dtype(dt)
        x = up(rng.standard_normal((5, h)).astype(npdt))
        w = up(rng.standard_normal((4, n, h)).astype(npdt))
        with pytest.raises(RouteError, match=r"multiple of 8|input 0 has dtype float32"):
            ops.moe_linear(x, w, rows, be, 2)
        with gp.route("moe_linear:auto"):
            y = ops.moe_linear(x, w, rows, be, 2)
        assert y.shape == (10, n)
