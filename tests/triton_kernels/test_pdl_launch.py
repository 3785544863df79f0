"""Programmatic dependent launch: a kernel launched early must be told to wait; a kernel told to
wait touches no memory before its gdc_wait but what its PREFETCH path may load (checked on the
source); the cache write and decode
attention ask for the early launch exactly when their PDL_LAUNCH knob says so (the device's
support faked: the CPU interpreter cannot run griddepcontrol, so those launches are recorded,
not run)."""

# Triton kernel bodies take tl tensors/constexprs: left unannotated.
# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import ast
import importlib
import pkgutil
import textwrap
from typing import Any

import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

import pygpukit as gp  # noqa: E402
from pygpukit.backends.triton_kernels import attention_decode as ad  # noqa: E402
from pygpukit.backends.triton_kernels import driver  # noqa: E402
from pygpukit.backends.triton_kernels import kv_write as kw  # noqa: E402


@triton.jit
def _fill(Y, n, PDL: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, 1.0, mask=i < n)


def test_early_launch_without_the_wait_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"_fill is launched with launch_pdl=True but without"):
        driver.check_pdl(_fill, {"PDL": False, "launch_pdl": True})
    with pytest.raises(RuntimeError, match="gdc_wait"):
        driver.check_pdl(_fill, {"launch_pdl": True})
    driver.check_pdl(_fill, {"PDL": True, "launch_pdl": True})  # told to wait: accepted
    driver.check_pdl(_fill, {"PDL": False, "launch_pdl": False})


def test_launch_refuses_before_running_and_stays_usable(device: str) -> None:
    y = gp.zeros((8,), "float32", device=device)
    with pytest.raises(RuntimeError, match="launch_pdl=True"):
        driver.launch(_fill, (1,), y, 8, PDL=False, BLOCK=8, launch_pdl=True)
    np.testing.assert_array_equal(y.to_numpy(), 0.0)  # refused before it ran
    driver.launch(_fill, (1,), y, 8, PDL=False, BLOCK=8)
    np.testing.assert_array_equal(y.to_numpy(), 1.0)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Launches of the cache write and decode attention, recorded instead of run, with the
    device taken for one that supports programmatic dependent launch."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def fake(kernel: Any, grid: tuple[int, ...], *args: Any, **constexprs: Any) -> None:
        driver.check_pdl(kernel, constexprs)
        calls.append((kernel.fn.__name__, constexprs))

    for mod in (ad, kw):
        monkeypatch.setattr(mod, "pdl_enabled", lambda device: True)
        monkeypatch.setattr(mod, "launch", fake)
    return calls


