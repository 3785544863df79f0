"""The routing table, every override form, their errors, explain and stats (CPU machine)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import numpy as np
import pytest

import pygpukit as gp
from pygpukit import routing
from pygpukit.backends import cpu as cpu_backend
from pygpukit.routing.overrides import forced_backend

select_mod = importlib.import_module("pygpukit.routing.select")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("ROUTE", raising=False)
    monkeypatch.delenv("PYGPUKIT_ROUTE", raising=False)
    routing.reload_env()
    routing.clear_routes()
    routing.reset_stats()
    yield
    routing.clear_routes()
    monkeypatch.delenv("ROUTE", raising=False)
    monkeypatch.delenv("PYGPUKIT_ROUTE", raising=False)
    routing.reload_env()


def _x() -> gp.GPUArray:
    return gp.from_numpy(
        np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32), device="cpu"
    )


def test_every_backend_op_has_a_route_with_numpy_last() -> None:
    ops = set(cpu_backend.__all__) - {"rope_tables", "BACKEND"}  # tables: host-built; the record
    assert ops <= set(routing.TABLE), ops - set(routing.TABLE)
    for op, r in routing.TABLE.items():
        assert r.candidates[-1].backend == "cpu", op
        assert {c.backend for c in r.candidates} <= set(routing.BACKENDS)


def test_table_prints_every_op(capsys: pytest.CaptureFixture[str]) -> None:
    rows = routing.table()
    out = capsys.readouterr().out
    assert len(rows) == len(routing.TABLE)
    for op in routing.TABLE:
        assert f"\n{op} " in out
    assert "cpu: available" in out


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ("rmsnorm", "not of the form op:backend"),
        ("rmsnorm:", "not of the form op:backend"),
        ("rmsnrom:native", "unknown op 'rmsnrom'; valid ops: \\*, abs, add"),
        ("rmsnorm:cuda", "unknown backend 'cuda' for rmsnorm; valid: triton, native, cpu, auto"),
    ],
)
def test_parse_errors_list_valid_names(spec: str, msg: str) -> None:
    with pytest.raises(gp.RouteError, match=msg):
        routing.parse(spec)
    with pytest.raises(gp.RouteError, match=msg):
        gp.set_route(spec)
    with pytest.raises(gp.RouteError, match=msg):
        with gp.route(spec):
            pass


def test_env_parse_errors_raise_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTE", "softmax:gpu")
    with pytest.raises(gp.RouteError, match="ROUTE: unknown backend 'gpu'"):
        routing.reload_env()


def test_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTE", "rmsnorm:cpu,*:native")
    monkeypatch.setenv("PYGPUKIT_ROUTE", "rmsnorm:triton")
    routing.reload_env()
    assert forced_backend("rmsnorm") == ("triton", "PYGPUKIT_ROUTE (rmsnorm:triton)")
    assert forced_backend("softmax") == ("native", "ROUTE (*:native)")
    gp.set_route(rmsnorm="native")
    assert forced_backend("rmsnorm")[0] == "native"
    with gp.route(rmsnorm="cpu"):
        assert forced_backend("rmsnorm") == ("cpu", "with gp.route (rmsnorm:cpu)")
        with gp.route("*:triton"):
            assert forced_backend("rmsnorm")[0] == "triton"
            with gp.route(rmsnorm="auto"):
                assert forced_backend("rmsnorm") == (None, "")
        assert forced_backend("softmax")[0] == "native"  # the set_route layer has no softmax rule
    gp.set_route(rmsnorm="auto")
    assert forced_backend("rmsnorm")[0] == "triton"


def test_forced_backend_with_several_candidates_names_every_reason() -> None:
    """The FFT lists two native candidates (float32 / float64, each with its 7-smooth
    lengths): a forced call that neither serves names both candidates' reasons."""
    z = gp.from_numpy(np.ones((2, 4096), np.complex128))
    with gp.route(fft="native"):
        with pytest.raises(gp.RouteError) as err:
            gp.fft.fft(z)
    msg = str(err.value)
    assert "dtype complex128 is not supported" in msg
    want = "needs the transform length n in [1, 2048] with prime factors in (2, 3, 5, 7)"
    assert f"{want} (any up to 1024), got 4096" in msg
    assert msg.count(" | ") == 1


