"""``gp.fft``: discrete Fourier transforms with numpy.fft's names and semantics.

``gp.fft.fft``, ``gp.fft.ifft``, ``gp.fft.rfft``, ``gp.fft.irfft`` are routed ops like every
other (pygpukit/ops/fft.py): fp32 kernels on CUDA (native for lengths whose prime factors are
2, 3, 5 and 7 up to 4096 complex / 8192 real points and any other up to half those, Triton for
the rest), NumPy on the CPU. They live in this
namespace, not in ``gp``'s top level, because ``gp.fft`` names the module (as numpy.fft does).
"""

from __future__ import annotations

from pygpukit.ops.fft import fft, ifft, irfft, rfft

__all__ = ["fft", "ifft", "irfft", "rfft"]