@pytest.mark.parametrize("on", [True, False])
def test_decode_write_and_attention_launch_early(
    recorded: list[tuple[str, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, on: bool
) -> None:
    monkeypatch.setattr(ad, "PDL_LAUNCH", on)
    monkeypatch.setattr(kw, "PDL_LAUNCH", on)
    b, hq, hkv, s, d = 1, 4, 2, 64, 16
    rng = np.random.default_rng(0)
    q = gp.from_numpy(rng.standard_normal((b, hq, 1, d)).astype(np.float32), device="cpu")
    kc = gp.zeros((b, hkv, s, d), "float32", device="cpu")
    vc = gp.zeros((b, hkv, s, d), "float32", device="cpu")
    k = gp.from_numpy(rng.standard_normal((b, hkv, 1, d)).astype(np.float32), device="cpu")
    pos = gp.from_numpy(np.array([5], np.int32), device="cpu")
    lens = gp.from_numpy(np.array([6], np.int32), device="cpu")
    kw.kv_cache_write(kc, vc, k, k, pos)
    ad.sdpa_decode(q, kc, vc, lens)
    assert [name for name, _ in recorded] == ["_kv_write", "_decode_fwd"]
    for _, c in recorded:
        assert c["launch_pdl"] is on and c["PDL"] is on
    assert recorded[1][1]["RELEASE"] is True  # attention releases the next kernel either way


def _jit_functions() -> list[tuple[str, Any]]:
    import inspect

    from pygpukit.backends import triton_kernels

    out = []
    for info in pkgutil.iter_modules(triton_kernels.__path__):
        mod = importlib.import_module(f"pygpukit.backends.triton_kernels.{info.name}")
        for name, obj in vars(mod).items():
            fn = getattr(obj, "fn", None)
            if fn is not None and getattr(fn, "__module__", None) == mod.__name__:
                src = textwrap.dedent(inspect.getsource(fn))
                out.append((f"{info.name}.{name}", ast.parse(src)))
    return out


# What a kernel may call before its gdc_wait: index arithmetic only. Any other call (a load, a
# store, an atomic, a jit helper that might do one) fails the check below.
_BEFORE_WAIT = {
    "program_id", "arange", "to", "where", "zeros", "full", "cdiv", "num_programs",
}  # fmt: skip
# What a PREFETCH path may call besides: loads (of weights, positions, lengths, the cache write's
# rope tables), never a store; the helpers named here are checked to store nothing below.
_PREFETCH_HELPERS = {"_seq_len", "_angles", "_norm_weights"}
_PREFETCH_LOADS = {"load"} | _PREFETCH_HELPERS


def test_prefetch_helpers_store_nothing() -> None:
    """The jit helpers a PREFETCH path may call load, and call nothing that could store (only
    each other, tl's loads, index arithmetic and register reshapes)."""
    found = [(n, t) for n, t in _jit_functions() if n.split(".")[-1] in _PREFETCH_HELPERS]
    assert {n.split(".")[-1] for n, _ in found} == _PREFETCH_HELPERS
    allowed = _BEFORE_WAIT | _PREFETCH_LOADS | {"tl.minimum", "tl.maximum", "tl.where", "tl.load"}
    allowed |= {"tl.split", "tl.reshape", "float"}  # pairs in registers; float("nan")
    for name, tree in found:
        calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        strays = {c for c in calls if c not in allowed and c.split(".")[-1] not in allowed}
        assert not strays, f"{name} calls {strays}"


def _not_index_math(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name not in _BEFORE_WAIT


def _passes_pdl(st: ast.AST) -> bool:
    """st calls a body with PDL=PDL (the body then waits)."""
    return any(
        isinstance(n, ast.keyword) and n.arg == "PDL"
        and isinstance(n.value, ast.Name) and n.value.id == "PDL"
        for n in ast.walk(st)
    )  # fmt: skip


def test_kernels_told_to_wait_wait_before_they_touch_memory() -> None:
    # A kernel with a PDL parameter either waits (an ``if PDL:`` holding gdc_wait) before any
    # call but index arithmetic, or hands PDL on to the body that does (and calls nothing but
    # index arithmetic before that). The exceptions are the documented prefetches (``if
    # PREFETCH...``) of what no kernel that may still run writes inside the engine's forward:
    # the decode GEMV's constant weights, the cache write's positions (with ANGLES_EARLY its
    # angles and head-norm weights too), decode attention's lengths.
    checked = 0
    for name, tree in _jit_functions():
        fn = tree.body[0]
        assert isinstance(fn, ast.FunctionDef)
        if "PDL" not in [a.arg for a in fn.args.args]:
            continue
        checked += 1
        waits = [
            i for i, st in enumerate(fn.body)
            if isinstance(st, ast.If) and isinstance(st.test, ast.Name) and st.test.id == "PDL"
            and any(isinstance(n, ast.Name) and n.id == "gdc_wait" for n in ast.walk(st))
        ]  # fmt: skip
        if not waits:
            waits = [i for i, st in enumerate(fn.body) if _passes_pdl(st)]
            assert waits, f"{name} takes PDL but neither waits nor passes it on"
        for st in fn.body[: waits[0]]:
            if isinstance(st, ast.If) and ast.unparse(st.test).startswith("PREFETCH"):
                stray = [
                    ast.unparse(n) for n in ast.walk(st) if _not_index_math(n)
                    and ast.unparse(n.func).split(".")[-1] not in _PREFETCH_LOADS
                ]  # fmt: skip
                assert not stray, f"{name}'s PREFETCH path does more than load: {stray}"
                continue
            calls = [n for n in ast.walk(st) if _not_index_math(n)]
            assert not calls, (
                f"{name} calls more than index math before gdc_wait: {ast.unparse(st)}"
            )
    # _gemv_sums, _gemv and its two entries, the qkv write, the cache write, decode attention
    assert checked >= 7


def test_positions_and_lengths_loaded_before_the_wait_change_nothing(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """The cache write's and decode attention's PREFETCH paths (their knobs on, inside the
    engine's constant_weights() promise: positions and lengths loaded ahead of the wait) store
    the same caches and attend to the same output, bit for bit, as the plain launches; outside
    that promise the launches do not take them. On an sm_90+ GPU both are launched early."""
    from pygpukit.backends._support.weights import constant_weights

    seen: list[bool | None] = []
    real = {m: m.launch for m in (ad, kw)}

    def spy(mod: Any) -> Any:
        def launch(kernel: Any, grid: Any, *args: Any, **c: Any) -> Any:
            seen.append(c.get("PREFETCH"))
            return real[mod](kernel, grid, *args, **c)

        return launch

    for mod in (ad, kw):
        monkeypatch.setattr(mod, "launch", spy(mod))
    b, hq, hkv, s, d, half = 2, 4, 2, 24, 16, 8
    rng = np.random.default_rng(3)

    def up(a: np.ndarray) -> Any:
        return gp.from_numpy(a.astype(np.float32), device=device)

    q0 = rng.standard_normal((b, hq, 1, d))
    k, v = up(rng.standard_normal((b, hkv, 1, d))), up(rng.standard_normal((b, hkv, 1, d)))
    cache0 = rng.standard_normal((b, hkv, s, d))
    ang = np.arange(s)[:, None] * 0.1 * np.arange(1, half + 1)[None, :]
    cos, sin = up(np.cos(ang)), up(np.sin(ang))
    pos = gp.from_numpy(np.array([5, 17], np.int32), device=device)
    lens = gp.from_numpy(np.array([6, 18], np.int32), device=device)

    def step() -> tuple[np.ndarray, ...]:
        q, kc, vc = up(q0), up(cache0), up(cache0[::-1].copy())
        kw.kv_cache_write(kc, vc, k, v, pos, cos=cos, sin=sin, q=q)
        o = ad.sdpa_decode(q, kc, vc, lens)
        return o.to_numpy(), kc.to_numpy(), vc.to_numpy()

    want = step()
    monkeypatch.setattr(kw, "PREFETCH_POSITIONS", True)
    monkeypatch.setattr(ad, "PREFETCH_LENGTHS", True)
    assert seen == [False, False]
    step()
    assert seen[2:] == [False, False]  # outside the promise: the plain launches
    with constant_weights():
        got = step()
    assert seen[4:] == [True, True]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
