"""How the deterministic mode steers the routing table (CPU machine): the fixed-tile Triton
GEMM serves only under the mode, backends that are not batch invariant are refused under it
(forced or not) with a reason that says so, and the decision cache keeps the two modes apart."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import routing

select_mod = importlib.import_module("pygpukit.routing.select")


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    routing.clear_routes()
    yield
    routing.clear_routes()
    gp.set_deterministic(None)


def _reasons(op: str, *arrays: gp.GPUArray) -> dict[str, list[str]]:
    return dict(gp.routing.explain(op, *arrays).candidates)


def _f32(*shape: int) -> gp.GPUArray:
    rng = np.random.default_rng(0)
    return gp.from_numpy(rng.standard_normal(shape).astype(np.float32), device="cpu")


def test_fixed_gemm_serves_only_the_mode() -> None:
    x, w = _f32(3, 8), _f32(5, 8)
    assert any("deterministic mode only" in r for r in _reasons("linear", x, w)["triton"])
    with gp.deterministic():
        assert gp.is_deterministic()
        assert not any("deterministic" in r for r in _reasons("linear", x, w)["triton"])
        native = _reasons("linear", x, w)["native"]
        assert "not batch invariant for float32 (the deterministic mode is on)" in native
    assert not gp.is_deterministic()


def test_integer_products_stay_native_under_the_mode() -> None:
    a = gp.from_numpy(np.arange(12, dtype=np.int32).reshape(3, 4), device="cpu")
    with gp.deterministic():
        assert not any("batch invariant" in r for r in _reasons("matmul", a, a.T)["native"])


def test_native_twins_without_an_invariant_plan_are_refused() -> None:
    rng = np.random.default_rng(1)
    x = gp.from_numpy(rng.standard_normal((2, 4, 3, 8)).astype(np.float32), device="cpu")
    with gp.deterministic():
        native = _reasons("sdpa", x, x, x)["native"]
        assert "not batch invariant for float32 (the deterministic mode is on)" in native
        assert any("batch invariant" in r for r in _reasons("sum", _f32(3, 8))["native"])
        ints = gp.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3), device="cpu")
        assert not any("batch invariant" in r for r in _reasons("sum", ints)["native"])
        assert not any("batch invariant" in r for r in _reasons("max", _f32(3, 8))["native"])
    assert not any("batch invariant" in r for r in _reasons("sdpa", x, x, x)["native"])


def test_forced_backend_that_is_not_invariant_raises_under_the_mode() -> None:
    x, w = _f32(3, 8), _f32(5, 8)
    with gp.deterministic(), gp.route(linear="native"):
        with pytest.raises(gp.RouteError, match="not batch invariant for float32"):
            gp.linear(x, w)
    # the runtime stays usable, and the CPU backend serves both modes
    with gp.deterministic():
        a = gp.linear(x, w).to_numpy()
    np.testing.assert_allclose(a, gp.linear(x, w).to_numpy(), rtol=1e-6)


def test_decision_cache_keeps_the_modes_apart() -> None:
    x, w = _f32(3, 8), _f32(5, 8)
    gp.linear(x, w)
    with gp.deterministic():
        gp.linear(x, w)
    keys = [k for k in select_mod._cache if k[0] == "linear"]
    assert {k[3] for k in keys} == {False, True}


def test_flag_from_the_environment_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGPUKIT_DETERMINISTIC", "1")
    gp.set_deterministic(None)
    assert gp.is_deterministic()
    gp.set_deterministic(False)  # an explicit call wins over the environment
    assert not gp.is_deterministic()
    monkeypatch.setenv("PYGPUKIT_DETERMINISTIC", "maybe")
    with pytest.raises(ValueError, match="PYGPUKIT_DETERMINISTIC must be 1/0"):
        gp.set_deterministic(None)
    monkeypatch.delenv("PYGPUKIT_DETERMINISTIC")
    gp.set_deterministic(None)
    for bad in (1, "yes", None):
        with pytest.raises(TypeError, match="deterministic"):
            with gp.deterministic(bad):  # type: ignore[arg-type]
                pass
    with pytest.raises(TypeError, match="set_deterministic: on must be"):
        gp.set_deterministic(1)  # type: ignore[arg-type]
    assert not gp.is_deterministic()
