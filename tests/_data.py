"""Random test data: arrays of a given dtype plus their exact float64 values.

Tests compute the reference in float64 from the *rounded* inputs (`as64(x)`), so the comparison
measures only the op's own error, not the rounding of the inputs to half precision.
"""

from __future__ import annotations

import zlib
from typing import Any

import ml_dtypes
import numpy as np

DTYPES: dict[str, Any] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int8": np.dtype(np.int8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}
FLOATS = ("float32", "float16", "bfloat16", "float64")


def np_dtype(name: str) -> Any:
    return DTYPES[name]


def rand(
    rng: np.random.Generator,
    shape: tuple[int, ...] | int,
    dtype: str = "float32",
    *,
    scale: float = 1.0,
    positive: bool = False,
    low: int = -50,
    high: int = 50,
) -> np.ndarray:
    """Random data in `dtype`: normal*scale for floats (|x| + 0.1 when positive, so never 0),
    uniform integers in [low, high) with 0 replaced by 1 for integer dtypes, random bools."""
    dt = DTYPES[dtype]
    shape = (shape,) if isinstance(shape, int) else shape
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        x = rng.integers(low, high, size=shape)
        x[x == 0] = 1
        return x.astype(dt)
    x64 = rng.standard_normal(shape) * scale
    if positive:
        x64 = np.abs(x64) + 0.1
    # Going through float32 first is exact for every target narrower than float32.
    src = x64 if dt == np.float64 else x64.astype(np.float32)
    return src.astype(dt)


def as64(x: Any) -> np.ndarray:
    """Exact float64 copy of a (possibly half-precision or fp8) array."""
    x = np.asarray(x)
    if x.dtype == np.float64:
        return x.copy()
    if x.dtype.kind in "biu":
        return x.astype(np.float64)
    with np.errstate(invalid="ignore"):  # NaN payloads of ml_dtypes types
        return x.astype(np.float32).astype(np.float64)


def seed(*parts: Any) -> int:
    """A reproducible seed from test parameters (hash() of str is salted per process)."""
    return zlib.crc32(repr(parts).encode())
