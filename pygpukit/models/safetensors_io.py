"""Reading safetensors checkpoints: one file, or a sharded ``model.safetensors.index.json``.

Format (huggingface/safetensors, docs "format"): an 8-byte little-endian header length N, N bytes
of JSON ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``, then
the data, offsets relative to the end of the header. The file is memory-mapped, so a tensor is a
NumPy view of the page cache until the loader converts and copies it to the device. bfloat16 and
fp8 are read through ml_dtypes (NumPy has no such types), which is why this is parsed here rather
than through the safetensors package's NumPy API. Every inconsistency (short file, offsets past
the end, a size that does not match the shape) raises ModelLoadError naming the file and tensor.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from pygpukit.models.errors import ModelLoadError

__all__ = ["SafeTensorsFile", "ShardedSafeTensors", "load_safetensors", "find_checkpoint"]

_DTYPES: dict[str, Any] = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E5M2": ml_dtypes.float8_e5m2,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}

_MAX_HEADER = 100 * 1024 * 1024  # the reference reader's limit on the JSON header


class SafeTensorsFile:
    """One memory-mapped .safetensors file: ``num_tensors``, ``file_size``, ``tensor_names``,
    ``tensor_info(name)`` and ``tensor(name)`` (a read-only NumPy view, no copy)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError(f"{self.path}: safetensors file not found", file=str(self.path))
        self.file_size = self.path.stat().st_size
        if self.file_size < 8:
            raise self._error(
                f"truncated safetensors file ({self.file_size} bytes, the header length alone "
                "needs 8)",
                field="header length",
            )
        with open(self.path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if n > _MAX_HEADER or 8 + n > self.file_size:
                raise self._error(
                    f"truncated or corrupt safetensors file (header says {n} bytes "
                    f"of JSON, the file has {self.file_size} bytes)",
                    field="header length",
                )
            raw = f.read(n)
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise self._error(f"corrupt safetensors header ({exc})", field="header") from None
        if not isinstance(header, dict):
            raise self._error("corrupt safetensors header (not a JSON object)", field="header")
        meta = header.pop("__metadata__", None) or {}
        if not isinstance(meta, dict):
            raise self._error(
                f"'__metadata__' must be a JSON object, got {type(meta).__name__}",
                field="__metadata__",
            )
        self.metadata: dict[str, str] = meta
        self._data_start = 8 + n
        self._info: dict[str, tuple[Any, tuple[int, ...], int, int]] = {}
        for name, entry in header.items():
            self._info[name] = self._check_entry(name, entry)
        self._mmap: mmap.mmap | None = None

    def _error(
        self, what: str, tensor: str | None = None, field: str | None = None, named: bool = False
    ) -> Exception:
        where = f"tensor {tensor!r}: " if tensor is not None and not named else ""
        return ModelLoadError(
            f"{self.path}: {where}{what}", file=str(self.path), tensor=tensor, field=field
        )

    def _check_entry(self, name: str, entry: Any) -> tuple[Any, tuple[int, ...], int, int]:
        """dtype, shape and offsets of one header entry, each checked against the file.

        Python integers do the arithmetic, so no product of dims can wrap around (a wrapped
        byte count once passed the bounds check with a wrong shape)."""
        if not isinstance(entry, dict):
            raise self._error(f"header entry must be a JSON object, got {entry!r}", name)
        for key in ("dtype", "shape", "data_offsets"):
            if key not in entry:
                raise self._error(f"header entry has no {key!r}", name, key)
        code = entry["dtype"]
        if not isinstance(code, str) or code not in _DTYPES:
            raise self._error(
                f"unknown dtype {code!r} (known: {', '.join(_DTYPES)})", name, "dtype"
            )
        dtype = _DTYPES[code]
        shape = _ints(entry["shape"])
        if shape is None:
            raise self._error(
                f"shape must be a list of non-negative integers, got {entry['shape']!r}",
                name,
                "shape",
            )
        offsets = _ints(entry["data_offsets"])
        if offsets is None or len(offsets) != 2:
            raise self._error(
                "data_offsets must be two non-negative integers [begin, end], got "
                f"{entry['data_offsets']!r}",
                name,
                "data_offsets",
            )
        begin, end = offsets
        if end < begin:
            raise self._error(
                f"data_offsets [{begin}, {end}] end before they begin", name, "data_offsets"
            )
        itemsize = np.dtype(dtype).itemsize
        # NumPy cannot describe an array whose non-zero dims span more than 2**63 bytes, even
        # with another dim 0 (then it holds no bytes at all): refuse the shape by name.
        if math.prod(d for d in shape if d) * itemsize > np.iinfo(np.intp).max:
            raise self._error(
                f"{code}{list(shape)} is too large to address (over 2**63 bytes)", name, "shape"
            )
        nbytes = math.prod(shape) * itemsize
        if end - begin != nbytes:
            raise self._error(
                f"{code}{list(shape)} needs {nbytes} bytes but its offsets span {end - begin}",
                name,
                "data_offsets",
            )
        if self._data_start + end > self.file_size:
            raise self._error(
                f"truncated safetensors file: tensor {name!r} ends at byte "
                f"{self._data_start + end} but the file has {self.file_size} bytes",
                name,
                "data_offsets",
                named=True,
            )
        return dtype, shape, begin, end

    @property
    def num_tensors(self) -> int:
        return len(self._info)

    @property
    def tensor_names(self) -> list[str]:
        return list(self._info)

    def __contains__(self, name: object) -> bool:
        return name in self._info

    def tensor_info(self, name: str) -> tuple[np.dtype[Any], tuple[int, ...]]:
        dtype, shape, _, _ = self._entry(name)
        return np.dtype(dtype), shape

    def _entry(self, name: str) -> tuple[Any, tuple[int, ...], int, int]:
        try:
            return self._info[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def tensor(self, name: str) -> np.ndarray:
        """A read-only view of the mapped file (copy or convert it before the file closes)."""
        dtype, shape, begin, end = self._entry(name)
        if self._mmap is None:
            with open(self.path, "rb") as f:
                self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        buf = np.frombuffer(
            self._mmap, dtype=np.uint8, count=end - begin, offset=self._data_start + begin
        )
        return buf.view(dtype).reshape(shape)

    def close(self) -> None:
        """Drop the mapping (views handed out keep it alive until they are gone)."""
        self._mmap = None

    def __repr__(self) -> str:
        return f"SafeTensorsFile({str(self.path)!r}, num_tensors={self.num_tensors})"


class ShardedSafeTensors:
    """The shards of a ``model.safetensors.index.json`` behind the SafeTensorsFile interface."""

    def __init__(self, index_path: str | os.PathLike[str]) -> None:
        self.path = Path(index_path)
        try:
            index = json.loads(self.path.read_text(encoding="utf-8"))
            weight_map: dict[str, str] = index["weight_map"]
        except FileNotFoundError:
            raise ModelLoadError(f"{self.path}: safetensors index not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise ModelLoadError(
                f"{self.path}: corrupt safetensors index (needs a 'weight_map'; {exc})"
            ) from None
        self.metadata: dict[str, Any] = index.get("metadata") or {}
        self.shards: dict[str, SafeTensorsFile] = {}
        for shard in sorted(set(weight_map.values())):
            self.shards[shard] = SafeTensorsFile(self.path.parent / shard)
        self._where: dict[str, SafeTensorsFile] = {}
        for name, shard in weight_map.items():
            f = self.shards[shard]
            if name not in f:
                raise ModelLoadError(
                    f"{self.path}: the index puts {name!r} in {shard}, which has no such tensor"
                )
            self._where[name] = f

    @property
    def num_tensors(self) -> int:
        return len(self._where)

    @property
    def tensor_names(self) -> list[str]:
        return list(self._where)

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.shards.values())

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def _file(self, name: str) -> SafeTensorsFile:
        try:
            return self._where[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor named {name!r}") from None

    def tensor_info(self, name: str) -> tuple[np.dtype[Any], tuple[int, ...]]:
        return self._file(name).tensor_info(name)

    def tensor(self, name: str) -> np.ndarray:
        return self._file(name).tensor(name)

    def close(self) -> None:
        for f in self.shards.values():
            f.close()

    def __repr__(self) -> str:
        return (
            f"ShardedSafeTensors({str(self.path)!r}, shards={len(self.shards)}, "
            f"num_tensors={self.num_tensors})"
        )


def _ints(v: Any) -> tuple[int, ...] | None:
    """v as a tuple of non-negative ints (JSON integers only: no bools, floats or strings)."""
    if not isinstance(v, list):
        return None
    if any(type(d) is not int or d < 0 for d in v):
        return None
    return tuple(v)


def find_checkpoint(model_dir: str | os.PathLike[str]) -> Path:
    """The weights of a model directory: the sharded index if present, else model.safetensors,
    else the one *.safetensors file there."""
    d = Path(model_dir)
    for name in ("model.safetensors.index.json", "model.safetensors"):
        if (d / name).is_file():
            return d / name
    files = sorted(d.glob("*.safetensors"))
    if len(files) == 1:
        return files[0]
    what = "no *.safetensors file" if not files else f"{len(files)} *.safetensors files"
    raise ModelLoadError(f"{d}: {what} and no model.safetensors.index.json")


def load_safetensors(path: str | os.PathLike[str]) -> SafeTensorsFile | ShardedSafeTensors:
    """Open a .safetensors file, a sharded ``*.index.json``, or a model directory."""
    p = Path(path)
    if p.is_dir():
        p = find_checkpoint(p)
    if p.name.endswith(".index.json"):
        return ShardedSafeTensors(p)
    return SafeTensorsFile(p)


def iter_tensors(st: SafeTensorsFile | ShardedSafeTensors) -> Iterator[tuple[str, np.ndarray]]:
    for name in st.tensor_names:
        yield name, st.tensor(name)
