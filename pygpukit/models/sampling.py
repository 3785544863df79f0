"""Choosing the next token from logits: greedy, temperature, top-k, top-p, min-p, repetition
penalty.

The order and semantics follow HF transformers' logits processors (generation/logits_process.py):
RepetitionPenaltyLogitsProcessor (CTRL, Keskar et al. 2019: a seen token's logit is divided by the
penalty when positive, multiplied when negative), then TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper (keep the smallest set of tokens whose probability mass reaches top_p, at least
one), MinPLogitsWarper (keep probabilities >= min_p x the largest), then a draw from the
softmax. temperature 0 (or do_sample False) is greedy: argmax, first index on ties, as
torch.argmax.

Where the draw runs (SamplingParams.on_device):
- None (the default): on the device when the logits are on a GPU. Greedy without a penalty is
  gp.argmax; everything else is gp.sample (Philox4x32-10 keyed by a 63-bit key derived from the
  seed, at counter (row << 32) + position, so a row's draw depends on neither the batch nor the
  other rows). One id a row comes back; the logits never leave the device (with a penalty, a
  byte mask of the seen tokens goes up each step). On the CPU device the host draws, as below.
- False: the host draws: greedy as above, sampling copies the logits row to the host and draws
  with a seeded NumPy Generator (the reference the device draws are tested against).
- True: gp.sample wherever the logits are (on the CPU device its NumPy twin: the same stream).
A seed reproduces a run either way; the two streams differ, so the same seed gives different
(equally distributed) tokens on the host and on the device. Speculative decoding's acceptance
test uses the host distribution (probs_row).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import from_numpy

__all__ = ["SamplingParams", "Sampler", "draws_on_device", "seen_marks"]


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.7
    top_k: int = 50
    top_p: float = 0.9
    repetition_penalty: float = 1.0
    seed: int | None = None
    min_p: float = 0.0
    on_device: bool | None = None  # where the draw runs (module docstring)

    def __post_init__(self) -> None:
        # NaN slips past every comparison: the shared check refuses it by name (top_k 0
        # disables top-k).
        from pygpukit.models._gen_args import check_sampling

        check_sampling(
            self.temperature, self.top_k, self.top_p, self.repetition_penalty, self.seed,
            self.min_p, self.on_device,
        )  # fmt: skip

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def argmax(self) -> bool:
        """Greedy without a repetition penalty: the next token is the logits' argmax."""
        return self.greedy and self.repetition_penalty == 1.0


