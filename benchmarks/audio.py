"""pygpukit.audio against torch.stft / torchaudio and librosa, on a batch of speech-length rows.

    python benchmarks/audio.py [--json results.json] [--quick] [--rounds 10] [--cases stft mel]

A batch of 32 rows x 60 s at 16 kHz (float32, random noise plus a chirp). Cases: stft with
n_fft 400 / hop 160 and n_fft 2048 / hop 512 (periodic Hann, center, constant padding: librosa's
defaults), melspectrogram (power 2, Slaney mel bank: 400/160 with 80 mels and 2048/512 with
128), the Whisper log-mel front end (32 x 30 s, 80 mels) and cqt (84 bins from C1, 12 per
octave, hop 512, res_type 'polyphase') and hpss on the n_fft 2048 / hop 512 magnitude
spectrogram (librosa's defaults: median windows of 31 frames and 31 bins, power 2; the STFT is
made once, outside the timing; torch's peer gathers the reflected windows and takes
torch.median), griffinlim on that spectrogram of 32 x 10 s (32 iterations from zero phase,
reflect padding, momentum 0.99; torchaudio.transforms.GriffinLim with the same settings), and
the pitch trackers yin and pyin (frame_length 1024 / hop 256, fmin C2 to fmax
C7, 32 x 10 s; no torch peer; the error column compares f0 with unvoiced frames as 0). gp and
torch (torch.stft,
torchaudio.transforms.MelSpectrogram with the same settings; Whisper's formula written in torch;
for cqt nnAudio's CQT2010v2 when importable, else no GPU peer) run on one stream, timed with
CUDA events after warm-up, the L2 flushed before each round, median of --rounds
(pygpukit.benchmark.timing). librosa runs on the CPU on ONE row, timed with perf_counter
(median of 3), and its batch time is that times the row count: an extrapolation, flagged as
such in the table. Each case also reports gp's relative error against librosa
(float64) on that row. Without torch/torchaudio their columns stay empty; without librosa its
columns do; without a GPU the script says so and exits. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import pygpukit as gp
import pygpukit.audio as pa
from pygpukit.benchmark.report import emit

SR = 16000


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "stft", "mel", "whisper", "cqt", "hpss", "griffinlim", "yin" or "pyin"
    n_fft: int
    hop: int
    n_mels: int = 0
    seconds: int = 60


CASES = [
    Case("stft 400/160", "stft", 400, 160),
    Case("stft 2048/512", "stft", 2048, 512),
    Case("melspec 400/160 x80", "mel", 400, 160, 80),
    Case("melspec 2048/512 x128", "mel", 2048, 512, 128),
    Case("whisper log-mel x80", "whisper", 400, 160, 80, 30),
    Case("cqt 84 bins hop 512", "cqt", 0, 512),
    Case("hpss 2048/512 |S|", "hpss", 2048, 512),
    Case("griffinlim 2048/512 x32", "griffinlim", 2048, 512, 0, 10),
    Case("yin 1024/256", "yin", 1024, 256, 0, 10),
    Case("pyin 1024/256", "pyin", 1024, 256, 0, 10),
]
# librosa.note_to_hz('C2') and ('C7'): librosa's recommended pitch range
PITCH_RANGE = {"fmin": 65.40639132514966, "fmax": 2093.004522404789}


def _signal(rows: int, seconds: int, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(seconds * SR, dtype=np.float64) / SR
    chirp = 0.3 * np.sin(2 * np.pi * (100 + 30 * t) * t)
    return (chirp + 0.05 * rng.standard_normal((rows, t.size))).astype(np.float32)


def _gp_fn(c: Case, x: gp.GPUArray) -> Callable[[], Any]:
    if c.kind in ("yin", "pyin"):
        track = pa.yin if c.kind == "yin" else pa.pyin
        return lambda: track(x, sr=SR, frame_length=c.n_fft, hop_length=c.hop, **PITCH_RANGE)
    if c.kind == "stft":
        return lambda: pa.stft(x, n_fft=c.n_fft, hop_length=c.hop)
    if c.kind == "mel":
        return lambda: pa.feature.melspectrogram(
            y=x, sr=SR, n_fft=c.n_fft, hop_length=c.hop, n_mels=c.n_mels
        )
    if c.kind == "cqt":
        return lambda: pa.cqt(x, sr=SR, hop_length=c.hop)
    if c.kind == "hpss":
        mag = pa.magphase(pa.stft(x, n_fft=c.n_fft, hop_length=c.hop))[0]
        return lambda: pa.hpss(mag)[0]
    if c.kind == "griffinlim":
        mag = pa.magphase(pa.stft(x, n_fft=c.n_fft, hop_length=c.hop))[0]
        return lambda: pa.griffinlim(mag, **_griffinlim_args(c))
    return lambda: pa.log_mel_spectrogram(x, n_mels=c.n_mels)


def _griffinlim_args(c: Case) -> dict[str, Any]:
    """32 iterations from zero phase (torchaudio's rand_init draws on the device and librosa's
    on the host: a zero start compares the iterations alone), reflect padding as
    torchaudio's; momentum 0.99 (both defaults)."""
    return {"n_iter": 32, "hop_length": c.hop, "n_fft": c.n_fft, "init": None,
            "pad_mode": "reflect"}  # fmt: skip


