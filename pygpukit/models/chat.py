"""A multi-turn chat over one model: the model's chat template, streaming text, stop tokens, and
KV-cache reuse across turns (the rendered conversation of turn n+1 starts with the tokens of
turn n, so only the new suffix is prefilled)."""

from __future__ import annotations

import secrets
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pygpukit.models._gen_args import check as check_gen_args
from pygpukit.models.chat_template import ChatTemplate, ThinkFilter
from pygpukit.models.decode_loop import DecodeRun, check_steps_per_sync
from pygpukit.models.errors import ContextLengthError, ModelLoadError
from pygpukit.models.generation import (
    GenerationStats,
    default_stop_ids,
    run_steps,
    speculation,
)
from pygpukit.models.sampling import Sampler, SamplingParams
from pygpukit.models.speculative import decode as decode_speculative
from pygpukit.models.step_graph import StepGraph
from pygpukit.models.tokenizer import StreamDecoder

if TYPE_CHECKING:
    from pygpukit.array import GPUArray
    from pygpukit.models.transformer import CausalTransformerModel

__all__ = ["ChatSession"]

# For checkpoints without a template (base models): a plain transcript format.
_PLAIN_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


class ChatSession:
    def __init__(
        self,
        model: CausalTransformerModel,
        system: str | None = None,
        sampling: SamplingParams | None = None,
        max_new_tokens: int = 512,
        max_seq_len: int | None = None,
        think: str = "show",
        graph: bool = True,
        speculative: Any = None,
        draft_tokens: int | None = None,
        steps_per_sync: int = 1,
    ) -> None:
        """speculative ("ngram", a draft model or a drafter; models/speculative.py) and
        draft_tokens: each decode step checks that many proposed tokens in one forward, captured
        in a CUDA graph of its own next to the 1-token step's. steps_per_sync: decode steps a
        host round trip (models.decode_loop: the k steps in one CUDA graph, tokens drawn on the
        device; a seeded session gives the tokens of one step a sync), streamed k at a time."""
        args = check_gen_args(max_new_tokens=max_new_tokens, max_seq_len=max_seq_len)
        params = sampling or SamplingParams()
        check_steps_per_sync(steps_per_sync, params, model.device.type, speculative)
        tok = model.tokenizer
        if tok is None:
            raise ModelLoadError(f"{model.source}: the model has no tokenizer; chat needs one")
        template = tok.chat_template
        if not template:
            warnings.warn(
                "the model has no chat template; using a plain 'User:/Assistant:' transcript",
                stacklevel=2,
            )
            template = _PLAIN_TEMPLATE
        self.model = model
        self.tokenizer = tok
        self.template = ChatTemplate(template, tok.bos_token, tok.eos_token)
        self.system = system
        self.sampling = params
        self.drafter: Any
        self.drafter, self.draft_tokens = speculation(
            model, speculative, draft_tokens, Sampler(self.sampling)
        )
        self.max_new_tokens = args.max_new_tokens
        self.think = think
        ThinkFilter(think)  # validates the mode
        n = min(model.config.max_context, args.max_seq_len or model.config.max_context)
        self.cache = model.new_cache(1, n)
        # Decode steps replayed from a CUDA graph on a GPU (models.step_graph); otherwise, or when
        # the step cannot be captured, every step is an eager forward (graph_reason says why).
        self.step_graph: StepGraph | None = None
        self.check_graph: StepGraph | None = None  # the speculative check's k + 1 token step
        self.run: DecodeRun | None = None  # steps_per_sync > 1: k steps a host round trip
        self.graph_reason = "off (graph=False)"
        spec = (
            ""
            if self.drafter is None
            else f"; speculative ({self.drafter.kind}, {self.draft_tokens} drafts a check)"
        )
        # The session's sampler key drives a run's device draws (recorded in its graph); an
        # unseeded session gives each turn a fresh high counter word instead (_runs), so a turn
        # never replays another turn's random numbers.
        run_sampler = Sampler(self.sampling)
        if graph:
            try:
                if steps_per_sync > 1:
                    self.run = DecodeRun(model, self.cache, 1, steps_per_sync, True, run_sampler)
                    self.graph_reason = (
                        f"CUDA graph replay, {steps_per_sync} steps a launch and host round trip"
                    )
                elif self.drafter is None:
                    self.step_graph = StepGraph(model, self.cache)
                    self.graph_reason = "CUDA graph replay, one launch per token"
                else:  # every decode step is a check: only its graph is replayed
                    self.check_graph = StepGraph(model, self.cache, 1, self.draft_tokens + 1)
                    self.graph_reason = "CUDA graph replay, one launch per check"
            except RuntimeError as exc:
                self.graph_reason = f"eager ({exc})"
        if steps_per_sync > 1 and self.run is None:
            self.run = DecodeRun(model, self.cache, 1, steps_per_sync, False, run_sampler)
            self.graph_reason += f", {steps_per_sync} steps a host round trip"
        self.graph_reason += spec
        self.stop_ids = default_stop_ids(model)
        self.messages: list[dict[str, str]] = []
        self.cached_ids: list[int] = []
        self.last_stats = GenerationStats()
        self.total_stats = GenerationStats()
        self.turns = 0
        self.reset()

    def reset(self) -> None:
        self.messages = [{"role": "system", "content": self.system}] if self.system else []
        self.cached_ids = []
        self.cache.reset()

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        kwargs = {"enable_thinking": False} if self.think == "off" else {}
        text = self.template.render(messages, add_generation_prompt=True, **kwargs)
        return self.tokenizer.encode(text, add_special_tokens=False)

    def send(self, text: str) -> Iterator[str]:
        """Stream the reply to ``text``; the turn joins the history once the reply is complete.
        A prompt that does not fit raises ContextLengthError and leaves the history unchanged."""
        if not isinstance(text, str):
            raise TypeError(f"send: text must be a str, got {type(text).__name__}")
        msgs = [*self.messages, {"role": "user", "content": text}]
        ids = self.render(msgs)
        room = self.cache.max_seq_len - len(ids)
        if room < 1:
            raise ContextLengthError(
                f"the conversation is {len(ids)} tokens but the context holds "
                f"{self.cache.max_seq_len}; use /reset or a larger --context"
            )
        max_new = min(self.max_new_tokens, room)
        common = 0
        for a, b in zip(self.cached_ids, ids, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(ids) - 1)  # at least one token to prefill for the logits
        st = GenerationStats()
        self.cache.lengths[0] = common
        self.cached_ids = []  # the cache holds an unknown state until this turn completes
        sampler = Sampler(self.sampling)
        stream = StreamDecoder(self.tokenizer)
        think = ThinkFilter(self.think)
        self.cache.order_after_spare()  # the last turn's spare decode steps may still write it
        t0 = time.perf_counter()
        logits = self.model.forward([ids[common:]], self.cache)
        st.prompt_tokens = len(ids) - common
        history = list(ids)
        out: list[int] = []
        for tok in self._tokens(logits, history, sampler, max_new, st, t0):
            out.append(tok)
            if tok in self.stop_ids:
                break
            piece = think.push(stream.push(tok))
            if piece:
                yield piece
        tail = think.push(stream.flush()) + think.flush()
        if tail:
            yield tail
        reply = self.tokenizer.decode([t for t in out if t not in self.stop_ids])
        self.messages = [*msgs, {"role": "assistant", "content": reply}]
        self.cached_ids = history[:-1]  # the last token was sampled but never fed
        self.last_stats = st
        tot = self.total_stats
        tot.prompt_tokens += st.prompt_tokens
        tot.new_tokens += st.new_tokens
        tot.prefill_s += st.prefill_s
        tot.decode_s += st.decode_s
        tot.decode_steps += st.decode_steps
        tot.draft_tokens += st.draft_tokens
        tot.accepted_tokens += st.accepted_tokens
        tot.batch_rows = self.turns = self.turns + 1  # one prefill-made token per turn

    def _tokens(
        self,
        logits: GPUArray,
        history: list[int],
        sampler: Sampler,
        max_new: int,
        st: GenerationStats,
        t0: float,
    ) -> Iterator[int]:
        """The reply's tokens as they are decided, appended to history. Every token before the
        last is in the cache when the turn ends (a speculative check may have cached more past
        it; the next turn's prefix match starts from cached_ids, never from the cache length)."""
        tok = sampler(logits, [history])[0]
        st.prefill_s = time.perf_counter() - t0
        st.new_tokens += 1
        history.append(tok)
        yield tok
        if tok in self.stop_ids or max_new <= 1:
            return
        if self.drafter is not None:
            t0 = time.perf_counter()
            self.drafter.start(self.model, history[:-1], self.cache.max_seq_len)
            st.prefill_s += time.perf_counter() - t0  # a draft model's own prefill
            for kept in decode_speculative(
                self.model, self.cache, history, max_new, sampler, self.stop_ids,
                self.drafter, self.draft_tokens, self.check_graph, st,
            ):  # fmt: skip
                yield from kept
            return
        if self.run is not None:
            yield from self._runs(history, max_new - 1, st)
            return
        for _ in range(max_new - 1):
            t0 = time.perf_counter()
            tok = sampler(self._step(history[-1]), [history])[0]
            st.decode_s += time.perf_counter() - t0
            st.decode_steps += 1
            st.new_tokens += 1
            history.append(tok)
            yield tok
            if tok in self.stop_ids:
                return

    def _runs(self, history: list[int], remaining: int, st: GenerationStats) -> Iterator[int]:
        """The reply's decode steps, run.steps a host round trip (generation.run_steps: a run's
        tokens after a stop token are dropped and their cache slots taken back)."""
        assert self.run is not None
        # A seeded session draws where one step a sync does (row 0's counters); an unseeded one
        # at counters of a stream of its own for this turn.
        stream = 0 if self.sampling.seed is not None else 1 + secrets.randbelow(2**31 - 1)
        steps = run_steps(
            self.run, [history[-1]], [history], [False], self.stop_ids, remaining, st, [stream]
        )
        for step in steps:
            yield from (tok for _, tok in step)

    def _step(self, tok: int) -> GPUArray:
        """One decode step of row 0; logits [1, 1, vocab]."""
        if self.step_graph is None:
            return self.model.forward([[tok]], self.cache)
        return self.step_graph.step(tok)

    def ask(self, text: str) -> str:
        """The whole reply at once."""
        return "".join(self.send(text))
