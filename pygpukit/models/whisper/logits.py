"""HF's Whisper logit processors on the device, and the token choice.

Applied in HF's order (WhisperGenerationMixin._retrieve_logit_processors): begin_suppress_tokens
at the first generated position, suppress_tokens at every one, then the timestamp rules of
WhisperTimeStampLogitsProcessor (generation/logits_process.py):
- <|notimestamps|> never;
- timestamps come in pairs: after a timestamp that follows text, the next token is a timestamp
  or end-of-text (text is masked); after two timestamps, the next is text (timestamps masked);
- timestamps do not decrease (those below the last one are masked; after a pair, the last one
  itself too);
- the first generated token is a timestamp no later than max_initial_timestamp_index;
- when the summed probability of the timestamps exceeds that of the likeliest text token, text
  is masked.
The sequence-dependent rules are at most three masked id ranges [lo, hi) a row, which the host
computes from the tokens it has read (it reads every chosen token anyway) and writes into a
small device array; the probability rule runs on the device. So a step reads back nothing but
the chosen tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import arange, from_numpy, zeros
from pygpukit.dtypes import int64
from pygpukit.models.whisper.config import WhisperGenerationConfig
from pygpukit.runtime import Device

__all__ = ["LogitRules", "timestamp_ranges"]

RANGES = 3  # masked id ranges a row, at most (the first step has two, later ones two)
_NEG_INF = -math.inf


def timestamp_ranges(
    generated: Sequence[int], timestamp_begin: int, eos: int, vocab: int, max_initial: int | None
) -> list[tuple[int, int]]:
    """The id ranges WhisperTimeStampLogitsProcessor masks after ``generated`` (the tokens
    since the prompt), before its probability rule."""
    seq = list(generated)
    out: list[tuple[int, int]] = []
    last_ts = len(seq) >= 1 and seq[-1] >= timestamp_begin
    penult_ts = len(seq) < 2 or seq[-2] >= timestamp_begin
    if last_ts:
        out.append((timestamp_begin, vocab) if penult_ts else (0, eos))
    stamps = [t for t in seq if t >= timestamp_begin]
    if stamps:
        # After a pair the last timestamp may not repeat; after a single one it may (the pair).
        last = stamps[-1] if last_ts and not penult_ts else stamps[-1] + 1
        out.append((timestamp_begin, last))
    if not seq:
        out.append((0, timestamp_begin))
        if max_initial is not None:
            out.append((timestamp_begin + max_initial + 1, vocab))
    return out


def _bias(vocab: int, ids: Sequence[int], device: Device) -> GPUArray:
    b = np.zeros(vocab, np.float32)
    ok = [i for i in ids if 0 <= i < vocab]
    b[ok] = _NEG_INF
    return from_numpy(b, device=device)


class LogitRules:
    """The processors of one decoding run of ``batch`` rows (timestamps on or off)."""

    def __init__(
        self,
        gen: WhisperGenerationConfig,
        vocab: int,
        batch: int,
        device: Device,
        timestamps: bool,
    ) -> None:
        self.vocab = vocab
        self.batch = batch
        self.eos = gen.eos_token_id
        self.timestamp_begin = gen.timestamp_begin if timestamps else None
        self.max_initial = gen.max_initial_timestamp_index
        suppress = list(gen.suppress_tokens)
        if timestamps:
            if gen.no_timestamps_token_id is None:
                raise ValueError(
                    "timestamps need no_timestamps_token_id (generation_config.json or the "
                    "tokenizer's <|notimestamps|>)"
                )
            suppress.append(gen.no_timestamps_token_id)
        self.suppress = _bias(vocab, suppress, device)
        self.begin = ops.add(self.suppress, _bias(vocab, gen.begin_suppress_tokens, device))
        self.ranges = zeros((batch, RANGES, 2), int64, device)
        self.idx = arange(vocab, dtype=int64, device=device)

    def set_tokens(self, generated: Sequence[Sequence[int]]) -> None:
        """Write the masked ranges that follow each row's generated tokens (timestamps only)."""
        tb = self.timestamp_begin
        if tb is None:
            return
        host = np.zeros((self.batch, RANGES, 2), np.int64)
        for r, seq in enumerate(generated):
            for j, (lo, hi) in enumerate(
                timestamp_ranges(seq, tb, self.eos, self.vocab, self.max_initial)
            ):
                host[r, j] = (lo, hi)
        self.ranges[:] = host

    def apply(self, logits: GPUArray, first: bool) -> GPUArray:
        """The processed float32 logits [B, vocab] (device ops only)."""
        x = ops.add(logits, self.begin if first else self.suppress)
        tb = self.timestamp_begin
        if tb is None:
            return x
        for j in range(RANGES):
            lo = self.ranges[:, j, 0:1]
            hi = self.ranges[:, j, 1:2]
            inside = ops.where(ops.ge(self.idx, lo), ops.lt(self.idx, hi), False)
            x = ops.where(inside, _NEG_INF, x)
        # HF: logsumexp(log_softmax(x)[tb:]) > max(log_softmax(x)[:tb]); the shared
        # normaliser cancels, leaving logsumexp(x[tb:]) > max(x[:tb]).
        m = ops.max(x, axis=-1, keepdims=True)
        stamps = ops.sum(ops.exp(ops.sub(x[:, tb:], m)), axis=-1, keepdims=True)
        stamp_lse = ops.add(ops.log(stamps), m)
        text_max = ops.max(x[:, :tb], axis=-1, keepdims=True)
        prefer = ops.gt(stamp_lse, text_max)
        return ops.where(ops.where(prefer, ops.lt(self.idx, tb), False), _NEG_INF, x)


def choose(
    x: GPUArray, temperature: float, counter: GPUArray, seed: int
) -> tuple[GPUArray, GPUArray]:
    """The next token of each row of processed logits x [B, V] (int64 [B]: argmax, or a sample
    at ``temperature`` > 0) and its log-probability under softmax(x) [B] (HF's avg_logprob
    uses the processed scores at temperature 1)."""
    m = ops.max(x, axis=-1, keepdims=True)
    lse = ops.add(ops.log(ops.sum(ops.exp(ops.sub(x, m)), axis=-1, keepdims=True)), m)
    b, v = x.shape
    if temperature <= 0:
        tok = ops.argmax(x, axis=-1)
        return tok, ops.sub(m, lse).reshape(b)  # x[argmax] is the row maximum
    tok = ops.cast(ops.sample(x, counter, seed=seed, temperature=temperature), int64)
    flat = ops.add(tok, arange(0, b * v, v, dtype=int64, device=x.device))
    picked = ops.embedding(flat, x.reshape(b * v, 1)).reshape(b, 1)
    return tok, ops.sub(picked, lse).reshape(b)
