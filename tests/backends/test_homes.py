"""The backend homes keep their contract (pygpukit/backends/_record.py): one record each, the
routing table's family module names in every home that serves a family, no imports upward."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import pygpukit
from pygpukit.backends import HOMES, records
from pygpukit.routing.table import TABLE

BACKENDS_DIR = Path(pygpukit.__file__).parent / "backends"


def _imports(path: Path) -> list[str]:
    """Every module a file imports, anywhere in it (function bodies included)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


@pytest.mark.parametrize(
    "path", sorted(BACKENDS_DIR.rglob("*.py")), ids=lambda p: str(p.relative_to(BACKENDS_DIR))
)
def test_no_backend_module_imports_ops_or_routing(path: Path) -> None:
    upward = [
        m
        for m in _imports(path)
        if m in ("pygpukit.ops", "pygpukit.routing")
        or m.startswith(("pygpukit.ops.", "pygpukit.routing."))
    ]
    assert not upward, f"{path} imports {upward}: backends call their siblings or _support"


def test_every_home_declares_its_record() -> None:
    recs = records()
    assert set(recs) == set(HOMES)
    for name, rec in recs.items():
        assert rec.name == name and rec.package == HOMES[name]
        assert rec.devices
        ok, why = rec.probe()
        assert isinstance(ok, bool) and isinstance(why, str) and (ok or why)


@pytest.mark.parametrize("op", sorted(TABLE))
def test_each_candidate_home_has_the_family_module_and_op(op: str) -> None:
    route = TABLE[op]
    for cand in route.candidates:
        rec = records()[cand.backend]
        if cand.backend == "triton":
            pytest.importorskip("triton")
        fam = route.family_of(cand)
        mod = rec.module(fam)
        assert mod is not None, f"{rec.package} has no module {fam}.py for {op}"
        assert callable(getattr(mod, op, None)), f"{mod.__name__} has no function {op}"


def test_gpu_twins_take_the_same_parameters() -> None:
    """A Triton op and its native twin accept the same keyword parameters (ROUTE= may swap
    them without the caller changing anything)."""
    pytest.importorskip("triton")
    recs = records()
    for op, route in TABLE.items():
        backends = {c.backend for c in route.candidates}
        if not {"triton", "native"} <= backends:
            continue
        tri = getattr(recs["triton"].module(route.family), op)
        kw = {
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        }
        tp = {n for n, p in inspect.signature(tri).parameters.items() if p.kind in kw}
        for fam in {route.family_of(c) for c in route.candidates if c.backend == "native"}:
            nat = getattr(recs["native"].module(fam), op)
            np_ = {n for n, p in inspect.signature(nat).parameters.items() if p.kind in kw}
            assert tp == np_, (op, fam, sorted(tp ^ np_))


def test_the_former_triton_path_is_the_same_module() -> None:
    import pygpukit.triton_kernels._common as old

    import pygpukit.backends.triton_kernels._common as new

    assert old is new


def test_records_are_whole_when_threads_ask_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first lookup may come from several threads at once: none sees a partial table (the
    imports are slowed down so that the threads overlap while it is being built)."""
    import importlib
    import threading
    import time

    import pygpukit.backends as homes

    real = importlib.import_module

    def slow_import(name: str) -> object:
        time.sleep(0.002)
        return real(name)

    monkeypatch.setattr(homes.importlib, "import_module", slow_import)
    for _ in range(5):
        monkeypatch.setattr(homes, "_records", None)
        seen: list[set[str]] = []
        barrier = threading.Barrier(8)

        def ask(barrier: threading.Barrier, seen: list[set[str]]) -> None:
            barrier.wait()
            seen.append(set(homes.records()))

        threads = [threading.Thread(target=ask, args=(barrier, seen)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [set(HOMES)] * 8


def test_the_former_triton_path_keeps_the_real_module_spec() -> None:
    import importlib
    import importlib.util

    import pygpukit.triton_kernels.norm  # noqa: F401  (the old name, as an edited kernel file)

    real = importlib.import_module("pygpukit.backends.triton_kernels.norm")
    assert real.__spec__ is not None and real.__spec__.name == real.__name__
    assert real.__spec__.origin is not None and real.__spec__.origin.endswith("norm.py")
    found = importlib.util.find_spec("pygpukit.backends.triton_kernels.norm")
    assert found is not None and found.origin == real.__spec__.origin


def test_native_family_status_names_a_missing_needed_family(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A partial build with unary but not copy cannot serve unary (its casts launch copy)."""
    import types

    from pygpukit.backends import native

    fake = types.SimpleNamespace(families=("unary", "norm"))
    monkeypatch.setattr(native, "status", lambda: (True, ""))
    monkeypatch.setattr(native, "extension", lambda: fake)
    ok, why = native.BACKEND.family_status("unary")
    assert not ok and "copy family" in why and "unary family needs it" in why
    assert native.BACKEND.family_status("norm") == (True, "")


@pytest.mark.parametrize("op", sorted(TABLE))
def test_candidates_run_on_devices_their_home_declares(op: str) -> None:
    for cand in TABLE[op].candidates:
        home = records()[cand.backend]
        assert cand.devices <= home.devices, (op, cand.backend, cand.devices, home.devices)
