"""Choosing the backend for a call, with a per-(op, override, device, dtypes, shape class) cache,
plus ``explain`` (why each candidate passes or fails) and ``stats`` (what actually ran)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pygpukit import determinism
from pygpukit.array import GPUArray
from pygpukit.errors import BackendUnavailableError, RouteError
from pygpukit.routing import backends
from pygpukit.routing.overrides import forced_backend, named_backend
from pygpukit.routing.table import TABLE, Candidate, OpRoute
from pygpukit.runtime import Device

__all__ = [
    "select",
    "serves",
    "explain",
    "stats",
    "timings",
    "record_timings",
    "reset_stats",
    "invalidate",
    "Explanation",
]

Impl = Callable[..., Any]
_cache: dict[tuple[Any, ...], tuple[str, Impl]] = {}
_serves: dict[tuple[Any, ...], bool] = {}  # serves()'s answers, by select's key
_stats: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
# Host seconds spent inside each op's implementation (the launch on a GPU, the whole computation
# on the NumPy backend), recorded only while enabled: two clock reads cost ~0.3 us per call, a
# few percent of a small op. Device time would need events around every call.
_times: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
_timing = [False]


def record_timings(on: bool = True) -> None:
    """Start (or stop) recording host time per op and backend for ``timings()``."""
    _timing[0] = bool(on)


_ROUTE_PARAMS = {op: r.route_params for op, r in TABLE.items() if r.route_params}
# The (input, axis) dims some candidate constrains (Candidate.multiple_of): part of the key.
_DIM_KEYS = {
    op: tuple(sorted({(i, ax) for c in r.candidates for i, ax, _ in c.multiple_of}))
    for op, r in TABLE.items()
    if any(c.multiple_of for c in r.candidates)
}


def _input(inputs: tuple[Any, ...], i: int) -> Any:
    """The op's input at position i (None past the end: an optional input not passed)."""
    return inputs[i] if i < len(inputs) else None


def invalidate() -> None:
    """Forget cached decisions (after kernels are reloaded or backends change)."""
    _cache.clear()
    _serves.clear()


def _route(op: str) -> OpRoute:
    try:
        return TABLE[op]
    except KeyError:
        raise RouteError(f"no routing entry for op {op!r}") from None


def _smooth(n: int, primes: tuple[int, ...]) -> bool:
    """Whether n >= 1 has no prime factor outside primes."""
    if n < 1:
        return False
    for p in primes:
        while n % p == 0:
            n //= p
    return n == 1


