"""HF parity on the GPU (marker ``gpu``; skipped without a CUDA device).

float32 on CUDA: the same greedy tokens as HF. bfloat16 on CUDA: at the first divergence from
HF's greedy tokens, each side's token is among the other's top 5 (the float32 CPU model, which
matches HF exactly, stands in for HF's logits at that step). Until the GEMM and attention
kernels are routed for CUDA this skips, naming the op that has no CUDA backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import pygpukit as gp
import pygpukit.models.decode_forms as forms
from pygpukit.models import load_model
from pygpukit.models.decode_forms import qkv_rope_write

from ._util import ARCHS, FIXTURES, golden

pytestmark = pytest.mark.gpu


def _need_gpu_backends() -> None:
    x = gp.zeros((2, 4), "float32", "cuda")
    for op, args in (("linear", (x, x)), ("sdpa", (x[None, None], x[None, None], x[None, None]))):
        why = gp.routing.explain(op, *args)
        if why.backend is None:
            pytest.skip(f"no CUDA backend for {op} yet:\n{why}")


def _top5(model, prefix: list[int]) -> list[int]:  # type: ignore[no-untyped-def]
    logits = model.forward([prefix], model.new_cache(1, len(prefix))).to_numpy()
    return list(np.argsort(logits.astype(np.float32)[0, -1])[-5:])


@pytest.mark.parametrize("arch", ARCHS)
def test_float32_greedy_on_cuda(arch: str) -> None:
    _need_gpu_backends()
    g = golden(arch)
    model = load_model(FIXTURES / arch, dtype="float32", device="cuda")
    for prompt, want in zip(g["prompts"], g["greedy"], strict=True):
        out = model.generate(prompt, 32, temperature=0, stop_token_ids=())
        assert out[len(prompt) :] == want


@pytest.mark.parametrize("arch", ARCHS)
def test_bfloat16_first_divergence_within_top5(arch: str) -> None:
    _need_gpu_backends()
    g = golden(arch)
    gpu = load_model(FIXTURES / arch, dtype="bfloat16", device="cuda")
    ref = load_model(FIXTURES / arch, dtype="float32", device="cpu")
    for prompt, want in zip(g["prompts"], g["greedy"], strict=True):
        got = gpu.generate(prompt, 32, temperature=0, stop_token_ids=())[len(prompt) :]
        i = next((j for j, (a, b) in enumerate(zip(got, want, strict=True)) if a != b), None)
        if i is None:
            continue
        prefix = prompt + want[:i]
        assert got[i] in _top5(ref, prefix), f"{arch}: bf16 token {got[i]} at {i}"
        assert want[i] in _top5(gpu, prefix), f"{arch}: HF token {want[i]} at {i}"


@pytest.mark.parametrize("arch", ARCHS)
def test_graph_decode_replays_the_eager_step(arch: str) -> None:
    """DecodeM1Graph's replayed steps give DecodeM1's logits bit for bit (same kernels, inputs
    read from the device, the fused rmsnorm_linear GEMVs included), including a step back to
    an earlier position. The MoE families
    (Mixtral, Qwen3-MoE) route on the device, so their steps are captured like the dense ones."""
    from pygpukit import llm

    _need_gpu_backends()
    model = load_model(FIXTURES / arch, dtype="bfloat16", device="cuda")
    prompt = golden(arch)["prompts"][0]
    graph = llm.DecodeM1Graph().bind(model)
    graph.init_graph(max_seq_len=len(prompt) + 24)
    eager = llm.DecodeM1().bind(model)
    assert graph.has_graph(), graph.graph_reason
    want = eager.generate(prompt, 16, temperature=0, stop_token_ids=())
    assert graph.generate(prompt, 16, temperature=0, stop_token_ids=()) == want
    assert graph.has_graph()  # generate kept the init_graph cache
    lg = graph.prefill(prompt, max_seq_len=len(prompt) + 24).to_numpy()
    le = eager.prefill(prompt, max_seq_len=len(prompt) + 24).to_numpy()
    np.testing.assert_array_equal(lg, le)
    steps = [(t, len(prompt) + i) for i, t in enumerate(want[:8])] + [(want[3], len(prompt) + 2)]
    for token, position in steps:
        a = graph.step(token, position).to_numpy()
        b = eager.step(token, position).to_numpy()
        np.testing.assert_array_equal(a, b, err_msg=f"{arch}: position {position}")
    # The RMSNorm families read the norm into the qkv and lm_head GEMVs at decode, and Qwen3's
    # q/k norms into kv_cache_write: one rmsnorm launch a layer is left (before the MLP).
    # The cache write: kv_cache_write's launch (decode_forms.APPEND_ATTENTION off: the write and
    # attention in two launches), or with decode_forms.QKV_ROPE_WRITE on, for a model without
    # head norms, the qkv GEMV's (rmsnorm_qkv_rope_write).
    gp.routing.reset_stats()
    eager.step(want[0], len(prompt))
    counts = {op: sum(c.values()) for op, c in gp.routing.stats().items()}
    n = len(model.weights.layers)
    fused = sum(qkv_rope_write(model.spec, lw) for lw in model.weights.layers)
    takes = forms.QKV_ROPE_WRITE and arch in ("llama", "qwen2", "mixtral")
    assert fused == (n if takes else 0), (fused, n)
    if model.spec.norm == "rmsnorm":
        assert counts.get("rmsnorm_linear") == n - fused + 1, counts
        assert counts.get("rmsnorm") == n, counts
    assert counts.get("rmsnorm_qkv_rope_write", 0) == fused, counts
    assert counts.get("kv_cache_write", 0) == n - fused and counts.get("sdpa_decode") == n, counts
    assert "sdpa_decode_append" not in counts, counts
    graph.prefill(prompt, max_seq_len=len(prompt) + 64)  # a larger cache drops the graph
    assert not graph.has_graph() and "init_graph again" in graph.graph_reason


@pytest.mark.parametrize("arch", ARCHS)
def test_one_launch_write_and_attention_equals_two(arch: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The decode step with the cache write and attention in one launch (sdpa_decode_append)
    gives the logits of the two launches (kv_cache_write, sdpa_decode): the same bits in
    bfloat16 where no head norm runs (the same rotation expressions, the same attention
    kernel); with Qwen3's head norms (whose sum of squares runs in another order) in float32
    within 1e-4, and the same greedy tokens."""
    import pygpukit.models.decode_forms as tr

    _need_gpu_backends()
    norms = arch in ("qwen3", "qwen3_moe")
    model = load_model(FIXTURES / arch, dtype="float32" if norms else "bfloat16", device="cuda")
    prompt = golden(arch)["prompts"][0]
    res = {}
    for on in (True, False):
        monkeypatch.setattr(tr, "APPEND_ATTENTION", on)
        cache = model.new_cache(1, len(prompt) + 24)
        model.forward([prompt], cache)
        steps = [model.forward([[t]], cache).to_numpy() for t in prompt[:8]]
        tokens = model.generate(prompt, 16, temperature=0, stop_token_ids=(), graph=False)
        res[on] = (np.stack(steps), tokens)
    assert res[True][1] == res[False][1]
    if norms:
        np.testing.assert_allclose(res[True][0], res[False][0], rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_array_equal(res[True][0], res[False][0])


@pytest.mark.parametrize("arch", ARCHS)
def test_qkv_rope_write_equals_two_calls(arch: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The decode step with the qkv product, RoPE and the cache write in one launch
    (gp.rmsnorm_qkv_rope_write, decode_forms.QKV_ROPE_WRITE) gives the bits of
    gp.rmsnorm_linear then gp.kv_cache_write in bfloat16, step by step and in greedy tokens,
    eager and from a graph."""
    _need_gpu_backends()
    model = load_model(FIXTURES / arch, dtype="bfloat16", device="cuda")
    prompt = golden(arch)["prompts"][0]
    res = {}
    for on in (True, False):
        monkeypatch.setattr(forms, "QKV_ROPE_WRITE", on)
        model.drop_step_graphs()
        cache = model.new_cache(1, len(prompt) + 24)
        model.forward([prompt], cache)
        steps = [model.forward([[t]], cache).to_numpy() for t in prompt[:8]]
        kw = {"temperature": 0, "stop_token_ids": ()}
        res[on] = (np.stack(steps), model.generate(prompt, 16, graph=False, **kw),
                   model.generate(prompt, 16, graph=True, **kw))  # fmt: skip
    np.testing.assert_array_equal(res[True][0], res[False][0])
    assert res[True][1] == res[False][1] == res[True][2] == res[False][2]


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_graph_decode_replays_the_eager_step(arch: str) -> None:
    """A step of three rows at different lengths replayed from a graph gives the eager batched
    forward's logits bit for bit; generate() decodes batches from it by default and gives the
    eager tokens; Mixtral cannot be captured: graph=True raises, the default runs eagerly."""
    from pygpukit.models.generation import GenerationStats, _prefill
    from pygpukit.models.step_graph import StepGraph

    _need_gpu_backends()
    model = load_model(FIXTURES / arch, dtype="bfloat16", device="cuda")
    g = golden(arch)
    prompts = [g["prompts"][0], g["prompts"][1][:5], g["prompts"][0][:2]]
    n = max(len(p) for p in prompts) + 12
    eager, replayed = model.new_cache(3, n), model.new_cache(3, n)
    sg = StepGraph(model, replayed, rows=3)  # before the prefill: its warm-up writes slot 0
    a = [lg.to_numpy() for lg in _prefill(model, eager, prompts)]
    b = [lg.to_numpy() for lg in _prefill(model, replayed, prompts)]
    np.testing.assert_array_equal(np.stack(a), np.stack(b))
    tokens = [int(np.argmax(x.astype(np.float32))) for x in a]
    for i in range(10):
        la = model.forward([[t] for t in tokens], eager).to_numpy()
        lb = sg.step(tokens).to_numpy()
        np.testing.assert_array_equal(la, lb, err_msg=f"{arch}: step {i}")
        tokens = [int(t) for t in np.argmax(la[:, -1].astype(np.float32), axis=-1)]
    assert list(replayed.lengths) == list(eager.lengths)
    with pytest.raises(ValueError, match="outside"):
        sg.step([0, model.config.vocab_size, 0])
    with pytest.raises(ValueError, match=r"3 row\(s\) of 1 token id"):
        sg.step([0, 1])
    assert list(replayed.lengths) == list(eager.lengths)  # refused steps changed nothing
    sg.reset()
    with pytest.raises(RuntimeError, match="after reset"):
        sg.step([0, 0, 0])
    st_g, st_e = GenerationStats(), GenerationStats()
    got = model.generate(prompts, 12, temperature=0, stop_token_ids=(), stats=st_g)
    want = model.generate(prompts, 12, temperature=0, stop_token_ids=(), stats=st_e, graph=False)
    assert st_g.decode_mode.startswith("CUDA graph replay, 3 row"), st_g.decode_mode
    assert got == want
    kept = model._step_graphs[(3, 1, False)]
    # Another row count gets its own capture and keeps the first; equal-length rows too.
    pair = [g["prompts"][0], g["prompts"][0][::-1]]
    kw = {"temperature": 0.9, "top_k": 20, "seed": 5, "stop_token_ids": ()}  # device draws
    assert model.generate(pair, 9, graph=True, **kw) == model.generate(pair, 9, graph=False, **kw)
    assert model.generate(prompts, 12, temperature=0, stop_token_ids=(), graph=True) == want
    assert model._step_graphs[(3, 1, False)] is kept and (2, 1, False) in model._step_graphs
    # A longer request reallocates the cache: the graphs go with the old one.
    longer = model.generate(prompts, 40, temperature=0, stop_token_ids=(), graph=True)
    assert kept is not model._step_graphs[(3, 1, False)] and list(model._step_graphs) == [
        (3, 1, False)
    ]
    assert longer == model.generate(prompts, 40, temperature=0, stop_token_ids=(), graph=False)
    # A cache that already holds tokens is not captured (the capture's step would write slot 0).
    model.cache = None
    cache = model.ensure_cache(3, n)
    model.forward([prompts[0]], cache)
    with pytest.raises(RuntimeError, match="capture before the prefill"):
        model.step_graph(1)
    # A capture refused for a passing reason (another capture is running) is not remembered.
    model.cache = None
    model.ensure_cache(3, n)
    outer = gp.CUDAGraph(model.device)
    with pytest.raises(RuntimeError, match="already capturing") as err, outer.capture():
        model.step_graph(2)
    assert not isinstance(err.value, gp.CaptureError) and (2, 1, False) not in model._step_graphs

    # Nor is a CaptureError from the warm-up, which runs on the caller's stream (another library
    # may be capturing it): only one raised while recording on the graph's own stream is fixed.
    def busy_caller_stream(*args: object) -> object:
        del model.forward_device_step  # once: the class's method serves the next call
        raise gp.CaptureError("the caller's stream is capturing a CUDA graph")

    model.forward_device_step = busy_caller_stream  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="caller's stream") as err:
        model.step_graph(2)
    assert not isinstance(err.value, gp.CaptureError) and (2, 1, False) not in model._step_graphs
    assert model.step_graph(2).rows == 2


class _ByteTokenizer:
    """Just enough of a tokenizer for ChatSession: one id per character, modulo the vocab."""

    chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    bos_token, eos_token, stop_ids = None, None, ()

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(ch) % self.vocab for ch in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(32 + i % 90) for i in ids)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_chat_decodes_from_a_cuda_graph(arch: str) -> None:
    """The chat session's decode steps come from the captured step and give the eager
    session's greedy reply, over two turns (the second re-uses the cached prefix)."""
    from pygpukit.models.chat import ChatSession
    from pygpukit.models.sampling import SamplingParams

    _need_gpu_backends()
    model = load_model(FIXTURES / arch, dtype="bfloat16", device="cuda")
    model.tokenizer = _ByteTokenizer(model.config.vocab_size)  # type: ignore[assignment]
    greedy = SamplingParams(temperature=0.0)
    sessions = [ChatSession(model, None, greedy, 12, 128, graph=g) for g in (True, False)]
    assert sessions[0].step_graph is not None, sessions[0].graph_reason
    assert sessions[1].step_graph is None and sessions[1].graph_reason.startswith("off")
    for text in ("hello there", "and again"):
        replies = ["".join(s.send(text)) for s in sessions]
        assert replies[0] == replies[1]
        assert sessions[0].last_stats.new_tokens == sessions[1].last_stats.new_tokens > 0
