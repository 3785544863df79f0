"""Random GGUF blocks for the tests: every byte random except the float16 scale fields, which
get finite values (random bytes there would make inf/NaN weights). The reference values are the
``gguf`` package's (gguf.quants.dequantize, llama.cpp's dequantize_row_* bit for bit)."""

from __future__ import annotations

import gguf
import numpy as np

from pygpukit._gguf_planes import half_fields
from pygpukit.qweight import GGUF_BLOCKS

__all__ = ["FORMATS", "random_blocks", "reference"]

FORMATS = tuple(GGUF_BLOCKS)


def random_blocks(fmt: str, n: int, k: int, seed: int = 0, scale: float = 0.05) -> np.ndarray:
    """uint8 [n, k / QK * block bytes]: n rows of k values in ``fmt``."""
    qk, bb = GGUF_BLOCKS[fmt]
    assert k % qk == 0
    rng = np.random.default_rng(seed)
    nb = k // qk
    raw = rng.integers(0, 256, size=(n, nb, bb), dtype=np.uint8)
    for off in half_fields(fmt):
        h = (rng.uniform(-1, 1, size=(n, nb)) * scale).astype(np.float16)
        raw[:, :, off : off + 2] = h.view(np.uint8).reshape(n, nb, 2)
    return raw.reshape(n, nb * bb)


def reference(raw: np.ndarray, fmt: str) -> np.ndarray:
    """float32 [n, k] values of the rows, from the gguf package."""
    vals = gguf.quants.dequantize(np.ascontiguousarray(raw), gguf.GGMLQuantizationType[fmt.upper()])
    return np.asarray(vals, dtype=np.float32).reshape(raw.shape[0], -1)
