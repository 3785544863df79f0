"""Read-only memory imported through DLPack stays read-only on every write path."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

import pygpukit as gp

pytestmark = pytest.mark.filterwarnings("error")


def _bytes_backed() -> tuple[gp.GPUArray, bytes]:
    raw = bytes(np.arange(12, dtype=np.float32).tobytes())
    return gp.from_dlpack(np.frombuffer(raw, dtype=np.float32).reshape(3, 4)), raw


# The imported array lives on the CPU device: every other operand is made there too.
WRITES = [
    ("setitem", lambda a: a.__setitem__(0, 1.0)),
    ("setitem", lambda a: a.__setitem__(slice(None), 0.0)),
    ("setitem", lambda a: a.__setitem__(Ellipsis, np.zeros((3, 4), np.float32))),
    ("setitem", lambda a: a.__setitem__((1, 2), gp.zeros((), device="cpu"))),
    ("fill", lambda a: a.fill_(7.0)),
    ("exp: out", lambda a: gp.exp(gp.ones((3, 4), device="cpu"), out=a)),
    ("add: out", lambda a: gp.add(gp.ones((3, 4), device="cpu"), 2.0, out=a)),
    (
        "matmul: out",
        lambda a: gp.matmul(gp.ones((3, 5), device="cpu"), gp.ones((5, 4), device="cpu"), out=a),
    ),
    (
        "rmsnorm: out",
        lambda a: gp.rmsnorm(gp.ones((3, 4), device="cpu"), gp.ones((4,), device="cpu"), out=a),
    ),
    ("bias_add: out", lambda a: gp.bias_add_inplace(a, gp.ones((4,), device="cpu"))),
    ("copy", lambda a: gp._memory.copy_into(a, gp.ones((3, 4), device="cpu"))),
    ("copy", lambda a: gp._memory.upload(a, np.ones((3, 4), np.float32))),
    ("setitem", lambda a: a[1:].__setitem__(slice(None), 3.0)),  # a view keeps the flag
    ("setitem", lambda a: a.T.__setitem__(0, 3.0)),
]


@pytest.mark.parametrize(("what", "write"), WRITES)
def test_bytes_backed_import_refuses_writes(what: str, write) -> None:  # type: ignore[no-untyped-def]
    a, raw = _bytes_backed()
    assert a.readonly and a[1:].readonly and a.T.readonly
    with pytest.raises(gp.ReadOnlyError) as e:
        write(a)
    assert str(e.value).startswith(what.split(" ")[0]) and "read-only" in str(e.value)
    assert raw == np.arange(12, dtype=np.float32).tobytes()  # the bytes object is unchanged
    c = a.copy()  # reading works; a copy is writable
    assert not c.readonly
    c[0, 0] = 100.0
    np.testing.assert_array_equal(a.to_numpy().ravel(), np.arange(12))
    assert c.to_numpy()[0, 0] == 100.0


def test_readonly_mmap_import(tmp_path: Path) -> None:
    p = tmp_path / "w.bin"
    p.write_bytes(np.arange(8, dtype=np.float32).tobytes())
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    a = gp.from_dlpack(np.frombuffer(m, dtype=np.float32))
    assert a.readonly
    with pytest.raises(gp.ReadOnlyError, match=r"shape \(8,\)"):
        a[3] = 0.0  # used to segfault on the read-only mapping
    np.testing.assert_array_equal(a.to_numpy(), np.arange(8))
    assert not np.asarray(a).flags.writeable  # the NumPy view is read-only too


def test_writable_import_stays_writable() -> None:
    host = np.arange(4, dtype=np.float32)
    a = gp.from_dlpack(host)
    assert not a.readonly
    a[0] = 9.0
    assert host[0] == 9.0


def test_jit_refuses_readonly_for_non_const_pointer() -> None:
    import importlib

    from pygpukit._jit_signature import parse_kernels

    jit = importlib.import_module("pygpukit.jit")  # gp.jit is the function of that name

    a, _ = _bytes_backed()
    (p_out, p_in) = parse_kernels('extern "C" __global__ void k(float* out, const float* in) {}')[
        "k"
    ]
    assert jit._convert("k", 1, p_in, a) == a.data_ptr()
    with pytest.raises(gp.ReadOnlyError, match="parameter out"):
        jit._convert("k", 0, p_out, a)


def test_export_carries_the_flag_onward() -> None:
    """A re-export keeps the memory read-only: NumPy's view of it refuses writes, and a legacy
    capsule (which has no flag) is refused rather than handed out writable."""
    a, raw = _bytes_backed()
    view = np.from_dlpack(a)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = 5.0
    with pytest.raises(BufferError, match=r"read-only.*max_version=\(1, 0\)"):
        a.__dlpack__()
    writable = gp.from_dlpack(a.__dlpack__(max_version=(1, 0), copy=True))
    assert not writable.readonly
    writable[0, 0] = 5.0  # a copy is the caller's own
    assert raw == np.arange(12, dtype=np.float32).tobytes()
    b = gp.from_dlpack(a)  # round trip: still read-only
    assert b.readonly
    with pytest.raises(gp.ReadOnlyError):
        b[0] = 1.0
