"""Speculative decoding: a cheap drafter proposes the next k tokens, the model checks them all in
one step of k + 1 tokens, and every token the model would have produced anyway is kept.

Lossless by construction (Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding"; Chen et al. 2023):
- greedy: draft token j is kept while it equals the model's argmax at its position; the first
  mismatch is replaced by that argmax (the bonus token), so the output is greedy decoding's;
- sampling: draft token d at position j, drawn from the drafter's distribution q_j, is kept with
  probability min(1, p_j(d) / q_j(d)), where p_j is the model's distribution after the sampler's
  penalty, temperature, top-k, top-p and min-p (Sampler.probs_row); at the first rejection the
  token is drawn from max(0, p_j - q_j), renormalized. The kept tokens are then distributed as p. An
  n-gram drafter proposes deterministically (q_j is one-hot on d).

Drafters:
- ``NgramDrafter`` (prompt lookup, Saxena 2023; HF's ``prompt_lookup_num_tokens``): the tokens
  that followed the most recent earlier occurrence of the context's last n tokens (n from
  max_ngram down to min_ngram). Free to run; it wins where the output repeats its input
  (summaries, edits, code, extraction).
- ``ModelDrafter``: a smaller model of the same tokenizer decodes k tokens ahead from its own
  KV cache, rolled back to the kept prefix after each check.

The check runs the model on the last kept token plus the drafts, always k + 1 tokens (short
drafts are padded and the padding's logits ignored; eager checks too, so that a replayed check
and an eager one compute the same launch shapes and give the same bits), so one CUDA graph of
that step (CausalTransformerModel.step_graph(1, k + 1)) serves every check. Rejected
positions' cache entries stay behind the row's length, where attention never reads them, and
are overwritten.

Exactness: the model's logits for a position come from a k + 1 token step, not a 1 token step.
Under the deterministic mode (gp.set_deterministic) every kernel gives a row the same bits at any
token count, so greedy output equals plain greedy decoding's token for token (SmolLM2-135M, bf16,
H100: all 256 tokens). In the default mode the split-key decode attention rounds a row
differently when several queries share its launch, so a near tie between the top two logits can
flip and the output depart from plain greedy (each is still a greedy decode, up to rounding;
SmolLM2-135M in bf16 departed at token 138 of 256).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit.models.sampling import Sampler

if TYPE_CHECKING:
    from pygpukit.array import GPUArray
    from pygpukit.models.generation import GenerationStats
    from pygpukit.models.kv_cache import StaticKVCache
    from pygpukit.models.transformer import CausalTransformerModel

__all__ = ["ModelDrafter", "NgramDrafter", "accept_drafts", "drafter_for", "layer_skip_draft"]

DEFAULT_DRAFT_TOKENS = {"ngram": 8, "model": 4}


class NgramDrafter:
    """Prompt lookup: propose the continuation of the last n-gram's most recent earlier match."""

    kind = "ngram"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(
                f"NgramDrafter: need 1 <= min_ngram <= max_ngram, got {min_ngram} and {max_ngram}"
            )
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def check(self, model: CausalTransformerModel) -> None:
        pass

    def start(self, model: CausalTransformerModel, prompt: list[int], n_positions: int) -> None:
        pass

    def propose(self, history: list[int], k: int) -> tuple[list[int], list[np.ndarray] | None]:
        """Up to k tokens (possibly none) and None: the proposal is deterministic."""
        if k <= 0:
            return [], None
        seq = np.asarray(history, dtype=np.int64)
        n_tok = seq.shape[0]
        for n in range(min(self.max_ngram, n_tok - 1), self.min_ngram - 1, -1):
            # Windows that start before the suffix itself and leave a token after them.
            windows = np.lib.stride_tricks.sliding_window_view(seq[: n_tok - 1], n)
            hits = np.flatnonzero((windows == seq[n_tok - n :]).all(axis=1))
            if hits.size:
                at = int(hits[-1]) + n
                return [int(t) for t in seq[at : at + k]], None
        return [], None

    def commit(self, history: list[int]) -> None:
        pass


