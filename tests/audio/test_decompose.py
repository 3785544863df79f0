"""decompose.hpss and effects.hpss / harmonic / percussive against librosa 0.11.

Reference: librosa on the same input cast to float64 (complex128). The median filters select
values, so float32 error enters only through the magnitudes (|D| and librosa's hypot differ by
an ulp) and the soft mask's few divisions and products: observed 4e-8 to 1e-7 relative; the
bound is RTOL32 = 1e-5 (float64 input: RTOL64 = 1e-12). Hard masks (power=inf) are compared
with librosa's own float32 run, exactly: both compare the same float32 medians.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ops._helpers import DEVICE

import pygpukit as gp
import pygpukit.audio as pa

from ._signals import SPEECH, SYNTH, rel_err, speech, up, up32

librosa = pytest.importorskip("librosa")

RTOL32 = 1e-5
RTOL64 = 1e-12
_NO_OP_ROUTE = "*:native" if DEVICE == "cpu" else "*:cpu"


def _synth_spectrogram(name: str, seed: int) -> np.ndarray:
    y = SYNTH[name](16000, 1.0, np.random.default_rng(seed))
    return librosa.stft(y.astype(np.float32), n_fft=512, hop_length=128)


@pytest.mark.parametrize("name", sorted(SPEECH))
@pytest.mark.parametrize("mask", [False, True])
def test_speech_stft(name: str, mask: bool) -> None:
    """Defaults (kernel 31, power 2, margin 1) on a complex64 STFT: the parts keep its phase."""
    y, _ = speech(name)
    D = librosa.stft(y.astype(np.float32))
    want_h, want_p = librosa.decompose.hpss(D.astype(np.complex128), mask=mask)
    h, p = pa.decompose.hpss(up(D), mask=mask)
    assert h.dtype.name == p.dtype.name == ("float32" if mask else "complex64")
    assert rel_err(h, want_h) <= RTOL32 and rel_err(p, want_p) <= RTOL32


def test_float64_input() -> None:
    y, _ = speech("hello_16k")
    D = librosa.stft(y)
    want_h, want_p = librosa.decompose.hpss(D, kernel_size=(17, 9), margin=(1.5, 2.0))
    h, p = pa.hpss(up(D), kernel_size=(17, 9), margin=(1.5, 2.0))
    assert h.dtype.name == "complex128"
    assert rel_err(h, want_h) <= RTOL64 and rel_err(p, want_p) <= RTOL64


KWARGS: list[dict[str, Any]] = [
    {"kernel_size": (17, 31)},
    {"kernel_size": [31, 7], "power": 1.0},
    {"margin": (1.0, 3.0)},
    {"margin": [2.0, 1.0], "power": 0.5},
    {"kernel_size": 9, "margin": 4, "power": 3},
]


@pytest.mark.parametrize("name", sorted(SYNTH))
@pytest.mark.parametrize("kwargs", KWARGS, ids=[str(k) for k in KWARGS])
@pytest.mark.parametrize("mask", [False, True])
def test_synthetic_magnitudes(name: str, kwargs: dict[str, Any], mask: bool) -> None:
    """A real (magnitude) spectrogram: window pairs, margins (single, tuple, list; > 1 leaves a
    residual) and powers other than 2."""
    S = np.abs(_synth_spectrogram(name, len(name)))
    want_h, want_p = librosa.decompose.hpss(S.astype(np.float64), mask=mask, **kwargs)
    h, p = pa.hpss(up(S), mask=mask, **kwargs)
    assert h.dtype.name == "float32"
    assert rel_err(h, want_h) <= RTOL32 and rel_err(p, want_p) <= RTOL32
    if not mask and kwargs.get("margin", 1.0) != 1.0:
        resid = S - h.to_numpy() - p.to_numpy()
        assert resid.min() > -1e-5 * S.max() and resid.max() > 1e-3 * S.max()


@pytest.mark.parametrize("margin", [1.0, (1.0, 2.0)])
def test_hard_masks(margin: Any) -> None:
    """power=inf: bool masks X > X_ref, equal to librosa's float32 run."""
    D = _synth_spectrogram("clicks", 5)
    want_h, want_p = librosa.decompose.hpss(D, power=np.inf, mask=True, margin=margin)
    h, p = pa.hpss(up(D), power=np.inf, mask=True, margin=margin)
    assert h.dtype is gp.bool_ and p.dtype is gp.bool_
    np.testing.assert_array_equal(h.to_numpy(), want_h)
    np.testing.assert_array_equal(p.to_numpy(), want_p)
    want_h, want_p = librosa.decompose.hpss(D.astype(np.complex128), power=np.inf, margin=margin)
    h, p = pa.hpss(up(D), power=np.inf, margin=margin)
    assert rel_err(h, want_h) <= RTOL32 and rel_err(p, want_p) <= RTOL32


