"""Checkpoint reading: the 0.2.x llm names, sharded indexes, dtype conversion, tied embeddings,
GGUF tensors (renaming, q/k un-permutation, dequantization against the gguf package)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pygpukit import llm
from pygpukit.models import load_model
from pygpukit.models.gguf_io import dequantize

from ._util import ARCHS, FIXTURES, golden, write_tiny_gguf

SPECS = {
    "llama": llm.LLAMA_SPEC,
    "qwen2": llm.QWEN2_SPEC,
    "qwen3": llm.QWEN3_SPEC,
    "mixtral": llm.MIXTRAL_SPEC,
    "qwen3_moe": llm.QWEN3_MOE_SPEC,
    "gpt2": llm.GPT2_SPEC,
}


def test_safetensors_file_api() -> None:
    path = FIXTURES / "llama" / "model.safetensors"
    st = llm.SafeTensorsFile(path)
    assert st.num_tensors == len(st.tensor_names) == 21
    assert st.file_size == path.stat().st_size
    assert "model.embed_tokens.weight" in st.tensor_names
    dt, shape = st.tensor_info("model.embed_tokens.weight")
    assert dt == np.float16 and shape == (300, 64)
    assert st.tensor("model.norm.weight").shape == (64,)
    with pytest.raises(KeyError, match="no tensor named"):
        st.tensor("nope")


def test_sharded_index() -> None:
    st = llm.load_safetensors(FIXTURES / "qwen2" / "model.safetensors.index.json")
    assert isinstance(st, llm.ShardedSafeTensors) and len(st.shards) == 2
    assert st.num_tensors == sum(f.num_tensors for f in st.shards.values())
    assert st.file_size == sum(f.file_size for f in st.shards.values())
    # A directory resolves to its index too.
    assert llm.load_safetensors(FIXTURES / "qwen2").num_tensors == st.num_tensors


@pytest.mark.parametrize("arch", ARCHS)
def test_detect_model_spec(arch: str) -> None:
    names = llm.load_safetensors(FIXTURES / arch).tensor_names
    assert llm.detect_model_spec(names) is SPECS[arch]


def test_load_model_from_safetensors_0_2_form() -> None:
    model = llm.load_model_from_safetensors(
        str(FIXTURES / "llama"), dtype="float16", spec=llm.LLAMA_SPEC
    )
    assert isinstance(model, llm.CausalTransformerModel)
    assert model.dtype.name == "float16"
    assert model.weights.layers[0].wqkv.dtype.name == "float16"


def test_dtype_conversion_at_load() -> None:
    ref = load_model(FIXTURES / "qwen3", dtype="float32", device="cpu")
    prompt = golden("qwen3")["prompts"][0]
    want = ref.forward([prompt], ref.new_cache(1, 16)).to_numpy()[0, -1]
    for dtype, tol in (("float16", 2e-2), ("bfloat16", 1e-1)):
        m = load_model(FIXTURES / "qwen3", dtype=dtype, device="cpu")
        assert m.weights.layers[0].wqkv.dtype.name == dtype
        assert m.cache is None
        got = m.forward([prompt], m.new_cache(1, 16)).to_numpy()[0, -1].astype(np.float32)
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < tol, f"{dtype}: {err}"
        assert int(np.argmax(got)) in np.argsort(want)[-5:]


def test_default_dtype_is_float32_on_cpu() -> None:
    assert load_model(FIXTURES / "gpt2", device="cpu").dtype.name == "float32"


def test_tied_and_untied_embeddings() -> None:
    tied = load_model(FIXTURES / "qwen2", device="cpu")
    assert tied.weights.lm_head is tied.weights.embed_tokens
    untied = load_model(FIXTURES / "llama", device="cpu")
    assert untied.weights.lm_head is not untied.weights.embed_tokens


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0", "Q4_1"])
def test_dequantize_matches_gguf_reference(qtype: str) -> None:
    import gguf

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((7, 96)) * rng.uniform(0.1, 3, size=(7, 1))).astype(np.float32)
    qt = getattr(gguf.GGMLQuantizationType, qtype)
    q = gguf.quants.quantize(x, qt)
    want = gguf.quants.dequantize(q, qt)
    got = dequantize(q, qtype, (7, 96))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert np.abs(got - x).max() < (0.02 if qtype == "Q8_0" else 0.5) * np.abs(x).max()


def test_dequantize_bf16() -> None:
    x = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)
    got = dequantize(x.view(np.uint8), "BF16", (2, 3))
    np.testing.assert_array_equal(got.astype(np.float32), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0"])
def test_gguf_round_trip_of_the_llama_fixture(tmp_path: Path, qtype: str) -> None:
    """The llama fixture written as llama.cpp would (q/k permuted, llama3 scaling as
    rope_freqs.weight, byte-level vocabulary) loads back to the same model."""
    path = tmp_path / f"tiny-{qtype}.gguf"
    write_tiny_gguf(path, qtype)
    ref = load_model(FIXTURES / "llama", device="cpu")
    m = load_model(path, device="cpu")
    assert m.config.num_kv_heads == 2 and m.config.spec is llm.LLAMA_SPEC
    g = golden("llama")
    prompt = g["prompts"][0]
    a = m.forward([prompt], m.new_cache(1, 16), all_logits=True).to_numpy()
    b = ref.forward([prompt], ref.new_cache(1, 16), all_logits=True).to_numpy()
    err = np.abs(a - b).max() / np.abs(b).max()
    if qtype == "Q8_0":
        assert err < 0.1
        return
    assert err < 1e-5
    out = m.generate(prompt, 32, temperature=0, stop_token_ids=())
    assert out[len(prompt) :] == g["greedy"][0]
    tok = m.tokenizer
    assert tok is not None
    assert tok.encode("hi<|im_end|>") == [104, 105, 257] and 257 in tok.stop_ids


# Where each k-quant block keeps its fp16 scales (ggml-common.h block_q*_K): random bytes
# everywhere else are valid quants and sub-block scales.
_KQ_HALVES = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,)}


def _random_blocks(qtype: str, rows: int, cols: int, seed: int) -> np.ndarray:
    import gguf

    qt = gguf.GGMLQuantizationType[qtype]
    rng = np.random.default_rng(seed)
    if qtype in _KQ_HALVES:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        raw = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
        for at in _KQ_HALVES[qtype]:
            halves = rng.uniform(0.001, 0.05, (rows, cols // block)).astype(np.float16)
            raw[:, :, at : at + 2] = halves[..., None].view(np.uint8)
        return raw.reshape(rows, -1)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    return np.asarray(gguf.quants.quantize(x, qt))


@pytest.mark.parametrize("qtype", ["Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"])
def test_gguf_quantized_tensors_load_as_the_reference_dequantizes(
    tmp_path: Path, qtype: str
) -> None:
    """A llama.cpp-style file with q (permuted by llama.cpp), down and a Mixtral expert stack in
    ``qtype``: each HF-named tensor is the gguf package's dequantization, q un-permuted."""
    import gguf

    from pygpukit.models.gguf_io import GGUFSource

    qt = gguf.GGMLQuantizationType[qtype]
    cols = 512
    q_raw = _random_blocks(qtype, 8, cols, 1)
    down_raw = _random_blocks(qtype, 6, cols, 2)
    exp_raw = np.stack([_random_blocks(qtype, 4, cols, 3 + e) for e in range(3)])
    path = tmp_path / f"{qtype}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_head_count(2)
    w.add_expert_count(3)
    w.add_tensor("blk.0.attn_q.weight", q_raw, raw_dtype=qt)
    w.add_tensor("blk.0.ffn_down.weight", down_raw, raw_dtype=qt)
    w.add_tensor("blk.0.ffn_down_exps.weight", exp_raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    src = GGUFSource(path)
    ref = {n: np.asarray(gguf.quants.dequantize(r, qt), np.float32)
           for n, r in (("q", q_raw), ("down", down_raw), ("exp", exp_raw))}  # fmt: skip
    assert np.isfinite(ref["q"]).all() and ref["q"].shape == (8, cols)
    np.testing.assert_array_equal(src.tensor("model.layers.0.mlp.down_proj.weight"), ref["down"])
    # llama.cpp's permute undone: rows of each head back in rotate_half order.
    q = src.tensor("model.layers.0.self_attn.q_proj.weight")
    np.testing.assert_array_equal(
        q, ref["q"].reshape(2, 2, 2, cols).swapaxes(1, 2).reshape(8, cols)
    )
    for e in range(3):
        got = src.tensor(f"model.layers.0.block_sparse_moe.experts.{e}.w2.weight")
        np.testing.assert_array_equal(got, ref["exp"][e])
