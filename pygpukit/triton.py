"""``from pygpukit.triton import ...``: the 0.2.x Triton names (pygpukit.compat.triton)."""

from pygpukit.compat.triton import *  # noqa: F403
from pygpukit.compat.triton import __all__ as __all__