@pytest.mark.parametrize(("margin", "fill"), [(1.0, 0.5), ((1.0, 2.0), 0.0)])
def test_silence_splits_or_drops_the_mask(margin: Any, fill: float) -> None:
    """Where both medians are 0 (below finfo.tiny) the mask is 0.5 with margins 1, else 0."""
    S = np.abs(_synth_spectrogram("tones", 6)).astype(np.float32)
    S[:, 20:80] = 0.0
    S[100:, :] = 0.0
    want_h, want_p = librosa.decompose.hpss(S, mask=True, margin=margin)
    h, p = pa.hpss(up(S), mask=True, margin=margin)
    assert (h.to_numpy()[150:, 40:60] == fill).all() and (p.to_numpy()[150:, 40:60] == fill).all()
    assert rel_err(h, want_h) <= RTOL32 and rel_err(p, want_p) <= RTOL32


def test_channels_and_the_stft_view() -> None:
    """[channels, freq, frames] input: each channel as if alone (same bits); the frame-major
    view pa.stft returns is read in place."""
    rng = np.random.default_rng(7)
    ys = np.stack([SYNTH[k](8000, 0.8, rng) for k in ("chirp", "clicks")]).astype(np.float32)
    D = pa.stft(up(ys), n_fft=256, hop_length=64)
    assert not D.is_contiguous()
    h, p = pa.hpss(D, kernel_size=(15, 11))
    Dn = D.to_numpy()
    want_h, want_p = librosa.decompose.hpss(Dn.astype(np.complex128), kernel_size=(15, 11))
    assert rel_err(h, want_h) <= RTOL32 and rel_err(p, want_p) <= RTOL32
    for c in range(2):
        hc, pc = pa.hpss(up(Dn[c]), kernel_size=(15, 11))
        np.testing.assert_array_equal(h.to_numpy()[c], hc.to_numpy())
        np.testing.assert_array_equal(p.to_numpy()[c], pc.to_numpy())


def test_top_level_name() -> None:
    assert pa.hpss is pa.decompose.hpss


@pytest.mark.parametrize("name", ["fox_22k", "numbers_16k"])
def test_effects_on_speech(name: str) -> None:
    y, _ = speech(name)
    want_h, want_p = librosa.effects.hpss(y)
    h, p = pa.effects.hpss(up32(y))
    assert h.dtype is gp.float32 and h.shape == p.shape == y.shape
    assert rel_err(h, want_h) <= RTOL32 and rel_err(p, want_p) <= RTOL32


@pytest.mark.parametrize("fn", ["hpss", "harmonic", "percussive"])
def test_effects_keywords(fn: str) -> None:
    """STFT keywords and hpss's go where librosa sends them; harmonic / percussive are hpss's
    halves (same bits); float64 in, float64 out."""
    y = SYNTH["clicks"](16000, 0.7, np.random.default_rng(8))
    kw: dict[str, Any] = {"n_fft": 512, "hop_length": 160, "margin": (1.0, 3.0), "power": 1.0}
    want = getattr(librosa.effects, fn)(y, kernel_size=(17, 9), **kw)
    got = getattr(pa.effects, fn)(up(y), kernel_size=(17, 9), **kw)
    wants = want if fn == "hpss" else (want,)
    gots = got if fn == "hpss" else (got,)
    for g, w in zip(gots, wants, strict=True):
        assert g.dtype is gp.float64 and g.shape == y.shape
        assert rel_err(g, w) <= RTOL64
    both = pa.effects.hpss(up(y), kernel_size=(17, 9), **kw)
    if fn != "hpss":
        half = both[0] if fn == "harmonic" else both[1]
        np.testing.assert_array_equal(got.to_numpy(), half.to_numpy())


