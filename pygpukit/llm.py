"""``from pygpukit import llm``: the 0.2.x LLM names, defined in pygpukit.compat.llm."""

from pygpukit.compat.llm import *  # noqa: F403
from pygpukit.compat.llm import __all__ as __all__
