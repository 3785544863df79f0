"""Generation: prefill the prompt(s) into the static KV cache, then decode one token per step.

Several prompts of different lengths run as one batch: each is prefilled into its own cache row
(one forward per distinct length), then every decode step feeds all rows together, each at its
own position (the matmuls are batched; attention reads each row's own prefix). A row stops at a
stop token (kept in its output, as HF does) or after max_new_tokens.

``stream_batch`` yields after every step the (row, token) pairs produced; ``stream`` and
``generate`` wrap it. Timing of prefill and decode is recorded in GenerationStats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pygpukit.models._gen_args as _gen_args
import pygpukit.models.speculative as _speculative
from pygpukit.models.errors import ContextLengthError
from pygpukit.models.kv_cache import StaticKVCache
from pygpukit.models.sampling import Sampler, SamplingParams

if TYPE_CHECKING:
    from pygpukit.array import GPUArray
    from pygpukit.models.decode_loop import DecodeRun, PendingRun
    from pygpukit.models.step_graph import StepGraph
    from pygpukit.models.transformer import CausalTransformerModel

__all__ = ["GenerationStats", "stream_batch", "stream", "generate", "default_stop_ids"]


@dataclass
class GenerationStats:
    """Token counts and wall times of prefill and decode (accumulated over calls).

    Prefill produces the first new token of each of the ``batch_rows`` rows; decode tokens/s
    counts the tokens after those.
    """

    prompt_tokens: int = 0
    new_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    decode_steps: int = 0
    batch_rows: int = 1
    decode_mode: str = ""
    draft_tokens: int = 0  # speculative decoding: tokens the drafter proposed
    accepted_tokens: int = 0  # ... and how many of them the model kept

    @property
    def acceptance_rate(self) -> float:
        """Kept drafts over proposed drafts (0 without speculative decoding)."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        n = self.new_tokens - min(self.new_tokens, self.batch_rows)
        return n / self.decode_s if self.decode_s > 0 else 0.0


def default_stop_ids(model: CausalTransformerModel) -> frozenset[int]:
    ids = set(model.config.eos_token_ids)
    tok = model.tokenizer
    if tok is not None:
        ids |= set(tok.stop_ids)
    return frozenset(ids)


def _as_batch(input_ids: Any) -> tuple[list[list[int]], bool]:
    """(prompts, was_single) from a list of ints, a list of lists, or a NumPy array."""
    return _gen_args.token_ids(input_ids)


