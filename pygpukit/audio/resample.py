"""Sample-rate conversion in librosa's name: resample with res_type 'polyphase'
(scipy.signal.resample_poly's filter, padding and alignment).

resample_poly filters the signal upsampled by ``up`` (zeros between samples) with a Kaiser
(beta 5) windowed sinc of 20 * max(up, down) + 1 taps and keeps every ``down``-th sample. Output
k needs the input run ending at (k * down) // up and the polyphase branch (k * down) % up, and
the pattern repeats every ``up`` outputs. So ``up`` consecutive outputs read one window of W
input samples that advances by ``down``: all windows form one strided view [rows, M, W] of the
zero-padded input (no copy) and one matmul with a [W, up] matrix of filter branches gives every
output, in order, as [rows, M, up].
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.audio import _checks as chk
from pygpukit.audio import _frames
from pygpukit.creation import empty, from_numpy

__all__ = ["resample"]

_KAISER_BETA = 5.0  # resample_poly's default window ('kaiser', 5.0)


def _firwin_lowpass(numtaps: int, cutoff: float) -> np.ndarray:
    """scipy.signal.firwin(numtaps, cutoff, window=('kaiser', 5.0)) (cutoff relative to
    Nyquist, scaled to unit gain at DC)."""
    m = np.arange(numtaps) - 0.5 * (numtaps - 1)
    h = cutoff * np.sinc(cutoff * m) * np.kaiser(numtaps, _KAISER_BETA)
    return h / np.sum(h)


def _output_len(len_h: int, n_in: int, up: int, down: int) -> int:
    """scipy.signal._upfirdn._output_len: samples upfirdn produces."""
    n = (n_in + (len_h + (-len_h % up)) // up - 1) * up
    return n // down + (1 if n % down else 0)


# Largest branch matrix of one matmul (elements). A rate pair with large coprime factors (8000 ->
# 8001) would need a mostly-zero [~down, up] matrix; it is split into groups of consecutive
# branches whose windows are about twice the branch length.
_MAX_MATRIX = 1 << 22


class _Plan:
    """resample_poly's filter and alignment for n_in samples at up/down, as polyphase groups."""

    def __init__(self, n_in: int, up: int, down: int) -> None:
        half_len = 10 * max(up, down)
        h = _firwin_lowpass(2 * half_len + 1, 1.0 / max(up, down)) * up
        self.n_out = -(-n_in * up // down)
        # resample_poly's alignment: pre-pad the filter so output 0 sits on its centre.
        n_pre_pad = down - half_len % down
        n_post_pad = 0
        k0 = (half_len + n_pre_pad) // down
        while _output_len(h.size + n_pre_pad + n_post_pad, n_in, up, down) < self.n_out + k0:
            n_post_pad += 1
        h = np.concatenate((np.zeros(n_pre_pad), h, np.zeros(n_post_pad)))
        self.taps = -(-h.size // up)  # taps of each polyphase branch
        self.h = np.pad(h, (0, self.taps * up - h.size))
        t = (k0 + np.arange(up)) * down
        # Output k0 + m * up + c reads inputs n0[c] + m * down - i (i < taps) with branch
        # phase[c]: taps h[phase[c] + i * up].
        self.n0, self.phase = t // up, t % up
        self.up, self.down = up, down
        self.n_win = -(-self.n_out // up)
        full = int(self.n0[-1] - self.n0[0]) + self.taps
        self.group = up if full * up <= _MAX_MATRIX else max(1, -(-self.taps * up // down))

    def first(self) -> int:
        """Input index of group 0's first window sample (negative: left zero padding)."""
        return int(self.n0[0]) - (self.taps - 1)

    def last(self) -> int:
        """One past the input index of the last window sample of the last group."""
        return int(self.n0[-1]) + 1 + (self.n_win - 1) * self.down

    def branches(self, c0: int, c1: int) -> tuple[int, np.ndarray]:
        """(first input index of window 0, the [width, c1 - c0] branch matrix) of outputs
        c0 .. c1 - 1 of each period."""
        n0 = self.n0[c0:c1]
        width = int(n0[-1] - n0[0]) + self.taps
        i = np.arange(self.taps)[:, None]
        mat = np.zeros((width, c1 - c0))
        rows = (n0 - n0[0])[None, :] + (self.taps - 1) - i
        mat[rows, np.arange(c1 - c0)[None, :]] = self.h[self.phase[c0:c1][None, :] + i * self.up]
        return int(n0[0]) - (self.taps - 1), mat


def resample(
    y: Any,
    *,
    orig_sr: float,
    target_sr: float,
    res_type: str = "polyphase",
    fix: bool = True,
    scale: bool = False,
    axis: int = -1,
) -> GPUArray:
    """librosa.resample with res_type='polyphase' along the last axis of y [..., samples].

    orig_sr and target_sr must be integers (as librosa's polyphase mode requires); the ratio is
    reduced by their gcd. fix=True cuts or zero-pads to ceil(samples * target_sr / orig_sr)
    (librosa.util.fix_length), scale=True divides by sqrt(target_sr / orig_sr).

    Deviations: res_type defaults to and only serves 'polyphase' (librosa's default 'soxr_hq'
    needs the soxr library); only the last axis.
    """
    fn = "resample"
    x = chk.signal(fn, "y", y)
    chk.choice(fn, "res_type", res_type, ("polyphase",))
    if axis not in (-1, x.ndim - 1) or isinstance(axis, bool):
        raise ValueError(f"{fn}: axis must be the last axis (-1), got {axis!r}")
    sr_in = chk.number(fn, "orig_sr", orig_sr, positive=True)
    sr_out = chk.number(fn, "target_sr", target_sr, positive=True)
    if int(sr_in) != sr_in or int(sr_out) != sr_out:
        raise ValueError(
            f"{fn}: polyphase resampling needs integer rates, got orig_sr={orig_sr!r}, "
            f"target_sr={target_sr!r}"
        )
    if sr_in == sr_out:
        return x
    g = math.gcd(int(sr_in), int(sr_out))
    up, down = int(sr_out) // g, int(sr_in) // g
    rows, lead = _frames.as_rows(x)
    n_in = rows.shape[1]
    plan = _Plan(n_in, up, down)
    n_out, n_win = plan.n_out, plan.n_win

    # Zero-pad so that every window lies inside the padded rows.
    left = max(0, -plan.first())
    padded = _frames.pad_rows(rows, left, max(0, plan.last() - n_in), "constant")
    dt, dev = rows.dtype.np_dtype, rows.device
    if plan.group == up:
        first, mat = plan.branches(0, up)
        windows = _frames.frame_view(padded[:, first + left :], mat.shape[0], down)[:, :n_win]
        out3 = ops.matmul(windows, from_numpy(mat.astype(dt), device=dev))
    else:
        out3 = empty((rows.shape[0], n_win, up), rows.dtype, dev)
        for c0 in range(0, up, plan.group):
            c1 = min(up, c0 + plan.group)
            first, mat = plan.branches(c0, c1)
            windows = _frames.frame_view(padded[:, first + left :], mat.shape[0], down)
            ops.matmul(
                windows[:, :n_win], from_numpy(mat.astype(dt), device=dev), out=out3[:, :, c0:c1]
            )
    out = out3.reshape(rows.shape[0], n_win * up)[:, :n_out]

    ratio = sr_out / sr_in
    n_keep = int(np.ceil(n_in * ratio)) if fix else n_out
    gain = 1.0 / math.sqrt(ratio) if scale else 1.0
    if n_keep <= n_out:
        res = out[:, :n_keep] * gain
    else:
        res = _frames.pad_rows(out.contiguous(), 0, n_keep - n_out, "constant")
        if scale:
            res = res * gain
    return res.reshape(*lead, n_keep)
