"""The 0.2.x decode strategies: ``strategy.bind(model)``, then prefill/step or generate.

Every ``generate`` here that follows the engine's sampling (DecodeM1, DecodeM1Graph, DecodeBatch)
runs the engine's own loop, pygpukit.models.generation.stream / stream_batch; this module only
adapts the 0.2.x arguments and keeps the state the 0.2.x objects exposed (their cache, their
graph). ``prefill``, ``step`` and ``step_batch`` are the 0.2.x single-forward calls, each one
CausalTransformerModel.forward over the strategy's cache.

- DecodeM1: one sequence, one token per forward, eager (the engine with graph=False) in a cache
  of the strategy's own.
- DecodeM1Graph: DecodeM1 with the decode step captured once in a CUDA graph and replayed per
  token, the engine's graph decode: ``init_graph`` asks the model for its captured step
  (CausalTransformerModel.step_graph, models.step_graph.StepGraph over gp.CUDAGraph) on the
  model's own cache, which is the graph the engine's generate then replays.
- DecodeBatch(batch_size): several prompts decoded together (``generate_batch``: the engine's
  stream_batch, batch_size rows at a time), and the 0.2.x ``step_batch`` that runs several
  consecutive tokens of one sequence in one forward.
- DecodeJacobi: Jacobi fixed-point decoding (Santilli et al. 2023, "Accelerating Transformer
  Inference for Translation via Parallel Decoding", Algorithm 1): guess the next n tokens, run
  them in one forward, replace each guess by the argmax at its position, repeat until nothing
  changes. Each forward at least confirms one more token, and the accepted tokens are exactly the
  greedy ones (the i-th output is greedy once the inputs before it are). This is a different
  loop from the engine's one-token step, so it is its own, built on model.forward(all_logits=True)
  and gp.argmax.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.models import ContextLengthError, GenerationStats, SamplingParams
from pygpukit.models.generation import default_stop_ids, stream, stream_batch

if TYPE_CHECKING:
    from pygpukit.models import CausalTransformerModel, StaticKVCache
    from pygpukit.models.step_graph import StepGraph

__all__ = ["DecodeStrategy", "DecodeM1", "DecodeM1Graph", "DecodeBatch", "DecodeJacobi"]


class DecodeStrategy:
    """Base: holds the bound model and a cache of its own (batch 1 unless a subclass asks)."""

    def __init__(self) -> None:
        self.model: CausalTransformerModel | None = None
        self.cache: StaticKVCache | None = None

    def bind(self, model: CausalTransformerModel) -> DecodeStrategy:
        self.model = model
        self.cache = None
        return self

    def _m(self) -> CausalTransformerModel:
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}: call bind(model) first")
        return self.model

    def _cache(self, max_seq_len: int | None, batch_size: int = 1) -> StaticKVCache:
        m = self._m()
        n = m.config.max_context if max_seq_len is None else int(max_seq_len)
        c = self.cache
        if c is None or c.max_seq_len < n or c.batch_size < batch_size:
            self.cache = c = m.new_cache(batch_size, n)
        c.reset()
        return c

    def prefill(self, input_ids: Iterable[int], max_seq_len: int | None = None) -> GPUArray:
        """Run the prompt into a fresh cache; the logits [vocab] at its last position."""
        ids = [int(t) for t in input_ids]
        m = self._m()
        m.check_context(len(ids))
        cache = self._cache(max_seq_len)
        return m.forward([ids], cache).reshape(-1)

    def step(self, token_id: int, position: int, context_len: int | None = None) -> GPUArray:
        """Feed one token at ``position`` (tokens before it must be cached); its logits [vocab].

        context_len, if given, must be position + 1 (the 0.2.x call form passed both).
        """
        cache = self._step_cache(position, context_len)
        return self._m().forward([[int(token_id)]], cache).reshape(-1)

    def _step_cache(self, position: int, context_len: int | None) -> StaticKVCache:
        """The cache, checked for a step at ``position`` and cut back to it (stepping back
        re-uses the cache up to position)."""
        cache = self.cache
        if cache is None:
            raise RuntimeError(f"{type(self).__name__}: call prefill() before step()")
        if context_len is not None and context_len != position + 1:
            raise ValueError(f"context_len must be position + 1, got {context_len} and {position}")
        if not 0 <= position <= int(cache.lengths[0]):
            raise ValueError(
                f"position {position} is past the {int(cache.lengths[0])} cached tokens"
            )
        cache.lengths[0] = position
        return cache

    def generate(
        self,
        input_ids: Iterable[int],
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int = 50,
        top_p: float = 0.9,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
    ) -> list[int]:
        """The new token ids (greedy by default) of one prompt: the engine's
        pygpukit.models.generation.stream, with this strategy's cache and graph choice."""
        ids = [int(t) for t in input_ids]
        params = SamplingParams(temperature, top_k, top_p, repetition_penalty, seed)
        args = self._engine_args(len(ids), int(max_new_tokens))
        return list(stream(self._m(), ids, max_new_tokens, params, stop_ids=stop_token_ids, **args))

    def _engine_args(self, prompt_len: int, max_new: int) -> dict[str, Any]:
        """Where the engine decodes: this strategy's cache (sized for the prompt and the new
        tokens, within the context: the engine reports a prompt that does not fit), eagerly."""
        n = min(prompt_len + max(max_new, 1), self._m().config.max_context)
        return {"cache": self._cache(n), "graph": False}


