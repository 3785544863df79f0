"""The 0.2.x names, thin over the current API: ``llm`` (loading, specs, the decode strategies
of ``decode``) and ``triton`` (the Triton entry points). ``pygpukit.llm`` and ``pygpukit.triton``
re-export them from their 0.2.x import paths.

Layering: these modules import the engine (pygpukit.models) and the op layer; nothing under
pygpukit.models imports them (tests/test_import_layers.py checks it). Submodules load on first
import, so ``import pygpukit.compat`` costs nothing.
"""
