"""Editing kernels without recompiling: a user's kernel directory replaces a shipped module, and
`python -m pygpukit kernels eject` copies a shipped module to start from.

Runs on the GPU, or on the CPU under Triton's interpreter (forcing the triton route there).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import routing
from pygpukit.cli import main as cli_main

pytest.importorskip("triton")
HAS_GPU = gp.is_cuda_available()
pytestmark = pytest.mark.skipif(
    not HAS_GPU and os.environ.get("TRITON_INTERPRET") != "1",
    reason="needs a GPU or TRITON_INTERPRET=1",
)

# A deliberately different "rmsnorm": y = x * w (no normalisation), so the result proves which
# module ran.
USER_NORM = textwrap.dedent(
    """
    import triton
    import triton.language as tl

    import pygpukit as gp
    from pygpukit.backends.triton_kernels.driver import launch


    @triton.jit
    def _scale(x, w, y, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        m = cols < n_cols
        xv = tl.load(x + row * n_cols + cols, mask=m).to(tl.float32)
        wv = tl.load(w + cols, mask=m).to(tl.float32)
        tl.store(y + row * n_cols + cols, (xv * wv).to(y.dtype.element_ty), mask=m)


    def rmsnorm(x, weight, residual=None, *, eps, out=None):
        x = x.contiguous()
        y = out if out is not None else gp.empty(x.shape, x.dtype, device=x.device)
        n = x.shape[-1]
        launch(_scale, (x.size // n,), x, weight, y, n, BLOCK=triton.next_power_of_2(n))
        return y
    """
)


@pytest.fixture
def device() -> Iterator[str]:
    routing.reset_stats()
    if HAS_GPU:
        yield "cuda:0"
    else:
        with gp.route(rmsnorm="triton"):
            yield "cpu"
    routing.load_kernels(None)


def test_user_kernel_directory_replaces_the_shipped_module(tmp_path: Path, device: str) -> None:
    rng = np.random.default_rng(3)
    xh = rng.standard_normal((5, 24)).astype(np.float32)
    wh = rng.standard_normal(24).astype(np.float32)
    x, w = gp.from_numpy(xh, device=device), gp.from_numpy(wh, device=device)
    (tmp_path / "norm.py").write_text(USER_NORM)
    routing.load_kernels(tmp_path)
    y = gp.rmsnorm(x, w, 1e-6).to_numpy()
    np.testing.assert_allclose(y, xh * wh, rtol=1e-6)
    assert routing.stats()["rmsnorm"] == {"triton": 1}
    # Edit the file again: the next load picks the edit up, nothing is reinstalled.
    (tmp_path / "norm.py").write_text(USER_NORM.replace("(xv * wv)", "(xv * wv * 2.0)"))
    routing.load_kernels(tmp_path)
    np.testing.assert_allclose(gp.rmsnorm(x, w, 1e-6).to_numpy(), 2 * xh * wh, rtol=1e-6)
    routing.load_kernels(None)  # back to the shipped kernel: a real rmsnorm
    ref = xh / np.sqrt((xh.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * wh
    np.testing.assert_allclose(gp.rmsnorm(x, w, 1e-6).to_numpy(), ref, rtol=1e-5, atol=1e-5)


def test_load_kernels_rejects_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        routing.load_kernels(tmp_path / "nope")


def test_eject_copies_the_shipped_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pygpukit.backends.triton_kernels as tk

    assert cli_main(["kernels", "eject", "norm", str(tmp_path)]) == 0
    shipped = Path(tk.__file__).parent / "norm.py"
    assert (tmp_path / "norm.py").read_text() == shipped.read_text()
    assert "PYGPUKIT_TRITON_KERNELS=" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="exists"):
        cli_main(["kernels", "eject", "norm", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown kernel family 'nrom'"):
        cli_main(["kernels", "eject", "nrom", str(tmp_path)])
