"""Several decode steps per host round trip (``generate(..., steps_per_sync=k)``).

A decode step on its own ends with the host: the next token is read back (argmax's ids), checked
against the stop tokens, and written into the next step's inputs. At batch 1 on a small model
that round trip is a tenth of the step (BENCHMARKS.md "Decode end to end"). ``DecodeRun`` keeps
k steps on the device: each step's token becomes the next step's token id on the device
(greedy steps read it where the step before wrote it), and the cache write marks (and, for a
model that reads them, the positions) of all k steps are made on the device at the run's start,
so the k steps are one CUDA graph (captured like models.step_graph's single step) and the host
reads the k tokens of each row once, at the end. A run of fewer steps (a generation's last)
runs only those: graphs of 1, 2, 4, ... steps, recorded when first needed, make up its length
(except in a run used once, such as a generation's that samples without a seed, which replays
the whole graph and keeps the tokens it needs).

Greedy steps take gp.argmax. Sampled steps (and greedy ones with a repetition penalty) take
gp.sample with the sampler's Philox key: the counter of each row, (row << 32) + its tokens so
far, is uploaded once a run and advanced by gp.sample itself after each draw, and the seen marks
of a penalty (uploaded once a run from the history) get each drawn token marked in place. These
are the draws one step a sync makes on the device (models/sampling.py, Sampler.device_ids), so
the tokens are the same.

With EARLY_FIRST_RUN a generation's first run is enqueued right behind the prefill: the
prefill's token of each row is drawn on the device into the run's inputs (``start_drawn``) and
read by the host while the run goes on.

The tokens come back through an asynchronous copy into pinned memory (``PendingRun``), and
``resume`` enqueues the next run behind the current one with no host input at all (the device
already holds its last token, positions, marks, counters and seen marks), so the generation loop
(generation.run_steps) keeps one run queued while the host reads, checks and yields the one
before: the device waits on the host between runs only where that takes longer than a run, or
where a run cannot continue from the device (no room left in the cache: it starts from the
host after the wait).

Stop tokens are checked by the host on those k tokens: a row that stopped inside the run keeps
decoding on the device until the run ends, and the tokens after its stop are dropped, so the
output is the same as with one step a sync (the cache slots past a stop are never read). The
steps are the kernels of the single step (forward_device_step, then the draw), so the tokens
are those of ``steps_per_sync=1``, in a graph or eager.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit import _core, determinism, ops, runtime
from pygpukit.creation import from_numpy, zeros
from pygpukit.graphs import CUDAGraph
from pygpukit.models.sampling import Sampler, SamplingParams, draws_on_device, seen_marks
from pygpukit.models.step_graph import capture, check_capturable

if TYPE_CHECKING:
    from pygpukit.array import GPUArray
    from pygpukit.models.kv_cache import StaticKVCache
    from pygpukit.models.transformer import CausalTransformerModel

__all__ = ["DecodeRun", "GreedyRun", "PendingRun", "check_steps_per_sync", "device_draw"]


def check_steps_per_sync(
    steps: Any, params: SamplingParams, device_type: str, speculative: Any
) -> None:
    """steps_per_sync's checks (generate/stream_batch and ChatSession): an int >= 1; k > 1
    steps a sync draw their tokens on the device (greedy without a penalty is gp.argmax,
    anything else gp.sample), so a sampler that draws on the host is refused, and so is
    speculative decoding."""
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise TypeError(f"steps_per_sync must be an int >= 1, got {steps!r}")
    if steps < 1:
        raise ValueError(f"steps_per_sync must be >= 1, got {steps}")
    if steps > 1 and not params.argmax and not draws_on_device(params, device_type):
        raise ValueError(
            f"steps_per_sync={steps} draws the tokens on the device, but this sampler draws on "
            f"the host (on_device={params.on_device} on {device_type}): sample on a CUDA "
            "device, pass SamplingParams(on_device=True) (stream_batch(sampling=...), "
            "ChatSession(sampling=...)), decode greedily without a repetition penalty, or use "
            "steps_per_sync=1"
        )
    if steps > 1 and speculative is not None:
        raise ValueError("steps_per_sync > 1 and speculative decoding do not combine")


def device_draw(sampler: Sampler | None) -> dict[str, Any] | None:
    """gp.sample's arguments for the sampler's draws, or None for gp.argmax (no sampler, or
    greedy without a repetition penalty): what Sampler.device_ids passes."""
    if sampler is None:
        return None
    return None if sampler.params.argmax else sampler.draw_args()


class PendingRun:
    """An enqueued run's tokens on their way to the host: on a GPU an asynchronous copy of the
    whole token buffer into pinned memory, started right behind the run (stream order: a run
    enqueued later cannot overwrite the buffer before the copy has read it), waited on by
    ``tokens``; on the CPU device the values themselves. ``rows``: the buffer's rows of the n
    steps, in order (a run made of several graphs: DecodeRun.segments)."""

    __slots__ = ("_copy", "_host", "_rows", "n")

    def __init__(self, out: GPUArray, n: int, rows: list[int]) -> None:
        self.n = n
        self._rows = rows
        self._host = np.empty(out.shape, out.dtype.np_dtype)
        self._copy = None
        if out.device.type == "cpu":
            self._host[...] = out.to_numpy()
        else:
            stream = runtime.current_stream(out.device)
            self._copy = _core.copy_dtoh_async(out.data_ptr(), self._host.nbytes, stream)

    def tokens(self) -> np.ndarray:
        """[row][step] of the run's n steps (waits for the copy, the run's one wait)."""
        if self._copy is not None:
            self._copy.wait_into(self._host.ctypes.data)
            self._copy = None
        return self._host[self._rows].T


# True: a run's write marks (and the positions of a model that reads them) for all its steps
# come from one add at its start (the run's first marks plus 0..t-1 into a [t, 2, rows] array
# that step j reads at j) and one more add moves the first marks on by t for the next run:
# two launches a run of more than two steps instead of one a step (DecodeRun._body). The same
# values; False: one add a step, as before. H200, 2026-11-30 (benchmarks/tuning/decode_ab.py
# --experiment ramp, two rounds), a step inside the 32-step graph, Llama-3.2-1B shape: 767.3-
# 767.9 us against 768.8-769.1.
RAMP_MARKS = True

# True: generate's first run is enqueued right behind the prefill, the prefill's token of each
# row drawn on the device (DecodeRun.start_drawn: the draw the sampler makes, into the run's
# inputs), so the device does not wait while the host reads that token, checks it and writes
# the run's inputs. False: the host draws it first (Sampler) and starts the run from it. The
# same tokens either way. Not shown to win: H200, 2026-11-30 (benchmarks/tuning/decode_ab.py
# --experiment first-run, two rounds, 7 repeats), Llama-3.2-1B shape at 32 steps a sync,
# 1291.4 / 1269.8 tok/s on against 1314.3 / 1274.7 off (off ahead in both rounds, by 1.8% and
# 0.4%; the rounds 1.7-3.1% apart): what it could save (a host round trip a generation, a few
# hundred microseconds over 255 tokens) is under the noise of a generation's wall time. Off.
EARLY_FIRST_RUN = False

# True: greedy steps read their ids from the step before's tokens and only a run's last step
# copies them into ids; the positions advance only for models that read them at decode
# (DecodeRun._step). Two launches a greedy step fewer with RoPE (one with learned position
# embeddings), the same tokens. Not yet measured on the GPU (benchmarks/tuning/decode_ab.py
# --experiment lean measures it); False: a copy and an add a step, as before.
LEAN_STEPS = True


class DecodeRun:
    """``steps`` decode steps of cache rows 0..rows-1 with no host in between: greedy, or drawn
    by ``sampler`` on the device (device_draw).

    With ``graph`` the steps are captured once in a CUDA graph (construction runs them once
    first, writing the first ``steps`` cache slots of those rows: make it before the prefill,
    as a StepGraph); otherwise ``run`` launches them eagerly (the CPU device, graph=False).
    ``run(tokens, n)`` feeds each row's last token at that row's cached length and returns the
    next ``n`` tokens of each row (n <= steps). A run of fewer steps (the last of a generation)
    runs exactly n steps: n's binary digits, largest first, each a graph of that many steps
    captured the first time it is needed (recorded only: the full run's warm-up ran the same
    kernels). The graph of t steps writes its tokens into rows t-1..2t-2 of the token buffer
    (the whole run into rows 0..steps-1), so the digits' rows never overlap and the host reads
    them back in order from the one copy: n steps cost n steps plus a replay a digit, and write
    n cache slots. Those graphs keep their own activations: at most about as much device memory
    again as the whole run's graph (``kept_bytes`` counts them all), made when they are
    recorded.

    ``short_graphs=False`` (a run used once, such as a generation's that samples without a seed:
    its key is recorded in the graph) records none: a shorter run replays the whole graph and
    keeps n tokens where the cache has room for all ``steps``, else runs its n steps eagerly,
    as it does after a short graph failed to record (a RuntimeWarning says why).
    """

    def __init__(
        self,
        model: CausalTransformerModel,
        cache: StaticKVCache,
        rows: int,
        steps: int,
        graph: bool,
        sampler: Sampler | None = None,
        short_graphs: bool = True,
    ) -> None:
        if not 1 <= rows <= cache.batch_size:
            raise ValueError(f"DecodeRun: rows must be in 1..{cache.batch_size}, got {rows}")
        if not 1 <= steps <= cache.max_seq_len:
            raise ValueError(
                f"DecodeRun: steps must be in 1..{cache.max_seq_len} (the cache's length), "
                f"got {steps}"
            )
        dev = model.device
        self.model, self.cache, self.rows, self.steps = model, cache, rows, steps
        self.draw = device_draw(sampler)
        self.ids = zeros((rows, 1), "int64", dev)
        self.pos = zeros((rows, 1), "int64", dev)
        self.marks = from_numpy(np.array([[0] * rows, [1] * rows], np.int32), device=dev)
        # RAMP_MARKS: step j's marks (and positions) at row j, filled at a run's start.
        self.ramp = from_numpy(np.arange(steps, dtype=np.int32).reshape(steps, 1, 1), device=dev)
        self.marks_at = zeros((steps, 2, rows), "int32", dev)
        self.pos_at = zeros((steps, rows, 1), "int64", dev)
        # Row j: step j's token of every row (gp.sample writes int32 ids, gp.argmax int64); the
        # t-step graphs' tokens at rows t-1..2t-2 (t a power of two below steps).
        tail_rows = (1 << (steps - 1).bit_length()) - 1
        self.out = zeros(
            (max(steps, tail_rows), rows), "int64" if self.draw is None else "int32", dev
        )
        self.counter = None  # the draws' Philox counters [rows]
        self.seen = None  # a penalty's seen marks [rows, vocab]
        if self.draw is not None:
            self.counter = zeros((rows,), "int64", dev)
        if self.draw is not None and self.draw["repetition_penalty"] != 1.0:
            self.seen = zeros((rows, model.config.vocab_size), "uint8", dev)
        self.graph: CUDAGraph | None = None
        # Graphs of fewer steps (a power of two each), made when a run first needs them, on the
        # SM partition and in the determinism mode of construction; and the RoPE / position
        # tables the graphs read.
        self.short_graphs = short_graphs
        self._tails: dict[int, CUDAGraph] = {}
        self._tables: list[Any] = []
        self._home = runtime.current_stream(dev)
        self._deterministic = determinism.is_deterministic()
        # The stream of the last enqueued run (``drop`` notes it on the cache), and whether the
        # device sits at that run's last kept token (resume may follow it there).
        self._last_stream: Any = None
        self._carried = False
        if graph:
            self._capture()
        self.partition_id = runtime.current_stream(dev).partition_id

    def _body(self, t: int, out: GPUArray) -> None:
        """A run of t steps from the device's ids, positions and marks, its tokens into out
        [t, rows]; the marks (and positions) end t further on. RAMP_MARKS: every step's marks
        in one add first (marks + 0..t-1), and the next run's in one more (from three steps
        on: those two launches cost what two steps' adds do)."""
        ramp = RAMP_MARKS and t > 2
        moves_pos = self.model.decode_reads_positions or not LEAN_STEPS
        if ramp:
            rows = self.rows
            ops.add(self.marks.reshape(1, 2, rows), self.ramp[:t], out=self.marks_at[:t])
            ops.add(self.marks, t, out=self.marks)
            if moves_pos:
                ops.add(self.pos.reshape(1, rows, 1), self.ramp[:t], out=self.pos_at[:t])
                ops.add(self.pos, t, out=self.pos)
        for j in range(t):
            marks = self.marks_at[j] if ramp else self.marks
            pos = self.pos_at[j] if ramp and moves_pos else self.pos
            self._step(j, j == t - 1, out, pos, marks)
            if not ramp:
                if moves_pos:
                    ops.add(self.pos, 1, out=self.pos)
                ops.add(self.marks, 1, out=self.marks)

    def _step(self, j: int, last: bool, out: GPUArray, pos: GPUArray, marks: GPUArray) -> None:
        """Step j at ``pos`` and ``marks``: logits of the current ids, the next token (argmax,
        or the draw) into out[j] and the next ids. Greedy steps read their ids from the step
        before's row of out (int64, as the model takes them) and only the last step of a run
        copies its tokens into ids (where the next run starts); the positions advance only for
        a model that reads them at decode (learned position embeddings: RoPE rotates at the
        write marks). Two launches a step fewer, the same tokens."""
        greedy = self.draw is None or self.counter is None
        lean = LEAN_STEPS and greedy
        ids = out[j - 1].reshape(self.rows, 1) if lean and j > 0 else self.ids
        logits = self.model.forward_device_step(ids, pos, marks, self.cache)
        self._draw(logits.reshape(self.rows, logits.shape[-1]), out[j])
        if last or not lean:
            self.ids.reshape(self.rows)[...] = out[j]

    def _draw(self, lg: GPUArray, out: GPUArray, row: int | None = None) -> None:
        """The next token of each row of logits lg [R, V] into out [R]: gp.argmax, or gp.sample
        at the rows' counters, which advance, and seen marks, which take the token, in place;
        ``row``: lg is that one row's."""
        if self.draw is None or self.counter is None:
            ops.argmax(lg, axis=-1, out=out)
            return
        rs = slice(None) if row is None else slice(row, row + 1)
        seen = None if self.seen is None else self.seen[rs]
        ops.sample(lg, self.counter[rs], seen, out=out, **self.draw)

    def _first_row(self, t: int) -> int:
        """The first row of out a part of t steps writes: 0 for the whole run, t - 1 for a
        graph of fewer (so the parts of one run never share a row)."""
        return 0 if t == self.steps else t - 1

    def _drop_tails(self) -> None:
        for g in self._tails.values():
            g.reset()
        self._tails.clear()

    def _capture(self) -> None:
        dev = self.model.device
        check_capturable(dev, "DecodeRun")

        self.graph = capture(dev, lambda: self._body(self.steps, self.out), "run")
        self._tables.append((self.model._rope, self.model._positions))  # read by the graph

    @property
    def kept_bytes(self) -> int:
        """Device memory the run's graphs (the whole run's and the shorter ones') keep."""
        graphs = ([] if self.graph is None else [self.graph]) + list(self._tails.values())
        return sum(g.kept_bytes for g in graphs)

    def _tail(self, t: int) -> CUDAGraph:
        """The graph of t < steps steps (t a power of two; its tokens at rows t-1..2t-2 of
        out), recorded the first time, on a stream of the construction's SM partition and in
        its determinism mode. No warm-up: a warm-up would run t steps at whatever the inputs
        hold now. Its kernels are the whole run's steps' (one met for the first time, such as
        a marks add of another size, compiles while it is recorded, which runs nothing)."""
        got = self._tails.get(t)
        if got is None:
            r = self._first_row(t)
            with determinism.deterministic(self._deterministic):
                got = capture(
                    self.model.device,
                    lambda: self._body(t, self.out[r : r + t]),
                    f"run's {t}-step tail",
                    warm_up=False,
                    stream=self._home.sibling(),
                )
            self._tables.append((self.model._rope, self.model._positions))
            self._tails[t] = got
        return got

    def _short(self, parts: list[int]) -> list[CUDAGraph] | None:
        """The graphs of a short run's parts, or None where short graphs are off or one fails
        to record (then off for good: a RuntimeWarning says why)."""
        if not self.short_graphs:
            return None
        try:
            return [self._tail(t) for t in parts]
        except RuntimeError as exc:
            # Off for good, and the graphs already recorded let go (out of memory is the usual
            # reason a recording fails).
            self.short_graphs = False
            self._drop_tails()
            warnings.warn(
                f"DecodeRun: {exc}; shorter runs replay the whole graph where the cache has "
                "room, else run eagerly",
                RuntimeWarning,
                stacklevel=4,  # the caller of start / resume
            )
            return None

    def run(
        self,
        tokens: list[int],
        n: int,
        history: list[list[int]] | None = None,
        streams: list[int] | None = None,
    ) -> list[list[int]]:
        """Feed ``tokens`` (one a row) and decode ``n`` steps; the tokens [row][step]. A run that
        draws needs each row's ``history`` (the tokens so far, the fed one last): a draw's
        Philox counter is (stream << 32) + the row's tokens so far, as Sampler.device_ids
        counts them, and a penalty's seen marks come from it. ``streams``: each row's high
        counter word (default: the row's index, as one step a sync uses), in [0, 2**31).
        ``finish(start(...))``."""
        return self.finish(self.start(tokens, n, history, streams))

    def start(
        self,
        tokens: list[int],
        n: int,
        history: list[list[int]] | None = None,
        streams: list[int] | None = None,
    ) -> PendingRun:
        """run()'s first half: the inputs written, the n steps enqueued and their tokens' copy
        to the host started, without waiting; ``finish`` waits for them. The rows' cached
        lengths count the n tokens from here on (``rewind`` takes them back)."""
        rows = self.rows
        if len(tokens) != rows:
            raise ValueError(f"DecodeRun.run: {rows} token(s) expected, got {len(tokens)}")
        vocab = self.model.config.vocab_size
        bad = [t for t in tokens if not isinstance(t, (int, np.integer)) or not 0 <= t < vocab]
        if bad:
            raise ValueError(f"DecodeRun.run: token ids outside [0, {vocab}): {bad[:5]}")
        self._write_inputs(n, history, streams, "run")
        self.ids[:] = np.asarray(tokens, np.int64)[:, None]
        return self._enqueue(n)

    def start_drawn(
        self,
        logits: list[GPUArray],
        n: int,
        history: list[list[int]],
        streams: list[int] | None = None,
    ) -> tuple[PendingRun, PendingRun]:
        """``start`` with each row's token drawn on the device from its logits (the prefill's
        last position, [1, 1, V] or [1, V] a row) as Sampler draws one (gp.argmax, or gp.sample
        at the row's counter and seen marks, which it advances) and the n steps enqueued right
        behind the draws, so the device does not wait for the host to read the token.
        ``history``: each row's tokens before the drawn one. Returns two PendingRuns: the drawn
        tokens (``finish`` gives [row][0]; their copy comes before the run's) and the run."""
        rows = self.rows
        if len(logits) != rows or len(history) != rows:
            raise ValueError(
                f"DecodeRun.start_drawn: logits and history of {rows} row(s) expected, got "
                f"{len(logits)} and {len(history)}"
            )
        vocab = self.model.config.vocab_size
        shapes = [tuple(lg.shape) for lg in logits]
        if any(lg.size != vocab for lg in logits):
            raise ValueError(
                f"DecodeRun.start_drawn: each row's logits must hold {vocab} values (one "
                f"position), got shapes {shapes}"
            )
        self._write_inputs(n, history, streams, "start_drawn")
        drawn = zeros((1, rows), self.out.dtype.name, self.model.device)
        for r, lg in enumerate(logits):
            self._draw(lg.reshape(1, vocab), drawn[0, r : r + 1], r)
        self.ids.reshape(rows)[...] = drawn[0]
        first = PendingRun(drawn, 1, [0])
        return first, self._enqueue(n)

    def _write_inputs(
        self, n: int, history: list[list[int]] | None, streams: list[int] | None, caller: str
    ) -> None:
        """A run's checks, then its inputs but the token ids: the positions and write marks at
        the rows' cached lengths and, for draws, each row's counter ((stream << 32) + its
        tokens so far) and a penalty's seen marks, from ``history``."""
        rows = self.rows
        self._check_n(n, caller)
        self._check_captured()
        if self.draw is not None and (history is None or len(history) != rows):
            raise ValueError(
                f"DecodeRun.{caller}: a run that draws its tokens needs the history of each of "
                f"the {rows} row(s)"
            )
        words = list(range(rows)) if streams is None else list(streams)
        if len(words) != rows or not all(
            isinstance(w, (int, np.integer)) and 0 <= w < 2**31 for w in words
        ):
            raise ValueError(
                f"DecodeRun.{caller}: streams must be {rows} int(s) in [0, 2**31), got {streams!r}"
            )
        lengths = self.cache.lengths[:rows]
        for r in range(rows):
            self.cache.check_room(r, n)
        self.cache.order_after_spare()  # the inputs written below may be a spare run's
        self._carried = False  # the device no longer sits where the last run left it
        start = lengths.copy()
        self.pos[:] = start[:, None]
        self.marks[:] = np.stack([start, start + 1]).astype(np.int32)
        if self.counter is not None and history is not None:
            so_far = np.asarray([len(h) for h in history], np.int64)
            self.counter[:] = (np.asarray(words, np.int64) << 32) + so_far
            if self.seen is not None:
                self.seen[:] = seen_marks(history, self.model.config.vocab_size)

    def can_resume(self, n: int) -> bool:
        """Whether ``resume(n)`` may follow the last enqueued run: that run left the device
        exactly where its last kept token ends (it ran only the steps it keeps: not a whole
        graph replayed for fewer; nothing rewound since), it went to the current stream (the
        next run reads what it wrote in stream order), and the cache has room for n more
        steps."""
        if not 1 <= n <= self.steps or not self._carried:
            return False
        if self._last_stream is not runtime.current_stream(self.model.device):
            return False
        room = self.cache.max_seq_len - int(self.cache.lengths[: self.rows].max())
        return room >= n

    def resume(self, n: int) -> PendingRun:
        """The next n steps from where the last enqueued run left the device (its last token
        as the next input, the write marks (and the positions of a model that reads them),
        the draws' Philox counters and a
        penalty's seen marks all advanced there by its steps), enqueued behind it without a host
        round trip: the tokens of the rows still decoding are those ``start`` would give with
        the last run's last tokens and the histories so far (a row that stopped keeps drawing
        past its stop; those tokens are dropped). The caller decodes ahead of its stop checks
        (a row's stop inside the earlier run makes these steps spare: ``rewind`` them). Needs
        ``can_resume(n)``."""
        self._check_n(n, "resume")
        self._check_captured()
        if not self.can_resume(n):
            raise RuntimeError(
                "DecodeRun.resume: no run to continue on this stream (none enqueued, one rewound "
                f"since, a graph replay that kept fewer than its {self.steps} steps, or one "
                f"enqueued on another stream), or the cache has no room for {n} more steps"
            )
        return self._enqueue(n)

    def finish(self, pending: PendingRun) -> list[list[int]]:
        """Wait for an enqueued run's tokens: [row][step], its n steps."""
        return pending.tokens().tolist()  # type: ignore[no-any-return]

    def _check_n(self, n: int, caller: str = "run") -> None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= self.steps:
            raise ValueError(f"DecodeRun.{caller}: n must be in 1..{self.steps}, got {n}")

    def _check_captured(self) -> None:
        if self.graph is not None and not self.graph.captured:
            raise RuntimeError("DecodeRun after reset(): its graphs were released")

    def segments(self, n: int) -> list[int]:
        """The runs n steps are made of: [n] for a whole run, else n's binary digits, largest
        first (each a graph of its own: at most log2(steps) + 1 of them)."""
        n = int(n)
        if n == self.steps:
            return [n]
        return [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]

    def _enqueue(self, n: int) -> PendingRun:
        """The n steps, then the tokens' copy to the host, started; the lengths count the n
        tokens. Without a graph: eager steps, in the parts of self.segments (each into the rows
        of out its graph would write). With one: the whole graph, or the graphs of n's binary
        digits (recorded before anything is enqueued, so a failed recording enqueues nothing);
        without short graphs, the whole graph kept for n tokens where the cache has room for
        all its steps (the device then sits past the last kept token), else n eager steps."""
        n = int(n)
        stream = runtime.current_stream(self.model.device)
        parts = self.segments(n)
        first = [self._first_row(t) for t in parts]
        carried = True
        if self.graph is None:
            for t, r in zip(parts, first, strict=True):
                self._body(t, self.out[r : r + t])
        elif n == self.steps:
            self.graph.replay(stream)
        elif (graphs := self._short(parts)) is not None:
            for g in graphs:
                g.replay(stream)
        else:
            room = self.cache.max_seq_len - int(self.cache.lengths[: self.rows].max())
            if room >= self.steps:
                self.graph.replay(stream)
                carried = False
            else:
                self._body(n, self.out[:n])
            parts, first = [n], [0]
        self._carried = carried
        self._last_stream = stream
        self.cache.lengths[: self.rows] += n
        rows = [r + j for t, r in zip(parts, first, strict=True) for j in range(t)]
        return PendingRun(self.out, n, rows)

    def drop(self, pending: PendingRun) -> None:
        """Drop an enqueued run without waiting for it (spare: no row needs its tokens): its
        tokens leave the cached lengths, and the cache notes its stream, where it may still
        write these rows (StaticKVCache.order_after_spare orders later work after it)."""
        self.rewind(pending.n)
        self.cache.spare_stream = self._last_stream

    def rewind(self, n: int) -> None:
        """Forget the last n tokens of every row (a run that went past where decoding ended).
        The device no longer sits where the lengths end: the next run starts from the host."""
        self.cache.lengths[: self.rows] -= n
        self._carried = False

    def reset(self) -> None:
        """Release the graphs and the memory they keep; a graph run cannot run after it."""
        if self.graph is not None:
            self.graph.reset()
        self._drop_tails()
        self._tables.clear()


# The name of the greedy-only first version.
GreedyRun = DecodeRun