def _librosa_fn(c: Case, row: np.ndarray) -> Callable[[], Any] | None:
    try:
        import librosa
    except ImportError:
        return None
    if c.kind in ("yin", "pyin"):
        track = librosa.yin if c.kind == "yin" else librosa.pyin
        return lambda: track(row, sr=SR, frame_length=c.n_fft, hop_length=c.hop, **PITCH_RANGE)
    if c.kind == "stft":
        return lambda: librosa.stft(row, n_fft=c.n_fft, hop_length=c.hop)
    if c.kind == "mel":
        return lambda: librosa.feature.melspectrogram(
            y=row, sr=SR, n_fft=c.n_fft, hop_length=c.hop, n_mels=c.n_mels
        )
    if c.kind == "cqt":
        return lambda: librosa.cqt(row, sr=SR, hop_length=c.hop, res_type="polyphase")
    if c.kind == "hpss":
        mag = np.abs(librosa.stft(row, n_fft=c.n_fft, hop_length=c.hop))
        return lambda: librosa.decompose.hpss(mag)
    if c.kind == "griffinlim":
        mag = np.abs(librosa.stft(row, n_fft=c.n_fft, hop_length=c.hop))
        return lambda: librosa.griffinlim(mag, **_griffinlim_args(c))
    return None  # Whisper's front end has no librosa call; HF's is the reference (tests)


def _reference(c: Case, row: np.ndarray) -> np.ndarray | None:
    try:
        import librosa
    except ImportError:
        return None
    r = row.astype(np.float64)
    if c.kind in ("yin", "pyin"):
        kw = {"sr": SR, "frame_length": c.n_fft, "hop_length": c.hop, **PITCH_RANGE}
        return librosa.yin(r, **kw) if c.kind == "yin" else np.nan_to_num(librosa.pyin(r, **kw)[0])
    if c.kind == "stft":
        return librosa.stft(r, n_fft=c.n_fft, hop_length=c.hop, dtype=np.complex128)
    if c.kind == "mel":
        return librosa.feature.melspectrogram(
            y=r, sr=SR, n_fft=c.n_fft, hop_length=c.hop, n_mels=c.n_mels, dtype=np.float64
        )
    if c.kind == "cqt":
        return np.asarray(librosa.cqt(r, sr=SR, hop_length=c.hop, res_type="polyphase"))
    if c.kind == "hpss":
        mag = np.abs(librosa.stft(r, n_fft=c.n_fft, hop_length=c.hop, dtype=np.complex128))
        return np.asarray(librosa.decompose.hpss(mag)[0])
    if c.kind == "griffinlim":
        mag = np.abs(librosa.stft(r, n_fft=c.n_fft, hop_length=c.hop, dtype=np.complex128))
        return np.asarray(librosa.griffinlim(mag, **_griffinlim_args(c)))
    return None


