"""DLPack and CUDA Array Interface: NumPy on any machine; torch and CuPy on the GPU machine."""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp


def test_dlpack_with_numpy_is_zero_copy_both_ways() -> None:
    a = gp.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4), device="cpu")
    v = a[:, 1::2]
    n = np.from_dlpack(v)
    assert n.shape == (3, 2) and n.strides == v.strides
    np.testing.assert_array_equal(n, np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1::2])
    n[0, 0] = -1.0  # writes through to the GPUArray's memory
    assert a.to_numpy()[0, 1] == -1.0
    h = np.arange(6, dtype=np.int32)
    b = gp.from_dlpack(h)
    assert b.device.type == "cpu" and b.dtype is gp.int32
    h[2] = 42
    assert b.to_numpy()[2] == 42
    del h
    assert b.to_numpy().tolist() == [0, 1, 42, 3, 4, 5]  # the producer is kept alive


def test_dlpack_export_rejects_bad_stream_and_device() -> None:
    a = gp.zeros((2,), device="cpu")
    assert a.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))


def test_cuda_array_interface_absent_on_cpu() -> None:
    assert not hasattr(gp.zeros((2,), device="cpu"), "__cuda_array_interface__")


@pytest.mark.gpu
def test_torch_zero_copy_both_directions_on_a_side_stream(cuda: str) -> None:
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
        a = gp.from_dlpack(t)  # torch orders its pending work before our stream
        assert a.data_ptr() == t.data_ptr() and a.shape == tuple(t.shape)
        assert float(a[-1]) == float((1 << 20) - 1)
        t.mul_(2)  # write through torch, read through pygpukit
        side.synchronize()
        assert float(a[7]) == 14.0
        g = gp.full((1 << 22,), 3.0, dtype="bfloat16", device=cuda)  # queued on our stream
        tg = torch.from_dlpack(g)  # our stream is made to wait for, not synced
        assert tg.dtype == torch.bfloat16 and tg.data_ptr() == g.data_ptr()
        assert float(tg.float().sum()) == 3.0 * (1 << 22)
        tg[0] = 5.0  # write through torch
        side.synchronize()
    assert float(g[0]) == 5.0
    v = gp.from_numpy(np.arange(20, dtype=np.float32).reshape(4, 5), device=cuda)[:, 1::2]
    tv = torch.from_dlpack(v)
    assert tv.stride() == v.element_strides
    np.testing.assert_array_equal(tv.cpu().numpy(), v.to_numpy())
    f8 = torch.from_dlpack(gp.ones((4,), "float8_e4m3fn", device=cuda))
    assert f8.dtype == torch.float8_e4m3fn and f8.float().sum().item() == 4.0


@pytest.mark.gpu
def test_cupy_zero_copy_both_directions(cuda: str) -> None:
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        c = cp.arange(1000, dtype=cp.float32)
        a = gp.asarray(c)
        assert a.data_ptr() == c.data.ptr
        c *= 3
        s.synchronize()
        assert float(a[10]) == 30.0
        g = gp.full((257,), 2, dtype="int32", device=cuda)
        cg = cp.asarray(g)  # __cuda_array_interface__ with our stream
        assert cg.data.ptr == g.data_ptr() and int(cg.sum()) == 514
        cd = cp.from_dlpack(g)
        cd[0] = 9
        s.synchronize()
    assert int(g[0]) == 9
    with pytest.raises(AttributeError, match="DLPack"):
        _ = gp.zeros((2,), "bfloat16", device=cuda).__cuda_array_interface__


@pytest.mark.parametrize("np_dt", [np.complex64, np.complex128])
def test_dlpack_carries_complex_both_ways(np_dt: type) -> None:
    host = (np.arange(12) - 1j * np.arange(12)).astype(np_dt).reshape(3, 4)
    a = gp.from_numpy(host, device="cpu")
    n = np.from_dlpack(a[:, ::2])
    assert n.dtype == np_dt and n.strides == a[:, ::2].strides
    np.testing.assert_array_equal(n, host[:, ::2])
    b = gp.from_dlpack(host)
    assert b.dtype is gp.as_dtype(np_dt) and b.data_ptr() == host.ctypes.data
    np.testing.assert_array_equal(b.to_numpy(), host)
