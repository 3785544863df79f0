"""Whisper large-v3 shapes (d_model 1280, 32 + 32 layers, 20 heads, 128 mels, vocab 51866),
random fp16 weights, 30 s of audio, 128 decoded tokens (forced: end-of-text does not stop):
wall time and real-time factor of pygpukit (eager and CUDA-graph decoder step) against HF
transformers (eager, and its static cache when it runs) at batch 1, and batch-16 throughput.

With torch + transformers, HF builds the model on the GPU and pygpukit loads its state dict
(the same weights); without them the weights are made on the host and the HF rows are skipped.

    python benchmarks/whisper.py [--tokens 128] [--batch 16] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

CONFIG: dict[str, Any] = dict(
    model_type="whisper", vocab_size=51866, num_mel_bins=128, d_model=1280, encoder_layers=32,
    encoder_attention_heads=20, decoder_layers=32, decoder_attention_heads=20,
    encoder_ffn_dim=5120, decoder_ffn_dim=5120, max_source_positions=1500,
    max_target_positions=448, activation_function="gelu", decoder_start_token_id=50258,
    eos_token_id=50257, pad_token_id=50257, bos_token_id=50257,
)  # fmt: skip
# <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|> of large-v3's vocabulary.
PROMPT = [50258, 50259, 50360, 50364]
AUDIO_SECONDS = 30.0


class _Fp16Source:
    """TensorSource over a torch state dict or over host-made random tensors (fp16)."""

    def __init__(self, tensors: dict[str, Any]) -> None:
        self.tensors = tensors

    @property
    def tensor_names(self) -> list[str]:
        return list(self.tensors)

    def tensor(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        if isinstance(t, tuple):  # a shape: draw it now (one tensor in host memory at a time)
            rng = np.random.default_rng(abs(hash(name)) % 2**32)
            x = rng.standard_normal(t, dtype=np.float32) * (0.02 if len(t) > 1 else 0.1)
            return (x + (1.0 if name.endswith("norm.weight") else 0.0)).astype(np.float16)
        out: np.ndarray = t.detach().cpu().numpy()
        return out


def _shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    d, out = c["d_model"], {}
    for side, n, ffn in (
        ("encoder", c["encoder_layers"], c["encoder_ffn_dim"]),
        ("decoder", c["decoder_layers"], c["decoder_ffn_dim"]),
    ):
        for i in range(n):
            p = f"model.{side}.layers.{i}."
            blocks = ["self_attn"] + (["encoder_attn"] if side == "decoder" else [])
            for a in blocks:
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    out[f"{p}{a}.{proj}.weight"] = (d, d)
                    if proj != "k_proj":
                        out[f"{p}{a}.{proj}.bias"] = (d,)
                norm = "self_attn_layer_norm" if a == "self_attn" else "encoder_attn_layer_norm"
                out[f"{p}{norm}.weight"] = out[f"{p}{norm}.bias"] = (d,)
            out |= {
                f"{p}fc1.weight": (ffn, d),
                f"{p}fc1.bias": (ffn,),
                f"{p}fc2.weight": (d, ffn),
                f"{p}fc2.bias": (d,),
                f"{p}final_layer_norm.weight": (d,),
                f"{p}final_layer_norm.bias": (d,),
            }
        out[f"model.{side}.layer_norm.weight"] = out[f"model.{side}.layer_norm.bias"] = (d,)
    out |= {
        "model.encoder.conv1.weight": (d, c["num_mel_bins"], 3),
        "model.encoder.conv1.bias": (d,),
        "model.encoder.conv2.weight": (d, d, 3),
        "model.encoder.conv2.bias": (d,),
        "model.encoder.embed_positions.weight": (c["max_source_positions"], d),
        "model.decoder.embed_tokens.weight": (c["vocab_size"], d),
        "model.decoder.embed_positions.weight": (c["max_target_positions"], d),
    }
    return out  # fmt: skip


def _ours(tensors: dict[str, Any]) -> Any:
    from pygpukit.models.whisper.config import WhisperGenerationConfig, whisper_config_from_dict
    from pygpukit.models.whisper.loader import whisper_from_source

    config = whisper_config_from_dict(CONFIG, "large-v3-shaped")
    gen = WhisperGenerationConfig(50258, 50257, 50257, no_timestamps_token_id=50364)
    return whisper_from_source(_Fp16Source(tensors), config, gen, "float16", "cuda", None, "rand")


def _time(fn: Callable[[], Any], sync: Callable[[], None], repeat: int = 3) -> float:
    fn()  # warm-up (compiles kernels, captures graphs)
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def _ours_run(model: Any, audio: np.ndarray, tokens: int, graph: bool) -> Callable[[], Any]:
    import pygpukit as gp
    from pygpukit.audio.whisper_features import log_mel_spectrogram
    from pygpukit.models.whisper import LogitRules, decode_window

    b = audio.shape[0]
    state = model.new_state(b)
    rules = LogitRules(model.generation, model.config.vocab_size, b, model.device, False)
    step = None
    if graph:
        from pygpukit.models.whisper.graph import WhisperStepGraph

        step = WhisperStepGraph(model, state, rules)
    dev_audio = gp.from_numpy(audio, device=model.device)

    def run() -> Any:
        feats = log_mel_spectrogram(dev_audio, model.config.num_mel_bins)
        model.set_encoder_output(state, model.encode(feats))
        return decode_window(model, state, PROMPT, rules, tokens, stop_at_eos=False, graph=step)

    return run


def _hf_run(hf: Any, feats: Any, tokens: int, static: bool) -> Callable[[], Any]:
    import torch
    from transformers import GenerationMixin

    prompt = torch.tensor([PROMPT] * feats.shape[0], device=feats.device)
    kw: dict[str, Any] = {"cache_implementation": "static"} if static else {}

    def run() -> Any:
        with torch.no_grad():
            # GenerationMixin.generate directly: Whisper's wrapper adds the long-form machinery,
            # which would not force exactly ``tokens`` tokens.
            return GenerationMixin.generate(
                hf, input_features=feats, decoder_input_ids=prompt, max_new_tokens=tokens,
                min_new_tokens=tokens, do_sample=False, **kw,
            )  # fmt: skip

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--json", default=None, help="write the results here (default: $OUT)")
    args = ap.parse_args()
    import pygpukit as gp

    if not gp.is_cuda_available():
        print("whisper benchmark: no CUDA device, skipped")
        return
    has_hf = all(importlib.util.find_spec(m) for m in ("torch", "transformers"))
    hf = None
    if has_hf:
        import torch
        import transformers

        torch.manual_seed(0)
        with torch.device("cuda"):
            hf_cfg = transformers.WhisperConfig(**CONFIG)
            hf = transformers.WhisperForConditionalGeneration(hf_cfg).to(torch.float16).eval()
        model = _ours(dict(hf.state_dict()))
    else:
        print("torch/transformers not installed: HF rows skipped, host-made random weights")
        model = _ours(dict(_shapes(CONFIG)))
    rng = np.random.default_rng(0)
    rows: list[tuple[str, int, float]] = []
    for b in (1, args.batch):
        audio = (rng.standard_normal((b, int(16000 * AUDIO_SECONDS))) * 0.1).astype(np.float32)
        for graph in (False, True):
            try:
                t = _time(_ours_run(model, audio, args.tokens, graph), gp.synchronize)
                rows.append((f"pygpukit {'graph' if graph else 'eager'}", b, t))
                print(f"{rows[-1][0]} batch {b}: {t:.3f} s", flush=True)
            except Exception as exc:  # report and go on: the other rows still mean something
                print(f"pygpukit graph={graph} batch {b}: {type(exc).__name__}: {exc}")
        if hf is not None:
            import torch

            fe = transformers.WhisperFeatureExtractor(feature_size=CONFIG["num_mel_bins"])
            feats = fe(list(audio), sampling_rate=16000, return_tensors="pt").input_features
            feats = feats.to("cuda", torch.float16)
            for static in (False, True):
                try:
                    t = _time(_hf_run(hf, feats, args.tokens, static), torch.cuda.synchronize)
                    rows.append((f"HF {'static cache' if static else 'eager'}", b, t))
                    print(f"{rows[-1][0]} batch {b}: {t:.3f} s", flush=True)
                except Exception as exc:
                    print(f"HF static={static} batch {b}: {type(exc).__name__}: {exc}")
    name = gp.device("cuda:0").properties["name"]
    head = f"Whisper large-v3 shapes, fp16, {AUDIO_SECONDS:.0f} s audio, {args.tokens} tokens"
    print(f"\n{head}, {name}")
    print(f"{'what':<22}{'batch':>6}{'wall s':>10}{'RTF':>9}{'tok/s':>10}")
    for what, b, t in rows:
        rtf = t / (AUDIO_SECONDS * b)
        print(f"{what:<22}{b:>6}{t:>10.3f}{rtf:>9.4f}{b * args.tokens / t:>10.1f}")
    dest = args.json or (
        os.path.join(os.environ["OUT"], "whisper.json") if "OUT" in os.environ else None
    )
    if dest:
        with open(dest, "w") as f:
            json.dump([{"what": w, "batch": b, "seconds": t} for w, b, t in rows], f, indent=1)


if __name__ == "__main__":
    main()
