"""One argument check for generate, stream, stream_batch, ChatSession and SamplingParams."""

from __future__ import annotations

import math
from typing import Any

import pytest
from models._util import FIXTURES, golden

from pygpukit.models import SamplingParams, generate, load_model, stream, stream_batch
from pygpukit.models.chat import ChatSession

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model(FIXTURES / "llama", device="cpu")


def _still_works(model: Any) -> None:
    g = golden("llama")
    out = model.generate(g["prompts"][0], 4, temperature=0, stop_token_ids=())
    assert out[len(g["prompts"][0]) :] == g["greedy"][0][:4]


BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"max_new_tokens": -1}, ValueError, "max_new_tokens"),
    ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens"),
    ({"max_new_tokens": "4"}, TypeError, "max_new_tokens"),
    ({"input_ids": [1, 2.5, 3]}, TypeError, r"input_ids\[1\]"),
    ({"input_ids": [1.0, 2.0]}, TypeError, r"input_ids\[0\]"),
    ({"input_ids": "hello"}, TypeError, "input_ids"),
    ({"input_ids": ["a", "b"]}, TypeError, r"input_ids\[0\]"),
    ({"input_ids": [[1, 2], [3, None]]}, TypeError, r"input_ids\[1\]\[1\]"),
    ({"input_ids": [1, -4]}, ValueError, r"input_ids\[1\]"),
    ({"input_ids": [True, 2]}, TypeError, r"input_ids\[0\]"),
    ({"input_ids": []}, ValueError, "empty"),
    ({"temperature": math.nan}, ValueError, "temperature"),
    ({"temperature": math.inf}, ValueError, "temperature"),
    ({"temperature": -0.5}, ValueError, "temperature"),
    ({"temperature": "0.7"}, TypeError, "temperature"),
    ({"top_k": -1}, ValueError, "top_k"),
    ({"top_k": 5.5}, TypeError, "top_k"),
    ({"top_p": math.nan}, ValueError, "top_p"),
    ({"top_p": 0.0}, ValueError, "top_p"),
    ({"top_p": 1.5}, ValueError, "top_p"),
    ({"repetition_penalty": 0}, ValueError, "repetition_penalty"),
    ({"repetition_penalty": math.nan}, ValueError, "repetition_penalty"),
    ({"seed": -3}, ValueError, "seed"),
    ({"seed": 1.5}, TypeError, "seed"),
    ({"max_seq_len": 0}, ValueError, "max_seq_len"),
    ({"stop_token_ids": [1.5]}, TypeError, "stop_token_ids"),
]


@pytest.mark.parametrize(("kw", "exc", "name"), BAD)
def test_generate_refuses(model: Any, kw: dict[str, Any], exc: type[Exception], name: str) -> None:
    args = {"input_ids": [1, 2, 3], "max_new_tokens": 2, "temperature": 0, **kw}
    ids = args.pop("input_ids")
    with pytest.raises(exc, match=name):
        generate(model, ids, **args)
    with pytest.raises(exc, match=name):
        model.generate(ids, **args)  # the 0.2.x method, and the decode strategies through it
    _still_works(model)


@pytest.mark.parametrize(
    ("call", "exc", "name"),
    [
        (lambda m: list(stream(m, [1, 2.0], 2)), TypeError, r"input_ids\[1\]"),
        (lambda m: list(stream(m, [1, 2], -2)), ValueError, "max_new_tokens"),
        (lambda m: list(stream_batch(m, [[1], [2, "x"]], 2)), TypeError, r"\[1\]\[1\]"),
        (lambda m: list(stream_batch(m, [[1]], 2, max_seq_len=-1)), ValueError, "max_seq_len"),
        (lambda m: SamplingParams(temperature=math.nan), ValueError, "temperature"),
        (lambda m: ChatSession(m, max_new_tokens=-1), ValueError, "max_new_tokens"),
        (lambda m: ChatSession(m, max_seq_len=0), ValueError, "max_seq_len"),
        (lambda m: ChatSession(m, max_new_tokens=1.5), TypeError, "max_new_tokens"),
    ],
)
def test_entry_points_share_the_check(model: Any, call, exc: type[Exception], name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=name):
        call(model)
    _still_works(model)


def test_zero_new_tokens_returns_the_prompt(model: Any) -> None:
    assert generate(model, [1, 2, 3], 0, temperature=0) == [1, 2, 3]
