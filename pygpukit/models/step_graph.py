"""The decode step of cache row 0, captured once in a CUDA graph and replayed per token.

One decode step of a model is a few hundred kernel launches; from Python each costs several
microseconds of host time, which at batch 1 is most of a step. The step reads everything that
changes between tokens from device memory (CausalTransformerModel.forward_device_step: the token
id, its position, its cache write position and the new length), so it is captured once with
gp.CUDAGraph and replayed with those three arrays rewritten. DecodeM1Graph and the chat session
use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy, zeros
from pygpukit.graphs import CUDAGraph

if TYPE_CHECKING:
    from pygpukit.models.kv_cache import StaticKVCache
    from pygpukit.models.transformer import CausalTransformerModel

__all__ = ["StepGraph"]


class StepGraph:
    """The captured step of ``model`` over ``cache`` (row 0).

    Construction runs the step once (the warm-up: kernels compile; it writes cache slot 0,
    which a prefill overwrites) and captures it on a stream of its own; it raises RuntimeError
    with the reason when the step cannot be captured (Mixtral: the expert routing reads the
    router's output on the host) or the device is not a GPU. ``step`` feeds a token at the
    cached length, as ``model.forward([[token]], cache)`` does, by writing the inputs and
    replaying on the current stream. The graph reads the model's RoPE tables of capture time:
    they are kept here, so a model that later builds longer tables does not free them.
    """

    def __init__(self, model: CausalTransformerModel, cache: StaticKVCache) -> None:
        dev = model.device
        if dev.type != "cuda":
            raise RuntimeError(f"CUDA graphs are not available on the {dev.type.upper()} device")
        ids, pos = zeros((1, 1), "int64", dev), zeros((1,), "int64", dev)
        marks = from_numpy(np.array([[0], [1]], np.int32), device=dev)
        graph = CUDAGraph(dev)
        try:
            model.forward_device_step(ids, pos, marks, cache)  # the warm-up, on the caller's stream
            with graph.capture():  # a new stream: nothing runs there
                logits = model.forward_device_step(ids, pos, marks, cache)
        except Exception as exc:
            graph.reset()
            raise RuntimeError(f"the decode step could not be captured: {exc}") from exc
        self.cache = cache
        self.graph = graph
        self.logits = logits  # [1, 1, vocab], rewritten by every replay
        self._inputs = (ids, pos, marks)
        self._tables = (model._rope, model._positions)  # read by the graph: keep them alive
        self._last: Any = None  # the stream of the last replay

    @property
    def kept_bytes(self) -> int:
        """Device memory the graph keeps for the step's activations."""
        return self.graph.kept_bytes

    def step(self, token_id: int) -> GPUArray:
        """Feed ``token_id`` after the cache's tokens (row 0) and count it there; the logits
        [1, 1, vocab], overwritten by the next step."""
        position = int(self.cache.lengths[0])
        self.cache.check_room(0, 1)
        cur = runtime.current_stream(self.graph.device)
        if self._last is not None and self._last != cur:
            # The previous replay ran on another stream: the inputs and logits it used must not
            # be rewritten before it is done.
            ev = runtime.Event(device=self.graph.device.index)
            ev.record(self._last)
            cur.wait_event(ev)
        ids, pos, marks = self._inputs
        ids[:] = np.array([[int(token_id)]], np.int64)
        pos[:] = np.array([position], np.int64)
        marks[:] = np.array([[position], [position + 1]], np.int32)
        self.graph.replay(cur)
        self._last = cur
        self.cache.lengths[0] = position + 1
        return self.logits

    def reset(self) -> None:
        """Release the graph and the memory it keeps (after the replays queued so far)."""
        self.graph.reset()