def _torch_fn(c: Case, timer: Any, x: gp.GPUArray) -> Callable[[], Any] | None:
    torch = timer.torch
    if torch is None or c.kind in ("yin", "pyin"):
        return None
    tx = torch.from_dlpack(x)
    if c.kind == "cqt":
        try:
            from nnAudio.features import CQT2010v2
        except ImportError:
            return None  # the GPU peer is nnAudio; without it only librosa (CPU) compares
        cq = CQT2010v2(
            sr=SR, hop_length=c.hop, n_bins=84, bins_per_octave=12, output_format="Complex",
            verbose=False,
        ).to(tx.device)  # fmt: skip
        return lambda: cq(tx)
    win = torch.hann_window(c.n_fft, periodic=True, device=tx.device)
    if c.kind == "hpss":
        return _torch_hpss(torch, tx, win, c)
    if c.kind == "griffinlim":
        try:
            import torchaudio
        except ImportError:
            return None
        spec = torch.stft(tx, c.n_fft, c.hop, window=win, return_complex=True).abs()
        gl = torchaudio.transforms.GriffinLim(
            n_fft=c.n_fft, n_iter=32, hop_length=c.hop, power=1.0, momentum=0.99,
            rand_init=False,
        ).to(tx.device)  # fmt: skip
        return lambda: gl(spec)
    if c.kind == "stft":
        return lambda: torch.stft(
            tx, c.n_fft, c.hop, window=win, center=True, pad_mode="constant", return_complex=True
        )
    mel_np = pa.filters.mel(sr=SR, n_fft=c.n_fft, n_mels=c.n_mels, device="cpu").to_numpy()
    if c.kind == "whisper":
        # OpenAI Whisper's log_mel_spectrogram (reflect padding, last frame dropped, per-row
        # maximum as HF's extractor takes it).
        filt = torch.from_numpy(mel_np).to(tx.device)

        def whisper() -> Any:
            spec = torch.stft(tx, c.n_fft, c.hop, window=win, return_complex=True)
            mag = spec[..., :-1].abs() ** 2
            log_spec = torch.clamp(filt @ mag, min=1e-10).log10()
            top = log_spec.amax(dim=(-2, -1), keepdim=True)
            return (torch.maximum(log_spec, top - 8.0) + 4.0) / 4.0

        return whisper
    try:
        import torchaudio
    except ImportError:
        return None
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=SR, n_fft=c.n_fft, hop_length=c.hop, n_mels=c.n_mels, power=2.0,
        center=True, pad_mode="constant", norm="slaney", mel_scale="slaney",
    ).to(tx.device)  # fmt: skip
    return lambda: mel(tx)


def _torch_hpss(torch: Any, tx: Any, win: Any, c: Case) -> Callable[[], Any]:
    """librosa.decompose.hpss's harmonic part in torch: the reflected windows gathered (no
    'symmetric' pad in torch), torch.median, the soft mask with power 2 and margin 1."""
    mag = torch.stft(tx, c.n_fft, c.hop, window=win, pad_mode="constant", return_complex=True)
    mag = mag.abs()

    def windows(n: int) -> Any:
        idx = np.pad(np.arange(n), 15, mode="symmetric")
        idx = np.lib.stride_tricks.sliding_window_view(idx, 31)
        return torch.from_numpy(np.ascontiguousarray(idx)).to(tx.device)

    t_idx, f_idx = windows(mag.shape[-1]), windows(mag.shape[-2])
    tiny = float(np.finfo(np.float32).tiny)

    def hpss() -> Any:
        harm = mag[..., t_idx].median(-1).values
        perc = mag.transpose(-1, -2)[..., f_idx].median(-1).values.transpose(-1, -2)
        z = torch.maximum(harm, perc)
        bad = z < tiny
        z = torch.where(bad, 1.0, z)
        m, r = (harm / z) ** 2, (perc / z) ** 2
        return mag * torch.where(bad, 0.5, m / (m + r))

    return hpss


