"""A bounds check of a GGUF file's header before the ``gguf`` package parses it.

The package's reader trusts every count: an array length of 2**62 in a corrupt file makes it loop
for ever, a dimension count of 2**32 likewise. This walk reads the same layout (gguf docs,
"GGUF file structure": magic, version, tensor count, metadata count, then key/value pairs and
tensor infos, little-endian) and checks each count and length against the bytes left in the
file, so the reader is only handed files whose header it can finish.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from pygpukit.models.errors import ModelLoadError

__all__ = ["scan"]

# GGUFValueType: byte sizes of the fixed-size scalar types.
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_DEPTH = 4  # nested arrays; the format allows them, real files do not use them


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

    def string(self) -> bytes:
        return self.take(self.count(self.u64(), 1, "string length"))

    def value(self, vtype: int, depth: int = 0) -> None:
        if vtype in _SIZES:
            self.take(_SIZES[vtype])
        elif vtype == _STRING:
            self.string()
        elif vtype == _ARRAY and depth < _MAX_DEPTH:
            etype = self.u32()
            n = self.count(self.u64(), _SIZES.get(etype, 8), "array length")
            if etype in _SIZES:
                self.take(n * _SIZES[etype])
            else:
                for _ in range(n):
                    self.value(etype, depth + 1)
        else:
            raise self.fail(f"unknown value type {vtype}")


def scan(path: Path) -> None:
    """Raise ModelLoadError naming the field when the header's counts overrun the file."""
    with open(path, "rb") as f:
        if path.stat().st_size < 24:
            raise _Cursor(b"", path).fail("the file is shorter than a GGUF header")
        raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # only the header is read
    try:
        _walk(_Cursor(raw, path))
    finally:
        raw.close()


def _walk(c: _Cursor) -> None:
    if c.take(4) != b"GGUF":
        raise c.fail("no GGUF magic")
    version = c.u32()
    if version not in (2, 3):
        raise c.fail(f"version {version} is not supported (2 or 3)")
    n_tensors = c.count(c.u64(), 24, "tensor count")
    n_kv = c.count(c.u64(), 12, "metadata count")
    for _ in range(n_kv):
        c.where = "metadata key"
        key = c.string()
        c.where = f"metadata {key.decode('utf-8', 'replace')!r}"
        c.value(c.u32())
    for _ in range(n_tensors):
        c.where = "tensor name"
        name = c.string()
        c.where = f"tensor {name.decode('utf-8', 'replace')!r}"
        n_dims = c.u32()
        if not 1 <= n_dims <= _MAX_DIMS:
            raise c.fail(f"{n_dims} dimensions (1 to {_MAX_DIMS})")
        c.take(8 * n_dims + 4 + 8)  # dims, type, data offset