class ModelDrafter:
    """A smaller model of the same vocabulary decodes the drafts from its own KV cache (greedy
    when the sampler is greedy, else drawn from its own distribution with the same settings and
    a generator seeded from the sampler's)."""

    kind = "model"

    def __init__(self, draft: CausalTransformerModel, sampler: Sampler) -> None:
        self.model = draft
        self.sampler = Sampler(sampler.params)
        self.sampler.rng = np.random.default_rng(sampler.rng.integers(2**63))
        self.cache: StaticKVCache | None = None
        self.graph: Any = None

    def check(self, model: CausalTransformerModel) -> None:
        """ValueError when this draft cannot serve ``model`` (checked before the prefill)."""
        d = self.model
        if d is model:
            raise ValueError(
                "speculative: the draft model is the model itself; pass a smaller model (the two "
                "need caches of their own)"
            )
        if d.config.vocab_size != model.config.vocab_size:
            raise ValueError(
                f"speculative: the draft model's vocabulary has {d.config.vocab_size} tokens but "
                f"the model's has {model.config.vocab_size}; the draft must share the tokenizer"
            )
        if d.device != model.device:
            raise ValueError(
                f"speculative: the draft model is on {d.device} but the model is on {model.device}"
            )

    def start(self, model: CausalTransformerModel, prompt: list[int], n_positions: int) -> None:
        """Prefill the prompt into the draft model's own cache (and capture its step)."""
        self.check(model)
        d = self.model
        self.cache = d.ensure_cache(1, min(n_positions, d.config.max_context))
        self.graph = None
        if d.device.type == "cuda":
            try:
                self.graph = d.step_graph(1)
            except RuntimeError:
                self.graph = None  # eager draft steps (the reason is the model's to report)
        d.forward([prompt], self.cache)

    def _next(self, logits: GPUArray, seen: list[int]) -> tuple[int, np.ndarray | None]:
        row = logits.reshape(1, logits.shape[-1])
        if self.sampler.params.greedy:
            return self.sampler.greedy_ids(row, [seen])[0], None
        probs = self.sampler.probs_row(row.to_numpy()[0], seen)
        assert probs is not None
        return int(self.sampler.rng.choice(probs.shape[0], p=probs)), probs

    def propose(self, history: list[int], k: int) -> tuple[list[int], list[np.ndarray] | None]:
        cache = self.cache
        assert cache is not None, "start() first"
        room = cache.max_seq_len - int(cache.lengths[0])
        pending = history[int(cache.lengths[0]) :]
        k = min(k, room - len(pending))
        if k <= 0:
            return [], None
        d = self.model
        if len(pending) == 1 and self.graph is not None:
            logits = self.graph.step(pending)
        else:
            logits = d.forward([pending], cache)
        seen = list(history)
        drafts: list[int] = []
        qs: list[np.ndarray] = []
        for j in range(k):
            t, q = self._next(logits, seen)
            drafts.append(t)
            seen.append(t)
            if q is not None:
                qs.append(q)
            if j + 1 < k:
                logits = self.graph.step([t]) if self.graph is not None else d.forward([[t]], cache)
        return drafts, (qs if qs else None)

    def commit(self, history: list[int]) -> None:
        """Roll the draft cache back to the longest prefix of ``history`` it holds."""
        cache = self.cache
        assert cache is not None
        cache.lengths[0] = min(int(cache.lengths[0]), len(history) - 1)


def layer_skip_draft(model: CausalTransformerModel, layers: int) -> CausalTransformerModel:
    """A draft model made of ``model``'s first ``layers`` layers, its final norm and its lm_head
    (early exit, as LayerSkip's self-speculation): the same tokenizer by construction, no second
    checkpoint, no weight memory of its own (the arrays are shared); only its KV cache is new.
    How often it agrees depends on how much the later layers change the answer: measure the
    acceptance rate (GenerationStats) on your task."""
    import dataclasses

    from pygpukit.models.transformer import CausalTransformerModel

    n = model.config.num_layers
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers < n:
        raise ValueError(f"layer_skip_draft: layers must be an int in 1..{n - 1}, got {layers!r}")
    config = dataclasses.replace(model.config, num_layers=layers)
    weights = dataclasses.replace(model.weights, layers=model.weights.layers[:layers])
    return CausalTransformerModel(
        config, weights, model.dtype, model.device, model.tokenizer,
        f"{model.source} (first {layers} of {n} layers)",
    )  # fmt: skip


