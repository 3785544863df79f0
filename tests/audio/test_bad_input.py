"""Bad arguments raise ValueError/TypeError naming the argument, before any op runs.

"Before any op runs" is checked by forcing every route to a backend that cannot serve the test
device (gp.route: native on the CPU, NumPy on a GPU), so a call that got as far as an op would
raise a RouteError instead of the expected error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

_NO_OP_ROUTE = "*:native" if DEVICE == "cpu" else "*:cpu"
Y = np.random.default_rng(0).standard_normal(4000).astype(np.float32)
S = np.abs(np.random.default_rng(1).standard_normal((129, 20))).astype(np.float32)
Z = (S + 1j * S).astype(np.complex64)


def _y() -> gp.GPUArray:
    return gp.from_numpy(Y, device=DEVICE)


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    (
        "2-D scalar",
        lambda: pa.stft(gp.from_numpy(np.array(1.0, np.float32), device=DEVICE)),
        ValueError,
        "y must have at least 1",
    ),
    ("int16 pcm", lambda: pa.stft((Y * 3e4).astype(np.int16)), TypeError, "y must be a float32"),
    (
        "int32 gpu",
        lambda: pa.stft(gp.from_numpy(np.arange(3000, dtype=np.int32), device=DEVICE)),
        TypeError,
        "y must be a float32",
    ),
    ("list input", lambda: pa.stft([0.0] * 100), TypeError, "y must be a GPUArray"),
    (
        "n_fft > length",
        lambda: pa.stft(_y(), n_fft=4096, center=False),
        ValueError,
        "n_fft=4096 is too large",
    ),
    ("n_fft 0", lambda: pa.stft(_y(), n_fft=0), ValueError, "n_fft must be > 0"),
    ("n_fft float", lambda: pa.stft(_y(), n_fft=512.0), TypeError, "n_fft must be an int"),
    ("hop 0", lambda: pa.stft(_y(), hop_length=0), ValueError, "hop_length must be > 0"),
    (
        "hop negative",
        lambda: pa.stft(_y(), n_fft=256, hop_length=-4),
        ValueError,
        "hop_length must be > 0",
    ),
    ("hop default 0", lambda: pa.stft(_y(), n_fft=2), ValueError, "hop_length"),
    ("win > n_fft", lambda: pa.stft(_y(), n_fft=256, win_length=300), ValueError, "win_length=300"),
    (
        "unknown window",
        lambda: pa.stft(_y(), window="hanning-ish"),
        ValueError,
        "window 'hanning-ish'",
    ),
    (
        "window length",
        lambda: pa.stft(_y(), n_fft=256, window=np.ones(100)),
        ValueError,
        "window array",
    ),
    ("unknown pad_mode", lambda: pa.stft(_y(), pad_mode="wrap"), ValueError, "pad_mode"),
    (
        "reflect too short",
        lambda: pa.stft(gp.from_numpy(Y[:100], device=DEVICE), n_fft=256, pad_mode="reflect"),
        ValueError,
        "pad_mode='reflect'",
    ),
    ("center not bool", lambda: pa.stft(_y(), center="yes"), TypeError, "center"),
    ("stft dtype", lambda: pa.stft(_y(), dtype=np.float32), TypeError, "dtype"),
    (
        "istft real",
        lambda: pa.istft(gp.from_numpy(S, device=DEVICE)),
        TypeError,
        "stft_matrix must be a complex64",
    ),
    (
        "istft bins",
        lambda: pa.istft(gp.from_numpy(Z, device=DEVICE), n_fft=512),
        ValueError,
        "129 frequency bins",
    ),
    (
        "istft 1-D",
        lambda: pa.istft(gp.from_numpy(Z[:, 0], device=DEVICE)),
        ValueError,
        "stft_matrix must have at least 2",
    ),
    (
        "istft length",
        lambda: pa.istft(gp.from_numpy(Z, device=DEVICE), length=0),
        ValueError,
        "length must be > 0",
    ),
    (
        "magphase real",
        lambda: pa.magphase(gp.from_numpy(S, device=DEVICE)),
        TypeError,
        "D must be a complex64",
    ),
    (
        "magphase power",
        lambda: pa.magphase(gp.from_numpy(Z, device=DEVICE), power=0),
        ValueError,
        "power",
    ),
    (
        "top_db negative",
        lambda: pa.power_to_db(gp.from_numpy(S, device=DEVICE), top_db=-1),
        ValueError,
        "top_db",
    ),
    (
        "amin zero",
        lambda: pa.power_to_db(gp.from_numpy(S, device=DEVICE), amin=0),
        ValueError,
        "amin",
    ),
    (
        "db int",
        lambda: pa.db_to_power(gp.from_numpy(np.arange(4), device=DEVICE)),
        TypeError,
        "S_db must be a float32",
    ),
    (
        "mel norm",
        lambda: pa.filters.mel(sr=16000, n_fft=400, norm="l2", device=DEVICE),
        ValueError,
        "norm",
    ),
    ("mel sr", lambda: pa.filters.mel(sr=0, n_fft=400, device=DEVICE), ValueError, "sr must be"),
    ("melspec nothing", lambda: pa.feature.melspectrogram(), ValueError, "pass either y"),
    ("melspec kwarg", lambda: pa.feature.melspectrogram(y=_y(), n_mel=40), TypeError, "n_mel"),
    ("melspec power", lambda: pa.feature.melspectrogram(y=_y(), power=-2), ValueError, "power"),
    ("mfcc dct", lambda: pa.feature.mfcc(y=_y(), dct_type=1), ValueError, "dct_type"),
    ("mfcc lifter", lambda: pa.feature.mfcc(y=_y(), lifter=-1), ValueError, "lifter"),
    ("mfcc n_mfcc", lambda: pa.feature.mfcc(y=_y(), n_mfcc=50, n_mels=40), ValueError, "n_mfcc=50"),
    (
        "whisper 3-D",
        lambda: pa.log_mel_spectrogram(
            gp.from_numpy(np.zeros((1, 1, 500), np.float32), device=DEVICE)
        ),
        ValueError,
        "audio must be",
    ),
    (
        "whisper short",
        lambda: pa.log_mel_spectrogram(gp.from_numpy(Y[:150], device=DEVICE), chunk_length=None),
        ValueError,
        "reflect",
    ),
    (
        "gl momentum",
        lambda: pa.griffinlim(gp.from_numpy(S, device=DEVICE), momentum=1.5),
        ValueError,
        "momentum",
    ),
    (
        "gl init",
        lambda: pa.griffinlim(gp.from_numpy(S, device=DEVICE), init="zeros"),
        ValueError,
        "init",
    ),
    (
        "resample res_type",
        lambda: pa.resample(_y(), orig_sr=16000, target_sr=8000, res_type="soxr_hq"),
        ValueError,
        "res_type",
    ),
    (
        "resample rate",
        lambda: pa.resample(_y(), orig_sr=16000.5, target_sr=8000),
        ValueError,
        "integer rates",
    ),
    (
        "resample axis",
        lambda: pa.resample(
            gp.from_numpy(np.zeros((2, 100), np.float32), device=DEVICE),
            orig_sr=2,
            target_sr=1,
            axis=0,
        ),
        ValueError,
        "axis",
    ),
]


@pytest.mark.parametrize(("what", "call", "exc", "match"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_before_any_op(
    what: str, call: Callable[[], Any], exc: type[Exception], match: str
) -> None:
    with gp.route(_NO_OP_ROUTE), pytest.raises(exc, match=match):
        call()
