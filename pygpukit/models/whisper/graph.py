"""The greedy single-token decoder step of a DecoderState, captured once in a CUDA graph.

The step (WhisperModel.step, then the logit rules and the argmax) reads every input that
changes between tokens from device memory: the token ids, the position, the cache write
position and length (state.ids / positions / marks) and the timestamp rules' masked ranges
(rules.ranges). So it is recorded once with gp.CUDAGraph and replayed with those arrays
rewritten, as models/step_graph.py does for the LLM engine. The warm-up and the capture write
the cache's last slot (position max_target_positions - 1), which any later step that reaches
it overwrites before reading, so the graph can be made at any time, before or after a prefill.
"""

from __future__ import annotations

import numpy as np

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.errors import CaptureError
from pygpukit.graphs import CUDAGraph
from pygpukit.models.whisper.logits import LogitRules, choose
from pygpukit.models.whisper.model import DecoderState, WhisperModel

__all__ = ["WhisperStepGraph"]


class WhisperStepGraph:
    """Replays ``choose(rules.apply(model.step(state, ...)))`` at temperature 0."""

    def __init__(self, model: WhisperModel, state: DecoderState, rules: LogitRules) -> None:
        dev = model.device
        if dev.type != "cuda":
            raise CaptureError(f"CUDA graphs are not available on the {dev.type.upper()} device")
        self.model, self.state, self.rules = model, state, rules
        b, last = state.batch_size, model.config.max_target_positions - 1
        state.marks[:] = np.array([[last] * b, [last + 1] * b], np.int32)
        state.positions[:] = np.full((b, 1), last, np.int64)
        graph = CUDAGraph(dev)
        try:
            self._run()  # warm-up: kernels compile and tune outside the capture
            with graph.capture():
                self.tok, self.lp = self._run()
        except Exception as exc:
            graph.reset()
            raise RuntimeError(f"the Whisper decoder step could not be captured: {exc}") from exc
        self.graph = graph

    def _run(self) -> tuple[GPUArray, GPUArray]:
        s = self.state
        logits = self.model.step(s, s.ids, s.positions, s.marks)
        return choose(self.rules.apply(logits, first=False), 0.0, s.ids, 0)

    def step(self, tok: GPUArray) -> tuple[GPUArray, GPUArray]:
        """Feed tok (int64 [B]) at the state's length; the next tokens and their
        log-probabilities (both rewritten by the next replay). rules.set_tokens comes first."""
        s = self.state
        b, start = s.batch_size, s.length
        s.cache.check_room(0, 1)
        s.ids[:] = tok.reshape(b, 1)
        s.positions[:] = np.full((b, 1), start, np.int64)
        s.marks[:] = np.array([[start] * b, [start + 1] * b], np.int32)
        self.graph.replay(runtime.current_stream(self.model.device))
        s.length += 1
        s.cache.lengths[:] = s.length
        return self.tok, self.lp

    def reset(self) -> None:
        self.graph.reset()