class DecodeM1(DecodeStrategy):
    """Batch 1, one token per forward pass (the engine's eager decode)."""


class DecodeM1Graph(DecodeM1):
    """DecodeM1 with the decode step replayed from a CUDA graph: the engine's graph decode.

    ``init_graph(max_seq_len)`` sizes the model's own cache (CausalTransformerModel.ensure_cache)
    and asks the model for its captured batch-1 step (CausalTransformerModel.step_graph: a
    models.step_graph.StepGraph, the step recorded once with gp.CUDAGraph, reading the token id,
    its position, and its write position and new length from device arrays). ``generate`` then
    runs the engine's stream on that same cache, which replays that same graph per token;
    ``step`` and ``step_graph`` write the inputs and replay it on the current stream.
    ``step_graph`` returns the graph's output array itself (the next step overwrites it);
    ``step`` returns a copy, as DecodeM1's steps do.

    Unlike DecodeM1 (and unlike 0.2.x, where the strategy owned its cache) the cache is the
    model's own, where the engine keeps its captured steps: a model.generate call between a
    prefill and its steps overwrites it, so prefill again after one.

    Without a graph (the CPU device, or a step that cannot be captured; ``graph_reason`` says
    why) steps run exactly as DecodeM1's. A prefill or generate that needs a larger cache than
    init_graph's makes the model allocate a new one, which drops the graph (call init_graph
    again).
    """

    def __init__(self) -> None:
        super().__init__()
        self._reason = "init_graph() has not been called"
        self.max_seq_len = 0
        self._step: StepGraph | None = None

    def bind(self, model: CausalTransformerModel) -> DecodeM1Graph:
        super().bind(model)
        self._forget("init_graph() has not been called")
        return self

    def _forget(self, reason: str) -> None:
        # The graph belongs to the model (it frees it with the cache): only let go of it here.
        self._step = None
        self._reason = reason

    @property
    def graph_ready(self) -> bool:
        return self._live() is not None

    @property
    def graph_reason(self) -> str:
        """Why steps replay a graph or run eagerly (read after the last prefill or generate)."""
        self._live()
        return self._reason

    def _live(self) -> StepGraph | None:
        """The captured step, if it still belongs to the model's current cache."""
        cache = self._m().cache
        if self._step is not None and cache is not self.cache:
            self._replaced(cache)
        return self._step

    def _replaced(self, cache: StaticKVCache | None) -> None:
        size = "" if cache is None else f" of {cache.max_seq_len} tokens"
        self._forget(
            f"the model's cache was replaced by another{size} (a prefill or generate needed "
            f"more than init_graph's {self.max_seq_len}): the graph pointed at the old cache; "
            "call init_graph again"
        )

    def _cache(self, max_seq_len: int | None, batch_size: int = 1) -> StaticKVCache:
        m = self._m()
        n = m.config.max_context if max_seq_len is None else int(max_seq_len)
        self._live()
        c = m.ensure_cache(batch_size, n)
        if c is not self.cache and self._step is not None:
            self._replaced(c)
        self.cache = c
        return c

    def init_graph(self, max_seq_len: int = 512) -> None:
        m = self._m()
        self._forget("init_graph() is capturing")
        self.max_seq_len = int(max_seq_len)
        self.cache = m.ensure_cache(1, self.max_seq_len)  # empty rows: a first capture writes one
        try:
            step = m.step_graph(1)
        except RuntimeError as exc:
            self._reason = f"{exc}: decode steps run eagerly, as DecodeM1"
            return
        self._step = step
        self._reason = f"captured: one launch per step, {step.kept_bytes} bytes of activations kept"

    def has_graph(self) -> bool:
        return self._live() is not None

    def _engine_args(self, prompt_len: int, max_new: int) -> dict[str, Any]:
        if self._live() is None:
            return super()._engine_args(prompt_len, max_new)
        # The model's own cache (no cache argument): the engine replays the graph kept there.
        return {"graph": None}

    def step(self, token_id: int, position: int, context_len: int | None = None) -> GPUArray:
        logits = self.step_graph(token_id, position, context_len)
        return logits if self._step is None else logits.copy()

    def step_graph(self, token_id: int, position: int, context_len: int | None = None) -> GPUArray:
        """step() by graph replay (as DecodeM1.step when no graph is captured)."""
        g = self._live()
        if g is None:
            return super().step(token_id, position, context_len)
        self._step_cache(position, context_len)
        return g.step(token_id).reshape(-1)