def _reasons(
    cand: Candidate,
    route: OpRoute,
    dev: Device,
    arrays: list[GPUArray],
    params: dict[str, Any],
    inputs: tuple[Any, ...] = (),
    forced: bool = False,
    det: bool | None = None,
) -> list[str]:
    """Every constraint of ``cand`` this call fails, in words (empty = it can serve); det: the
    deterministic mode as read once by the caller (None: read it now)."""
    why: list[str] = []
    devices = cand.devices
    if forced and cand.backend == "triton" and backends.interpreting():
        # Triton's interpreter runs kernels on host memory: forcing triton under
        # TRITON_INTERPRET=1 tests the Triton path on CPU-device arrays (never chosen by default).
        devices = devices | {"cpu"}
    if dev.type not in devices:
        why.append(f"device {dev} is not supported (runs on {', '.join(sorted(devices))})")
    for a in arrays:
        if a.dtype.name not in cand.dtypes:
            why.append(f"dtype {a.dtype.name} is not supported")
            break
    for name, want in cand.params:
        got = params.get(name)
        if name == "axis" and want == -1 and arrays and got in (-1, arrays[0].ndim - 1):
            continue
        if got != want:
            why.append(f"needs {name}={want!r}, got {got!r}")
    for i, allowed in cand.input_dtypes:
        arg = _input(inputs, i)
        if isinstance(arg, GPUArray) and arg.dtype.name not in allowed:
            why.append(f"input {i} has dtype {arg.dtype.name}, needs one of "
                       f"{', '.join(sorted(allowed))}")  # fmt: skip
    for i, ax, m in cand.multiple_of:
        arg = _input(inputs, i)
        if isinstance(arg, GPUArray) and ax < arg.ndim and arg.shape[ax] % m:
            why.append(f"needs dim {ax} of input {i} a multiple of {m}, got {arg.shape[ax]}")
    if cand.max_last_dim is not None and arrays and arrays[0].ndim:
        if arrays[0].shape[-1] > cand.max_last_dim:
            why.append(f"last dim {arrays[0].shape[-1]} exceeds {cand.max_last_dim}")
    if cand.smooth is not None:
        name, lo, hi, step, primes, any_hi = cand.smooth
        got = params.get(name)
        if not (isinstance(got, int) and lo <= got <= hi and got % step == 0
                and (got <= any_hi or _smooth(got, primes))):  # fmt: skip
            what = "even " if step == 2 else f"a multiple of {step} " if step > 1 else ""
            why.append(f"needs the transform length {name} {what}in [{lo}, {hi}] with prime "
                       f"factors in {primes} (any up to {any_hi}), got {got!r}")  # fmt: skip
    if det is None:
        det = determinism._on[0]
    if det:
        if cand.invariant is not None:
            bad = next((a.dtype.name for a in arrays if a.dtype.name not in cand.invariant), None)
            if bad is not None:
                why.append(f"not batch invariant for {bad} (the deterministic mode is on)")
    elif cand.deterministic_only and not forced:
        why.append("serves the deterministic mode only (gp.set_deterministic(True))")
    if (cand.min_capability > (0, 0) or cand.max_capability) and dev.type == "cuda":
        props = dev.properties
        cap = (props["major"], props["minor"])
        if cap < cand.min_capability:
            why.append(f"needs compute capability {cand.min_capability}, device has {cap}")
        if cand.max_capability is not None and cap > cand.max_capability:
            why.append(f"built for compute capability up to {cand.max_capability}, device has "
                       f"{cap}")  # fmt: skip
    ok, reason = backends.availability(cand.backend)
    if not ok:
        why.append(reason)
    elif not why:
        impl, missing = backends.implementation(cand.backend, route.family_of(cand), route.op)
        if impl is None:
            why.append(missing)
    return why


def _key(
    op: str,
    dev: Device,
    inputs: tuple[Any, ...],
    params: dict[str, Any],
    forced: str | bool | None = False,
    det: bool | None = None,
) -> tuple[Any, ...]:
    """select's cache key: the op, the forced backend, the device, the deterministic mode, the
    inputs' dtypes, the first input's rank and last dim, the route's params and the dims some
    candidate constrains. Built with plain loops: this runs on every op call (budget well under
    1 us)."""
    if forced is False:
        forced = forced_backend(op)[0]
    if det is None:
        det = determinism._on[0]
    key: list[Any] = [op, forced, dev, det]
    first: GPUArray | None = None
    for a in inputs:
        if type(a) is GPUArray:
            key.append(a._dtype)
            if first is None:
                first = a
    if first is not None:
        shape = first._shape
        key.append(len(shape))
        key.append(shape[-1] if shape else -1)
    route_params = _ROUTE_PARAMS.get(op)
    if route_params:
        for p in route_params:
            key.append(params.get(p))
    dims = _DIM_KEYS.get(op)
    if dims:
        for i, ax in dims:
            a = _input(inputs, i)
            key.append(a._shape[ax] if type(a) is GPUArray and ax < len(a._shape) else None)
    return tuple(key)


