"""Padding and framing on GPUArrays without a loop over frames (the overlap-add back is the
routed ops.overlap_add).

Signals are handled as [batch, samples] (leading dims folded into one batch dim) and frames as
[batch, frames, frame_length] ("frame-major": the FFT runs along the contiguous last axis).
Framing is a zero-copy strided view: frame f of row b starts at element b * row + f * hop, so
consecutive frames overlap in memory; the routed ops read views of any strides and write fresh
contiguous outputs, and nothing ever writes through the overlapping view.
"""

from __future__ import annotations

from pygpukit.array import GPUArray
from pygpukit.creation import empty, zeros
from pygpukit.ops import fft as fft_ops

PAD_MODES = fft_ops.PAD_MODES  # np.pad's modes served, one list with the FFT ops


def as_rows(y: GPUArray) -> tuple[GPUArray, tuple[int, ...]]:
    """(y as a contiguous [batch, samples] array, y's leading dims)."""
    lead = y.shape[:-1]
    batch = 1
    for n in lead:
        batch *= n
    return y.reshape(batch, y.shape[-1]).contiguous(), lead


def check_pad(fn: str, n: int, pad: int, mode: str) -> None:
    """np.pad's reflect/symmetric modes reflect repeatedly when pad exceeds the signal; a single
    reflection is served here (two strided copies), so shorter signals are refused up front."""
    if mode == "reflect" and pad > 0 and n <= pad:
        raise ValueError(
            f"{fn}: pad_mode='reflect' needs more than n_fft // 2 = {pad} samples, got {n}; "
            "use pad_mode='constant'"
        )
    if mode == "symmetric" and pad > n:
        raise ValueError(
            f"{fn}: pad_mode='symmetric' needs at least n_fft // 2 = {pad} samples, got {n}; "
            "use pad_mode='constant'"
        )


def pad_rows(y2: GPUArray, left: int, right: int, mode: str) -> GPUArray:
    """np.pad(y2, ((0, 0), (left, right)), mode) as a new contiguous array (check_pad first)."""
    b, n = y2.shape
    if mode == "constant":
        out = zeros((b, left + n + right), y2.dtype, y2.device)
    else:
        out = empty((b, left + n + right), y2.dtype, y2.device)
    out[:, left : left + n] = y2
    if mode == "constant":
        return out
    if mode == "edge":
        if left:
            out[:, :left] = y2[:, :1].broadcast_to((b, left))
        if right:
            out[:, left + n :] = y2[:, n - 1 :].broadcast_to((b, right))
        return out
    # reflect mirrors about the edge sample (excluded), symmetric about the edge (included);
    # a negative-stride view reads the mirrored run.
    skip = 1 if mode == "reflect" else 0
    if left:
        out[:, :left] = y2[:, skip : skip + left][:, ::-1]
    if right:
        out[:, left + n :] = y2[:, n - skip - right : n - skip][:, ::-1]
    return out


def frame_view(x2: GPUArray, frame_length: int, hop: int) -> GPUArray:
    """The [batch, 1 + (samples - frame_length) // hop, frame_length] overlapping frames of a
    contiguous [batch, samples] array, as a strided view (librosa.util.frame on the last axis)."""
    b, n = x2.shape
    n_frames = 1 + (n - frame_length) // hop
    row = x2.element_strides[0]
    return x2._view((b, n_frames, frame_length), (row, hop, 1), x2._offset)
