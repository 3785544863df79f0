"""librosa.phase_vocoder on the device, with the phase accumulated as a product of phasors.

librosa steps through the output frames t = 0, 1, ... at input positions s_t = t * rate and
keeps a phase accumulator:

    out[:, t] = ((1 - a_t) |D[:, i_t]| + a_t |D[:, i_t + 1]|) * exp(1j * phase_t)
    phase_0 = angle(D[:, 0])
    phase_{t+1} = phase_t + phi + wrap(angle(D[:, i_t + 1]) - angle(D[:, i_t]) - phi)

(i_t = floor(s_t), a_t = s_t - i_t, phi the bin's expected advance, wrap into [-pi, pi], D padded
with two zero frames). The wrap and phi only change the increment by multiples of 2 pi, so
exp(1j * phase_{t+1}) = exp(1j * phase_t) * u(D[:, i_t + 1]) * conj(u(D[:, i_t])) exactly, with
u(z) = z / |z| (and u(0) = exp(1j * angle(0)), i.e. -1 for a -0.0 real part as np.angle says,
else 1). So here the accumulator is an inclusive cumulative product of unit phasors
(_scan.complex_cumprod, log2 passes of strided complex multiplies): no atan2, no cos/sin of
large angles, no n x n triangular matrix.

Numerics: librosa's accumulator is a running float sum in D's real dtype, so for complex64 its
phase error grows with the accumulated angle (about ulp(t * phi) per frame: ~1e-3 rad after a
few hundred frames in the top bins). The product here has a relative error of about
3 * log2(frames) * eps (< 3e-6 for 4096 frames in float32) against the exact value librosa's
float64 run approximates; tests compare to librosa on complex128 input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray, view_as_complex, view_as_real
from pygpukit.audio import _checks as chk
from pygpukit.audio._scan import complex_cumprod, mul_conj_into
from pygpukit.audio._tables import device_table
from pygpukit.creation import empty

__all__ = ["phase_vocoder"]


def _check(fn: str, D: Any, rate: Any, hop_length: Any, n_fft: Any) -> tuple[GPUArray, float]:
    z = chk.complex_array(fn, "D", D)
    r = chk.number(fn, "rate", rate, positive=True)
    n_freq, n_frames = z.shape[-2], z.shape[-1]
    if n_fft is None:
        n_fft = 2 * (n_freq - 1)
        if n_fft <= 0:
            raise ValueError(f"{fn}: D has {n_freq} frequency bins; pass n_fft (it would be 0)")
    nfft = int(chk.positive_int(fn, "n_fft", n_fft) or 0)
    if n_freq != 1 + nfft // 2:
        raise ValueError(
            f"{fn}: D has {n_freq} frequency bins but n_fft={nfft} needs {1 + nfft // 2} "
            f"(D has shape {z.shape})"
        )
    if hop_length is None:
        hop_length = nfft // 4
        if hop_length <= 0:
            raise ValueError(f"{fn}: hop_length defaults to n_fft // 4 = 0; pass hop_length > 0")
    chk.positive_int(fn, "hop_length", hop_length)
    if n_frames == 0:
        raise ValueError(f"{fn}: D has no frames (shape {z.shape})")
    return z, r


def phase_vocoder(
    D: Any, *, rate: float, hop_length: int | None = None, n_fft: int | None = None
) -> GPUArray:
    """librosa.phase_vocoder: D [..., 1 + n_fft // 2, frames] (complex64/complex128) played
    ``rate`` times faster: [..., 1 + n_fft // 2, len(np.arange(0, frames, rate))].

    Magnitudes are interpolated linearly between neighbouring frames, phases advance by each
    bin's measured frame-to-frame phase difference (see the module note: the accumulation is a
    cumulative product of unit phasors on the device, more accurate than librosa's float32
    running sum). n_fft defaults to 2 * (bins - 1) and must match D; hop_length defaults to
    n_fft // 4. hop_length does not change the result (the expected advance it sets cancels
    under exp), it is checked and kept for librosa's signature. The frame positions and
    interpolation weights are host tables (they depend only on rate and the frame count); the
    frame gathers are the routed embedding op.

    Deviation: the result is a view with the frame axis last over frame-major storage (as stft).
    """
    fn = "phase_vocoder"
    z, r = _check(fn, D, rate, hop_length, n_fft)
    n_freq, n_frames = z.shape[-2], z.shape[-1]
    lead = z.shape[:-2]
    zf = z.swapaxes(-1, -2).reshape(-1, n_frames, n_freq)  # [B, T, F]
    batch = zf.shape[0]
    real = np.float32 if z.dtype.name == "complex64" else np.float64
    ri = view_as_real(zf)

    # Per input frame: |D| and u(D), scaled by max(|re|, |im|) first so that neither squares of
    # tiny values underflow nor large ones overflow; two zero frames appended (librosa's pad).
    re, im = ri[..., 0], ri[..., 1]
    scale = ops.maximum(ops.abs(re), ops.abs(im))
    is_zero = scale == 0.0
    scale_nz = ops.where(is_zero, 1.0, scale)
    a, b = re / scale_nz, im / scale_nz
    norm = ops.sqrt(a * a + b * b)
    norm_nz = ops.where(is_zero, 1.0, norm)
    table = empty((batch, n_frames + 2, n_freq, 3), ri.dtype, zf.device)
    ops.mul(norm, scale, out=table[:, :n_frames, :, 0])
    # u(0) = cos(angle(0)) = -1 for a -0.0 real part (1 / -0.0 = -inf), else +1.
    zero_re = ops.where(ops.div(1.0, re) < 0.0, -1.0, 1.0)
    table[:, :n_frames, :, 1] = ops.where(is_zero, zero_re, a / norm_nz)
    ops.div(b, norm_nz, out=table[:, :n_frames, :, 2])
    table[:, n_frames:, :, 0] = 0.0
    table[:, n_frames:, :, 1] = 1.0
    table[:, n_frames:, :, 2] = 0.0

    # Host tables: librosa's frame positions, their integer parts and fractions.
    steps = np.arange(0, n_frames, r, dtype=np.float64)
    n_out = steps.shape[0]
    idx = steps.astype(np.int64)
    alpha = np.mod(steps, 1.0)
    rows = np.arange(batch, dtype=np.int64)[:, None, None] * (n_frames + 2)
    ids = rows + idx[None, :, None] + np.arange(2, dtype=np.int64)[None, None, :]  # [B, T', 2]
    ids_dev = device_table(ids, np.int64, zf.device)
    weights = device_table(alpha[:, None], real, zf.device)
    gathered = ops.embedding(ids_dev, table.reshape(batch * (n_frames + 2), n_freq * 3))
    g = gathered.reshape(batch, n_out, 2, n_freq, 3)
    g0, g1 = g[:, :, 0], g[:, :, 1]

    mag0 = g0[..., 0]
    mag = mag0 + (g1[..., 0] - mag0) * weights  # (1 - a) m0 + a m1, one rounding fewer
    # Increments: R[0] = u(D[:, 0]), R[t] = u(D[:, i_{t-1} + 1]) * conj(u(D[:, i_{t-1}])).
    incr = empty((batch, n_out, n_freq, 2), table.dtype, zf.device)
    incr[:, :1] = g0[:, :1, :, 1:3]
    if n_out > 1:
        mul_conj_into(g1[:, :-1, :, 1:3], g0[:, :-1, :, 1:3], incr[:, 1:])
    phasor = complex_cumprod(incr)
    out = phasor * mag.reshape(batch, n_out, n_freq, 1)
    return view_as_complex(out).reshape(*lead, n_out, n_freq).swapaxes(-1, -2)
