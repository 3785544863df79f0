"""cqt, vqt, pseudo_cqt, hybrid_cqt and filters.wavelet against librosa 0.11 (res_type
'polyphase', the resampler pygpukit serves) in float64, on synthetic signals and speech.

Bound: float32 results are within docs/design.md's fp32 bound 1e-5 of librosa's float64 result,
as a relative norm error and elementwise relative to the largest magnitude (assert_close). The
filter basis is built exactly as librosa builds it (complex64 wavelets, scipy.fft, the same
sparsification), so the float64 path agrees to 1e-12.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _assert import assert_close
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SYNTH, rel_err, speech, up, up32

librosa = pytest.importorskip("librosa")
pytest.importorskip("scipy")

RTOL = 1e-5
RTOL64 = 1e-12
SR = 22050


def _lib(fn: str, y: np.ndarray, **kw: Any) -> np.ndarray:
    """librosa's transform in float64 (its n_fft > signal warnings on the low octaves are
    expected: those octaves run on a few hundred samples)."""
    if fn != "pseudo_cqt":
        kw = {"res_type": "polyphase", **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return np.asarray(getattr(librosa, fn)(y, **kw))


def _parts(x: Any) -> np.ndarray:
    """Complex values as (re, im) pairs: assert_close compares real arrays."""
    a = x.to_numpy() if isinstance(x, gp.GPUArray) else np.asarray(x)
    return np.stack([a.real, a.imag], axis=-1) if np.iscomplexobj(a) else a


def _check(out: gp.GPUArray, ref: np.ndarray, dtype: str = "float32") -> None:
    assert out.shape == ref.shape
    assert rel_err(out, ref) <= (RTOL if dtype == "float32" else RTOL64)
    assert_close(_parts(out), _parts(ref), dtype)


def _check32(out: gp.GPUArray, ref: np.ndarray, *, complex_out: bool = True) -> None:
    assert out.dtype is (gp.complex64 if complex_out else gp.float32)
    _check(out, ref)


def _chirp(seconds: float = 1.5, seed: int = 0) -> np.ndarray:
    return SYNTH["chirp"](SR, seconds, np.random.default_rng(seed))


def _band_tones(lo: float, hi: float, rng: np.random.Generator) -> np.ndarray:
    """Three sinusoids with random frequencies in [lo, hi] and random phases, 1.5 s. Energy
    outside the analysed band would make float32 rounding of the input (spread over all
    frequencies) large relative to the bins' response: see the out-of-band test."""
    t = np.arange(int(SR * 1.5)) / SR
    freqs = np.exp(rng.uniform(np.log(lo), np.log(hi), size=3))
    return sum(
        a * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
        for a, f in zip((0.4, 0.2, 0.1), freqs, strict=True)
    )


CQT_CONFIGS = [
    {},  # librosa's defaults: 84 bins from C1, 12 per octave, hop 512
    {"hop_length": 256, "fmin": 55.0, "n_bins": 72, "bins_per_octave": 24},
    {"n_bins": 30, "fmin": 110.0, "filter_scale": 0.8, "window": "hamming", "norm": 2},
    {"n_bins": 7, "fmin": 440.0, "hop_length": 128, "scale": False, "norm": np.inf},
    {"n_bins": 1, "fmin": 220.0, "sparsity": 0.0},
    {"hop_length": 500},  # halved twice, then the odd hop stops the downsampling
    {"hop_length": 63, "fmin": 130.0, "n_bins": 48},  # odd: no downsampling at all
    {"n_bins": 36, "fmin": 220.0, "pad_mode": "reflect", "tuning": 0.3},
    {"n_bins": 36, "fmin": 65.0, "window": ("kaiser", 6.0), "pad_mode": "edge"},
]


def _ids(kw: dict) -> str:
    return "-".join(f"{k}{v}" for k, v in kw.items()) or "defaults"


@pytest.mark.parametrize("kind", ["chirp", "tones"])
@pytest.mark.parametrize("kw", CQT_CONFIGS, ids=_ids)
def test_cqt_matches_librosa(kind: str, kw: dict) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{kind}{_ids(kw)}".encode()))
    if kind == "chirp":
        y = SYNTH["chirp"](SR, 1.5, rng)
    else:
        fmin = kw.get("fmin", 32.70319566257483)
        top = fmin * 2.0 ** ((kw.get("n_bins", 84) - 1) / kw.get("bins_per_octave", 12))
        y = _band_tones(fmin, top, rng)
    ref = _lib("cqt", y, sr=SR, **kw)
    _check32(pa.cqt(up32(y), sr=SR, **kw), ref)