class DecodeBatch(DecodeStrategy):
    """Several prompts at once (batch_size rows of one static cache)."""

    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.batch_size = int(batch_size)
        self.last_stats = GenerationStats()

    def generate_batch(
        self,
        prompts: list[list[int]],
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int = 50,
        top_p: float = 0.9,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
        graph: bool | None = None,
    ) -> list[list[int]]:
        """New token ids per prompt; prompts may differ in length; batch_size rows at a time.
        Decode steps replay a CUDA graph of the batch's step where one can be captured (graph:
        see generation.stream_batch); ``last_stats`` holds the last chunk's timings."""
        m = self._m()
        params = SamplingParams(temperature, top_k, top_p, repetition_penalty, seed)
        longest, ctx = max((len(p) for p in prompts), default=0), m.config.max_context
        if 0 < longest < ctx:
            # One cache for every chunk (stream_batch's ensure_cache then fits each): a chunk
            # of longer prompts does not reallocate it, which would drop the captured steps.
            rows = min(self.batch_size, len(prompts))
            m.ensure_cache(rows, min(longest + int(max_new_tokens), ctx))
        outs: list[list[int]] = []
        for i in range(0, len(prompts), self.batch_size):
            chunk = prompts[i : i + self.batch_size]
            got: list[list[int]] = [[] for _ in chunk]
            self.last_stats = st = GenerationStats()
            steps = stream_batch(
                m, chunk, max_new_tokens, params, stop_token_ids, stats=st, graph=graph
            )
            for step in steps:
                for r, t in step:
                    got[r].append(t)
            outs.extend(got)
        return outs

    def step_batch(
        self, token_ids: list[int], start_position: int, context_len: int | None = None
    ) -> GPUArray:
        """Feed consecutive tokens of one sequence from start_position; logits [n, vocab]."""
        cache = self.cache
        if cache is None:
            raise RuntimeError("DecodeBatch: call prefill() before step_batch()")
        n = len(token_ids)
        if context_len is not None and context_len != start_position + n:
            raise ValueError(
                f"context_len must be start_position + {n}, got {context_len} and {start_position}"
            )
        cache.lengths[0] = start_position
        logits = self._m().forward([list(token_ids)], cache, all_logits=True)
        return logits.reshape(n, -1)


