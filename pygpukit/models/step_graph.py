"""The decode step of cache rows 0..B-1, captured once in a CUDA graph and replayed per token.

One decode step of a model is a few hundred kernel launches; from Python each costs several
microseconds of host time, which at batch 1 is most of a step. The step reads everything that
changes between tokens from device memory (CausalTransformerModel.forward_device_step: the token
id, its position, its cache write position and the new length), so it is captured once with
gp.CUDAGraph and replayed with those three arrays rewritten. The generation loop (batched too)
and the 0.2.x DecodeM1Graph get it through CausalTransformerModel.step_graph, which keeps it with
the model's cache; the chat session captures one over its own cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy, zeros
from pygpukit.errors import CaptureError
from pygpukit.graphs import CUDAGraph

if TYPE_CHECKING:
    from pygpukit.models.kv_cache import StaticKVCache
    from pygpukit.models.transformer import CausalTransformerModel
    from pygpukit.runtime import Device

__all__ = ["StepGraph", "capture", "check_capturable"]


def check_capturable(dev: Device, who: str) -> None:
    """Raise CaptureError off a GPU and RuntimeError inside another capture on this thread."""
    if dev.type != "cuda":
        raise CaptureError(f"CUDA graphs are not available on the {dev.type.upper()} device")
    if runtime.capture_pool(dev) is not None:  # the warm-up would be recorded there
        raise RuntimeError(
            f"{who}: this thread is already capturing a CUDA graph on {dev}; make it outside "
            "that capture"
        )


def capture(
    dev: Device,
    body: Callable[[], Any],
    what: str,
    warm_up: bool = True,
    stream: Any = None,
) -> CUDAGraph:
    """body() run once on the caller's stream (the warm-up: kernels compile; warm_up=False
    where the same kernels ran before, so nothing runs), then recorded in a new CUDA graph on
    ``stream`` (default: a new sibling of the current stream, on its SM partition). A
    CaptureError raised while recording means the body can never be captured (a host read),
    which no retry changes: raised as CaptureError; anything else (out of memory, a
    CaptureError from the warm-up, whose stream another library may be capturing) as
    RuntimeError."""
    graph = CUDAGraph(dev)
    recording = False
    try:
        if warm_up:
            body()
        with graph.capture(stream):
            recording = True
            body()
    except Exception as exc:
        graph.reset()
        kind = CaptureError if recording and isinstance(exc, CaptureError) else RuntimeError
        raise kind(f"the decode {what} could not be captured: {exc}") from exc
    return graph


class StepGraph:
    """The captured step of ``model`` over rows 0..rows-1 of ``cache``, ``tokens`` new tokens a
    row (1: decode; more: verifying speculative drafts, with the logits of every position).

    Construction runs the step once (the warm-up: kernels compile; it writes the first cache
    slots of those rows, which a prefill overwrites) and captures it on a stream of its own; it
    raises CaptureError (a RuntimeError) with the reason when the step can never be captured
    (Mixtral: the expert routing reads the router's output on the host; a device that is not a
    GPU), and RuntimeError when the capture failed for a passing reason (out of memory, another
    capture running on this thread). ``step`` feeds the tokens of each row at that row's cached
    length, as ``model.forward(rows, cache)`` does, by writing the inputs and replaying on the
    current stream. The graph reads the model's RoPE tables of capture time: they are kept
    here, so a model that later builds longer tables does not free them.
    """

    def __init__(
        self, model: CausalTransformerModel, cache: StaticKVCache, rows: int = 1, tokens: int = 1
    ) -> None:
        from pygpukit.models.transformer import DECODE_TOKENS

        dev = model.device
        check_capturable(dev, "StepGraph")
        if not 1 <= rows <= cache.batch_size:
            raise ValueError(f"StepGraph: rows must be in 1..{cache.batch_size}, got {rows}")
        if not 1 <= tokens <= DECODE_TOKENS:
            raise ValueError(f"StepGraph: tokens must be in 1..{DECODE_TOKENS}, got {tokens}")
        ids = zeros((rows, tokens), "int64", dev)
        pos = from_numpy(np.tile(np.arange(tokens, dtype=np.int64), (rows, 1)), device=dev)
        marks = from_numpy(np.array([[0] * rows, [tokens] * rows], np.int32), device=dev)
        out: list[GPUArray] = []
        graph = capture(
            dev, lambda: out.append(model.forward_device_step(ids, pos, marks, cache)), "step"
        )
        logits = out[-1]
        self.cache = cache
        self.rows = rows
        self.tokens = tokens
        self.vocab = model.config.vocab_size
        self.graph = graph
        self.logits = logits  # [rows, tokens, vocab], rewritten by every replay
        self._inputs = (ids, pos, marks)
        self._tables = (model._rope, model._positions)  # read by the graph: keep them alive
        self._last: Any = None  # the stream of the last replay
        # The SM partition its kernels were recorded for (pygpukit.scheduler contexts).
        self.partition_id = runtime.current_stream(dev).partition_id

    @property
    def kept_bytes(self) -> int:
        """Device memory the graph keeps for the step's activations."""
        return self.graph.kept_bytes

    def step(self, token_ids: int | Sequence[int] | Sequence[Sequence[int]]) -> GPUArray:
        """Feed ``tokens`` tokens a row after that row's cached tokens and count them there
        (one id a row, or one sequence of ``tokens`` ids a row); the logits
        [rows, tokens, vocab], overwritten by the next step."""
        if not self.graph.captured:
            raise RuntimeError("StepGraph.step after reset(): the captured step was released")
        n, s = self.rows, self.tokens
        if isinstance(token_ids, (int, np.integer)):
            token_ids = [token_ids]
        try:
            rows = [[t] if isinstance(t, (int, np.integer)) else list(t) for t in token_ids]
            grid = np.array([[int(x) for x in r] for r in rows], dtype=np.int64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"StepGraph.step: token ids must be integers: {exc}") from None
        if grid.shape != (n, s):
            raise ValueError(
                f"StepGraph.step: {n} row(s) of {s} token id(s) expected, got shape {grid.shape}"
            )
        lengths = self.cache.lengths[:n]
        for r in range(n):
            self.cache.check_room(r, s)
        bad = grid[(grid < 0) | (grid >= self.vocab)]
        if bad.size:
            raise ValueError(
                f"StepGraph.step: token ids outside [0, {self.vocab}): {bad[:5].tolist()}"
            )
        start = lengths.copy()
        cur = runtime.current_stream(self.graph.device)
        if self._last is not None and self._last != cur:
            # The previous replay ran on another stream: the inputs and logits it used must not
            # be rewritten before it is done.
            ev = runtime.Event(device=self.graph.device.index)
            ev.record(self._last)
            cur.wait_event(ev)
        ids, pos, marks = self._inputs
        ids[:] = grid
        pos[:] = start[:, None] + np.arange(s, dtype=np.int64)
        marks[:] = np.stack([start, start + s]).astype(np.int32)
        self.graph.replay(cur)
        self._last = cur
        lengths += s
        return self.logits

    def reset(self) -> None:
        """Release the graph and the memory it keeps (after the replays queued so far)."""
        self.graph.reset()
