"""The GGUF header: read and checked in one walk.

Layout (gguf docs, "GGUF file structure"; little-endian): magic, version, tensor count,
metadata count, then key/value pairs and tensor infos, then the tensor data, aligned to
``general.alignment`` (default 32) bytes. Every count and length is checked against the bytes
left in the file before it is trusted, so a corrupt header raises ModelLoadError naming the
field instead of looping (an array length of 2**62) or reading past the end.

Why not the ``gguf`` package's GGUFReader: it builds a NumPy view for every part of every
field, and for SmolLM2-135M's 49,152-token vocabulary that took 2-4 s of the chat CLI's start on
an H100 host (cProfile: 147,238 field parts); this walk reads the same header in about 0.3 s.
The package still supplies the type table (block sizes) and is the reference in the tests
(tests/models/test_gguf_header.py compares the two readers field for field).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pygpukit.models.errors import ModelLoadError

__all__ = ["Header", "TensorInfo", "scan"]

# GGUFValueType: struct format of the fixed-size scalar types.
_FORMATS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_SIZES = {k: struct.calcsize("<" + f) for k, f in _FORMATS.items()}
_NUMPY = {k: np.dtype("<" + f) for k, f in _FORMATS.items()}  # the same layouts for arrays
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_DEPTH = 4  # nested arrays; the format allows them, real files do not use them


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # as stored: the fastest-varying dimension first
    ggml_type: int
    offset: int  # from the start of the data section


@dataclass
class Header:
    version: int
    meta: dict[str, Any] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)
    data_start: int = 0  # byte offset of the data section in the file


_U64 = struct.Struct("<Q")


class _Cursor:
    def __init__(self, raw: bytes | mmap.mmap, path: Path) -> None:
        self.raw, self.pos, self.path = raw, 0, path
        self.where = "header"

    def fail(self, what: str) -> ModelLoadError:
        return ModelLoadError(
            f"{self.path}: not a readable GGUF file: at byte {self.pos} ({self.where}) {what}",
            file=str(self.path),
            field=self.where,
        )

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.raw):
            raise self.fail(f"needs {n} bytes, {len(self.raw) - self.pos} are left")
        b = bytes(self.raw[self.pos : self.pos + n])
        self.pos += n
        return b

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def count(self, n: int, min_size: int, what: str) -> int:
        if n * min_size > len(self.raw) - self.pos:
            raise self.fail(f"{what} {n} does not fit in the {len(self.raw) - self.pos} bytes left")
        return n

    def string(self) -> str:
        b = self.take(self.count(self.u64(), 1, "string length"))
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"a string that is not UTF-8 ({exc.reason})") from None

    def strings(self, n: int) -> list[str]:
        """n strings in a row (a tokenizer's vocabulary and merges: about 100,000 in a chat
        model), with string()'s checks in one tight loop: the per-string method calls took a
        quarter of a second of the chat's start."""
        raw, pos, end = self.raw, self.pos, len(self.raw)
        unpack = _U64.unpack_from
        out: list[str] = []
        append = out.append
        for _ in range(n):
            if pos + 8 > end:
                self.pos = pos
                raise self.fail(f"needs 8 bytes, {end - pos} are left")
            size = unpack(raw, pos)[0]
            pos += 8
            if size > end - pos:
                self.pos = pos
                raise self.fail(f"string length {size} does not fit in the {end - pos} bytes left")
            try:
                append(raw[pos : pos + size].decode("utf-8"))
            except UnicodeDecodeError as exc:
                self.pos = pos + size  # where string() reports it: after the string's bytes
                raise self.fail(f"a string that is not UTF-8 ({exc.reason})") from None
            pos += size
        self.pos = pos
        return out

    def value(self, vtype: int, depth: int = 0) -> Any:
        if vtype in _FORMATS:
            return struct.unpack("<" + _FORMATS[vtype], self.take(_SIZES[vtype]))[0]
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY and depth < _MAX_DEPTH:
            etype = self.u32()
            n = self.count(self.u64(), _SIZES.get(etype, 8), "array length")
            if etype in _FORMATS:
                return np.frombuffer(self.take(n * _SIZES[etype]), _NUMPY[etype]).tolist()
            if etype == _STRING:
                return self.strings(n)
            return [self.value(etype, depth + 1) for _ in range(n)]
        raise self.fail(f"unknown value type {vtype}")


def scan(path: Path) -> Header:
    """The header of the GGUF file at ``path`` (ModelLoadError naming the field when a count or
    length overruns the file, a string is not UTF-8 or a value type is unknown)."""
    with open(path, "rb") as f:
        if path.stat().st_size < 24:
            raise _Cursor(b"", path).fail("the file is shorter than a GGUF header")
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # only the header is read
    try:
        return _walk(_Cursor(raw, path))
    finally:
        raw.close()


def _walk(c: _Cursor) -> Header:
    if c.take(4) != b"GGUF":
        raise c.fail("no GGUF magic")
    version = c.u32()
    if version not in (2, 3):
        raise c.fail(f"version {version} is not supported (2 or 3)")
    n_tensors = c.count(c.u64(), 24, "tensor count")
    n_kv = c.count(c.u64(), 12, "metadata count")
    head = Header(version)
    for _ in range(n_kv):
        c.where = "metadata key"
        key = c.string()
        c.where = f"metadata {key!r}"
        value = c.value(c.u32())
        head.meta.setdefault(key, value)  # a repeated key: the first value, as the gguf package
    for _ in range(n_tensors):
        c.where = "tensor name"
        name = c.string()
        c.where = f"tensor {name!r}"
        n_dims = c.u32()
        if not 1 <= n_dims <= _MAX_DIMS:
            raise c.fail(f"{n_dims} dimensions (1 to {_MAX_DIMS})")
        dims = struct.unpack(f"<{n_dims}Q", c.take(8 * n_dims))
        ggml_type = c.u32()
        offset = c.u64()
        head.tensors.append(TensorInfo(name, tuple(int(d) for d in dims), ggml_type, offset))
    c.where = "metadata 'general.alignment'"
    align = head.meta.get("general.alignment", 32)
    if isinstance(align, bool) or not isinstance(align, int) or align <= 0 or align % 8:
        raise c.fail(f"alignment {align!r} is not a positive multiple of 8 (the GGUF spec)")
    head.data_start = -(-c.pos // align) * align
    return head