def test_forced_route_that_cannot_serve_raises_naming_the_constraint() -> None:
    x, w = _x(), gp.ones((8,), device="cpu")
    with gp.route(rmsnorm="native"):
        with pytest.raises(
            gp.RouteError,
            match=r"rmsnorm: with gp.route \(rmsnorm:native\) "
            r"forces native, which cannot serve this call: device cpu",
        ):
            gp.rmsnorm(x, w)
    with gp.route(matmul_fp8="triton"):
        with pytest.raises(
            gp.RouteError, match="forces triton, which is not a backend for matmul_fp8"
        ):
            q, s = gp.quantize_fp8(gp.ones((16, 16), device="cpu"))
            gp.matmul_fp8(q, q, scale_a=s, scale_b=s)
    # a failed forced call leaves the runtime usable
    assert gp.rmsnorm(x, w).shape == (3, 8)


def test_default_route_on_cpu_is_numpy_and_stats_count_what_ran() -> None:
    x, w = _x(), gp.ones((8,), device="cpu")
    gp.rmsnorm(x, w)
    gp.rmsnorm(x, w)
    gp.softmax(x)
    with gp.route(softmax="cpu"):
        gp.softmax(x)
    assert routing.stats()["rmsnorm"] == {"cpu": 2}
    assert routing.stats()["softmax"] == {"cpu": 2}
    routing.reset_stats()
    assert routing.stats() == {}


def test_explain_lists_each_candidate_with_reasons() -> None:
    x, w = _x(), gp.ones((8,), device="cpu")
    e = routing.explain("rmsnorm", x, w)
    assert e.backend == "cpu" and e.device == gp.device("cpu")
    names = [n for n, _ in e.candidates]
    assert names == ["triton", "native", "cpu"]
    why = dict(e.candidates)
    assert any("device cpu is not supported" in r for r in why["triton"])
    # native cannot serve: no driver here (CPU CI), or, on a GPU host, the CPU device
    assert any(("device cpu is not supported" in r or "no CUDA driver" in r) for r in why["native"])
    assert why["cpu"] == []
    text = str(e)
    assert "rmsnorm on cpu: runs on cpu" in text and "[ok  ] cpu" in text
    s = routing.explain("softmax", x, axis=0)
    assert any("needs axis=-1" in r for r in dict(s.candidates)["triton"])
    with gp.route(rmsnorm="native"):
        forced = routing.explain("rmsnorm", x, w)
        assert forced.backend is None and "rmsnorm:native" in forced.override


def _count_decisions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The candidates evaluated from now on (a cached decision evaluates none)."""
    calls: list[str] = []
    real = select_mod._reasons

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0].backend)
        return real(*args, **kwargs)

    select_mod.invalidate()
    monkeypatch.setattr(select_mod, "_reasons", counting)
    return calls


def test_decisions_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = _x(), gp.ones((8,), device="cpu")
    calls = _count_decisions(monkeypatch)
    gp.rmsnorm(x, w)
    first = len(calls)
    assert first == 3  # triton, native, cpu evaluated once
    for _ in range(5):
        gp.rmsnorm(x, w)
    assert len(calls) == first
    gp.rmsnorm(gp.ones((2, 16), device="cpu"), gp.ones((16,), device="cpu"))  # new shape class
    assert len(calls) == 2 * first


def test_cpu_fallback_is_never_silent_for_cuda_arrays() -> None:
    # No GPU backend here for cuda arrays, and NumPy never serves them.
    cand = routing.TABLE["rmsnorm"].candidates[-1]
    assert cand.backend == "cpu" and cand.devices == frozenset({"cpu"})


def test_unserved_lists_ops_without_a_backend_on_a_device() -> None:
    assert routing.unserved(("rmsnorm", "sdpa", "linear"), "cpu") == {}


@pytest.mark.gpu
def test_every_model_op_has_a_gpu_backend() -> None:
    from pygpukit.cli.chat import MODEL_OPS

    assert routing.unserved(MODEL_OPS, "cuda:0") == {}


def test_integer_side_inputs_do_not_block_a_gpu_candidate() -> None:
    # rope's positions are int64: the triton candidate must still accept the call's dtypes.
    cand = routing.TABLE["rope"].candidates[0]
    assert cand.backend == "triton" and {"int32", "int64", "bfloat16"} <= cand.dtypes


def test_timings_follow_stats() -> None:
    x, w = _x(), gp.ones((8,), device="cpu")
    gp.rmsnorm(x, w)
    assert routing.timings() == {}  # off by default: no clock reads on the hot path
    routing.record_timings()
    gp.rmsnorm(x, w)
    routing.record_timings(False)
    t = routing.timings()
    assert set(t) == set(routing.stats()) == {"rmsnorm"}
    assert t["rmsnorm"]["cpu"] > 0.0
    routing.reset_stats()
    assert routing.timings() == {}


def test_per_input_constraints_are_named_and_enter_the_decision_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moe_linear's native twin (CUTLASS) needs half-precision x and K, N multiples of 8: each
    failing constraint is named by input position, and N (the second input's dim 1, not the
    first input's last dim) is part of the cached decision's key."""
    rng = np.random.default_rng(3)
    experts = gp.from_numpy(rng.integers(0, 4, (5, 2)).astype(np.int32), device="cpu")
    rows, be = gp.moe_align(experts, 4, 16)
    x = gp.from_numpy(rng.standard_normal((5, 12)).astype(np.float32), device="cpu")
    w = gp.from_numpy(rng.standard_normal((4, 20, 12)).astype(np.float32), device="cpu")
    why = dict(routing.explain("moe_linear", x, w, rows, be, None, None).candidates)["native"]
    assert "input 0 has dtype float32, needs one of bfloat16, float16" in why
    assert "needs dim 1 of input 0 a multiple of 8, got 12" in why
    assert "needs dim 1 of input 1 a multiple of 8, got 20" in why
    x16 = gp.from_numpy(rng.standard_normal((5, 16)).astype(np.float16), device="cpu")
    w16 = gp.from_numpy(rng.standard_normal((4, 24, 16)).astype(np.float16), device="cpu")
    why16 = dict(routing.explain("moe_linear", x16, w16, rows, be, None, None).candidates)
    assert not any("multiple of" in r or "input 0" in r for r in why16["native"])

    calls = _count_decisions(monkeypatch)
    gp.moe_linear(x16, w16, rows, be, 2)
    first = len(calls)
    gp.moe_linear(x16, w16, rows, be, 2)
    assert len(calls) == first  # same key
    w20 = gp.from_numpy(rng.standard_normal((4, 20, 16)).astype(np.float16), device="cpu")
    gp.moe_linear(x16, w20, rows, be, 2)
    assert len(calls) == 2 * first  # N changed: a new decision


