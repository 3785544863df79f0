"""Matrix-product precision for float32: exact fp32 by default, TF32 only when asked for.

TF32 rounds fp32 inputs to a 10-bit mantissa before the tensor-core product (relative error
around 5e-4 instead of 1e-6), so it is never switched on silently:

- ``gp.set_matmul_precision("tf32")`` (or ``"highest"`` to go back), process-wide;
- the environment: ``PYGPUKIT_ALLOW_TF32=1`` opts in at start-up; ``PYGPUKIT_NO_TF32=1`` (the
  0.2.x variable) is still accepted and means the default, exact fp32. When both are set,
  NO_TF32 wins: the more precise choice.

An explicit ``set_matmul_precision`` call overrides the environment. float16, bfloat16 (fp32
accumulation) and float64 are unaffected.
"""

from __future__ import annotations

import os
import threading

__all__ = ["set_matmul_precision", "get_matmul_precision", "allow_tf32", "PRECISIONS"]

PRECISIONS = ("highest", "tf32")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")

_lock = threading.Lock()
_explicit: str | None = None


def _env_flag(name: str) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return False
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{name} must be 1/0 (or true/false, yes/no, on/off), got {raw!r}")


def _from_env() -> str:
    if _env_flag("PYGPUKIT_NO_TF32"):
        return "highest"
    return "tf32" if _env_flag("PYGPUKIT_ALLOW_TF32") else "highest"


def set_matmul_precision(precision: str | None) -> None:
    """``"highest"``: exact fp32 (CUBLAS_COMPUTE_32F), the default; ``"tf32"``: let fp32
    matrix products use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32). ``None`` goes back to
    what the environment says."""
    global _explicit
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(
            f"set_matmul_precision: precision must be one of {PRECISIONS} or None, "
            f"got {precision!r}"
        )
    with _lock:
        _explicit = precision


def get_matmul_precision() -> str:
    """The precision fp32 matrix products use now: ``"highest"`` or ``"tf32"``."""
    p = _explicit
    return p if p is not None else _from_env()


def allow_tf32() -> bool:
    return get_matmul_precision() == "tf32"
