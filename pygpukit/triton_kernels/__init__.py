"""Triton kernels, one module per op family, each kernel next to its launcher.

Plain Python: edit a copy and point ``PYGPUKIT_TRITON_KERNELS`` (or ``gp.routing.load_kernels``)
at its directory to run it instead of the shipped module, with nothing to recompile.
``python -m pygpukit kernels eject <family> DIR`` copies a shipped module there to start from.
Importing this package does not import Triton; the routing table loads modules on first use.
"""
