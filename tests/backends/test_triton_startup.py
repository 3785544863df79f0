"""The Triton home sets up Triton's argument specializer without importing torch (whose import
cost seconds of the first launch), and leaves ``import torch`` working afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]


def test_specializer_setup_skips_torch_and_leaves_it_importable(tmp_path: Path) -> None:
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("import os\nos.environ['FAKE_TORCH_IMPORTED'] = '1'\n")
    script = textwrap.dedent(
        """
        import os, sys
        from pygpukit.backends.triton_kernels import driver
        driver._prime_specializer()
        assert "torch" not in sys.modules and "FAKE_TORCH_IMPORTED" not in os.environ
        assert not driver._no_torch.on
        from triton._C.libtriton import native_specialize_impl
        from triton.backends.compiler import BaseBackend
        assert native_specialize_impl(BaseBackend, 16, False, True, True) == ("i32", "D")
        assert native_specialize_impl(BaseBackend, 1, False, True, True) == ("constexpr", 1)
        driver._no_torch.on = True  # refused in this thread only
        import threading
        seen = []
        t = threading.Thread(target=lambda: seen.append(__import__("torch")))
        t.start(); t.join()
        assert seen and os.environ["FAKE_TORCH_IMPORTED"] == "1"
        del sys.modules["torch"]
        try:
            import torch
            raise SystemExit("imported while refused")
        except ImportError:
            pass
        driver._no_torch.on = False
        import torch  # the fake one: imports normally once the set-up is done
        print("ok")
        """
    )
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


def _run(script: str, cache: Path) -> str:
    env = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "PYGPUKIT_TRITON_CACHE_DIR": str(cache),
    }
    res = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


def test_triton_key_is_stored_and_served_from_the_cache_dir(tmp_path: Path) -> None:
    script = """
        from triton.runtime import cache as tc
        from pygpukit.backends.triton_kernels import driver
        original = tc.triton_key
        driver._stored_triton_key()
        assert tc.triton_key is not original
        print(tc.triton_key() == original(), end=" ")
        print(tc.triton_key()[-16:])
    """
    first = _run(script, tmp_path)
    assert first.startswith("True ")
    (stored,) = (tmp_path / "triton_key").iterdir()
    assert stored.read_text()[-16:] == first.split()[1]
    stored.write_text("a value only the store has")
    served = _run("""
        from triton.runtime import cache as tc
        from pygpukit.backends.triton_kernels import driver
        driver._stored_triton_key()
        print(tc.triton_key())
    """, tmp_path)  # fmt: skip
    assert served == "a value only the store has"


def test_triton_stamp_follows_the_files(tmp_path: Path) -> None:
    from pygpukit.backends.triton_kernels.driver import triton_stamp

    (tmp_path / "compiler").mkdir()
    (tmp_path / "_C").mkdir()
    src = tmp_path / "compiler" / "compiler.py"
    src.write_text("a = 1\n")
    (tmp_path / "_C" / "libtriton.so").write_bytes(b"\0" * 64)
    (tmp_path / "compiler" / "notes.txt").write_text("not hashed")
    before = triton_stamp(tmp_path)
    assert triton_stamp(tmp_path) == before
    (tmp_path / "compiler" / "notes.txt").write_text("still not hashed")
    assert triton_stamp(tmp_path) == before
    src.write_text("a = 22\n")  # another size
    assert triton_stamp(tmp_path) != before
    changed = triton_stamp(tmp_path)
    (tmp_path / "_C" / "libtriton.so").write_bytes(b"\1" * 65)
    assert triton_stamp(tmp_path) != changed
    changed = triton_stamp(tmp_path)
    st = src.stat()
    src.write_text("a = 33\n")  # same size, same mtime: the contents count
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert triton_stamp(tmp_path) != changed
    # A backend linked in from elsewhere (a source install) is followed.
    real = tmp_path.parent / f"{tmp_path.name}-nvidia"
    real.mkdir()
    (real / "compiler.py").write_text("x = 1\n")
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "nvidia").symlink_to(real, target_is_directory=True)
    linked = triton_stamp(tmp_path)
    (real / "compiler.py").write_text("x = 2\n")
    assert triton_stamp(tmp_path) != linked
