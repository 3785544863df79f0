"""The decode step of cache row 0, captured once in a CUDA graph and replayed per token.

One decode step of a model is a few hundred kernel launches; from Python each costs several
microseconds of host time, which at batch 1 is most of a step. The step reads everything that
changes between tokens from device memory (CausalTransformerModel.forward_device_step: the token
id, its position, its cache write position and the new length), so it is captured once with
gp.CUDAGraph and replayed with those three arrays rewritten. DecodeM1Graph and the chat session
use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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

    Construction runs the step once on a private stream (the warm-up: kernels compile and
    workspaces are sized; it writes cache slot 0, which a prefill overwrites) and captures it; it
    raises RuntimeError with the reason when the step cannot be captured (Mixtral: the expert
    routing reads the router's output on the host) or the device is not a GPU. ``step`` writes
    the inputs and replays on the current stream.
    """

    def __init__(self, model: CausalTransformerModel, cache: StaticKVCache) -> None:
        dev = model.device
        if dev.type != "cuda":
            raise RuntimeError(f"CUDA graphs are not available on the {dev.type.upper()} device")
        ids, pos = zeros((1, 1), "int64", dev), zeros((1,), "int64", dev)
        marks = from_numpy(np.array([[0], [1]], np.int32), device=dev)
        side = runtime.Stream(device=dev.index)
        caller = runtime.current_stream(dev)
        ready = runtime.Event(device=dev.index)
        ready.record(caller)
        side.wait_event(ready)  # the weights and the cache were written on the caller's stream
        graph = CUDAGraph(dev)
        try:
            with runtime.stream(side):
                model.forward_device_step(ids, pos, marks, cache)  # the warm-up
                with graph.capture(side):
                    logits = model.forward_device_step(ids, pos, marks, cache)
        except Exception as exc:
            graph.reset()
            raise RuntimeError(f"the decode step could not be captured: {exc}") from exc
        finally:
            done = runtime.Event(device=dev.index)
            done.record(side)
            caller.wait_event(done)
        self.cache = cache
        self.graph = graph
        self.logits = logits  # [1, 1, vocab], rewritten by every replay
        self._inputs = (ids, pos, marks)

    @property
    def kept_bytes(self) -> int:
        """Device memory the graph keeps for the step's activations."""
        return self.graph.kept_bytes

    def step(self, token_id: int, position: int) -> GPUArray:
        """Feed ``token_id`` at ``position`` (the cache holds the tokens before it); the logits
        [1, 1, vocab], overwritten by the next step. cache.lengths is the caller's."""
        if not 0 <= position < self.cache.max_seq_len:
            raise ValueError(
                f"position {position} is outside the KV cache's {self.cache.max_seq_len} slots"
            )
        ids, pos, marks = self._inputs
        ids[:] = np.array([[int(token_id)]], np.int64)
        pos[:] = np.array([position], np.int64)
        marks[:] = np.array([[position], [position + 1]], np.int32)
        self.graph.replay()
        return self.logits

    def reset(self) -> None:
        """Release the graph and the memory it keeps (after the replays queued so far)."""
        self.graph.reset()
