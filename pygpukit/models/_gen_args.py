"""The one check of generation arguments, shared by generate, stream, stream_batch, ChatSession,
SamplingParams and the 0.2.x decode strategies (which delegate to generate).

Each bad value raises before any work, naming the argument and the value: a negative
max_new_tokens (which used to return the prompt), float or string token ids (which int() used to
truncate or reject with its own message), a NaN or infinite temperature (which reached the sampler
as "Probabilities contain NaN"), a max_seq_len of 0 (which used to mean "the full context").
TypeError for a value of the wrong type, ValueError for one out of range, as Python does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["GenArgs", "check", "token_ids"]

_UNSET: Any = object()


class GenArgs(NamedTuple):
    prompts: list[list[int]]  # empty when no input_ids were given
    single: bool
    max_new_tokens: int
    max_seq_len: int | None
    stop_ids: frozenset[int] | None


def _int(name: str, v: Any, low: int) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__} {v!r}")
    if v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    return int(v)


def _number(name: str, v: Any, ok: Any, want: str) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(v).__name__} {v!r}")
    f = float(v)
    if math.isnan(f) or not ok(f):
        raise ValueError(f"{name} must be {want}, got {v!r}")
    return f


def token_ids(input_ids: Any, name: str = "input_ids") -> tuple[list[list[int]], bool]:
    """(prompts, was_single) from a list of ints, a list of lists, or a NumPy array. Every id
    must be an integer (floats are not truncated); an empty prompt is refused."""
    if isinstance(input_ids, np.ndarray):
        if input_ids.dtype.kind not in "iu":
            raise TypeError(
                f"{name} must hold integer token ids, got an array of {input_ids.dtype}"
            )
        input_ids = input_ids.tolist()
    if isinstance(input_ids, (str, bytes)) or not isinstance(input_ids, Iterable):
        raise TypeError(
            f"{name} must be a list of token ids (ints) or a list of such lists, got "
            f"{type(input_ids).__name__} {input_ids!r:.60}"
        )
    seq = list(input_ids)
    single = not (seq and isinstance(seq[0], (list, tuple, np.ndarray)))
    rows = [seq] if single else seq
    prompts: list[list[int]] = []
    for i, row in enumerate(rows):
        if isinstance(row, np.ndarray):
            row = row.tolist()
        if isinstance(row, (str, bytes)) or not isinstance(row, (list, tuple)):
            raise TypeError(f"{name}[{i}] must be a list of token ids, got {type(row).__name__}")
        if not row:
            raise ValueError(f"prompt {i} is empty: generation needs at least one input token")
        out = []
        for j, t in enumerate(row):
            where = f"{name}[{j}]" if single else f"{name}[{i}][{j}]"
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                raise TypeError(
                    f"{where} must be an int token id, got {type(t).__name__} {t!r} (encode text "
                    "with the tokenizer first)"
                )
            if t < 0:
                raise ValueError(f"{where} is {t}, a negative token id")
            out.append(int(t))
        prompts.append(out)
    return prompts, single


def check(
    input_ids: Any = _UNSET,
    max_new_tokens: Any = 32,
    max_seq_len: Any = None,
    stop_ids: Any = None,
) -> GenArgs:
    """The generation arguments, checked and normalised (see the module docstring)."""
    prompts, single = ([], True) if input_ids is _UNSET else token_ids(input_ids)
    n_new = _int("max_new_tokens", max_new_tokens, 0)
    seq = None if max_seq_len is None else _int("max_seq_len", max_seq_len, 1)
    stop = None
    if stop_ids is not None:
        if isinstance(stop_ids, (int, np.integer)):
            stop_ids = [stop_ids]
        stop = frozenset(_int(f"stop_token_ids[{k}]", t, 0) for k, t in enumerate(stop_ids))
    return GenArgs(prompts, single, n_new, seq, stop)


def check_sampling(
    temperature: Any,
    top_k: Any,
    top_p: Any,
    repetition_penalty: Any,
    seed: Any,
    min_p: Any = 0.0,
    on_device: Any = None,
) -> None:
    """SamplingParams' values: finite numbers in range (0 temperature is greedy)."""
    _number("min_p", min_p, lambda f: 0 <= f < 1, "in [0, 1)")
    if on_device is not None and not isinstance(on_device, bool):
        raise ValueError(f"on_device must be None, True or False, got {on_device!r}")
    _number("temperature", temperature, lambda f: 0 <= f < math.inf, "a finite number >= 0")
    _int("top_k", top_k, 0)
    _number("top_p", top_p, lambda f: 0 < f <= 1, "in (0, 1]")
    _number(
        "repetition_penalty", repetition_penalty, lambda f: 0 < f < math.inf, "a finite number > 0"
    )
    if seed is not None:
        _int("seed", seed, 0)