@pytest.mark.parametrize(
    "kw",
    [
        {},  # gamma None: the ERB-proportional offset (librosa.vqt's default)
        {"gamma": 10.0},
        {"gamma": 3.0, "bins_per_octave": 24, "n_bins": 96, "fmin": 55.0, "scale": False},
        # A ratio array sets bins_per_octave (5 here), which the tuning offset is a fraction of.
        {
            "gamma": 20.0,
            "intervals": [1.0, 5 / 4, 4 / 3, 3 / 2, 5 / 3],
            "n_bins": 25,
            "tuning": -0.4,
        },
    ],
    ids=_ids,
)
def test_vqt_matches_librosa(kw: dict) -> None:
    y = _chirp(seed=len(kw))
    ref = _lib("vqt", y, sr=SR, **kw)
    out = pa.vqt(up32(y), sr=SR, **kw)
    _check32(out, ref)
    # gamma changes the result: the comparison is not blind to the bandwidth offset.
    if kw.get("gamma"):
        other = _lib("vqt", y, sr=SR, **{**kw, "gamma": 0.0})
        assert rel_err(out, other) > 100 * RTOL


@pytest.mark.parametrize("name", ["fox_22k", "hello_16k", "numbers_16k"])
def test_cqt_vqt_speech(name: str) -> None:
    y, sr = speech(name)
    _check32(pa.cqt(up32(y), sr=sr), _lib("cqt", y, sr=sr))
    _check32(pa.vqt(up32(y), sr=sr, gamma=5.0), _lib("vqt", y, sr=sr, gamma=5.0))


def test_float64_path_matches_librosa_to_rounding() -> None:
    y, sr = speech("fox_22k")
    ref = _lib("cqt", y, sr=sr)
    out = pa.cqt(up(y), sr=sr)
    assert out.dtype is gp.complex128
    _check(out, ref, "float64")
    # dtype asks for the other precision: float32 in, complex128 out.
    out2 = pa.vqt(up32(y), sr=sr, gamma=2.0, dtype=np.complex128)
    assert out2.dtype is gp.complex128
    assert (
        rel_err(out2, _lib("vqt", y.astype(np.float32).astype(np.float64), sr=sr, gamma=2.0))
        <= RTOL64
    )


def test_batched_rows_match_librosa_multichannel() -> None:
    rng = np.random.default_rng(11)
    y = np.stack(
        [SYNTH["chirp"](SR, 1.0, rng), SYNTH["tones"](SR, 1.0, rng), SYNTH["clicks"](SR, 1.0, rng)]
    )
    ref = _lib("cqt", y, sr=SR)
    assert ref.shape[:2] == (3, 84)
    out = pa.cqt(up32(y), sr=SR)
    _check32(out, ref)
    # Leading dims fold and unfold: [2, 3, samples] -> [2, 3, n_bins, frames], rows unchanged.
    y4 = np.stack([y, y[::-1]])
    out4 = pa.vqt(up32(y4), sr=SR, gamma=4.0, n_bins=60, fmin=65.0)
    ref4 = _lib("vqt", y4, sr=SR, gamma=4.0, n_bins=60, fmin=65.0)
    _check32(out4, ref4)
    # Each row of the batch equals its own single-row transform.
    one = pa.vqt(up32(y4[1, 0]), sr=SR, gamma=4.0, n_bins=60, fmin=65.0).to_numpy()
    np.testing.assert_array_equal(out4.to_numpy()[1, 0], one)


@pytest.mark.parametrize("fn", ["pseudo_cqt", "hybrid_cqt"])
@pytest.mark.parametrize(
    "kw",
    [{}, {"hop_length": 256, "fmin": 55.0, "n_bins": 72, "bins_per_octave": 24, "scale": False}],
    ids=_ids,
)
def test_pseudo_and_hybrid_match_librosa(fn: str, kw: dict) -> None:
    y = _chirp(seed=5)
    ref = _lib(fn, y, sr=SR, **kw)
    _check32(getattr(pa, fn)(up32(y), sr=SR, **kw), ref, complex_out=False)