def drafter_for(speculative: Any, sampler: Sampler) -> NgramDrafter | ModelDrafter:
    """The drafter a ``speculative=`` argument names: "ngram", a model, or a drafter."""
    from pygpukit.models.transformer import CausalTransformerModel

    if isinstance(speculative, (NgramDrafter, ModelDrafter)):
        return speculative
    if speculative == "ngram":
        return NgramDrafter()
    if isinstance(speculative, CausalTransformerModel):
        return ModelDrafter(speculative, sampler)
    raise ValueError(
        f"speculative must be None, 'ngram', a draft CausalTransformerModel or a drafter, got "
        f"{speculative!r}"
    )


def accept_drafts(
    logits: np.ndarray | None,
    greedy_ids: np.ndarray | None,
    drafts: Sequence[int],
    q: Sequence[np.ndarray] | None,
    sampler: Sampler,
    history: list[int],
) -> tuple[int, int]:
    """(drafts kept, the token after them) for one row.

    Greedy: greedy_ids [len(drafts) + 1] are the model's choices at each position. Sampling:
    logits [len(drafts) + 1, V] on the host; q[j] the drafter's distribution of drafts[j] (None:
    deterministic drafts)."""
    if greedy_ids is not None:
        n = 0
        while n < len(drafts) and int(greedy_ids[n]) == drafts[n]:
            n += 1
        return n, int(greedy_ids[n])
    assert logits is not None
    rng = sampler.rng
    seen = list(history)
    for j, d in enumerate(drafts):
        p = sampler.probs_row(logits[j], seen)
        assert p is not None
        qd = 1.0 if q is None else float(q[j][d])
        if rng.random() * qd < p[d]:  # accept with probability min(1, p(d) / q(d))
            seen.append(d)
            continue
        if q is None:
            resid = p.copy()
            resid[d] = 0.0
        else:
            resid = np.maximum(p - q[j], 0.0)
        total = resid.sum()
        if not total > 0:
            resid, total = p, 1.0
        return j, int(rng.choice(resid.shape[0], p=resid / total))
    p = sampler.probs_row(logits[len(drafts)], seen)
    assert p is not None
    return len(drafts), int(rng.choice(p.shape[0], p=p))


def decode(
    model: CausalTransformerModel,
    cache: StaticKVCache,
    history: list[int],
    max_new: int,
    sampler: Sampler,
    stop: frozenset[int],
    drafter: NgramDrafter | ModelDrafter,
    k: int,
    verify: Any,
    st: GenerationStats,
) -> Iterator[list[int]]:
    """After the prefill and the first new token (history[-1], not yet in the cache): yield the
    tokens each check keeps, until max_new tokens in all (counting the first) or a stop token."""
    import time

    produced = 1
    while produced < max_new:
        t0 = time.perf_counter()
        start = int(cache.lengths[0])
        room = cache.max_seq_len - start
        drafts, q = drafter.propose(history, min(k, max_new - produced - 1, room - 1))
        feed = [history[-1], *drafts]
        # Eager checks take the graph's k + 1 tokens too (padded alike), so a check's logits do
        # not depend on whether it was replayed: graph == eager in the default mode as well,
        # whose decode attention rounds a row by the number of queries in its launch.
        width = verify.tokens if verify is not None else k + 1
        padded = feed + [feed[-1]] * (width - len(feed)) if room >= width else feed
        if verify is not None and room >= width:
            logits = verify.step([padded])
        else:
            logits = model.forward([padded], cache, all_logits=True)
        rows = logits.reshape(logits.shape[-2], logits.shape[-1])[: len(feed)]
        if sampler.params.greedy:  # each position after the tokens before it, as plain decoding
            seen = [[*history, *drafts[:j]] for j in range(len(feed))]
            ids = np.asarray(sampler.greedy_ids(rows, seen))
            n, nxt = accept_drafts(None, ids, drafts, q, sampler, history)
        else:
            host = rows.to_numpy().astype(np.float32)
            n, nxt = accept_drafts(host, None, drafts, q, sampler, history)
        cache.lengths[0] = start + 1 + n  # the fed token and the kept drafts
        kept = [*drafts[:n], nxt]
        for i, t in enumerate(kept):
            if t in stop or produced + i + 1 >= max_new:
                kept = kept[: i + 1]
                break
        history.extend(kept)
        drafter.commit(history)
        produced += len(kept)
        st.draft_tokens += len(drafts)
        st.accepted_tokens += n
        st.decode_steps += 1
        st.new_tokens += len(kept)
        st.decode_s += time.perf_counter() - t0
        yield kept
        if kept[-1] in stop:
            return