def _S() -> gp.GPUArray:
    return up32(np.abs(np.random.default_rng(2).standard_normal((33, 20))))


_Y = np.random.default_rng(3).standard_normal(4000).astype(np.float32)

BAD: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("list S", lambda: pa.hpss([[1.0, 2.0]]), TypeError, "S must be a GPUArray or a NumPy"),
    ("int S", lambda: pa.hpss(np.ones((4, 4), np.int32)), TypeError, "S must be a float32"),
    (
        "float16 S",
        lambda: pa.hpss(gp.from_numpy(np.ones((4, 4), np.float16), device=DEVICE)),
        TypeError,
        "got dtype float16",
    ),
    ("1-D S", lambda: pa.hpss(up32(np.ones(8))), ValueError, "at least 2 dims"),
    ("even kernel", lambda: pa.hpss(_S(), kernel_size=30), ValueError, "kernel_size must be odd"),
    (
        "even percussive kernel",
        lambda: pa.hpss(_S(), kernel_size=(31, 8)),
        ValueError,
        "kernel_size[1] must be odd",
    ),
    ("kernel 0", lambda: pa.hpss(_S(), kernel_size=0), ValueError, "kernel_size must be an odd"),
    ("kernel 301", lambda: pa.hpss(_S(), kernel_size=301), ValueError, "[1, 255]"),
    ("kernel float", lambda: pa.hpss(_S(), kernel_size=3.0), TypeError, "kernel_size must be"),
    ("kernel triple", lambda: pa.hpss(_S(), kernel_size=(3, 3, 3)), ValueError, "pair"),
    ("margin < 1", lambda: pa.hpss(_S(), margin=0.5), ValueError, "margin must be a finite"),
    (
        "margin[1] < 1",
        lambda: pa.hpss(_S(), margin=(1.0, 0.9)),
        ValueError,
        "margin[1] must be a finite number >= 1.0",
    ),
    ("margin str", lambda: pa.hpss(_S(), margin="1"), TypeError, "margin must be a number"),
    ("power 0", lambda: pa.hpss(_S(), power=0), ValueError, "power must be > 0"),
    ("power nan", lambda: pa.hpss(_S(), power=float("nan")), ValueError, "power must be > 0"),
    ("power None", lambda: pa.hpss(_S(), power=None), TypeError, "power must be a number"),
    ("mask int", lambda: pa.hpss(_S(), mask=1), TypeError, "mask must be a bool"),
    (
        "effects mask",
        lambda: pa.effects.hpss(_Y, n_fft=256, mask=True),
        ValueError,
        "mask=True gives masks",
    ),
    (
        "effects kernel",
        lambda: pa.effects.harmonic(_Y, n_fft=256, kernel_size=4),
        ValueError,
        "harmonic: kernel_size must be odd",
    ),
    (
        "effects n_fft",
        lambda: pa.effects.percussive(_Y, n_fft=0),
        ValueError,
        "percussive: n_fft must be > 0",
    ),
    (
        "effects pad_mode",
        lambda: pa.effects.hpss(_Y, n_fft=256, pad_mode="wrap"),
        ValueError,
        "pad_mode must be one of",
    ),
]


@pytest.mark.parametrize(("case", "call", "exc", "match"), BAD, ids=[c[0] for c in BAD])
def test_bad_input_raises_before_any_op(
    case: str, call: Callable[[], Any], exc: type[Exception], match: str
) -> None:
    """Under a route no backend can serve, a call that got as far as an op would raise a
    RouteError instead of the expected error."""
    with gp.route(_NO_OP_ROUTE), pytest.raises(exc, match=re.escape(match)):
        call()


def test_the_no_op_route_does_stop_a_valid_call() -> None:
    with gp.route(_NO_OP_ROUTE), pytest.raises(gp.RouteError):
        pa.hpss(_S())
