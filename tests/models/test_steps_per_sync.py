"""Decode steps run on the device between host round trips (steps_per_sync,
models/decode_loop.py): the tokens of one step a sync at every k, greedy and drawn on the device
(sampling, penalties), with rows of different lengths, a stop token inside a run, and a last
run shorter than k; bad arguments named; on a GPU the k steps replay from one CUDA graph, in
both determinism modes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pygpukit as gp
from pygpukit.models import GenerationStats, decode_loop, load_model
from pygpukit.models.generation import stream_batch
from pygpukit.models.sampling import SamplingParams

from ._util import FIXTURES, golden

KW = {"temperature": 0, "stop_token_ids": ()}


def _prompts() -> list[list[int]]:
    g = golden("llama")["prompts"]
    return [g[0], g[1][:5], g[0][:2]]


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("k", [2, 5, 13, 40])
def test_tokens_equal_one_step_a_sync(k: int, arch: str) -> None:
    """13 new tokens: 12 decode steps, so k = 5 ends with a run of 2 and k = 13 or 40 is one
    short run; the stats count the same steps and tokens. GPT-2 reads its positions at decode
    (learned position embeddings): the runs advance them; Llama's they need not."""
    model = load_model(FIXTURES / arch, device="cpu")
    assert model.decode_reads_positions == (arch == "gpt2")
    assert decode_loop.LEAN_STEPS  # the shipped steps (ids from the step before's tokens)
    st1, stk = GenerationStats(), GenerationStats()
    want = model.generate(_prompts(), 13, stats=st1, **KW)
    got = model.generate(_prompts(), 13, stats=stk, steps_per_sync=k, **KW)
    assert got == want
    assert (stk.decode_steps, stk.new_tokens) == (st1.decode_steps, st1.new_tokens) == (12, 39)
    assert stk.decode_mode.startswith(f"eager, {k} greedy steps a sync")


def _drawn(model: Any, params: SamplingParams, k: int, **kw: Any) -> list[list[int]]:
    """Each row's 13 new tokens from stream_batch with ``params`` and steps_per_sync=k."""
    rows: list[list[int]] = [[] for _ in _prompts()]
    for step in stream_batch(model, _prompts(), 13, sampling=params, steps_per_sync=k, **kw):
        for r, t in step:
            rows[r].append(t)
    return rows


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=0.9, top_k=0, top_p=1.0, seed=3, on_device=True),
        SamplingParams(temperature=0.7, top_k=20, top_p=0.8, min_p=0.05, seed=4, on_device=True),
        SamplingParams(
            temperature=1.1, top_k=0, top_p=1.0, repetition_penalty=1.3, seed=5, on_device=True
        ),
        SamplingParams(temperature=0, repetition_penalty=1.5, on_device=True),
    ],
    ids=["plain", "top-k-p-min-p", "penalty", "greedy-penalty"],
)
@pytest.mark.parametrize("k", [3, 40])
def test_device_draws_equal_one_step_a_sync(params: SamplingParams, k: int) -> None:
    """Draws on the device (gp.sample; its NumPy twin on the CPU): the run's counters and seen
    marks are those of one step a sync, so the tokens are the same, for every row."""
    model = load_model(FIXTURES / "llama", device="cpu")
    st = GenerationStats()
    want = _drawn(model, params, 1, stop_ids=())
    got = _drawn(model, params, k, stop_ids=(), stats=st)
    assert got == want
    kind = "greedy" if params.greedy else "sampled"
    assert st.decode_mode.startswith(f"eager, {k} {kind} steps a sync")
    if params.seed is not None:  # another seed draws other tokens: the key reaches the draws
        other = SamplingParams(**{**params.__dict__, "seed": params.seed + 100})
        assert _drawn(model, other, k, stop_ids=()) != got


