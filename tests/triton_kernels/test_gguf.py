"""The Triton GGUF kernels: dequantization bit for bit the gguf package's values (every format,
all rows and looked-up rows), and x @ W^T against the float64 product (CUDA-core and
tensor-core paths, strided x, bias, a strided out); float32 x under the interpreter, half types
on the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")
pytest.importorskip("gguf")

from _assert import assert_close
from _gguf_ref import FORMATS, random_blocks, reference
from _tkutil import FLOATS, GPU, up

from pygpukit._gguf_planes import to_planes
from pygpukit.backends.triton_kernels import gguf as tg
from pygpukit.qweight import GGUF_BLOCKS

HALF = [pytest.param("float16", marks=GPU), pytest.param("bfloat16", marks=GPU)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("rows,blocks,seed", [(5, 2, None), (9, 3, 4)])
def test_dequantize_matches_gguf_bits(
    device: str, fmt: str, rows: int, blocks: int, seed: int | None
) -> None:
    """Bit for bit, signed zeros included ((9, 3, 4) holds q4_k and q5_k values -0 = -0 - 0:
    an offset added negated, -0 + (0 - 0), gives +0)."""
    qk = GGUF_BLOCKS[fmt][0]
    raw = random_blocks(fmt, rows, blocks * qk, seed=len(fmt) if seed is None else seed)
    planes = up(to_planes(fmt, raw), device)
    got = tg.dequantize_gguf(planes, None, fmt=fmt, out_dtype=np.float32).to_numpy()
    want = reference(raw, fmt)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


@pytest.mark.parametrize("fmt", ["q8_0", "q4_k", "q6_k"])
def test_dequantize_rows_by_id(device: str, fmt: str) -> None:
    qk = GGUF_BLOCKS[fmt][0]
    raw = random_blocks(fmt, 7, qk, seed=3)
    ids = np.array([[6, 0, 3], [3, 3, 1]], dtype=np.int64)
    planes = up(to_planes(fmt, raw), device)
    got = tg.dequantize_gguf(planes, up(ids, device), fmt=fmt, out_dtype=np.float32)
    assert got.shape == (2, 3, qk)
    assert (got.to_numpy() == reference(raw, fmt)[ids]).all()


def test_dequantize_id_out_of_range_is_nan(device: str) -> None:
    raw = random_blocks("q4_0", 3, 32)
    ids = np.array([1, 3, -1], dtype=np.int32)
    planes = up(to_planes("q4_0", raw), device)
    got = tg.dequantize_gguf(planes, up(ids, device), fmt="q4_0", out_dtype=np.float32)
    g = got.to_numpy()
    assert (g[0] == reference(raw, "q4_0")[1]).all() and np.isnan(g[1:]).all()


def _product(x: np.ndarray, raw: np.ndarray, fmt: str, bias: np.ndarray | None) -> np.ndarray:
    y = x.astype(np.float64) @ reference(raw, fmt).astype(np.float64).T
    return y if bias is None else y + bias.astype(np.float64)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_linear_few_rows(device: str, fmt: str, dtype: str) -> None:
    qk = GGUF_BLOCKS[fmt][0]
    k = 2 * qk if qk == 256 else 3 * qk
    raw = random_blocks(fmt, 19, k, seed=5)
    x = np.random.default_rng(1).standard_normal((1, 3, k)).astype(np.float32)
    xd = up(x, device).astype(dtype)
    y = tg.linear_gguf(xd, up(to_planes(fmt, raw), device), None, fmt=fmt)
    assert y.shape == (1, 3, 19) and y.dtype.name == dtype
    assert_close(y, _product(xd.astype("float32").to_numpy(), raw, fmt, None), dtype)


@pytest.mark.parametrize("fmt", ["q4_1", "q5_k", "q6_k"])
@pytest.mark.parametrize("dtype", [*HALF, "float32"])
def test_linear_many_rows_strided_bias_out(device: str, fmt: str, dtype: str) -> None:
    """M = 37 rows (the tensor-core path for half x), x a strided view, bias, and out a column
    slice of a wider array."""
    qk = GGUF_BLOCKS[fmt][0]
    k, n = 2 * qk, 24
    raw = random_blocks(fmt, n, k, seed=7)
    rng = np.random.default_rng(2)
    wide = rng.standard_normal((37, 2 * k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    xd = up(wide, device).astype(dtype)[:, ::2]
    bd = up(bias, device).astype(dtype)
    outer = up(np.zeros((37, n + 5), np.float32), device).astype(dtype)
    out = outer[:, 3 : 3 + n]
    y = tg.linear_gguf(xd, up(to_planes(fmt, raw), device), bd, fmt=fmt, out=out)
    assert y is out
    want = _product(xd.astype("float32").to_numpy(), raw, fmt, bd.astype("float32").to_numpy())
    assert_close(out, want, dtype)
    rest = outer.astype("float32").to_numpy()
    assert (rest[:, :3] == 0).all() and (rest[:, 3 + n :] == 0).all()


@pytest.mark.parametrize("fmt,k", [("q4_k", 2304), ("q4_0", 67 * 32), ("q2_k", 17 * 256)])
@pytest.mark.parametrize("m", [1, 3])
def test_linear_strided_bias_and_partial_k_tile(device: str, fmt: str, k: int, m: int) -> None:
    """bias a strided view (its stride is a kernel argument), and K of 67-72 groups: the K loop
    runs a full tile of 64 groups and a partial one; 3 rows: a program of two rows and one with
    its second row masked off."""
    n = 7
    raw = random_blocks(fmt, n, k, seed=9)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((m, k)).astype(np.float32)
    wide_b = rng.standard_normal(2 * n).astype(np.float32)
    y = tg.linear_gguf(up(x, device), up(to_planes(fmt, raw), device), up(wide_b, device)[::2],
                       fmt=fmt)  # fmt: skip
    assert_close(y, _product(x, raw, fmt, wide_b[::2]), "float32")


def test_linear_rows_past_the_grid_launch_in_chunks(device: str, monkeypatch: Any) -> None:
    """More rows than the grid's second axis holds programs (lowered to 2 here: 4 rows a
    launch) run as several launches over row slices of x and out."""
    monkeypatch.setattr(tg, "MAX_GRID_Y", 2)
    fmt, k, n = "q8_0", 64, 5
    raw = random_blocks(fmt, n, k, seed=6)
    x = np.random.default_rng(8).standard_normal((11, k)).astype(np.float32)
    y = tg.linear_gguf(up(x, device), up(to_planes(fmt, raw), device), None, fmt=fmt)
    assert_close(y, _product(x, raw, fmt, None), "float32")


@pytest.mark.parametrize("fmt", ["q6_k", "q2_k"])
def test_deterministic_rows_do_not_depend_on_the_batch(device: str, fmt: str) -> None:
    """Under the deterministic mode the kernel's tile does not follow the row count, so a row's
    bits are the same alone and inside 37 rows (float32 here; half types on the GPU use the
    tensor-core tile)."""
    import pygpukit as gp

    k = 512
    planes = up(to_planes(fmt, random_blocks(fmt, 11, k, seed=2)), device)
    x = np.random.default_rng(3).standard_normal((37, k)).astype(np.float32)
    with gp.deterministic():
        for dt in ["float32", *(["bfloat16", "float16"] if device != "cpu" else [])]:
            xd = up(x, device).astype(dt)
            one = tg.linear_gguf(xd[5:6], planes, None, fmt=fmt).astype("float32").to_numpy()
            many = tg.linear_gguf(xd, planes, None, fmt=fmt).astype("float32").to_numpy()
            assert one.tobytes() == many[5:6].tobytes(), dt


@pytest.mark.parametrize(
    ("fmt", "k"),
    [("q8_0", 768), ("q8_0", 160), ("q4_k", 768), ("q6_k", 768), ("q3_k", 768), ("q2_k", 768)],
)
@pytest.mark.parametrize("dtype", ["float32", *HALF])
@pytest.mark.parametrize("t", [3, 4, 9])
def test_grouped_experts(device: str, fmt: str, k: int, dtype: str, t: int) -> None:
    """The grouped expert product reading GGUF planes (gated with silu, and with the routing
    weight) against the float64 product of the same experts' values; one out-of-range id.
    3 tokens (6 routed rows, fewer than two an expert) take the row-streaming kernel; 4 (8 rows:
    two an expert) the tensor-core one for half x and the row kernel for float32 x (streams_rows);
    9 (18 rows) the tensor-core one. K 768 is 24 groups (q2_k / q3_k: 12), whole K tiles of the
    tensor-core kernel (4 groups), one and a half of the row kernel's (16; q2_k / q3_k: three
    quarters of one); K 160 (5 groups) ends in a partial tile in both."""
    from _moe_ref import moe_linear as ref_moe

    from pygpukit.backends.cpu import moe as cm

    e, n, top = 4, 24, 2
    assert tg.streams_rows(t * top, e, dtype != "float32") == (
        t == 3 or (t == 4 and dtype == "float32")
    )
    raw = random_blocks(fmt, e * n, k, seed=11, scale=0.002)
    raw_up = random_blocks(fmt, e * n, k, seed=12, scale=0.002)
    w = reference(raw, fmt).reshape(e, n, k)
    wu = reference(raw_up, fmt).reshape(e, n, k)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((t, k)).astype(np.float32)
    experts = rng.integers(0, e, (t, top)).astype(np.int32)
    experts[t // 2, 1] = e + 2
    scale = rng.uniform(0.1, 1.0, t * top).astype(np.float32)
    rows, be = cm.moe_align(experts, num_experts=e, block_m=16)
    xd = up(x, device).astype(dtype)
    args = (up(rows, device), up(be, device))
    p, pu = up(to_planes(fmt, raw), device), up(to_planes(fmt, raw_up), device)
    y = tg.moe_linear_gguf(xd, p, *args, pu, None, top_k=top, block_m=16, fmt=fmt, experts=e)
    x64 = xd.astype("float32").to_numpy()
    assert_close(y, ref_moe(x64, w, experts, top, wu), dtype)
    y2 = tg.moe_linear_gguf(xd, p, *args, None, up(scale, device), top_k=top, block_m=16,
                            fmt=fmt, experts=e)  # fmt: skip
    assert_close(y2, ref_moe(x64, w, experts, top, None, scale), dtype)


def test_grouped_experts_widest_block(device: str) -> None:
    """block_m 256 (direct calls only: the engine stops at 128) takes experts_config's narrowest
    tile; q8_0 with K 160 (a partial K tile), against the float64 product."""
    from _moe_ref import moe_linear as ref_moe

    from pygpukit.backends.cpu import moe as cm

    e, n, k, t, top, fmt = 3, 40, 160, 20, 2, "q8_0"
    assert tg.experts_config(256, fmt) == (32, 2, 4)
    raw = random_blocks(fmt, e * n, k, seed=13, scale=0.002)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((t, k)).astype(np.float32)
    experts = rng.integers(0, e, (t, top)).astype(np.int32)
    rows, be = cm.moe_align(experts, num_experts=e, block_m=256)
    xd = up(x, device)
    p = up(to_planes(fmt, raw), device)
    y = tg.moe_linear_gguf(xd, p, up(rows, device), up(be, device), None, None, top_k=top,
                           block_m=256, fmt=fmt, experts=e)  # fmt: skip
    w = reference(raw, fmt).reshape(e, n, k)
    assert_close(y, ref_moe(x, w, experts, top), "float32")