def _cpu_seconds(fn: Callable[[], Any], repeats: int = 3) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_case(c: Case, timer: Any, rows: int, rounds: int, rng: np.random.Generator) -> dict:
    host = _signal(rows, c.seconds, rng)
    x = gp.from_numpy(host, device="cuda:0")
    fn = _gp_fn(c, x)
    out = fn()
    row: dict[str, Any] = {"case": c.name, "rows": rows, "seconds": c.seconds}
    ref = _reference(c, host[0])
    if ref is not None:
        got = np.nan_to_num((out[0] if isinstance(out, tuple) else out)[0].to_numpy())
        row["rel_error_vs_librosa"] = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    t = timer.median_seconds(fn, rounds=rounds)
    row["gp_ms"] = t * 1e3
    row["gp_audio_s_per_s"] = rows * c.seconds / t
    tfn = _torch_fn(c, timer, x)
    if tfn is not None:
        tt = timer.median_seconds(tfn, rounds=rounds)
        row["torch_ms"] = tt * 1e3
        row["speed_vs_torch"] = tt / t
    lfn = _librosa_fn(c, host[0])
    if lfn is not None:
        one = _cpu_seconds(lfn)
        row["librosa_cpu_ms_per_row"] = one * 1e3
        row["librosa_cpu_ms_batch_extrapolated"] = one * rows * 1e3
        row["speed_vs_librosa_extrapolated"] = one * rows / t
    return row


def _fmt(v: Any, spec: str, width: int) -> str:
    return "-".rjust(width) if v is None else format(v, spec)


def report(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'case':>22} {'rows':>4} {'gp ms':>9} {'audio s/s':>10} {'torch ms':>9} "
        f"{'vs torch':>8} {'librosa ms*':>12} {'vs librosa*':>11} {'rel err':>8}"
    )
    for r in rows:
        print(
            f"{r['case']:>22} {r['rows']:>4} {r['gp_ms']:>9.2f} {r['gp_audio_s_per_s']:>10.0f} "
            f"{_fmt(r.get('torch_ms'), '>9.2f', 9)} {_fmt(r.get('speed_vs_torch'), '>7.2f', 7)}x "
            f"{_fmt(r.get('librosa_cpu_ms_batch_extrapolated'), '>12.0f', 12)} "
            f"{_fmt(r.get('speed_vs_librosa_extrapolated'), '>10.0f', 10)}x "
            f"{_fmt(r.get('rel_error_vs_librosa'), '>8.1e', 8)}"
        )
    print("* librosa: one row timed on the CPU, times the row count (extrapolated, not measured)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=None, help="write the results here")
    p.add_argument("--quick", action="store_true", help="4 rows of 5 s (a smoke run)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--cases", nargs="+", default=None, help="only the cases whose names start so")
    args = p.parse_args(argv)
    if not gp.is_cuda_available():
        print("benchmarks/audio.py: no CUDA device; nothing to time")
        return 0
    from pygpukit.benchmark.timing import DeviceTimer

    timer = DeviceTimer(0)
    rng = np.random.default_rng(0)
    rows_n = 4 if args.quick else 32
    results = []
    for c in CASES:
        if args.cases is not None and not any(c.name.startswith(w) for w in args.cases):
            continue
        case = Case(c.name, c.kind, c.n_fft, c.hop, c.n_mels, 5 if args.quick else c.seconds)
        results.append(run_case(case, timer, rows_n, args.rounds, rng))
        r = results[-1]
        print(f"{c.name}: {r['gp_ms']:.2f} ms, vs torch {_fmt(r.get('speed_vs_torch'), '.2f', 0)}x",
              flush=True)  # fmt: skip
    report(results)
    props = gp.get_device_properties(0)
    result = {
        "device": str(props.get("name", "cuda:0")),
        "torch": None if timer.torch is None else str(timer.torch.__version__),
        "cases": results,
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