def _check_lengths(model: CausalTransformerModel, prompts: list[list[int]], max_new: int) -> int:
    ctx = model.config.max_context
    longest = max(len(p) for p in prompts)
    if longest >= ctx:
        raise ContextLengthError(
            f"the prompt has {longest} tokens but the model's context is {ctx} tokens "
            "(room is needed for at least one new token); shorten the prompt"
        )
    vocab = model.config.vocab_size
    for i, p in enumerate(prompts):
        bad = [t for t in p if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt {i} has token ids outside [0, {vocab}): {bad[:5]}")
    return min(max_new, ctx - longest)


def _prefill(
    model: CausalTransformerModel, cache: StaticKVCache, prompts: list[list[int]]
) -> list[GPUArray]:
    """Run the prompts into the cache; the last-position logits [1, 1, V] of each row."""
    out: list[GPUArray | None] = [None] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for r, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(r)
    for rows in by_len.values():
        # Rows of one length that sit next to each other in the cache share one forward.
        runs: list[list[int]] = []
        for r in rows:
            if runs and runs[-1][-1] == r - 1:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in runs:
            logits = model.forward([prompts[r] for r in run], cache, row0=run[0])
            for j, r in enumerate(run):
                out[r] = logits[j : j + 1]
    return [o for o in out if o is not None]


def stream_batch(
    model: CausalTransformerModel,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int = 32,
    sampling: SamplingParams | None = None,
    stop_ids: Iterable[int] | None = None,
    max_seq_len: int | None = None,
    stats: GenerationStats | None = None,
    cache: StaticKVCache | None = None,
    use_cache: bool = True,
    graph: bool | None = None,
    speculative: Any = None,
    draft_tokens: int | None = None,
    steps_per_sync: int = 1,
) -> Iterator[list[tuple[int, int]]]:
    """Yield, after prefill and after each decode step, the (row, token) pairs of that step.

    speculative: "ngram" (prompt lookup) or a smaller draft model of the same tokenizer (or a
    drafter from models.speculative): each step checks ``draft_tokens`` proposed tokens (default
    8 for ngram, 4 for a model) in one forward and yields every token it keeps, all of row 0;
    greedy output is greedy decoding's and sampled output has the sampler's distribution
    (models/speculative.py). One prompt only; stats count proposed and kept drafts.

    graph: decode steps replayed from a CUDA graph of the model's own cache
    (CausalTransformerModel.step_graph; the same kernels as the eager step, one launch a step).
    None (default): wherever the step can be captured, else eager; True: raise RuntimeError with
    the reason when it cannot; False: eager. ``stats.decode_mode`` says which ran and why.

    steps_per_sync: decode steps run on the device between two host round trips
    (models/decode_loop.py; one CUDA graph holds them all where the step is captured). The
    tokens are those of one step a sync; stop tokens are checked on each run's tokens, and the
    steps a row runs past its stop are dropped. Sampling (and a repetition penalty) needs the
    device draw (gp.sample: on CUDA by default, SamplingParams(on_device=True) elsewhere); not
    with speculative decoding.
    """
    args = _gen_args.check(prompts, max_new_tokens, max_seq_len, stop_ids)
    batch = args.prompts
    params = sampling or SamplingParams()
    sampler = Sampler(params)
    from pygpukit.models import decode_loop

    decode_loop.check_steps_per_sync(steps_per_sync, params, model.device.type, speculative)
    if steps_per_sync > 1 and not use_cache:
        raise ValueError("steps_per_sync > 1 needs the KV cache (use_cache=True)")
    if speculative is not None:
        if len(batch) != 1:
            raise ValueError(
                f"speculative decoding takes one prompt, got {len(batch)}; batch rows decode "
                "together already (leave speculative=None)"
            )
        if not use_cache:
            raise ValueError("speculative decoding needs the KV cache (use_cache=True)")
    drafter, k = speculation(model, speculative, draft_tokens, sampler)
    max_new = _check_lengths(model, batch, args.max_new_tokens)
    if max_new <= 0:
        return
    stop = default_stop_ids(model) if args.stop_ids is None else args.stop_ids
    need = max(len(p) for p in batch) + max_new
    own_cache = cache is None  # graphs are kept only for the model's own cache
    if cache is None:
        n = need if args.max_seq_len is None else args.max_seq_len
        if n < need:
            raise ContextLengthError(
                f"max_seq_len {n} is too small for a {need - max_new}-token prompt plus "
                f"{max_new} new tokens"
            )
        # A check feeds k + 1 tokens: room for the drafts past the last kept token. A run of
        # steps_per_sync steps used once (sampling without a seed) records no graphs of fewer
        # steps: its last, shorter run replays the whole graph, so room for its spare steps.
        slack = k + steps_per_sync - 1
        cache = model.ensure_cache(len(batch), min(n + slack, model.config.max_context))
    cache.order_after_spare()  # a last generation's spare decode steps may still write it
    st = stats if stats is not None else GenerationStats()
    # Before the prefill: a first capture runs the step once, writing the first slots of the rows.
    run: DecodeRun | None = None
    step_graph: StepGraph | None = None
    if steps_per_sync > 1:
        run = _decode_run(
            model, cache, len(batch), graph, own_cache, max_new, st, steps_per_sync, sampler
        )
    else:
        step_graph = _decode_graph(
            model, len(batch), graph, use_cache, own_cache, max_new, st, k + 1
        )
    st.prompt_tokens += sum(len(p) for p in batch)
    st.batch_rows = len(batch)
    history = [list(p) for p in batch]
    t0 = time.perf_counter()
    logits = _prefill(model, cache, batch)
    pending: PendingRun | None = None
    if run is not None and decode_loop.EARLY_FIRST_RUN:
        # The prefill's tokens drawn on the device and the first run enqueued behind them: the
        # device goes on while the host reads the tokens (the same draws as the sampler's).
        drawn, pending = run.start_drawn(logits, min(run.steps, max_new - 1), history)
        try:
            tokens = [row[0] for row in run.finish(drawn)]
        except BaseException:
            run.drop(pending)  # the run's tokens are nobody's: out of the cache's lengths
            raise
    else:
        tokens = [
            sampler(lg, [h], rows=[r])[0]
            for r, (lg, h) in enumerate(zip(logits, history, strict=True))
        ]
    st.prefill_s += time.perf_counter() - t0
    done = [False] * len(batch)
    step: list[tuple[int, int]] = []
    for r, t in enumerate(tokens):
        history[r].append(t)
        step.append((r, t))
        done[r] = t in stop
    st.new_tokens += len(step)
    if run is not None:
        yield from _first_then_runs(run, step, pending, tokens, history, done, stop, max_new, st)
        return
    yield step
    if drafter is not None:
        if not done[0]:
            t0 = time.perf_counter()
            drafter.start(model, batch[0], cache.max_seq_len)  # the draft's own prefill
            st.prefill_s += time.perf_counter() - t0
            for kept in _speculative.decode(
                model, cache, history[0], max_new, sampler, stop, drafter, k, step_graph, st
            ):
                yield [(0, t) for t in kept]
        return
    for _ in range(max_new - 1):
        if all(done):
            return
        t0 = time.perf_counter()
        if step_graph is not None:
            lg = step_graph.step(tokens)
        elif use_cache:
            lg = model.forward([[t] for t in tokens], cache, row0=0)
        else:
            # No cache reuse: every step recomputes each sequence from scratch (0.2.x
            # use_cache=False; slow, for checking the cached path).
            cache.reset()
            lg = _stack_rows(_prefill(model, cache, history))
        tokens = sampler(lg, history)
        step = []
        for r, t in enumerate(tokens):
            if done[r]:
                continue
            history[r].append(t)
            step.append((r, t))
            done[r] = t in stop
        st.decode_s += time.perf_counter() - t0
        st.decode_steps += 1
        st.new_tokens += len(step)
        yield step


def _first_then_runs(
    run: DecodeRun,
    step: list[tuple[int, int]],
    pending: PendingRun | None,
    tokens: list[int],
    history: list[list[int]],
    done: list[bool],
    stop: frozenset[int],
    max_new: int,
    st: GenerationStats,
) -> Iterator[list[tuple[int, int]]]:
    """The prefill's step, then the decode runs (run_steps, continuing ``pending``, the first
    run enqueued behind the prefill, where there is one); a consumer that stops at the first
    step leaves the first run dropped, its tokens not counted in the cache."""
    handed = False
    try:
        yield step
        handed = True
        yield from run_steps(run, tokens, history, done, stop, max_new - 1, st, pending=pending)
    finally:
        if not handed and pending is not None:
            run.drop(pending)


def speculation(
    model: CausalTransformerModel, speculative: Any, draft_tokens: int | None, sampler: Sampler
) -> tuple[Any, int]:
    """(drafter, drafts a check) for a ``speculative=`` argument, checked against ``model``;
    (None, 0) without one."""
    from pygpukit.models.transformer import DECODE_TOKENS

    if speculative is None:
        if draft_tokens is not None:
            raise ValueError(
                "draft_tokens sets speculative decoding's drafts; pass speculative too"
            )
        return None, 0
    drafter = _speculative.drafter_for(speculative, sampler)
    drafter.check(model)  # before anything is allocated or prefilled
    k = _speculative.DEFAULT_DRAFT_TOKENS[drafter.kind] if draft_tokens is None else draft_tokens
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k < DECODE_TOKENS:
        raise ValueError(f"draft_tokens must be an int in 1..{DECODE_TOKENS - 1}, got {k!r}")
    return drafter, k


def _captured(
    graph: bool | None, use_cache: bool, own_cache: bool, make: Callable[[], Any], what: str
) -> tuple[Any, str]:
    """(make(), "") where the decode can replay a CUDA graph, else (None, why not);
    graph=True raises RuntimeError with the reason instead."""
    if graph is False:
        return None, "graph=False"
    if not use_cache:
        why = "use_cache=False recomputes every step"
    elif not own_cache:
        why = "graphs are kept for the model's own cache, not a caller's"
    else:
        try:
            return make(), ""
        except RuntimeError as exc:
            why = str(exc)
    if graph:
        raise RuntimeError(f"graph=True but the decode {what} cannot be replayed: {why}")
    return None, why


def _decode_graph(
    model: CausalTransformerModel,
    rows: int,
    graph: bool | None,
    use_cache: bool,
    own_cache: bool,
    max_new: int,
    st: GenerationStats,
    tokens: int = 1,
) -> StepGraph | None:
    """The captured step to decode with (``tokens`` tokens a row: more than 1 checks
    speculative drafts), or None for eager steps (st.decode_mode says why)."""
    if max_new < 2:
        st.decode_mode = "none (no decode steps)"
        return None
    # A 1-token step is asked for as step_graph(rows), the call form stand-ins (the compat
    # tests' CPU step) implement.
    g, why = _captured(
        graph,
        use_cache,
        own_cache,
        lambda: model.step_graph(rows) if tokens == 1 else model.step_graph(rows, tokens),
        "step",
    )
    if g is None:
        st.decode_mode = f"eager ({why})"
        return None
    st.decode_mode = f"CUDA graph replay, {rows} row(s) a step" + (
        f", {tokens} tokens a row (speculative check)" if tokens > 1 else ""
    )
    return g


def _decode_run(
    model: CausalTransformerModel,
    cache: StaticKVCache,
    rows: int,
    graph: bool | None,
    own_cache: bool,
    max_new: int,
    st: GenerationStats,
    steps: int,
    sampler: Sampler,
) -> DecodeRun | None:
    """The device-side decode steps (models.decode_loop) for steps_per_sync > 1: captured in
    a graph where the step can be, else eager (graph=None), as _decode_graph decides."""
    from pygpukit.models.decode_loop import DecodeRun

    if max_new < 2:
        st.decode_mode = "none (no decode steps)"
        return None
    kind = "greedy" if sampler.params.greedy else "sampled"
    got, why = _captured(
        graph, True, own_cache, lambda: model.decode_run(rows, steps, sampler), "run"
    )
    if got is None:
        st.decode_mode = f"eager, {steps} {kind} steps a sync ({why})"
        return DecodeRun(model, cache, rows, steps, graph=False, sampler=sampler)
    st.decode_mode = f"CUDA graph replay, {rows} row(s) a step, {steps} {kind} steps a replay"
    return got


def run_steps(
    run: DecodeRun,
    tokens: list[int],
    history: list[list[int]],
    done: list[bool],
    stop: frozenset[int],
    remaining: int,
    st: GenerationStats,
    streams: list[int] | None = None,
    pending: PendingRun | None = None,
) -> Iterator[list[tuple[int, int]]]:
    """Decode ``remaining`` steps, run.steps a sync; yield each step's (row, token)s, each
    token appended to its row's history. ``pending``: the first run, already enqueued from
    ``tokens`` (DecodeRun.start_drawn), else started here. The cache ends as one step a sync
    leaves it: when every row has stopped inside a run, the run's later tokens are taken back.
    streams: the draws' per-row counter words (DecodeRun.run).

    Runs are pipelined: before waiting for a run's tokens the next run is enqueued behind it,
    continuing on the device from where the run leaves it (DecodeRun.resume), so the device
    keeps working while the host reads, checks and yields a run's tokens (as long as that takes
    less than a run). When every row stops inside a run, the run already enqueued behind it was
    spare: its device work still runs (up to run.steps steps), its tokens are dropped and taken
    back from the cache, and the cache notes its stream (DecodeRun.drop)."""
    ahead = None  # the run enqueued behind ``pending``, not yet collected
    try:
        while remaining > 0 and not all(done):
            if pending is None:
                t0 = time.perf_counter()
                pending = run.start(tokens, min(run.steps, remaining), history, streams)
                st.decode_s += time.perf_counter() - t0
            n = pending.n
            t0 = time.perf_counter()
            nxt = min(run.steps, remaining - n)
            if nxt > 0 and run.can_resume(nxt):
                ahead = run.resume(nxt)
            got = run.finish(pending)
            pending = None
            st.decode_s += time.perf_counter() - t0
            ended = [False] * len(got)  # rows done after each step, ahead of the yields
            last = n
            for j in range(n):
                ended = [
                    e or d or row[j] in stop for e, d, row in zip(ended, done, got, strict=True)
                ]
                if all(ended):
                    last = j + 1
                    break
            if last < n or all(ended):
                if ahead is not None:  # spare: every row stopped inside this run
                    run.drop(ahead)
                    ahead = None
                if last < n:
                    run.rewind(n - last)
            for j in range(last):
                step = []
                for r, row in enumerate(got):
                    if done[r]:
                        continue
                    history[r].append(row[j])
                    step.append((r, row[j]))
                    done[r] = row[j] in stop
                st.decode_steps += 1
                st.new_tokens += len(step)
                yield step
                if all(done):
                    return
            tokens = [row[n - 1] for row in got]
            remaining -= n
            pending, ahead = ahead, None
    finally:
        # A consumer that stops iterating (or an error) leaves an enqueued run uncollected: its
        # tokens are not the caller's, so the cache does not keep them.
        for left in (pending, ahead):
            if left is not None:
                run.drop(left)


def _stack_rows(rows: list[GPUArray]) -> GPUArray:
    from pygpukit.creation import empty

    first = rows[0]
    out = empty((len(rows), *first.shape[1:]), first.dtype, first.device)
    for i, r in enumerate(rows):
        out[i : i + 1] = r
    return out


def stream(
    model: CausalTransformerModel,
    input_ids: Sequence[int],
    max_new_tokens: int = 32,
    sampling: SamplingParams | None = None,
    **kwargs: Any,
) -> Iterator[int]:
    """The new token ids of one prompt, as they are produced."""
    prompts, _ = _gen_args.token_ids(input_ids)
    if len(prompts) != 1:
        raise ValueError(f"stream takes one prompt, got {len(prompts)}; use stream_batch")
    for step in stream_batch(model, prompts, max_new_tokens, sampling, **kwargs):
        for _, t in step:
            yield t


def generate(
    model: CausalTransformerModel,
    input_ids: Any,
    max_new_tokens: int = 32,
    temperature: float = 0.7,
    top_k: int = 50,
    top_p: float = 0.9,
    repetition_penalty: float = 1.0,
    seed: int | None = None,
    stop_token_ids: Iterable[int] | None = None,
    max_seq_len: int | None = None,
    use_cache: bool = True,
    stats: GenerationStats | None = None,
    graph: bool | None = None,
    speculative: Any = None,
    draft_tokens: int | None = None,
    min_p: float = 0.0,
    steps_per_sync: int = 1,
) -> list[int] | list[list[int]]:
    """Prompt + new ids for one prompt (a list of ints), or a list of those for a batch.
    graph: CUDA-graph decode steps; speculative ("ngram" or a draft model) and draft_tokens:
    speculative decoding of one prompt (see stream_batch); min_p: drop tokens whose probability
    is below min_p times the top one (0: off), as SamplingParams; steps_per_sync: decode steps
    a host round trip (see stream_batch)."""
    args = _gen_args.check(input_ids, max_new_tokens, max_seq_len, stop_token_ids)
    prompts, single = args.prompts, args.single
    params = SamplingParams(temperature, top_k, top_p, repetition_penalty, seed, min_p)
    outs = [list(p) for p in prompts]
    for step in stream_batch(
        model,
        prompts,
        max_new_tokens,
        params,
        stop_ids=stop_token_ids,
        max_seq_len=max_seq_len,
        stats=stats,
        use_cache=use_cache,
        graph=graph,
        speculative=speculative,
        draft_tokens=draft_tokens,
        steps_per_sync=steps_per_sync,
    ):
        for r, t in step:
            outs[r].append(t)
    return outs[0] if single else outs
