"""Padding, framing and overlap-add on GPUArrays without a loop over frames.

Signals are handled as [batch, samples] (leading dims folded into one batch dim) and frames as
[batch, frames, frame_length] ("frame-major": the FFT runs along the contiguous last axis).
Framing is a zero-copy strided view: frame f of row b starts at element b * row + f * hop, so
consecutive frames overlap in memory; the routed ops read views of any strides and write fresh
contiguous outputs, and nothing ever writes through the overlapping view.
"""

from __future__ import annotations

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import empty, zeros
from pygpukit.dtypes import complex64, complex128, float64
from pygpukit.ops.fft import rfft_windowed

PAD_MODES = ("constant", "reflect", "symmetric", "edge")


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


def windowed_rfft(
    y2: GPUArray,
    n_fft: int,
    hop: int,
    window: GPUArray,
    pad: int,
    mode: str,
    n_frames: int | None = None,
    power: float | None = None,
) -> GPUArray:
    """rfft(frames * window) [batch, frames, 1 + n_fft // 2] of the contiguous [batch, samples]
    signal y2 padded by ``pad`` on both sides in ``mode`` (check_pad first), over its first
    ``n_frames`` frames (default all of them); with ``power`` (1 or 2) its magnitude or power
    (ops.fft.rfft_windowed), over the whole padded copy.

    Why not pad_rows then frame_view: padding copies the whole signal (a zero fill and a
    copy: on an H100 about 120 us for 32 rows of 60 s) to serve the few frames that overlap
    the edges. Here the frames that lie inside the signal are an overlapping view of y2 itself,
    and only the edge frames read small padded copies of the edges: three rfft_windowed calls
    writing slices of one result. The frames are the same, so are the values. A signal with no
    inner frame takes the whole padded copy."""
    b, n = y2.shape
    total = n + 2 * pad
    count = 1 + (total - n_fft) // hop
    if n_frames is not None:
        count = min(count, n_frames)
    # Frames [left, right) start inside the signal and end inside it.
    left = min(count, -(-pad // hop))
    right = min(count, (n + pad - n_fft) // hop + 1) if n + pad >= n_fft else left
    if pad == 0 or right <= left or power is not None:
        # One call over the whole padded copy; also for a power result, which the Triton
        # backend may hand back as a view of its own scratch (an out= slice would be a copy).
        frames = frame_view(pad_rows(y2, pad, pad, mode) if pad else y2, n_fft, hop)
        return rfft_windowed(frames[:, :count], window, power=power)
    dt = complex128 if y2.dtype is float64 else complex64
    out = empty((b, count, n_fft // 2 + 1), dt, y2.device)
    row = y2.element_strides[0]
    inner = y2._view((b, right - left, n_fft), (row, hop, 1), y2._offset + left * hop - pad)
    rfft_windowed(inner, window, out=out[:, left:right])
    if left > 0:
        # The padded signal's first (left - 1) hop + n_fft samples; reflection reads pad + 1.
        need = min(n, max((left - 1) * hop + n_fft - pad, pad + 1))
        piece = pad_rows(y2[:, :need], pad, 0, mode)
        rfft_windowed(frame_view(piece, n_fft, hop)[:, :left], window, out=out[:, :left])
    if right < count:
        start = right * hop - pad  # in y2; the piece starts early enough to reflect pad samples
        first = max(0, min(start, n - pad - 1))
        piece = pad_rows(y2[:, first:], 0, pad, mode)
        view = piece._view(
            (b, count - right, n_fft), (piece.element_strides[0], hop, 1),
            piece._offset + start - first,
        )  # fmt: skip
        rfft_windowed(view, window, out=out[:, right:])
    return out


def overlap_add(frames: GPUArray, hop: int) -> GPUArray:
    """Sum of [batch, frames, n] frames placed hop apart: [batch, n + hop * (frames - 1)].

    Frame f covers blocks f .. f + r - 1 of a [frames + r - 1, hop] grid (r = ceil(n / hop)), so
    piece j of every frame adds onto blocks j .. j + frames - 1 at once: r strided in-place adds
    whatever the frame count (librosa's __overlap_add loops over frames instead).
    """
    b, n_frames, n = frames.shape
    r = -(-n // hop)
    grid = zeros((b, n_frames + r - 1, hop), frames.dtype, frames.device)
    for j in range(r):
        width = min(hop, n - j * hop)
        target = grid[:, j : j + n_frames, :width]
        ops.add(target, frames[:, :, j * hop : j * hop + width], out=target)
    return grid.reshape(b, (n_frames + r - 1) * hop)[:, : n + hop * (n_frames - 1)]
