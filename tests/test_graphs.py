"""CUDA graph capture and replay (pygpukit.graphs): refusals everywhere, replays on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import _core, graphs

GPU = pytest.mark.gpu


def test_no_cuda_device_no_graph() -> None:
    with pytest.raises(gp.CaptureError, match="CUDA graphs need a CUDA device, got cpu"):
        gp.CUDAGraph(device="cpu")
    with pytest.raises(ValueError, match="host pseudo-stream"):
        _core.Stream(device=-1).begin_capture()
    with pytest.raises(ValueError, match="host pseudo-stream"):
        _core.Stream(device=-1).end_capture()
    assert not graphs.is_capturing("cpu")


def _xy(cuda: str) -> tuple[np.ndarray, np.ndarray, gp.GPUArray, gp.GPUArray]:
    rng = np.random.default_rng(3)
    x, y = (
        rng.standard_normal(4099).astype(np.float32),
        rng.standard_normal(4099).astype(np.float32),
    )
    return x, y, gp.from_numpy(x, device=cuda), gp.from_numpy(y, device=cuda)


@GPU
def test_replay_reads_new_inputs_and_keeps_outputs(cuda: str) -> None:
    x, y, dx, dy = _xy(cuda)
    g = gp.CUDAGraph(cuda)
    assert (dx + dy * 2.0).shape == x.shape  # warm-up: compiles before capture
    gp.routing.reset_stats()
    with g.capture() as same:
        assert same is g and graphs.is_capturing(cuda)
        z = gp.exp(dx + dy * 2.0)  # allocations inside: kept by the graph
    assert g.captured and not graphs.is_capturing(cuda)
    assert g.kept_bytes >= 3 * x.nbytes
    counted = gp.routing.stats()  # recorded, not run: nothing counted yet
    assert all(n == 0 for by in counted.values() for n in by.values()), counted
    for i in range(3):
        x = x + 1.0
        dx[:] = x
        g.replay()
        np.testing.assert_allclose(z.to_numpy(), np.exp(x + y * 2.0), rtol=1e-6)
        ran = gp.routing.stats()
        assert sum(ran["exp"].values()) == i + 1 and sum(ran["mul"].values()) == i + 1, ran
    del z  # the graph still owns the memory: replays stay valid
    g.replay()
    gp.synchronize()
    g.reset()
    assert not g.captured and g.kept_bytes == 0
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()


@GPU
def test_host_copy_inside_capture_is_refused_and_runtime_stays_usable(cuda: str) -> None:
    x, y, dx, dy = _xy(cuda)
    g = gp.CUDAGraph(cuda)
    with pytest.raises(gp.CaptureError, match="capturing a CUDA graph"), g.capture():
        (dx + dy).to_numpy()
    assert not g.captured and not graphs.is_capturing(cuda)
    with pytest.raises(gp.CaptureError, match="capturing a CUDA graph"), g.capture():
        dx[:] = x
    np.testing.assert_allclose((dx + dy).to_numpy(), x + y, rtol=1e-6)  # eager again
    with pytest.raises(ZeroDivisionError), g.capture():
        _ = dx + dy
        _ = 1 / 0  # the body's own error propagates, the capture is dropped
    assert not g.captured and g.kept_bytes == 0
    with g.capture():
        out = dx - dy
    g.replay()
    np.testing.assert_allclose(out.to_numpy(), x - y, rtol=1e-6)


@GPU
def test_capture_misuse_names_the_problem(cuda: str) -> None:
    _, _, dx, dy = _xy(cuda)
    g = gp.CUDAGraph(cuda)
    with g.capture():
        _ = dx * dy
        with pytest.raises(RuntimeError, match="already capturing"), gp.CUDAGraph(cuda).capture():
            pass
    with pytest.raises(RuntimeError, match="already holds a capture"), g.capture():
        pass
    legacy = gp.Stream.external(1, gp.device(cuda).index)
    with pytest.raises(ValueError, match="default stream"), gp.CUDAGraph(cuda).capture(legacy):
        pass
    with pytest.raises(ValueError, match="pygpukit Stream"), gp.CUDAGraph(cuda).capture("s"):
        pass
    assert not graphs.is_capturing(cuda)
    np.testing.assert_allclose((dx * dy).to_numpy(), dx.to_numpy() * dy.to_numpy(), rtol=1e-6)


@GPU
def test_matmul_captured_without_warm_up_replays(cuda: str) -> None:
    """The cuBLASLt workspace a first product on the capturing stream needs comes from memory
    the graph keeps, not from an allocation recorded in the graph."""
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((64, 96)).astype(np.float32) for _ in range(2))
    da, db = gp.from_numpy(a, device=cuda), gp.from_numpy(b.T.copy(), device=cuda)
    g = gp.CUDAGraph(cuda)
    with g.capture():
        c = gp.matmul(da, db)
    g.replay()
    np.testing.assert_allclose(c.to_numpy(), a @ b.T, rtol=1e-4, atol=1e-4)
    da[:] = 2 * a
    g.replay()
    np.testing.assert_allclose(c.to_numpy(), 2 * a @ b.T, rtol=1e-4, atol=1e-4)
    assert np.allclose(gp.matmul(da, db).to_numpy(), 2 * a @ b.T, rtol=1e-4, atol=1e-4)


@GPU
def test_decode_attention_captured_without_warm_up_has_its_own_workspace(cuda: str) -> None:
    """The graph's split workspace (partials and combine counters) is its own, zeroed at
    capture time: no warm-up needed, and eager calls on the capture stream do not share it."""
    rng = np.random.default_rng(6)
    q = gp.from_numpy(rng.standard_normal((1, 8, 1, 64)).astype(np.float32), device=cuda)
    k = gp.from_numpy(rng.standard_normal((1, 2, 4096, 64)).astype(np.float32), device=cuda)
    lens = gp.from_numpy(np.array([4096], np.int32), device=cuda)
    g, s = gp.CUDAGraph(cuda), gp.Stream(device=gp.device(cuda).index)
    with g.capture(s):
        out = gp.sdpa_decode(q, k, k, lens)
    for n in (4096, 1000, 7):
        lens[:] = np.array([n], np.int32)
        g.replay()
        with gp.stream(s):
            want = gp.sdpa_decode(q, k, k, lens).to_numpy()
        np.testing.assert_array_equal(out.to_numpy(), want, err_msg=f"length {n}")


@GPU
def test_arrays_released_during_capture_stay_alive_for_the_graph(cuda: str) -> None:
    x, _, dx, _ = _xy(cuda)
    g = gp.CUDAGraph(cuda)
    h = dx * 1.0  # made before the capture; its last reference goes inside it
    with g.capture():
        h2 = h * 2.0
        del h  # the Rust core holds its free until the graph is gone
        out = h2 + 1.0
    for _ in range(3):  # a free recorded in the graph would run (twice) here
        g.replay()
    np.testing.assert_allclose(out.to_numpy(), x * 2.0 + 1.0, rtol=1e-6)


@GPU
def test_no_stream_switch_or_reset_inside_a_capture(cuda: str) -> None:
    _, _, dx, dy = _xy(cuda)
    g, other = gp.CUDAGraph(cuda), gp.Stream(device=gp.device(cuda).index)
    with pytest.raises(gp.CaptureError, match="switch streams after the capture"), g.capture():
        with gp.stream(other):
            pass
    assert not graphs.is_capturing(cuda)
    with g.capture():
        _ = dx + dy
        with pytest.raises(RuntimeError, match="reset after the capture"):
            gp.CUDAGraph(cuda).reset()
        with pytest.raises(RuntimeError, match="switch streams"):
            gp.set_stream(other)
    g.replay()
    gp.synchronize()