class DecodeJacobi(DecodeStrategy):
    """Greedy decoding by Jacobi iteration over a window of ``n_tokens`` guesses.

    Its generate is not the engine's loop (which feeds one sampled token a step): each forward
    here checks a window of guesses, which the engine has no step for, so the loop is this
    class's own, over model.forward(all_logits=True) and gp.argmax, with the engine's stop ids.
    It gives the engine's greedy tokens (temperature 0) and accepts nothing else.

    max_iter: iterations on one window before its verified prefix is accepted (None: until the
    fixed point, at most n_tokens iterations). init_strategy "repeat" fills new guesses with the
    last known token.
    """

    def __init__(
        self, n_tokens: int = 8, max_iter: int | None = None, init_strategy: str = "repeat"
    ) -> None:
        super().__init__()
        if n_tokens < 1:
            raise ValueError(f"n_tokens must be >= 1, got {n_tokens}")
        if init_strategy != "repeat":
            raise ValueError(f"init_strategy must be 'repeat', got {init_strategy!r}")
        self.n_tokens = int(n_tokens)
        self.max_iter = int(max_iter) if max_iter is not None else self.n_tokens
        self.guess: list[int] = []
        self.forwards = 0

    def step_jacobi(
        self, token_id: int, position: int, context_len: int | None = None
    ) -> tuple[list[int], int, dict[str, Any]]:
        """Given the last committed token at ``position`` (not yet cached), return (accepted
        greedy tokens, the new position of the last accepted one, stats)."""
        cache = self.cache
        if cache is None:
            raise RuntimeError("DecodeJacobi: call prefill() before step_jacobi()")
        m = self._m()
        n = min(self.n_tokens, cache.max_seq_len - position)
        if n <= 0:
            raise ContextLengthError(f"no room left in the cache at position {position}")
        guess = (self.guess + [token_id] * n)[:n]
        iters = 0
        while True:
            cache.lengths[0] = position
            inputs = [int(token_id), *guess[: n - 1]]
            logits = m.forward([inputs], cache, all_logits=True)
            y = [int(t) for t in ops.argmax(logits.reshape(n, -1), axis=-1).to_numpy()]
            iters += 1
            self.forwards += 1
            if y == guess or iters >= self.max_iter:
                break
            guess = y
        # y[i] is greedy when the inputs before it (guess[:i]) equal the greedy tokens y[:i].
        k = 0
        while k < n - 1 and guess[k] == y[k]:
            k += 1
        accepted = y[: k + 1]
        cache.lengths[0] = position + k + 1  # KV of inputs 0..k came from greedy tokens
        self.guess = y[k + 1 :]
        return accepted, position + len(accepted), {"iterations": iters, "accepted": len(accepted)}

    def generate(
        self,
        input_ids: Iterable[int],
        max_new_tokens: int = 32,
        temperature: float = 0.0,
        top_k: int = 50,
        top_p: float = 0.9,
        repetition_penalty: float = 1.0,
        seed: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
    ) -> list[int]:
        """Greedy new tokens (Jacobi decoding is defined for greedy decoding only)."""
        if temperature != 0 or repetition_penalty != 1.0:
            raise ValueError("DecodeJacobi is greedy: use temperature=0, repetition_penalty=1")
        ids = [int(t) for t in input_ids]
        m = self._m()
        stop = default_stop_ids(m) if stop_token_ids is None else frozenset(stop_token_ids)
        n_new = min(int(max_new_tokens), m.config.max_context - len(ids))
        if n_new <= 0:
            raise ContextLengthError(f"the prompt of {len(ids)} tokens leaves no room")
        logits = self.prefill(ids, max_seq_len=len(ids) + n_new + self.n_tokens)
        self.guess = []
        first = int(np.asarray(ops.argmax(logits).to_numpy()).reshape(()))
        out = [first]
        while first not in stop and len(out) < n_new:
            accepted, _, _ = self.step_jacobi(out[-1], len(ids) + len(out) - 1)
            for t in accepted:
                out.append(t)
                if t in stop or len(out) >= n_new:
                    return out
        return out