def test_device_draws_with_a_stop_inside_a_run_and_streams() -> None:
    """Sampled on the device with a stop token that row 0 draws inside a run of 4: the outputs
    of one step a sync (the run's later tokens dropped, its slots taken back); a run given
    another stream word draws other tokens."""
    from pygpukit.models.decode_loop import DecodeRun
    from pygpukit.models.sampling import Sampler

    model = load_model(FIXTURES / "llama", device="cpu")
    params = SamplingParams(temperature=0.9, top_k=0, top_p=1.0, seed=21, on_device=True)
    free = _drawn(model, params, 1, stop_ids=())
    stop = free[0][5]
    assert stop not in free[0][:5]
    want = _drawn(model, params, 1, stop_ids=(stop,))
    assert _drawn(model, params, 4, stop_ids=(stop,)) == want and want[0][-1] == stop
    cache = model.new_cache(1, 32)
    run = DecodeRun(model, cache, 1, 6, graph=False, sampler=Sampler(params))
    a = run.run([5], 6, [[1, 2, 5]])
    run.rewind(6)
    assert run.run([5], 6, [[1, 2, 5]]) == a  # the same counters: the same draws
    run.rewind(6)
    assert run.run([5], 6, [[1, 2, 5]], streams=[7]) != a
    with pytest.raises(ValueError, match=r"streams must be 1 int\(s\) in \[0, 2\*\*31\)"):
        run.run([5], 2, [[5]], streams=[2**31])
    with pytest.raises(ValueError, match="needs the history"):
        run.run([5], 2)