def test_serves_answers_without_raising_and_caches_refusals() -> None:
    """routing.select.serves: True where select picks a backend, False where no candidate
    can serve (cached, refusals too), and a forced route that cannot serve still raises."""
    from pygpukit.errors import RouteError

    sel = select_mod  # the module (routing.select is also the function's name)
    dev = gp.runtime.device("cpu")
    x = gp.zeros((4, 128), "float16", device="cpu")
    qw = gp.quantize_weight(np.ones((8, 128), np.float32), "int4", device="cpu")
    inputs = (x, qw.data, qw.scales, None)
    assert sel.serves("qgemm_int4_dense", dev, inputs, {"group": 128})
    f64 = gp.zeros((4, 128), "float64", device="cpu")
    assert sel.serves("softmax", dev, (f64,), {"axis": -1})
    c = gp.zeros((4, 4), "complex64", device="cpu")
    assert not sel.serves("relu", dev, (c,), {})
    assert not sel.serves("relu", dev, (c,), {})  # the cached refusal
    assert any(v is False for v in sel._serves.values())
    with gp.route("qgemm_int4_dense:native"), pytest.raises(RouteError, match="cannot serve"):
        sel.serves("qgemm_int4_dense", dev, inputs, {"group": 128})
    # A "*" rule forcing a backend the op does not have: not served, no error (the caller's
    # other way runs, whose ops the rule reaches).
    with gp.route("*:triton"):
        assert not sel.serves("qgemm_int4_dense", dev, inputs, {"group": 128})
    key = sel._key("relu", dev, (c,), {})
    assert sel._serves[key] is False
    sel.invalidate()
    assert sel._serves == {}


def test_wildcard_route_keeps_linear_quantized_dense_rows_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``*:triton`` the dense rows of an int4 weight expand it (dequantize_weight, linear)
    rather than fail on the one-product op, which has no Triton candidate."""
    ops_gemv = importlib.import_module("pygpukit.ops.gemv")
    ran: list[str] = []

    def run(op: str, inputs: object, params: object, out: object = None) -> str:
        ran.append(op)
        return op

    monkeypatch.setattr(ops_gemv, "run", run)
    monkeypatch.setattr(ops_gemv, "_dense_path", lambda fmt, x: True)
    mm = importlib.import_module("pygpukit.ops.matmul")
    monkeypatch.setattr(mm, "linear", lambda x, w, bias=None, out=None: "linear")
    qw = gp.quantize_weight(np.ones((8, 128), np.float32), "int4", device="cpu")
    x = gp.zeros((300, 128), "float16", device="cpu")
    with gp.route("*:triton"):
        gp.linear_quantized(x, qw)
    assert ran == ["dequantize_weight"]
    ran.clear()
    gp.linear_quantized(x, qw)  # on the CPU the NumPy twin serves the one-product op
    assert ran == ["qgemm_int4_dense"]
