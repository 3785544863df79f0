"""Malformed safetensors and GGUF files give a ModelLoadError naming file, tensor and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pygpukit.models import ModelLoadError, SafeTensorsFile
from pygpukit.models.gguf_io import GGUFSource
from pygpukit.models.tokenizer import Tokenizer

from ._files import safetensors_bytes, write_gguf

pytestmark = pytest.mark.filterwarnings("error")


def _hdr(**a: Any) -> dict[str, Any]:
    entry = {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    entry.update(a)
    return {"a": entry}


BAD = [
    (_hdr(shape=[-2, -3]), "a", "shape"),
    (_hdr(shape=[2, 3.0]), "a", "shape"),
    (_hdr(shape=[True, 6]), "a", "shape"),
    (_hdr(shape="2,3"), "a", "shape"),
    (_hdr(data_offsets=[24, 0]), "a", "data_offsets"),
    (_hdr(data_offsets=[0]), "a", "data_offsets"),
    (_hdr(data_offsets=[-24, 0]), "a", "data_offsets"),
    (_hdr(data_offsets=[0, 20]), "a", "data_offsets"),
    (_hdr(data_offsets=[0, 2**70]), "a", "data_offsets"),
    # 2**62 * 2**2 elements * 4 bytes wraps to 0 in int64: must not pass as 0 bytes; shapes
    # beyond 2**63 bytes are refused by name, even with a 0 dim (NumPy cannot describe them)
    (_hdr(shape=[2**62, 4], data_offsets=[0, 0]), "a", "shape"),
    (_hdr(shape=[2**31, 2**31], data_offsets=[0, 24]), "a", "shape"),
    (_hdr(shape=[0, 2**62], data_offsets=[0, 0]), "a", "shape"),
    (_hdr(shape=[2**20, 2**20], data_offsets=[0, 24]), "a", "data_offsets"),
    (_hdr(dtype="F33"), "a", "dtype"),
    (_hdr(dtype=5), "a", "dtype"),
    ({"a": {"dtype": "F32", "shape": [2, 3]}}, "a", "data_offsets"),
    ({"a": [1, 2]}, "a", None),
    ({"a": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]}}, "a", "data_offsets"),
    ({"__metadata__": [1]}, None, "__metadata__"),
]


@pytest.mark.parametrize(("header", "tensor", "field"), BAD)
def test_bad_safetensors_header(tmp_path: Path, header, tensor, field) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "m.safetensors"
    p.write_bytes(safetensors_bytes(header))
    with pytest.raises(ModelLoadError) as e:
        SafeTensorsFile(p)
    assert str(p) in str(e.value) and e.value.file == str(p)
    assert e.value.tensor == tensor and e.value.field == field
    if tensor:
        assert repr(tensor) in str(e.value)
    good = tmp_path / "good.safetensors"
    good.write_bytes(safetensors_bytes())
    np.testing.assert_array_equal(SafeTensorsFile(good).tensor("b"), np.arange(6, 10))


@pytest.mark.parametrize("cut", [0, 4, 8, 20, -1, -16])
def test_truncated_safetensors(tmp_path: Path, cut: int) -> None:
    raw = safetensors_bytes()
    p = tmp_path / "t.safetensors"
    p.write_bytes(raw[:cut])
    with pytest.raises(ModelLoadError, match=r"t\.safetensors"):
        SafeTensorsFile(p)


def test_header_length_past_the_file(tmp_path: Path) -> None:
    p = tmp_path / "h.safetensors"
    p.write_bytes((2**63).to_bytes(8, "little") + b"{}")
    with pytest.raises(ModelLoadError, match="header says") as e:
        SafeTensorsFile(p)
    assert e.value.field == "header length"


def test_gguf_without_token_list(tmp_path: Path) -> None:
    p = tmp_path / "m.gguf"
    write_gguf(p, tokens=False)
    src = GGUFSource(p)
    with pytest.raises(ModelLoadError, match=r"'tokenizer\.ggml\.tokens' is missing") as e:
        Tokenizer.from_gguf_fields(src.meta, str(src.path))
    assert e.value.field == "tokenizer.ggml.tokens" and str(p) in str(e.value)


@pytest.mark.parametrize(
    "missing",
    [
        "llama.embedding_length",
        "llama.attention.head_count",
        "llama.block_count",
        "llama.feed_forward_length",
        "llama.context_length",
        "llama.attention.layer_norm_rms_epsilon",
    ],
)
def test_gguf_missing_metadata_is_named(tmp_path: Path, missing: str) -> None:
    p = tmp_path / "m.gguf"
    write_gguf(p)
    src = GGUFSource(p)
    del src.meta[missing]
    with pytest.raises(ModelLoadError, match=f"'{missing}' is missing") as e:
        src.config_dict()
    assert e.value.field == missing
    assert GGUFSource(p).config_dict()["hidden_size"] == 8


def test_gguf_wrong_type_metadata_is_named(tmp_path: Path) -> None:
    p = tmp_path / "m.gguf"
    write_gguf(p)
    src = GGUFSource(p)
    src.meta["llama.block_count"] = "one"
    want = r"'llama\.block_count' must be a non-negative integer"
    with pytest.raises(ModelLoadError, match=want):
        src.config_dict()


def test_gguf_truncated(tmp_path: Path) -> None:
    p = tmp_path / "m.gguf"
    write_gguf(p)
    raw = p.read_bytes()
    p.write_bytes(raw[:-40])
    with pytest.raises(ModelLoadError, match=r"m\.gguf"):
        GGUFSource(p)


def test_safetensors_json_bomb_is_clean(tmp_path: Path) -> None:
    raw = ("[" * 100000 + "]" * 100000).encode()
    p = tmp_path / "deep.safetensors"
    p.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(ModelLoadError, match="corrupt safetensors header"):
        SafeTensorsFile(p)
    assert json.loads("[1]") == [1]
