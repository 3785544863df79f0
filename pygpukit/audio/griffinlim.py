"""Phase reconstruction in librosa's name: griffinlim (fast Griffin-Lim with momentum,
Perraudin, Balazs and Sondergaard 2013), on the device.

Each iteration is istft -> stft of the current estimate, then one ops.phase_project: the
momentum step against the previous rebuilt spectrum and the projection onto the given
magnitudes. The iterates stay frame-major [batch, frames, n_freq] throughout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray, view_as_complex
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.audio.spectrum import _Params, istft_frames, stft_frames
from pygpukit.creation import from_numpy, zeros

__all__ = ["griffinlim"]


def _rng(fn: str, random_state: Any) -> Any:
    """librosa's random_state rule: None -> default_rng(), int -> RandomState(seed), or a
    Generator/RandomState used as is."""
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.RandomState(seed=int(random_state))
    if isinstance(random_state, (np.random.RandomState, np.random.Generator)):
        return random_state
    raise TypeError(
        f"{fn}: random_state must be None, an int or a NumPy generator, got {random_state!r}"
    )


def griffinlim(
    S: Any,
    *,
    n_iter: int = 32,
    hop_length: int | None = None,
    win_length: int | None = None,
    n_fft: int | None = None,
    window: Any = "hann",
    center: bool = True,
    dtype: Any = None,
    length: int | None = None,
    pad_mode: str = "constant",
    momentum: float = 0.99,
    init: str | None = "random",
    random_state: Any = None,
) -> GPUArray:
    """librosa.griffinlim: a signal [..., samples] whose STFT magnitude approximates S
    [..., 1 + n_fft // 2, frames] (float32 or float64).

    init='random' draws the initial phases on the host with librosa's generator rule (the same
    random_state gives librosa's phases), init=None starts from zero phase. momentum in [0, 1]
    (librosa warns above 1; here momentum > 1 raises).

    Deviation: dtype (librosa's complex working type) must be None; the working type follows S.
    """
    fn = "griffinlim"
    mag = chk.signal(fn, "S", S, min_ndim=2)
    n_iter_ = chk.non_negative_int(fn, "n_iter", n_iter)
    mom = chk.number(fn, "momentum", momentum)
    if not 0.0 <= mom <= 1.0:
        raise ValueError(f"{fn}: momentum must be in [0, 1], got {momentum!r}")
    chk.choice(fn, "init", init, ("random", None))
    chk.choice(fn, "pad_mode", pad_mode, _frames.PAD_MODES)
    if dtype is not None:
        raise TypeError(f"{fn}: dtype must be None (the working type follows S), got {dtype!r}")
    if not isinstance(center, bool):
        raise TypeError(f"{fn}: center must be a bool, got {type(center).__name__}")
    n_freq, n_frames = mag.shape[-2], mag.shape[-1]
    if n_fft is None:
        n_fft = 2 * (n_freq - 1)
    p = _Params(fn, n_fft, hop_length, win_length, window)
    if n_freq != 1 + p.n_fft // 2:
        raise ValueError(
            f"{fn}: S has {n_freq} frequency bins but n_fft={p.n_fft} needs {1 + p.n_fft // 2}"
        )
    length = chk.positive_int(fn, "length", length, allow_none=True)
    if length is not None:
        # The stft of each estimate must give S's frame count back (librosa fails later with a
        # broadcast error otherwise).
        frames_back = 1 + (length if center else length - p.n_fft) // p.hop_length
        if frames_back != n_frames:
            raise ValueError(
                f"{fn}: length={length} gives {frames_back} frames at hop_length={p.hop_length}, "
                f"but S has {n_frames}"
            )
    rng = _rng(fn, random_state) if init == "random" else None

    if mag.size == 0:
        raise ValueError(f"{fn}: S has no values (shape {mag.shape}): nothing to reconstruct")
    lead = mag.shape[:-2]
    mag_f = mag.reshape(-1, n_freq, n_frames).swapaxes(1, 2).contiguous()  # [B, T, F]
    if rng is None:  # zero phase: S itself as the real parts, made on the device
        ri = zeros((*mag_f.shape, 2), mag_f.dtype, mag_f.device)  # [B, T, F, 2]
        ri[..., 0] = mag_f
    else:
        ri = ops.mul(_initial_phase(rng, mag.shape, mag_f), mag_f.reshape(*mag_f.shape, 1))
    z = view_as_complex(ri)
    eps = float(np.finfo(mag.dtype.np_dtype).tiny)
    c = mom / (1.0 + mom)
    tprev: GPUArray | None = None
    for _ in range(n_iter_):
        inverse = istft_frames(z, p, center, length)
        rebuilt = stft_frames(inverse, p, center, pad_mode)[0]
        # est = rebuilt - c tprev projected onto the target magnitudes, est * (S / (|est| + eps))
        # (within an ulp of librosa's est / (|est| + eps) * S): one routed pass.
        z = ops.phase_project(rebuilt, mag_f, tprev, prev_scale=c, eps=eps)
        tprev = rebuilt
    y = istft_frames(z, p, center, length)
    return y.reshape(*lead, y.shape[-1])


def _initial_phase(rng: Any, shape: tuple[int, ...], like: GPUArray) -> GPUArray:
    """[B, T, F, 2] unit phasors exp(2j pi u), u drawn over S's own [..., F, T] shape in C
    order as librosa draws them (on the host: librosa's generator rule, so the same
    random_state gives librosa's phases)."""
    b, t, f = like.shape
    u = rng.random(size=shape).reshape(b, f, t).transpose(0, 2, 1)
    angle = 2 * np.pi * u
    pairs = np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    return from_numpy(pairs.astype(like.dtype.np_dtype), device=like.device)