def test_hybrid_uses_both_parts() -> None:
    """With hop 512 the top bins come from pseudo_cqt and the low ones from cqt: a hybrid that
    took either part alone would differ from librosa's."""
    y = _chirp(seed=6)
    full = np.abs(_lib("cqt", y, sr=SR))
    pseudo = _lib("pseudo_cqt", y, sr=SR)
    out = pa.hybrid_cqt(up32(y), sr=SR)
    assert rel_err(out, full) > 100 * RTOL
    assert rel_err(out, pseudo) > 100 * RTOL
    _check32(out, _lib("hybrid_cqt", y, sr=SR), complex_out=False)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"gamma": None, "window": "hamming", "filter_scale": 0.7, "norm": np.inf},
        {"pad_fft": False, "norm": None, "gamma": 5.0},
    ],
    ids=_ids,
)
def test_wavelet_filters_match_librosa(kw: dict) -> None:
    freqs = librosa.cqt_frequencies(30, fmin=55.0)
    ref, ref_len = librosa.filters.wavelet(freqs=freqs, sr=SR, dtype=np.complex128, **kw)
    out, lengths = pa.filters.wavelet(freqs=freqs, sr=SR, dtype=np.complex128, device=DEVICE, **kw)
    assert out.dtype is gp.complex128
    _check(out, ref, "float64")
    np.testing.assert_allclose(lengths, ref_len, rtol=1e-15)
    gamma = kw.get("gamma", 0)
    window = kw.get("window", "hann")
    fs = kw.get("filter_scale", 1)
    got = pa.filters.wavelet_lengths(
        freqs=freqs, sr=SR, window=window, filter_scale=fs, gamma=gamma
    )
    want = librosa.filters.wavelet_lengths(
        freqs=freqs, sr=SR, window=window, filter_scale=fs, gamma=gamma
    )
    np.testing.assert_allclose(got[0], want[0], rtol=1e-15)
    assert got[1] == pytest.approx(want[1], rel=1e-15)


def test_repeat_call_reuses_tables_and_numpy_input() -> None:
    y = _chirp(seconds=1.0, seed=8).astype(np.float32)
    first = pa.cqt(up32(y), sr=SR).to_numpy()
    again = pa.cqt(y, sr=SR)  # a NumPy array is uploaded; the cached bases are reused
    np.testing.assert_array_equal(again.to_numpy(), first)


_NO_OP_ROUTE = "*:native" if DEVICE == "cpu" else "*:cpu"
_Y = np.random.default_rng(0).standard_normal(8000).astype(np.float32)


def _y(n: int = 8000) -> gp.GPUArray:
    return gp.from_numpy(_Y[:n], device=DEVICE)


