"""Static KV cache: preallocated once, written in place, no allocation per token.

K and V are each one array [layers, batch, num_kv_heads, max_seq, head_dim] (gpt-fast's static
cache): with grouped-query attention only the num_kv_heads heads are stored, and query head h
reads kv head h // (num_heads // num_kv_heads) inside sdpa. Each batch row has its own length, so
prompts of different lengths share one cache; positions past a row's length hold stale values
that attention never reads (prefill sdpa is given the view [:length], decode's sdpa_decode the
rows' lengths on the device).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pygpukit import runtime
from pygpukit.array import GPUArray
from pygpukit.creation import empty
from pygpukit.models.errors import ContextLengthError
from pygpukit.runtime import Device

__all__ = ["CacheDims", "StaticKVCache"]


class CacheDims(Protocol):
    """What the cache needs of a model's config: ModelConfig, and the Whisper decoder's
    (WhisperConfig.decoder_cache_dims)."""

    @property
    def num_layers(self) -> int: ...

    @property
    def num_kv_heads(self) -> int: ...

    @property
    def head_dim(self) -> int: ...

    @property
    def max_context(self) -> int: ...


class StaticKVCache:
    def __init__(
        self,
        config: CacheDims,
        batch_size: int,
        max_seq_len: int,
        dtype: Any,
        device: Device,
    ) -> None:
        if batch_size <= 0 or max_seq_len <= 0:
            raise ValueError(
                f"StaticKVCache: batch_size and max_seq_len must be positive, got {batch_size} "
                f"and {max_seq_len}"
            )
        if max_seq_len > config.max_context:
            raise ContextLengthError(
                f"StaticKVCache: max_seq_len {max_seq_len} exceeds the model's context of "
                f"{config.max_context} tokens"
            )
        shape = (config.num_layers, batch_size, config.num_kv_heads, max_seq_len, config.head_dim)
        self.k = empty(shape, dtype, device)
        self.v = empty(shape, dtype, device)
        self.batch_size = batch_size
        self.max_seq_len = max_seq_len
        self.lengths = np.zeros(batch_size, dtype=np.int64)  # tokens stored per row (host side)
        # The stream of decode steps dropped without a wait (models.decode_loop: a run enqueued
        # ahead that no row needed), which may still write these rows: order_after_spare.
        self.spare_stream: Any = None

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def reset(self, row: int | None = None) -> None:
        """Forget the stored tokens (of one row, or all); nothing is freed or cleared."""
        if row is None:
            self.lengths[:] = 0
        else:
            self.lengths[row] = 0

    def order_after_spare(self) -> None:
        """Make the current stream wait for decode steps dropped without a wait if they went to
        another stream (on the same stream, order is given): call before work on the current
        stream writes these rows (a prefill, a decode run)."""
        s, self.spare_stream = self.spare_stream, None
        dev = self.k.device
        if s is None or dev.type == "cpu" or s is runtime.current_stream(dev):
            return
        ev = runtime.Event(device=dev.index)
        ev.record(s)
        runtime.current_stream(dev).wait_event(ev)

    def check_room(self, row: int, new_tokens: int) -> None:
        end = int(self.lengths[row]) + new_tokens
        if end > self.max_seq_len:
            raise ContextLengthError(
                f"sequence would reach {end} tokens (row {row}: {int(self.lengths[row])} cached "
                f"+ {new_tokens} new) but the KV cache holds {self.max_seq_len}; shorten the "
                "prompt, lower max_new_tokens or use a larger max_seq_len"
            )

    def write(self, layer: int, row0: int, start: int, k: GPUArray, v: GPUArray) -> None:
        """Store k, v [n_rows, Hkv, S, D] for rows row0.. at positions start..start+S-1."""
        n, s = k.shape[0], k.shape[2]
        self.k[layer, row0 : row0 + n, :, start : start + s, :] = k
        self.v[layer, row0 : row0 + n, :, start : start + s, :] = v

    def rows(self, layer: int, row0: int, n_rows: int) -> tuple[GPUArray, GPUArray]:
        """Rows row0..row0+n_rows-1 of one layer, all max_seq_len positions: [n, Hkv, S_max, D]
        views (kv_cache_write / sdpa_decode take lengths and positions on the device)."""
        rows = slice(row0, row0 + n_rows)
        return self.k[layer, rows], self.v[layer, rows]

    def view(self, layer: int, row0: int, n_rows: int, length: int) -> tuple[GPUArray, GPUArray]:
        """The first ``length`` positions of rows row0..row0+n_rows-1: views, no copy."""
        rows = slice(row0, row0 + n_rows)
        return (
            self.k[layer, rows, :, :length, :],
            self.v[layer, rows, :, :length, :],
        )
