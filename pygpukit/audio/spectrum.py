"""Short-time Fourier transforms in librosa's names: stft, istft, magphase.

Layouts follow librosa: a signal is [..., samples], a spectrogram [..., 1 + n_fft // 2, frames].
Internally the work is frame-major ([batch, frames, n_fft], the FFT along the contiguous last
axis) and one op, ops.fft.rfft_frames: its kernel reads each frame's samples from the signal,
applying the centre padding and the window as it loads (no padded or windowed copy where
the one-kernel FFT serves n_fft; a padded copy otherwise). The
returned spectrogram is the frame-major result viewed with its last two axes swapped (no
copy; .contiguous() makes one). istft runs the same steps back: gp.fft.irfft, then one
ops.overlap_add (the window at load, the frames summed, the reciprocal window sum-square
envelope applied; the envelope is computed on the host once per parameter set).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pygpukit import fft as gfft
from pygpukit import ops
from pygpukit.array import GPUArray, view_as_complex, view_as_real
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.audio._complex import abs2
from pygpukit.audio._tables import device_table, device_table_of
from pygpukit.audio.filters import pad_center_np, sumsquare_np, window_np
from pygpukit.creation import empty
from pygpukit.dtypes import as_dtype, float32, float64
from pygpukit.ops.fft import rfft_frames

__all__ = ["istft", "magphase", "stft"]


class _Params:
    """Checked STFT parameters (librosa's defaults filled in) and the host window."""

    __slots__ = ("hop_length", "n_fft", "win_length", "window", "window_key")

    def __init__(self, fn: str, n_fft: Any, hop_length: Any, win_length: Any, window: Any) -> None:
        self.n_fft = int(chk.positive_int(fn, "n_fft", n_fft) or 0)
        self.win_length = int(
            chk.positive_int(fn, "win_length", win_length, allow_none=True) or self.n_fft
        )
        if self.win_length > self.n_fft:
            raise ValueError(f"{fn}: win_length={self.win_length} must be <= n_fft={self.n_fft}")
        if hop_length is None:
            hop_length = self.win_length // 4
            if hop_length <= 0:
                raise ValueError(
                    f"{fn}: hop_length defaults to win_length // 4 = 0; pass hop_length > 0"
                )
        self.hop_length = int(chk.positive_int(fn, "hop_length", hop_length) or 0)
        # The window padded to n_fft (librosa.util.pad_center), float64 on the host; a named
        # window is made once per (name, lengths) (scipy's get_window costs tens of us a call).
        if isinstance(window, str) or (
            isinstance(window, tuple) and all(isinstance(v, (str, int, float)) for v in window)
        ):
            self.window = _named_window(fn, window, self.win_length, self.n_fft)
            # What the window depends on, for tables cached by their parameters (None: an
            # array or callable window, whose tables are cached by content).
            self.window_key: tuple[Any, ...] | None = (window, self.win_length, self.n_fft)
        else:  # an array or a callable: made every call, as librosa does
            self.window = pad_center_np(fn, window_np(fn, window, self.win_length), self.n_fft)
            self.window_key = None

    def device_window(self, like: GPUArray) -> GPUArray:
        return self.device_table_of(("window",), lambda: self.window, like)

    def device_table_of(
        self, key: tuple[Any, ...], build: Callable[[], np.ndarray], like: GPUArray
    ) -> GPUArray:
        """A table that depends on the window and ``key``, in like's dtype on like's device:
        cached by parameters for a named window (no host rebuild or hash per call), by content
        otherwise."""
        if self.window_key is None:
            return device_table(build(), like.dtype.np_dtype, like.device)
        full = ("stft", *self.window_key, *key)
        return device_table_of(full, build, like.dtype.np_dtype, like.device)


@functools.lru_cache(maxsize=64)
def _named_window(fn: str, window: Any, win_length: int, n_fft: int) -> np.ndarray:
    """pad_center_np(window_np(...)) of a hashable window spec (a name or a tuple), read-only."""
    w = pad_center_np(fn, window_np(fn, window, win_length), n_fft)
    w.setflags(write=False)
    return w


def _dtype_name(fn: str, dtype: Any) -> str:
    try:
        return as_dtype(dtype).name
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: dtype {dtype!r} is not a data type") from None


def _real_dtype_for(fn: str, y: GPUArray, dtype: Any) -> GPUArray:
    """y in the float type whose FFT gives ``dtype`` (complex64 <- float32, complex128 <-
    float64); dtype None keeps y's own."""
    if dtype is None:
        return y
    want = {"complex64": float32, "complex128": float64}.get(_dtype_name(fn, dtype))
    if want is None:
        raise TypeError(f"{fn}: dtype must be complex64, complex128 or None, got {dtype!r}")
    return y if y.dtype is want else y.astype(want)


def stft_frames(
    y: GPUArray, p: _Params, center: bool, pad_mode: str, power: float | None = None
) -> tuple[GPUArray, tuple[int, ...]]:
    """(the frame-major complex STFT [batch, frames, 1 + n_fft // 2], y's leading dims); with
    ``power`` 1 or 2 its magnitude or power, taken as the FFT stores (a real result)."""
    y2, lead = _frames.as_rows(y)
    pad = p.n_fft // 2 if center else 0
    win = p.device_window(y2)
    z = rfft_frames(y2, win, hop=p.hop_length, pad=pad, pad_mode=pad_mode, power=power)
    return z, lead


def check_stft(
    fn: str,
    y: Any,
    n_fft: Any,
    hop_length: Any,
    win_length: Any,
    window: Any,
    center: Any,
    pad_mode: Any,
) -> tuple[GPUArray, _Params]:
    """Every check of stft's arguments, before any op runs."""
    x = chk.signal(fn, "y", y)
    p = _Params(fn, n_fft, hop_length, win_length, window)
    chk.choice(fn, "pad_mode", pad_mode, _frames.PAD_MODES)
    if not isinstance(center, bool):
        raise TypeError(f"{fn}: center must be a bool, got {type(center).__name__}")
    n = x.shape[-1]
    if center:
        _frames.check_pad(fn, n, p.n_fft // 2, pad_mode)
        if p.n_fft > n:
            warnings.warn(
                f"{fn}: n_fft={p.n_fft} is too large for input signal of length={n}",
                stacklevel=3,
            )
    elif p.n_fft > n:
        raise ValueError(
            f"{fn}: n_fft={p.n_fft} is too large for input signal of length={n} with center=False"
        )
    return x, p


def stft(
    y: Any,
    *,
    n_fft: int = 2048,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Any = "hann",
    center: bool = True,
    dtype: Any = None,
    pad_mode: str = "constant",
) -> GPUArray:
    """librosa.stft: the complex STFT [..., 1 + n_fft // 2, n_frames] of y [..., samples].

    D[..., f, t] = sum_n window[n] * y_padded[t * hop_length + n] * exp(-2j pi f n / n_fft),
    with y padded by n_fft // 2 on both sides when center (pad_mode 'constant' (librosa >= 0.10's
    default), 'reflect', 'symmetric' or 'edge'). hop_length defaults to win_length // 4,
    win_length to n_fft; the window (scipy.signal.get_window names, a callable or an array) is
    zero-padded to n_fft. float32 input gives complex64, float64 complex128 (dtype may ask for
    the other, converting y first).

    Deviations: the result is a view with the frame axis last over frame-major storage (no copy;
    .contiguous() makes one); the 'reflect'/'symmetric' modes need a signal longer than
    n_fft // 2 (np.pad would reflect repeatedly); there is no out= and no finiteness check.
    """
    fn = "stft"
    x, p = check_stft(fn, y, n_fft, hop_length, win_length, window, center, pad_mode)
    x = _real_dtype_for(fn, x, dtype)
    z, lead = stft_frames(x, p, center, pad_mode)
    return z.reshape(*lead, *z.shape[1:]).swapaxes(-1, -2)


def istft(
    stft_matrix: Any,
    *,
    hop_length: int | None = None,
    win_length: int | None = None,
    n_fft: int | None = None,
    window: Any = "hann",
    center: bool = True,
    dtype: Any = None,
    length: int | None = None,
) -> GPUArray:
    """librosa.istft: the signal [..., samples] whose stft is closest to stft_matrix
    [..., 1 + n_fft // 2, n_frames] (least-squares overlap-add).

    Each frame is irfft'd, windowed and overlap-added; the sum is divided by the window
    sum-square envelope where that exceeds the dtype's tiny (librosa.filters.window_sumsquare),
    trimmed by n_fft // 2 at the start when center, and cut or zero-padded to ``length`` when
    given (only the frames that reach into it are inverted). complex64 gives float32,
    complex128 float64 (dtype may ask for the other).

    Deviation: the division is a multiply by the reciprocal envelope (at most 1 ulp apart).
    """
    fn = "istft"
    z = chk.complex_array(fn, "stft_matrix", stft_matrix)
    n_freq, n_frames_in = z.shape[-2], z.shape[-1]
    if n_fft is None:
        n_fft = 2 * (n_freq - 1)
        if n_fft <= 0:
            raise ValueError(
                f"{fn}: stft_matrix has {n_freq} frequency bins; pass n_fft (it would be 0)"
            )
    p = _Params(fn, n_fft, hop_length, win_length, window)
    if n_freq != 1 + p.n_fft // 2:
        raise ValueError(
            f"{fn}: stft_matrix has {n_freq} frequency bins but n_fft={p.n_fft} needs "
            f"{1 + p.n_fft // 2} (stft_matrix has shape {z.shape})"
        )
    if not isinstance(center, bool):
        raise TypeError(f"{fn}: center must be a bool, got {type(center).__name__}")
    length = chk.positive_int(fn, "length", length, allow_none=True)
    real_name = _real_of(z) if dtype is None else _dtype_name(fn, dtype)
    if real_name not in ("float32", "float64"):
        raise TypeError(f"{fn}: dtype must be float32, float64 or None, got {dtype!r}")
    if n_frames_in == 0:
        raise ValueError(f"{fn}: stft_matrix has no frames (shape {z.shape})")

    n_frames = n_frames_in
    if length is not None:
        padded_length = length + 2 * (p.n_fft // 2 if center else 0)
        n_frames = min(n_frames, -(-padded_length // p.hop_length))
    lead = z.shape[:-2]
    zf = z.swapaxes(-1, -2)[..., :n_frames, :]
    if real_name != _real_of(z):
        zf = zf.astype("complex64" if real_name == "float32" else "complex128")
    y = istft_frames(zf.reshape(-1, n_frames, n_freq), p, center, length)
    return y.reshape(*lead, y.shape[-1])


def istft_frames(zf: GPUArray, p: _Params, center: bool, length: int | None) -> GPUArray:
    """The signal [batch, samples] of a frame-major complex STFT [batch, frames, n_freq]
    (every frame used; istft has already dropped frames past ``length``)."""
    n_frames = zf.shape[1]
    real = float32 if zf.dtype.name == "complex64" else float64
    start = p.n_fft // 2 if center else 0
    if length is not None:
        out_len = length
    else:
        out_len = p.n_fft + p.hop_length * (n_frames - 1) - 2 * start
    frames = gfft.irfft(zf, n=p.n_fft, axis=-1)

    # The envelope on the host: 1 / wss where wss > tiny, else 1 (librosa leaves those samples
    # undivided), over the output span [start, start + out_len) (1 past the overlap-add's end,
    # where no frame reaches and the output is 0: librosa.util.fix_length). Cached by its
    # parameters: griffinlim calls this every iteration, and rebuilding and hashing it cost more
    # than the GPU's work.
    def envelope() -> np.ndarray:
        wss = sumsquare_np(p.window, n_frames, p.hop_length)
        tiny = np.finfo(real.np_dtype).tiny
        inv = np.where(wss > tiny, 1.0 / np.where(wss > tiny, wss, 1.0), 1.0)
        span = np.ones(out_len)
        got = inv[start : start + out_len]
        span[: got.shape[0]] = got
        return span

    key = ("istft envelope", p.hop_length, n_frames, start, out_len)
    env = p.device_table_of(key, envelope, frames)
    # One routed op: the window at load, the sum over the frames, the envelope (ops/spectral.py).
    return ops.overlap_add(frames, p.hop_length, window=p.device_window(frames), envelope=env,
                           start=start, length=out_len)  # fmt: skip


def _real_of(z: GPUArray) -> str:
    return "float32" if z.dtype.name == "complex64" else "float64"


def magphase(D: Any, *, power: float = 1) -> tuple[GPUArray, GPUArray]:
    """librosa.magphase: (|D| ** power, D / |D|), the phase 1 + 0j where |D| is 0.

    The phase is computed per part (re / |D|, im / |D|) as librosa does, so denormal
    magnitudes give no NaN; it is a new complex array of D's dtype.
    """
    fn = "magphase"
    z = chk.complex_array(fn, "D", D, min_ndim=0)
    pw = chk.number(fn, "power", power, positive=True)
    mag = ops.sqrt(abs2(z))
    is_zero = mag == 0.0
    mag_nonzero = ops.where(is_zero, 1.0, mag)
    ri = view_as_real(z)
    phase_ri = empty(ri.shape, ri.dtype, ri.device)
    ops.add(ri[..., 0] / mag_nonzero, ops.where(is_zero, 1.0, 0.0), out=phase_ri[..., 0])
    ops.div(ri[..., 1], mag_nonzero, out=phase_ri[..., 1])
    if pw != 1.0:
        mag = ops.pow(mag, pw)
    return mag, view_as_complex(phase_ri)