BAD: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("n_bins 0", lambda: pa.cqt(_y(), n_bins=0), ValueError, "n_bins must be > 0"),
    ("n_bins float", lambda: pa.cqt(_y(), n_bins=84.0), TypeError, "n_bins must be an int"),
    ("fmin 0", lambda: pa.cqt(_y(), fmin=0.0), ValueError, "fmin must be a positive"),
    ("fmin negative", lambda: pa.vqt(_y(), fmin=-30.0), ValueError, "fmin must be a positive"),
    ("above nyquist", lambda: pa.cqt(_y(), sr=8000), ValueError, "n_bins=84 .*Nyquist"),
    ("vqt above nyquist", lambda: pa.vqt(_y(), n_bins=108), ValueError, "n_bins=108 .*Nyquist"),
    ("pseudo nyquist", lambda: pa.pseudo_cqt(_y(), sr=8000), ValueError, "Nyquist"),
    ("res_type soxr", lambda: pa.cqt(_y(), res_type="soxr_hq"), ValueError, "res_type"),
    (
        "res_type kaiser",
        lambda: pa.hybrid_cqt(_y(), res_type="kaiser_best"),
        ValueError,
        "res_type",
    ),
    ("res_type None", lambda: pa.vqt(_y(), res_type=None), ValueError, "res_type"),
    ("hop 0", lambda: pa.cqt(_y(), hop_length=0), ValueError, "hop_length must be > 0"),
    ("hop float", lambda: pa.cqt(_y(), hop_length=512.0), TypeError, "hop_length must be an int"),
    ("bpo 0", lambda: pa.cqt(_y(), bins_per_octave=0), ValueError, "bins_per_octave"),
    ("tuning None", lambda: pa.cqt(_y(), tuning=None), ValueError, "tuning=None"),
    ("sparsity 1", lambda: pa.cqt(_y(), sparsity=1.0), ValueError, "sparsity"),
    ("gamma negative", lambda: pa.vqt(_y(), gamma=-1.0), ValueError, "gamma"),
    ("filter_scale 0", lambda: pa.cqt(_y(), filter_scale=0), ValueError, "filter_scale"),
    ("norm negative", lambda: pa.cqt(_y(), norm=-1), ValueError, "norm"),
    ("window array", lambda: pa.cqt(_y(), window=np.ones(64)), TypeError, "window must be"),
    ("window unknown", lambda: pa.cqt(_y(), window="hanning-ish"), ValueError, "window"),
    ("scale str", lambda: pa.cqt(_y(), scale="yes"), TypeError, "scale must be a bool"),
    ("pad_mode", lambda: pa.cqt(_y(), pad_mode="wrap"), ValueError, "pad_mode"),
    ("intervals name", lambda: pa.vqt(_y(), intervals="ji5"), ValueError, "intervals"),
    ("intervals repeat", lambda: pa.vqt(_y(), intervals=[1.0, 1.0]), ValueError, "intervals"),
    ("dtype float", lambda: pa.cqt(_y(), dtype=np.float32), TypeError, "dtype must be complex"),
    ("int16 y", lambda: pa.cqt((_Y * 3e4).astype(np.int16)), TypeError, "y must be a float32"),
    ("empty y", lambda: pa.cqt(_y(0)), ValueError, "y has no samples"),
    # 3 octaves from C1 downsample by 16 first.
    ("too short", lambda: pa.cqt(_y(10), n_bins=36), ValueError, "y has 10 samples, too few"),
    (
        "reflect short octave",
        lambda: pa.cqt(_y(), pad_mode="reflect"),
        ValueError,
        r"octave .*pad_mode='reflect'",
    ),
    ("wavelet one freq", lambda: pa.filters.wavelet(freqs=[440.0]), ValueError, "alpha"),
    ("wavelet freqs order", lambda: pa.filters.wavelet(freqs=[440.0, 220.0]), ValueError, "ascend"),
]


@pytest.mark.parametrize(("what", "call", "exc", "match"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_raises_before_any_op(
    what: str, call: Callable[[], Any], exc: type[Exception], match: str
) -> None:
    """Every route forced to a backend that cannot serve the device: a call that reached an op
    would raise a RouteError instead."""
    with gp.route(_NO_OP_ROUTE), pytest.raises(exc, match=match):
        call()


def test_bad_values_are_rejected_by_librosa_too() -> None:
    """The value errors above are librosa's own limits, not stricter ones (hop_length needs no
    power-of-2 factor: librosa 0.11 stops halving at an odd hop, as CQT_CONFIGS check)."""
    y = _Y.astype(np.float64)
    errors = (librosa.util.exceptions.ParameterError, ValueError)
    for fn, kw in [
        ("cqt", {"n_bins": 0}),
        ("cqt", {"sr": 8000}),
        ("cqt", {"fmin": -30.0}),
        ("cqt", {"filter_scale": 0}),
        ("cqt", {"sparsity": 1.0}),
        ("vqt", {"gamma": -1.0}),
        ("vqt", {"n_bins": 108}),
    ]:
        with warnings.catch_warnings(), pytest.raises(errors):
            warnings.simplefilter("ignore", RuntimeWarning)  # librosa's log2 of fmin < 0
            _lib(fn, y, **kw)


def test_out_of_band_energy_no_worse_than_librosa_float32() -> None:
    """Tones outside a narrow band (55-440 Hz): the bins see little, and the float32 rounding
    of the input and of the FFT, spread over all frequencies, is large relative to them in any
    float32 implementation. Bound: librosa's own float32 error on the same input, +10%."""
    y = SYNTH["tones"](SR, 1.5, np.random.default_rng(4))
    kw = {"hop_length": 256, "fmin": 55.0, "n_bins": 72, "bins_per_octave": 24}
    ref = _lib("cqt", y, sr=SR, **kw)
    lib32 = _lib("cqt", y.astype(np.float32), sr=SR, **kw)
    err = rel_err(pa.cqt(up32(y), sr=SR, **kw), ref)
    assert err <= 1.1 * rel_err(lib32, ref)
    assert err <= 1e-4
