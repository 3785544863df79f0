"""stft, istft and magphase against librosa in float64, on synthetic signals and speech.

Bound: the relative norm error of the float32 transforms is <= 1e-5 (docs/design.md's fp32
bound); the float64 path agrees to 1e-12.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _assert import assert_close

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH, rel_err, speech, up, up32

librosa = pytest.importorskip("librosa")

CONFIGS = [
    {"n_fft": 2048},
    {"n_fft": 400, "hop_length": 160},
    {"n_fft": 512, "win_length": 300, "hop_length": 128, "window": "hamming"},
    {"n_fft": 511, "hop_length": 77, "window": "blackman", "pad_mode": "reflect"},
    {"n_fft": 256, "hop_length": 100, "center": False},
    {"n_fft": 64, "hop_length": 64, "window": "boxcar", "pad_mode": "edge"},
    {"n_fft": 128, "hop_length": 31, "window": ("kaiser", 8.0), "pad_mode": "symmetric"},
]
RTOL = 1e-5


def _istft_kw(kw: dict) -> dict:
    return {k: v for k, v in kw.items() if k != "pad_mode"}


@pytest.mark.parametrize("kind", sorted(SYNTH))
@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_stft_matches_librosa(kind: str, kw: dict) -> None:
    rng = np.random.default_rng(abs(hash((kind, str(kw)))) % 2**32)
    y = SYNTH[kind](22050, 0.7, rng)
    ref = librosa.stft(y, dtype=np.complex128, **kw)
    out = pa.stft(up32(y), **kw)
    assert out.dtype is gp.complex64
    assert out.shape == ref.shape
    assert rel_err(out, ref) <= RTOL
    # Every frame, not only the loud ones: the per-frame error stays within the bound.
    o = out.to_numpy()
    frame_err = np.linalg.norm(o - ref, axis=0) / np.maximum(np.linalg.norm(ref, axis=0), 1e-3)
    assert frame_err.max() <= 10 * RTOL


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_istft_matches_librosa(kw: dict) -> None:
    rng = np.random.default_rng(7)
    y = SYNTH["chirp"](22050, 0.5, rng)
    spec = librosa.stft(y, dtype=np.complex128, **kw)
    ref = librosa.istft(spec, dtype=np.float64, **_istft_kw(kw))
    out = pa.istft(up(spec.astype(np.complex64)), **_istft_kw(kw))
    assert out.dtype is gp.float32
    assert rel_err(out, ref) <= RTOL
    # Shorter than the natural length: only the frames reaching into it are inverted.
    n = y.size - 123
    ref_n = librosa.istft(spec, dtype=np.float64, length=n, **_istft_kw(kw))
    out_n = pa.istft(up(spec.astype(np.complex64)), length=n, **_istft_kw(kw))
    assert rel_err(out_n, ref_n) <= RTOL


def test_istft_longer_length_no_worse_than_librosa_float32() -> None:
    """Asking for more samples than the frames cover divides the last frame's tail by a window
    envelope as small as 1e-11 (hann, n_fft 2048): float32 rounding there is amplified in any
    implementation. Bound: librosa's own float32 result's error, and zeros past the frames."""
    rng = np.random.default_rng(3)
    y = SYNTH["tones"](22050, 0.1, rng)
    spec = librosa.stft(y, dtype=np.complex128)
    n = y.size + 3000
    ref = librosa.istft(spec, dtype=np.float64, length=n)
    lib32 = librosa.istft(spec.astype(np.complex64), length=n)
    out = pa.istft(up(spec.astype(np.complex64)), length=n).to_numpy()
    assert out.shape == (n,)
    assert rel_err(out, ref) <= max(rel_err(lib32, ref), RTOL)
    natural = 2048 + 512 * (spec.shape[-1] - 1) - 1024  # the overlap-add span after the trim
    assert np.all(out[natural:] == 0.0) and np.any(out[natural - 10 : natural] != 0.0)


def test_round_trip_reconstructs_signal() -> None:
    rng = np.random.default_rng(11)
    y = SYNTH["clicks"](16000, 0.5, rng)
    x = up32(y)
    back = pa.istft(pa.stft(x, n_fft=400, hop_length=160), n_fft=400, hop_length=160, length=y.size)
    assert_close(back, y.astype(np.float32), rtol=RTOL)


@pytest.mark.parametrize("name", ["fox_22k", "hello_16k", "numbers_16k"])
def test_speech_stft_istft(name: str) -> None:
    y, sr = speech(name)
    kw = {"n_fft": 2048, "hop_length": 512} if sr == 22050 else {"n_fft": 400, "hop_length": 160}
    ref = librosa.stft(y, dtype=np.complex128, **kw)
    out = pa.stft(up32(y), **kw)
    assert rel_err(out, ref) <= RTOL
    ref_y = librosa.istft(ref, dtype=np.float64, length=y.size, **kw)
    assert rel_err(pa.istft(out, length=y.size, **kw), ref_y) <= RTOL


def test_batched_equals_rows_and_leading_dims() -> None:
    rng = np.random.default_rng(5)
    ys = np.stack([SYNTH[k](16000, 0.4, rng) for k in ("chirp", "tones", "clicks")])
    kw = {"n_fft": 400, "hop_length": 160, "pad_mode": "reflect"}
    batched = pa.stft(up32(ys), **kw).to_numpy()
    for i in range(3):
        np.testing.assert_array_equal(batched[i], pa.stft(up32(ys[i]), **kw).to_numpy())
    assert rel_err(batched, librosa.stft(ys, dtype=np.complex128, **kw)) <= RTOL
    four = np.stack([ys[:2], ys[1:]])  # [2, 2, T]
    out4 = pa.stft(up32(four), **kw)
    assert out4.shape == (2, 2, 201, ys.shape[-1] // 160 + 1)
    np.testing.assert_array_equal(out4.to_numpy()[1, 0], batched[1])
    inv = pa.istft(up(batched), n_fft=400, hop_length=160, length=ys.shape[-1])
    for i in range(3):
        row = pa.istft(up(batched[i]), n_fft=400, hop_length=160, length=ys.shape[-1])
        np.testing.assert_array_equal(inv.to_numpy()[i], row.to_numpy())


def test_float64_and_strided_input() -> None:
    rng = np.random.default_rng(9)
    y = SYNTH["chirp"](8000, 0.5, rng)
    for n_fft in (400, 256):  # on the GPU: Triton in float64 at 400, the native kernel at 256
        ref = librosa.stft(y, n_fft=n_fft, dtype=np.complex128)
        out = pa.stft(up(y), n_fft=n_fft)
        assert out.dtype is gp.complex128
        assert rel_err(out, ref) <= 1e-12
    wide = np.zeros(2 * y.size, np.float32)
    wide[::2] = y
    strided = up32(wide)[::2]
    assert not strided.is_contiguous()
    assert rel_err(pa.stft(strided, n_fft=256), ref) <= RTOL
    # NumPy input is uploaded to the default device.
    assert rel_err(pa.stft(y.astype(np.float32), n_fft=256), ref) <= RTOL


def test_short_signal_center_warns_like_librosa() -> None:
    y = np.random.default_rng(1).standard_normal(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = librosa.stft(y, n_fft=1024, dtype=np.complex128)
    with pytest.warns(UserWarning, match="n_fft=1024 is too large"):
        out = pa.stft(up32(y), n_fft=1024)
    assert rel_err(out, ref) <= RTOL


@pytest.mark.parametrize("power", [1.0, 2.0, 0.5])
def test_magphase(power: float) -> None:
    rng = np.random.default_rng(2)
    d = (rng.standard_normal((33, 20)) + 1j * rng.standard_normal((33, 20))).astype(np.complex64)
    d[3, 4] = 0  # magnitude 0: phase 1 + 0j
    mag, phase = pa.magphase(up(d), power=power)
    ref_mag, ref_phase = librosa.magphase(d.astype(np.complex128), power=power)
    assert mag.dtype is gp.float32 and phase.dtype is gp.complex64
    assert rel_err(mag, ref_mag) <= RTOL
    assert rel_err(phase, ref_phase) <= RTOL
    assert phase.to_numpy()[3, 4] == 1.0


def test_tables_are_uploaded_once() -> None:
    """A repeated melspectrogram with the same parameters reuses its window and mel basis from
    the device table cache (nothing new uploaded), and the result does not change."""
    from pygpukit.audio import _tables

    rng = np.random.default_rng(3)
    y = up(rng.standard_normal(4000).astype(np.float32))
    first = pa.feature.melspectrogram(y=y, sr=16000, n_fft=400, hop_length=160, n_mels=40)
    before = list(_tables._tables)
    again = pa.feature.melspectrogram(y=y, sr=16000, n_fft=400, hop_length=160, n_mels=40)
    assert sorted(map(repr, _tables._tables)) == sorted(map(repr, before))
    assert (again.to_numpy() == first.to_numpy()).all()
    # the Whisper front end too: its window and mel basis come from the cache on a repeat
    pa.log_mel_spectrogram(y, n_mels=80, chunk_length=1)
    before = list(_tables._tables)
    pa.log_mel_spectrogram(y, n_mels=80, chunk_length=1)
    assert sorted(map(repr, _tables._tables)) == sorted(map(repr, before))
    w = np.hanning(64)
    assert _tables.device_table(w, np.float32, y.device) is _tables.device_table(
        w, np.float32, y.device
    )


def _stft_np(y: np.ndarray, n_fft: int, hop: int, win: np.ndarray, mode: str) -> np.ndarray:
    """The padded-copy reference: np.pad, every frame, window, rfft ([frames, bins])."""
    yp = np.pad(y, n_fft // 2, mode=mode)
    count = 1 + (len(yp) - n_fft) // hop
    idx = np.arange(count)[:, None] * hop + np.arange(n_fft)[None, :]
    return np.fft.rfft(yp[idx] * win, axis=-1)


@pytest.mark.filterwarnings("ignore:stft. n_fft=.* is too large")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["constant", "reflect", "symmetric", "edge"])
@pytest.mark.parametrize(("n_fft", "hop"), [(16, 4), (16, 5), (17, 3), (8, 11), (32, 16)])
def test_centre_padding_at_every_length(mode: str, n_fft: int, hop: int, dtype: str) -> None:
    """stft pads in the FFT's loads (ops.fft.rfft_frames): every signal length from the
    shortest each mode allows to a few frames past n_fft gives the padded-copy frames, in
    float64 (exact to 1e-12) and float32 (the GPU's path) to the fp32 bound."""
    rng = np.random.default_rng(n_fft * 100 + hop)
    pad = n_fft // 2
    shortest = pad + 1 if mode == "reflect" else max(pad, 1) if mode == "symmetric" else 1
    for n in range(shortest, 3 * n_fft + 2 * hop):
        y = rng.standard_normal((2, n))
        win = np.hanning(n_fft + 2)[1:-1]
        yd = up(y) if dtype == "float64" else up32(y)
        got = pa.stft(yd, n_fft=n_fft, hop_length=hop, window=win, pad_mode=mode).to_numpy()
        y64 = y if dtype == "float64" else y.astype(np.float32).astype(np.float64)
        want = np.stack([_stft_np(r, n_fft, hop, win, mode) for r in y64]).swapaxes(-1, -2)
        assert got.shape == want.shape, n
        tol = 1e-12 if dtype == "float64" else RTOL
        assert np.abs(got - want).max() <= tol * np.abs(want).max(), n