class Sampler:
    """Stateful only in its random generator (seeded once per generation)."""

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self.rng = np.random.default_rng(params.seed)
        # The device stream's Philox key (63 bits: gp.sample takes [0, 2**63)), from the seed
        # (fresh entropy without one).
        words = np.random.SeedSequence(params.seed).generate_state(2, np.uint32)
        self.key = ((int(words[0]) << 32) | int(words[1])) & (2**63 - 1)

    def __call__(
        self, logits: GPUArray, history: list[list[int]], rows: list[int] | None = None
    ) -> list[int]:
        """Next token per row of logits [B, 1, V] (or [B, V]); history[b] = tokens so far;
        rows[b]: row b's index in its batch (default 0..B-1), which keys its device draws."""
        lg = logits.reshape(logits.shape[0], logits.shape[-1])
        if self.params.greedy:
            return self.greedy_ids(lg, history)
        if self.on_device(lg):
            return self.device_ids(lg, history, rows)
        host = lg.to_numpy().astype(np.float32)
        return [self.sample_row(host[b], history[b]) for b in range(host.shape[0])]

    def on_device(self, logits: GPUArray) -> bool:
        return draws_on_device(self.params, logits.device.type)

    def device_ids(
        self, rows_logits: GPUArray, history: list[list[int]], rows: list[int] | None = None
    ) -> list[int]:
        """gp.sample on each row of logits [R, V]: counters (row << 32) + position uploaded
        (8 bytes a row), the seen marks only with a penalty (one byte a vocabulary entry)."""
        p = self.params
        n, v = rows_logits.shape
        idx = list(range(n)) if rows is None else rows
        ctr = np.asarray([(r << 32) + len(h) for r, h in zip(idx, history, strict=True)], np.int64)
        dev = rows_logits.device
        seen = None
        if p.repetition_penalty != 1.0:
            seen = from_numpy(seen_marks(history, v), device=dev)
        out = ops.sample(rows_logits, from_numpy(ctr, device=dev), seen, **self.draw_args())
        return [int(t) for t in out.to_numpy()]

    def draw_args(self) -> dict[str, Any]:
        """gp.sample's keyword arguments for this sampler's draws (a greedy draw reads no
        random numbers: its key is 0, whatever the seed)."""
        p = self.params
        return {
            "seed": 0 if p.greedy else self.key, "temperature": float(p.temperature),
            "top_k": int(p.top_k), "top_p": float(p.top_p), "min_p": float(p.min_p),
            "repetition_penalty": float(p.repetition_penalty),
        }  # fmt: skip

    def greedy_ids(self, rows: GPUArray, seen: list[list[int]]) -> list[int]:
        """The greedy choice of each row of logits [R, V], seen[r] the tokens before row r:
        gp.argmax (one id a row comes back); with a repetition penalty, gp.sample where the
        draws run on the device (on_device), else the host's argmax after the penalty."""
        if self.params.repetition_penalty == 1.0:
            return [int(i) for i in ops.argmax(rows, axis=-1).to_numpy()]
        if self.on_device(rows):
            return self.device_ids(rows, seen)
        host = rows.to_numpy().astype(np.float32)
        return [int(np.argmax(self.penalized(host[r], seen[r]))) for r in range(host.shape[0])]

    def sample_row(self, logits: np.ndarray, seen: list[int]) -> int:
        probs = self.probs_row(logits, seen)
        if probs is None:
            return int(np.argmax(self.penalized(logits, seen)))
        return int(self.rng.choice(probs.shape[0], p=probs))

    def penalized(self, logits: np.ndarray, seen: list[int]) -> np.ndarray:
        """A float32 copy of one row's logits with the repetition penalty applied."""
        p = self.params
        x = np.array(logits, dtype=np.float32)
        if p.repetition_penalty != 1.0 and seen:
            ids = np.unique(np.asarray(seen, dtype=np.int64))
            ids = ids[(ids >= 0) & (ids < x.shape[0])]
            v = x[ids]
            x[ids] = np.where(v < 0, v * p.repetition_penalty, v / p.repetition_penalty)
        return x

    def probs_row(self, logits: np.ndarray, seen: list[int]) -> np.ndarray | None:
        """The distribution one row's next token is drawn from (float64, after the penalty,
        temperature, top-k, top-p and min-p), or None when greedy. Speculative decoding's acceptance
        test (models/speculative.py) uses it as the target distribution."""
        p = self.params
        if p.greedy:
            return None
        x = self.penalized(logits, seen) / np.float32(p.temperature)
        if 0 < p.top_k < x.shape[0]:
            kth = np.partition(x, -p.top_k)[-p.top_k]
            x = np.where(x < kth, -np.inf, x)
        if p.top_p < 1.0:
            order = np.argsort(-x, kind="stable")
            probs = _softmax(x[order])
            # Keep tokens while the mass before them is below top_p (the first always stays).
            before = np.cumsum(probs) - probs
            drop = order[before >= p.top_p]
            x[drop] = -np.inf
        if p.min_p > 0.0:
            x = np.where(x < np.max(x) + np.float32(np.log(p.min_p)), -np.inf, x)
        return _softmax(x)  # type: ignore[no-any-return]


def seen_marks(history: list[list[int]], vocab: int) -> np.ndarray:
    """uint8 [rows, vocab]: 1 where a row's history holds the token (gp.sample's ``seen``)."""
    marks = np.zeros((len(history), vocab), np.uint8)
    for b, h in enumerate(history):
        ids = np.asarray(h, np.int64)
        marks[b, ids[(ids >= 0) & (ids < vocab)]] = 1
    return marks


def draws_on_device(params: SamplingParams, device_type: str) -> bool:
    """Whether the next tokens are drawn on the device (module docstring: on_device)."""
    return params.on_device is True or (params.on_device is None and device_type == "cuda")


def _softmax(x: np.ndarray) -> Any:
    m = np.max(x)
    e = np.exp((x - m).astype(np.float64))
    return e / e.sum()
