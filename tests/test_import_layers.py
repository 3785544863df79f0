"""Import layering of the LLM engine, read from the source with ast (nothing is imported).

- The engine (every module under pygpukit/models) never imports the 0.2.x layer
  (pygpukit.llm, pygpukit.triton, pygpukit.compat), anywhere in the file, function bodies
  included: compat imports the engine, never the reverse.
- The engine's modules have no import cycle at module level (what runs on import: top-level
  statements and class bodies, not function bodies, not ``if TYPE_CHECKING:`` blocks), the
  models package, generation.py and step_graph.py included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "pygpukit" / "models"
COMPAT_LAYER = ("pygpukit.llm", "pygpukit.triton", "pygpukit.compat")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    """The dotted names an import statement may load: ``from a import b`` gives a and a.b
    (b may be a submodule); relative imports are resolved against ``module``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = module.split(".") if is_pkg else module.split(".")[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join([*pkg, base]) if base else ".".join(pkg)
    return [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]


def imports(source: str, module: str, is_pkg: bool = False, runtime_only: bool = False) -> set[str]:
    """Names imported by ``source``: all of them, or (runtime_only) those a plain import of the
    module executes."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_targets(node, module, is_pkg))
            elif runtime_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif runtime_only and isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody"):
                    visit([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
                for h in getattr(node, "handlers", []):
                    visit(h.body)
                for case in getattr(node, "cases", []):
                    visit(case.body)

    visit(ast.parse(source).body)
    return found


def in_layer(name: str, layers: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in layers)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of a directed graph, one per strongly connected component of more than one
    node or with a self edge (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _engine_files() -> list[Path]:
    files = sorted(MODELS.rglob("*.py"))
    assert len(files) > 10, "pygpukit/models not found"
    return files


def engine_graph() -> dict[str, set[str]]:
    """Module-level import edges between the engine's modules. Importing a.b also runs the
    package a first, but a package importing its own submodules is not a cycle; a submodule
    importing names from its package (``from pygpukit.models import X``) is an edge to it."""
    files = _engine_files()
    names = {_module_name(f) for f in files}
    graph: dict[str, set[str]] = {}
    for f in files:
        mod = _module_name(f)
        got = imports(f.read_text(), mod, f.name == "__init__.py", runtime_only=True)
        graph[mod] = {n for n in got if n in names and n != mod}
    return graph


@pytest.mark.parametrize("path", _engine_files(), ids=lambda p: p.name)
def test_engine_never_imports_the_compat_layer(path: Path) -> None:
    mod = _module_name(path)
    got = imports(path.read_text(), mod, path.name == "__init__.py")
    bad = sorted(n for n in got if in_layer(n, COMPAT_LAYER))
    assert not bad, f"{mod} imports the 0.2.x layer {bad}: compat imports the engine, not back"


def test_engine_modules_have_no_import_cycle() -> None:
    graph = engine_graph()
    core = ("pygpukit.models", "pygpukit.models.generation", "pygpukit.models.step_graph")
    assert all(c in graph for c in core)
    # The package imports generation at module level: the walk does see real edges.
    assert "pygpukit.models.generation" in graph["pygpukit.models"]
    assert cycles(graph) == [], f"import cycles among the engine modules: {cycles(graph)}"


def test_compat_imports_the_engine() -> None:
    """The other direction: the shims are built on the engine (and name the Triton kernels by
    their package path, pygpukit.triton_kernels, through the routing table)."""
    for name in ("llm", "decode"):
        path = ROOT / "pygpukit" / "compat" / f"{name}.py"
        got = imports(path.read_text(), f"pygpukit.compat.{name}")
        assert any(in_layer(n, ("pygpukit.models",)) for n in got), name
    for shim, target in (("llm", "pygpukit.compat.llm"), ("triton", "pygpukit.compat.triton")):
        src = (ROOT / "pygpukit" / f"{shim}.py").read_text()
        assert target in imports(src, f"pygpukit.{shim}")
        assert len(src.splitlines()) <= 6, f"pygpukit/{shim}.py should only re-export {target}"


def test_the_checks_catch_what_they_look_for() -> None:
    """The parser and the cycle finder on made-up input, so the checks above can fail."""
    src = (
        "from typing import TYPE_CHECKING\n"
        "from pygpukit import llm\n"
        "from . import kv_cache\n"
        "if TYPE_CHECKING:\n"
        "    from pygpukit.models.transformer import CausalTransformerModel\n"
        "try:\n"
        "    import pygpukit.triton as t\n"
        "except ImportError:\n"
        "    pass\n"
        "class A:\n"
        "    from pygpukit.models import sampling\n"
        "def f():\n"
        "    from pygpukit.compat import decode\n"
    )
    mod = "pygpukit.models.generation"
    everything = imports(src, mod)
    assert {"pygpukit.llm", "pygpukit.triton", "pygpukit.compat.decode"} <= everything
    assert "pygpukit.models.transformer" in everything
    run = imports(src, mod, runtime_only=True)
    assert {"pygpukit.llm", "pygpukit.models.kv_cache", "pygpukit.triton"} <= run
    assert "pygpukit.models.sampling" in run  # a class body runs on import
    assert "pygpukit.models.transformer" not in run and "pygpukit.compat.decode" not in run
    assert not in_layer("pygpukit.triton_kernels", COMPAT_LAYER)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