@pytest.mark.parametrize("early", [True, False], ids=["behind-the-prefill", "after-the-host"])
def test_first_run_behind_the_prefill_or_after_the_host(
    early: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """generate's first run enqueued behind the prefill, the prefill's tokens drawn on the
    device into its inputs (decode_loop.EARLY_FIRST_RUN), or after the host drew them: the
    tokens of one step a sync, greedy and sampled with a penalty, rows of three lengths."""
    monkeypatch.setattr(decode_loop, "EARLY_FIRST_RUN", early)
    model = load_model(FIXTURES / "llama", device="cpu")
    want = model.generate(_prompts(), 9, **KW)
    assert model.generate(_prompts(), 9, steps_per_sync=4, **KW) == want
    for params in (
        SamplingParams(
            temperature=1.1, top_k=0, top_p=1.0, repetition_penalty=1.3, seed=5, on_device=True
        ),
        SamplingParams(temperature=0, repetition_penalty=1.5, on_device=True),
    ):
        assert _drawn(model, params, 4, stop_ids=()) == _drawn(model, params, 1, stop_ids=())


@pytest.mark.parametrize("early", [True, False], ids=["behind-the-prefill", "after-the-host"])
def test_a_stop_as_the_prefills_token_drops_the_first_run(
    early: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row's first token (the prefill's) is a stop token: a run enqueued behind the
    prefill (EARLY_FIRST_RUN) is spare and dropped, so the cache counts what one step a sync
    leaves and notes the run's stream (without it no run starts); a consumer that stops after
    the first step leaves the prompt alone too."""
    from pygpukit.creation import zeros
    from pygpukit.models.decode_loop import DecodeRun

    monkeypatch.setattr(decode_loop, "EARLY_FIRST_RUN", early)
    model = load_model(FIXTURES / "llama", device="cpu")
    p = [_prompts()[0]]
    first = model.generate(p, 1, **KW)[0][len(p[0])]
    kw = {"temperature": 0, "stop_token_ids": (first,)}
    want = model.generate(p, 9, **kw)
    assert model.cache is not None
    assert list(model.cache.lengths[:1]) == [len(p[0])]
    assert model.generate(p, 9, steps_per_sync=4, **kw) == want
    assert list(model.cache.lengths[:1]) == [len(p[0])]
    assert (model.cache.spare_stream is not None) == early
    greedy = SamplingParams(temperature=0)
    steps = stream_batch(model, p, 9, greedy, stop_ids=(), steps_per_sync=4)
    assert next(steps) == [(0, first)]
    steps.close()
    assert list(model.cache.lengths[:1]) == [len(p[0])]
    run = DecodeRun(model, model.new_cache(2, 16), 2, 4, graph=False)
    one = zeros((1, 1, model.config.vocab_size), "float32", model.device)
    with pytest.raises(ValueError, match=r"logits and history of 2 row\(s\) expected"):
        run.start_drawn([one], 2, [[1], [2]])
    with pytest.raises(ValueError, match=r"must hold 300 values \(one position\)"):
        run.start_drawn([one[..., :5], one], 2, [[1], [2]])
    assert list(run.cache.lengths) == [0, 0]


def test_stop_token_inside_a_run() -> None:
    """Row 0 stops at its 6th new token, inside the second run of 4: the same outputs (the
    steps after the stop are dropped) and the other rows go on."""
    model = load_model(FIXTURES / "llama", device="cpu")
    free = model.generate(_prompts(), 14, **KW)
    stop = free[0][len(_prompts()[0]) + 5]
    kw = {"temperature": 0, "stop_token_ids": (stop,)}
    want = model.generate(_prompts(), 14, **kw)
    assert model.generate(_prompts(), 14, steps_per_sync=4, **kw) == want
    assert want[0][-1] == stop and len(want[0]) <= len(free[0])


def test_cache_ends_as_with_one_step_a_sync() -> None:
    """Every row stops inside a run: the run's later tokens are taken back from the cache, so
    its lengths are those one step a sync leaves."""
    model = load_model(FIXTURES / "llama", device="cpu")
    p = [_prompts()[0]]
    free = model.generate(p, 14, **KW)
    stop = free[0][len(p[0]) + 2]
    kw = {"temperature": 0, "stop_token_ids": (stop,)}
    want = model.generate(p, 14, **kw)
    assert model.cache is not None
    lengths = list(model.cache.lengths[:1])
    for k in (8, 40):
        assert model.generate(p, 14, steps_per_sync=k, **kw) == want
        assert list(model.cache.lengths[:1]) == lengths, k
        # k = 8: the run enqueued behind the first was spare, dropped without a wait, and the
        # cache notes its stream for the next work on it; k = 40: one run, none spare (and the
        # generation first ordered itself after the note left before, which it clears).
        assert (model.cache.spare_stream is not None) == (k == 8), k


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_resume_continues_where_the_last_run_left_the_device(sampled: bool) -> None:
    """A run enqueued behind the last one without the host (DecodeRun.resume: the last token,
    positions, marks, Philox counters and seen marks taken from the device) gives the tokens
    of one longer run; the lengths count both; resume is refused where the cache has no room,
    after a rewind (the device no longer sits where the lengths end) and before any run."""
    from pygpukit.models.decode_loop import DecodeRun
    from pygpukit.models.sampling import Sampler

    model = load_model(FIXTURES / "llama", device="cpu")
    params = SamplingParams(temperature=0.9, repetition_penalty=1.2, seed=8, on_device=True)
    sampler = Sampler(params) if sampled else None
    cache = model.new_cache(2, 11)
    run = DecodeRun(model, cache, 2, 6, graph=False, sampler=sampler)
    assert not run.can_resume(1)  # nothing enqueued yet
    hist = [[1, 2, 5], [7, 5]]
    whole = run.run([5, 5], 6, hist)
    run.rewind(6)
    assert not run.can_resume(1)
    with pytest.raises(RuntimeError, match="no run to continue on this stream"):
        run.resume(1)
    first = run.start([5, 5], 3, hist)
    assert run.can_resume(3)
    second = run.resume(3)
    assert list(cache.lengths) == [6, 6]
    got = [a + b for a, b in zip(run.finish(first), run.finish(second), strict=True)]
    assert got == whole
    assert run.can_resume(5) and not run.can_resume(6)  # 5 of the 11 slots left
    with pytest.raises(RuntimeError, match="no room for 6 more steps"):
        run.resume(6)
    with pytest.raises(ValueError, match=r"DecodeRun.resume: n must be in 1\.\.6, got 7"):
        run.resume(7)
    assert list(cache.lengths) == [6, 6]


def test_a_short_run_is_made_of_its_binary_digits() -> None:
    """A run of n < steps steps is n's binary digits, largest first (each a graph of its own on
    a GPU); a whole run is one."""
    from pygpukit.models.decode_loop import DecodeRun

    model = load_model(FIXTURES / "llama", device="cpu")
    run = DecodeRun(model, model.new_cache(1, 40), 1, 32, graph=False)
    assert run.segments(32) == [32]
    assert run.segments(31) == [16, 8, 4, 2, 1]
    assert run.segments(12) == [8, 4] and run.segments(1) == [1]
    for n in range(1, 32):
        parts = run.segments(n)
        assert sum(parts) == n and parts == sorted(parts, reverse=True)
        assert all(t & (t - 1) == 0 for t in parts) and len(set(parts)) == len(parts)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
@pytest.mark.parametrize("ramp", [True, False], ids=["ramped-marks", "marks-a-step"])
@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_every_short_run_continues_like_one_longer_run(
    sampled: bool, ramp: bool, arch: str
) -> None:
    """Runs of every length 1..steps, each resumed by the next on the device, give the tokens
    of one run of their total, with the marks (and gpt2's positions) made a step at a time or
    all at a run's start (decode_loop.RAMP_MARKS), and leave exactly their steps in the cache
    lengths."""
    from pygpukit.models.decode_loop import DecodeRun
    from pygpukit.models.sampling import Sampler

    model = load_model(FIXTURES / arch, device="cpu")
    params = SamplingParams(temperature=0.9, top_k=20, seed=3, on_device=True)
    hist = [[1, 2, 5], [7, 5]]
    shipped = decode_loop.RAMP_MARKS
    try:
        decode_loop.RAMP_MARKS = True
        whole = DecodeRun(model, model.new_cache(2, 40), 2, 21,
                          graph=False, sampler=Sampler(params) if sampled else None)  # fmt: skip
        want = whole.run([5, 5], 21, hist)
        decode_loop.RAMP_MARKS = ramp
        cache = model.new_cache(2, 40)
        run = DecodeRun(model, cache, 2, 6, graph=False,
                        sampler=Sampler(params) if sampled else None)  # fmt: skip
        pending = [run.start([5, 5], 1, hist)]
        for n in range(2, 7):  # 1 + 2 + ... + 6 = 21 steps
            pending.append(run.resume(n))
        got: list[list[int]] = [[], []]
        for p in pending:
            for r, row in enumerate(run.finish(p)):
                got[r] += row
    finally:
        decode_loop.RAMP_MARKS = shipped
    assert got == want
    assert list(cache.lengths) == [21, 21]


class _Replays:
    """A CPU stand-in for a recorded graph: a replay runs the body it stands for."""

    captured = True

    def __init__(self, body: Any) -> None:
        self.body = body

    def replay(self, stream: Any = None) -> None:
        self.body()

    def reset(self) -> None:
        self.captured = False


def _with_stand_in(model: Any, cache: Any, steps: int) -> Any:
    """An eager DecodeRun given a stand-in for its whole graph (DecodeRun._enqueue's graph
    branches then run on the CPU)."""
    from pygpukit.models.decode_loop import DecodeRun

    run = DecodeRun(model, cache, 2, steps, graph=False)
    run.graph = _Replays(lambda: run._body(steps, run.out))
    return run


def test_short_runs_of_graphs_read_their_rows_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the graph branch (stand-ins that run what each graph would): a short run is the
    graphs of its binary digits, each writing its own rows of the token buffer, read back in
    order; the tokens are one eager run's, and every run may be resumed on the device."""
    from pygpukit.models.decode_loop import DecodeRun

    model = load_model(FIXTURES / "llama", device="cpu")
    want = DecodeRun(model, model.new_cache(2, 40), 2, 21, graph=False).run([5, 5], 21)
    run = _with_stand_in(model, model.new_cache(2, 40), 8)
    made: list[int] = []

    def tail(t: int) -> _Replays:
        made.append(t)
        return _Replays(lambda: run._body(t, run.out[t - 1 : 2 * t - 1]))

    monkeypatch.setattr(run, "_tail", tail)
    pending = [run.start([5, 5], 5)] + [run.resume(n) for n in (8, 3, 5)]  # 21 steps
    got: list[list[int]] = [[], []]
    for p in pending:
        for r, row in enumerate(run.finish(p)):
            got[r] += row
    assert got == want
    assert made == [4, 1, 2, 1, 4, 1]
    assert list(run.cache.lengths) == [21, 21]
    assert run.run([got[0][-1], got[1][-1]], np.int64(3)) is not None  # a NumPy count
    run.reset()
    with pytest.raises(RuntimeError, match=r"after reset\(\)"):
        run.run([5, 5], 2)


def test_short_graphs_are_recorded_where_and_how_the_run_was_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A graph of fewer steps is recorded on a sibling of the stream current when the run was
    made (its SM partition) and in the determinism mode of then, whatever the caller's now; a
    failed recording lets the graphs already recorded go."""
    from pygpukit.models.decode_loop import DecodeRun

    model = load_model(FIXTURES / "llama", device="cpu")
    with gp.deterministic(True):
        run = _with_stand_in(model, model.new_cache(2, 40), 8)
    home = object()
    monkeypatch.setattr(run, "_home", type("Home", (), {"sibling": lambda self: home})())
    seen: list[tuple[int, bool, Any]] = []

    def record(dev: Any, body: Any, what: str, warm_up: bool = True, stream: Any = None) -> Any:
        assert not warm_up
        seen.append((int(what.split("'s ")[1].split("-")[0]), gp.is_deterministic(), stream))
        return _Replays(body)

    monkeypatch.setattr(decode_loop, "capture", record)
    with gp.deterministic(False):
        got = run.run([5, 5], 5)
    assert seen == [(4, True, home), (1, True, home)]
    want = DecodeRun(model, model.new_cache(2, 40), 2, 5, graph=False).run([5, 5], 5)
    assert got == want
    assert sorted(run._tails) == [1, 4]

    def fail(dev: Any, body: Any, what: str, **kw: Any) -> Any:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(decode_loop, "capture", fail)
    kept = list(run._tails.values())
    with pytest.warns(RuntimeWarning, match="out of memory"):
        run.run([5, 5], 2)  # the 2-step graph fails to record
    assert run._tails == {} and not any(g.captured for g in kept)


def test_a_run_used_once_records_no_short_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    """model.decode_run: a sampler without a seed draws a fresh key a generation, so its run
    serves one generation and records no graphs of fewer steps; greedy runs and seeded ones
    are kept and do."""
    from pygpukit.models.sampling import Sampler

    made: list[bool] = []

    class Recorded:
        partition_id = None

        def __init__(self, *a: Any, short_graphs: bool = True, **kw: Any) -> None:
            made.append(short_graphs)

    monkeypatch.setattr(decode_loop, "DecodeRun", Recorded)
    model = load_model(FIXTURES / "llama", device="cpu")
    model.ensure_cache(1, 32)
    model.decode_run(1, 4)
    model.decode_run(1, 4, Sampler(SamplingParams(temperature=0, repetition_penalty=1.2)))
    model.decode_run(1, 4, Sampler(SamplingParams(temperature=0.8, seed=1, on_device=True)))
    model.decode_run(1, 4, Sampler(SamplingParams(temperature=0.8, on_device=True)))
    assert made == [True, True, True, False]


def test_a_short_graph_that_fails_to_record_warns_and_runs_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A graph of fewer steps that fails to record (out of memory, say) turns short graphs off
    with a RuntimeWarning naming the reason: a shorter run then replays the whole graph where
    the cache has room for all its steps (and is not resumed from the device, which sits past
    its last kept token) or runs its steps eagerly; the tokens are the same."""
    from pygpukit.models.decode_loop import DecodeRun

    model = load_model(FIXTURES / "llama", device="cpu")
    want = DecodeRun(model, model.new_cache(2, 40), 2, 10, graph=False).run([5, 5], 10)
    run = _with_stand_in(model, model.new_cache(2, 10), 8)

    def fail(t: int) -> None:
        raise RuntimeError(f"the decode run's {t}-step tail could not be captured: out of memory")

    monkeypatch.setattr(run, "_tail", fail)
    with pytest.warns(RuntimeWarning, match="4-step tail could not be captured: out of memory"):
        first = run.start([5, 5], 5)
    assert not run.short_graphs and not run.can_resume(1)  # the whole graph ran 8 steps
    got = run.finish(first)
    second = run.start([row[-1] for row in got], 3)  # 5 slots left: 3 eager steps
    assert run.can_resume(2)
    third = run.resume(2)
    got = [a + b + c for a, b, c in zip(got, run.finish(second), run.finish(third), strict=True)]
    assert got == want
    assert list(run.cache.lengths) == [10, 10]


def test_a_consumer_that_stops_early_leaves_no_enqueued_tokens_in_the_cache() -> None:
    """The run enqueued ahead while the host reads the current one is taken back from the
    cache when the consumer stops iterating: the lengths count the runs it was handed."""
    model = load_model(FIXTURES / "llama", device="cpu")
    p = _prompts()[0]
    greedy = SamplingParams(temperature=0)
    steps = stream_batch(model, [p], 20, greedy, stop_ids=(), steps_per_sync=4)
    next(steps)  # the prefill's token
    next(steps)  # the first run's first token (the run of 4 and the one behind it enqueued)
    steps.close()
    assert model.cache is not None
    assert list(model.cache.lengths[:1]) == [len(p) + 4]


def test_greedy_run_checks_its_arguments() -> None:
    from pygpukit.models.decode_loop import GreedyRun

    model = load_model(FIXTURES / "llama", device="cpu")
    cache = model.new_cache(2, 32)
    with pytest.raises(ValueError, match=r"steps must be in 1\.\.32"):
        GreedyRun(model, cache, 2, 33, graph=False)
    run = GreedyRun(model, cache, 2, 4, graph=False)
    vocab = model.config.vocab_size
    with pytest.raises(ValueError, match=r"token ids outside \[0, 300\)"):
        run.run([1, vocab], 2)
    with pytest.raises(ValueError, match=r"2 token\(s\) expected"):
        run.run([1], 2)
    with pytest.raises(ValueError, match=r"n must be in 1\.\.4"):
        run.run([1, 2], 5)
    assert list(cache.lengths) == [0, 0]  # refused runs changed nothing
    assert [len(r) for r in run.run([1, 2], 3)] == [3, 3] and list(cache.lengths) == [3, 3]


def test_bad_arguments_name_the_problem() -> None:
    model = load_model(FIXTURES / "llama", device="cpu")
    p = _prompts()[0]
    with pytest.raises(ValueError, match="steps_per_sync must be >= 1, got 0"):
        model.generate(p, 4, steps_per_sync=0, **KW)
    for bad in (2.0, True, "4"):
        with pytest.raises(TypeError, match="steps_per_sync must be an int >= 1"):
            model.generate(p, 4, steps_per_sync=bad, **KW)
    host = "draws the tokens on the device, but this sampler draws on the host"
    with pytest.raises(ValueError, match=host):
        model.generate(p, 4, steps_per_sync=4, temperature=0.7)
    with pytest.raises(ValueError, match=host):
        model.generate(p, 4, steps_per_sync=4, repetition_penalty=1.2, **KW)
    with pytest.raises(ValueError, match=r"on_device=False on cpu"):
        list(stream_batch(model, [p], 4, SamplingParams(on_device=False), steps_per_sync=4))
    from pygpukit.models.decode_loop import DecodeRun
    from pygpukit.models.sampling import Sampler

    cache = model.new_cache(1, 16)
    penalty = Sampler(SamplingParams(repetition_penalty=1.2, on_device=True))
    run = DecodeRun(model, cache, 1, 4, graph=False, sampler=penalty)
    with pytest.raises(ValueError, match="a run that draws its tokens needs the history"):
        run.run([1], 2)
    assert list(cache.lengths) == [0]
    with pytest.raises(ValueError, match="do not combine"):
        model.generate(p, 4, steps_per_sync=4, speculative="ngram", **KW)
    with pytest.raises(ValueError, match="needs the KV cache"):
        model.generate(p, 4, steps_per_sync=4, use_cache=False, **KW)
    assert model.generate(p, 4, steps_per_sync=4, **KW) == model.generate(p, 4, **KW)


@pytest.mark.gpu
@pytest.mark.parametrize("det", [False, True], ids=["default", "deterministic"])
def test_graph_runs_equal_one_step_a_sync_on_gpu(det: bool) -> None:
    """bfloat16 on CUDA: 8 steps a replay of one graph give the tokens of the one-step graph
    (30 new tokens: three full runs and a last run of 5 steps, the graphs of 4 and 1 steps),
    greedy and sampled on the device (with and without a repetition penalty)."""
    if gp.device_count() == 0:
        pytest.skip("no CUDA device")
    model = load_model(FIXTURES / "llama", dtype="bfloat16", device="cuda")
    with gp.deterministic(det):
        want = model.generate(_prompts(), 30, **KW)
        st = GenerationStats()
        got = model.generate(_prompts(), 30, steps_per_sync=8, stats=st, **KW)
        again = model.generate(_prompts(), 30, steps_per_sync=8, **KW)
    assert st.decode_mode.startswith("CUDA graph replay") and "8 greedy steps" in st.decode_mode
    assert got == want == again
    sample = {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "seed": 11, "stop_token_ids": ()}
    with gp.deterministic(det):
        want = model.generate(_prompts(), 30, **sample)
        st = GenerationStats()
        got = model.generate(_prompts(), 30, steps_per_sync=8, stats=st, **sample)
        again = model.generate(_prompts(), 30, steps_per_sync=8, **sample)
        pen = {**sample, "repetition_penalty": 1.3}
        want_pen = model.generate(_prompts(), 30, **pen)
        got_pen = model.generate(_prompts(), 30, steps_per_sync=8, **pen)
    assert "8 sampled steps a replay" in st.decode_mode
    assert got == want == again and got_pen == want_pen


@pytest.mark.gpu
def test_pipelined_runs_follow_the_consumers_stream_on_gpu() -> None:
    """A consumer that takes each step under another stream: a run is continued on the device
    only on the stream it went to (DecodeRun.can_resume), else it starts from the host after
    the wait, so the tokens are those of one step a sync; a generation after one that left a
    spare run on another stream is ordered after it."""
    if gp.device_count() == 0:
        pytest.skip("no CUDA device")
    model = load_model(FIXTURES / "llama", dtype="bfloat16", device="cuda")
    want = model.generate(_prompts(), 30, **KW)
    dev = gp.device("cuda")
    streams = [gp.Stream(device=dev.core_index) for _ in range(2)]
    rows: list[list[int]] = [list(p) for p in _prompts()]
    steps = stream_batch(model, _prompts(), 30, SamplingParams(temperature=0), stop_ids=(),
                         steps_per_sync=4)  # fmt: skip
    i = 0
    while True:
        with gp.stream(streams[i % 2]):
            step = next(steps, None)
        i += 1
        if step is None:
            break
        for r, t in step:
            rows[r].append(t)
    assert rows == want
    # A generation whose rows all stop inside a run leaves its spare run running on stream 0;
    # the next one, on stream 1, is ordered after it (DecodeRun.order_after) before its prefill
    # writes the same cache rows.
    stop = want[0][len(_prompts()[0]) + 3]
    for _ in range(3):
        with gp.stream(streams[0]):
            model.generate(_prompts()[:1], 30, temperature=0, stop_token_ids=(stop,),
                           steps_per_sync=8)  # fmt: skip
        with gp.stream(streams[1]):
            assert model.generate(_prompts(), 30, steps_per_sync=4, **KW) == want


@pytest.mark.gpu
def test_graph_runs_of_every_length_write_only_their_slots_on_gpu() -> None:
    """bfloat16 on CUDA: runs of 1..8 steps of an 8-step graph run (the short ones made of the
    graphs of 4, 2 and 1 steps, recorded when first needed), each resumed on the device by the
    next, give the tokens of one step a sync; a run of n steps writes the n cache slots after
    the row's length and leaves the later ones as they were."""
    import numpy as np

    from pygpukit.models.decode_loop import DecodeRun
    from pygpukit.models.generation import _prefill

    if gp.device_count() == 0:
        pytest.skip("no CUDA device")
    model = load_model(FIXTURES / "llama", dtype="bfloat16", device="cuda")
    p = _prompts()[0]
    want = model.generate([p], 1 + 36, **KW)[0][len(p) :]  # the prefill's token, then 1+..+8
    cache = model.new_cache(1, len(p) + 48)
    run = DecodeRun(model, cache, 1, 8, graph=True)  # before the prefill: its warm-up writes
    _prefill(model, cache, [p])
    cache.lengths[0] = len(p)
    got = [want[0]]
    for n in range(1, 9):
        start = int(cache.lengths[0])
        before = cache.k.to_numpy().view(np.uint16)
        pending = run.start([want[0]], 1) if n == 1 else run.resume(n)
        got += run.finish(pending)[0]
        after = cache.k.to_numpy().view(np.uint16)
        assert (after[..., start + n :, :] == before[..., start + n :, :]).all(), n
        assert not (after[..., start : start + n, :] == before[..., start : start + n, :]).all()
        assert sorted(run._tails) == [t for t in (1, 2, 4) if t <= n], n
    assert got == want
    assert list(cache.lengths) == [len(p) + 36]
    run.reset()