def select(
    op: str, dev: Device, inputs: tuple[Any, ...], params: dict[str, Any]
) -> tuple[str, Impl]:
    """(backend name, implementation) for this call; raises rather than fall back silently."""
    forced, source = forced_backend(op)
    det = determinism._on[0]  # read once: the key and the decision agree on the mode
    k = _key(op, dev, inputs, params, forced, det)
    hit = _cache.get(k)
    if hit is not None:
        return hit
    route = _route(op)
    arrays = [a for a in inputs if isinstance(a, GPUArray)]
    if forced is not None:
        # The backend may list several candidates (different dtypes or limits): the first that
        # serves the call, else every one's reasons.
        named = [c for c in route.candidates if c.backend == forced]
        if not named:
            names = ", ".join(c.backend for c in route.candidates)
            raise RouteError(
                f"{op}: {source} forces {forced}, which is not a backend for "
                f"{op} (candidates: {names})"
            )
        cand = named[0]
        reasons: list[str] = []
        for c in named:
            why = _reasons(c, route, dev, arrays, params, inputs, forced=True, det=det)
            if not why:
                cand, reasons = c, []
                break
            reasons.append("; ".join(why))
        if reasons:
            raise RouteError(
                f"{op}: {source} forces {forced}, which cannot serve this call: "
                + " | ".join(reasons)
            )
        chosen: Candidate | None = cand
    else:
        chosen = None
        failures = []
        for c in route.candidates:
            why = _reasons(c, route, dev, arrays, params, inputs, det=det)
            if not why:
                chosen = c
                break
            failures.append(f"{c.backend}: {'; '.join(why)}")
        if chosen is None:
            raise BackendUnavailableError(
                f"{op}: no backend can serve {dev} inputs of dtype "
                f"{', '.join(sorted({a.dtype.name for a in arrays}))} - " + " | ".join(failures)
            )
    assert chosen is not None
    impl, _ = backends.implementation(chosen.backend, route.family_of(chosen), op)
    assert impl is not None
    result = (chosen.backend, impl)
    _cache[k] = result
    return result


def serves(op: str, dev: Device, inputs: tuple[Any, ...], params: dict[str, Any]) -> bool:
    """Whether some backend serves this call, for an ops-layer path that has another way to
    compute it: False where no candidate can (select's BackendUnavailableError) or where a ``*``
    route forces a backend that cannot (``*:triton`` on an op with no Triton candidate: the
    other way keeps serving it, as before the op existed). A rule naming ``op`` itself that
    cannot serve still raises its RouteError: the user asked for that op's backend. The answer
    is cached under select's key, refusals too."""
    k = _key(op, dev, inputs, params)
    got = _serves.get(k)
    if got is None:
        try:
            select(op, dev, inputs, params)
            got = True
        except BackendUnavailableError:
            got = False
        except RouteError:
            if named_backend(op) is not None:
                raise
            got = False
        _serves[k] = got
    return got


def stats() -> dict[str, dict[str, int]]:
    """Calls per op, by the backend that actually executed them, since start or reset_stats()."""
    return {op: dict(by) for op, by in sorted(_stats.items())}


def timings() -> dict[str, dict[str, float]]:
    """Host seconds spent in each op, by backend, while ``record_timings()`` is on."""
    return {op: dict(by) for op, by in sorted(_times.items())}


def reset_stats() -> None:
    _stats.clear()
    _times.clear()


@dataclass
class Explanation:
    op: str
    device: Device
    backend: str | None
    override: str
    candidates: list[tuple[str, list[str]]]

    def __str__(self) -> str:
        head = f"{self.op} on {self.device}: "
        head += f"runs on {self.backend}" if self.backend else "no backend can serve this call"
        if self.override:
            head += f" (forced by {self.override})"
        lines = [head]
        for name, why in self.candidates:
            mark = "ok  " if not why else "fail"
            detail = "" if not why else " - " + "; ".join(why)
            lines.append(f"  [{mark}] {name}{detail}")
        return "\n".join(lines)


def explain(op: str, *inputs: Any, **params: Any) -> Explanation:
    """Which backend would run ``op`` on these arguments, and each candidate's pass/fail reasons."""
    route = _route(op)
    arrays = [a for a in inputs if isinstance(a, GPUArray)]
    if not arrays:
        raise TypeError(f"explain({op!r}, ...) needs the call's GPUArray arguments")
    dev = arrays[0].device
    forced, source = forced_backend(op)
    cands = [
        (c.backend, _reasons(c, route, dev, arrays, params, inputs, forced=c.backend == forced))
        for c in route.candidates
    ]
    if forced is not None:
        why = next((w for n, w in cands if n == forced), [f"{forced} is not a candidate"])
        backend = forced if not why else None
    else:
        backend = next((n for n, w in cands if not w), None)
    return Explanation(op, dev, backend, source, cands)
