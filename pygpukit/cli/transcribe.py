"""``python -m pygpukit transcribe FILE --model DIR``: speech to text with a Whisper checkpoint
(an HF directory: config.json, model.safetensors, tokenizer.json, generation_config.json).

Prints the text; with --timestamps, one line per segment, ``[start --> end] text``. Audio longer
than 30 s is transcribed window by window (timestamps on). Runs on the GPU when there is one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pygpukit.cli import _types as T


def add_parser(sub: Any) -> None:
    p = sub.add_parser("transcribe", help="speech to text with Whisper", description=__doc__)
    p.add_argument("file", help="audio file (WAV, FLAC, OGG, ...; resampled to 16 kHz)")
    p.add_argument("--model", required=True, help="Whisper model directory (HF layout)")
    p.add_argument("--language", help="language code, e.g. en (default: detected)")
    p.add_argument("--task", choices=("transcribe", "translate"), default=None)
    p.add_argument("--timestamps", action="store_true", help="print segments with times")
    p.add_argument("--device", help="cpu or cuda[:N] (default: the GPU when present)")
    p.add_argument(
        "--dtype",
        choices=("float32", "float16", "bfloat16"),
        help="default: float32 on CPU, float16 on GPU",
    )
    p.add_argument("--max-new-tokens", type=T.positive_int, default=None)
    p.add_argument(
        "--temperature-fallback",
        action="store_true",
        help="retry a window at temperatures 0.2 .. 1.0 when its output repeats itself "
        "(compression ratio > 2.4) or is unlikely (mean log-probability < -1)",
    )
    p.add_argument(
        "--graph",
        action="store_true",
        help="replay the decoder step from a CUDA graph (GPU only)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pygpukit.models.whisper import load_whisper, transcribe

    audio = Path(args.file)
    if not audio.is_file():
        raise FileNotFoundError(f"{audio}: no such audio file")
    if args.graph and (args.device or "").startswith("cpu"):
        raise ValueError("--graph replays the decoder step from a CUDA graph: it needs a GPU")
    model = load_whisper(args.model, dtype=args.dtype, device=args.device)
    kw: dict[str, Any] = {}
    if args.temperature_fallback:
        kw = {
            "temperature": (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
            "compression_ratio_threshold": 2.4,
            "logprob_threshold": -1.0,
        }
    result = transcribe(
        model,
        audio,
        language=args.language,
        task=args.task,
        timestamps=args.timestamps,
        max_new_tokens=args.max_new_tokens,
        graph=args.graph,
        **kw,
    )
    out = sys.stdout
    print(result.text.strip(), file=out)
    if args.timestamps:
        for s in result.segments:
            print(f"[{s.start:7.2f} --> {s.end:7.2f}] {s.text.strip()}", file=out)
    if result.language:
        print(f"language: {result.language}", file=sys.stderr)
    return 0
