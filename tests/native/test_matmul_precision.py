"""The fp32 matmul precision switch: exact by default, TF32 only when asked (API or env)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pygpukit as gp
from pygpukit import precision


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("PYGPUKIT_ALLOW_TF32", raising=False)
    monkeypatch.delenv("PYGPUKIT_NO_TF32", raising=False)
    prev = precision._explicit
    precision._explicit = None
    yield
    precision._explicit = prev


def test_default_is_exact() -> None:
    assert gp.get_matmul_precision() == "highest"
    assert not precision.allow_tf32()


def test_api_opt_in_and_back() -> None:
    gp.set_matmul_precision("tf32")
    assert gp.get_matmul_precision() == "tf32" and precision.allow_tf32()
    gp.set_matmul_precision("highest")
    assert not precision.allow_tf32()
    with pytest.raises(ValueError, match="set_matmul_precision: precision must be one of"):
        gp.set_matmul_precision("high")


def test_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGPUKIT_ALLOW_TF32", "1")
    assert gp.get_matmul_precision() == "tf32"
    # The 0.2.x variable is accepted and wins: the more precise choice.
    monkeypatch.setenv("PYGPUKIT_NO_TF32", "1")
    assert gp.get_matmul_precision() == "highest"
    monkeypatch.setenv("PYGPUKIT_NO_TF32", "0")
    assert gp.get_matmul_precision() == "tf32"
    # An explicit call overrides the environment; None goes back to it.
    gp.set_matmul_precision("highest")
    assert gp.get_matmul_precision() == "highest"
    gp.set_matmul_precision(None)
    assert gp.get_matmul_precision() == "tf32"
    monkeypatch.setenv("PYGPUKIT_ALLOW_TF32", "maybe")
    with pytest.raises(ValueError, match="PYGPUKIT_ALLOW_TF32 must be 1/0"):
        gp.get_matmul_precision()


def test_no_tf32_alone_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGPUKIT_NO_TF32", "1")
    assert gp.get_matmul_precision() == "highest"
