"""Sampling, stop tokens, streaming, the KV cache, chat templates and the <think> filter."""

from __future__ import annotations

import numpy as np
import pytest

from pygpukit.models import (
    ChatTemplate,
    GenerationStats,
    SamplingParams,
    ThinkFilter,
    load_model,
    stream,
    stream_batch,
)
from pygpukit.models.sampling import Sampler

from ._util import FIXTURES, golden


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return load_model(FIXTURES / "qwen2", device="cpu")


def test_seeded_sampling_is_reproducible(model) -> None:  # type: ignore[no-untyped-def]
    prompt = golden("qwen2")["prompts"][0]
    kw = {"temperature": 1.0, "top_k": 40, "top_p": 0.95, "stop_token_ids": ()}
    a = model.generate(prompt, 16, seed=7, **kw)
    b = model.generate(prompt, 16, seed=7, **kw)
    c = model.generate(prompt, 16, seed=8, **kw)
    assert a == b and a != c


def test_top_k_one_and_zero_temperature_are_greedy(model) -> None:  # type: ignore[no-untyped-def]
    g = golden("qwen2")
    out = model.generate(g["prompts"][0], 16, temperature=1.0, top_k=1, seed=3, stop_token_ids=())
    assert out[len(g["prompts"][0]) :] == g["greedy"][0][:16]


def test_sampler_filters() -> None:
    logits = np.array([5.0, 4.0, 3.0, -1.0, -2.0], dtype=np.float32)
    draws = {Sampler(SamplingParams(1.0, 2, 1.0, seed=s)).sample_row(logits, []) for s in range(50)}
    assert draws == {0, 1}  # top_k=2 keeps exactly the two largest
    # top_p keeps the smallest set reaching the mass: p(0) = 0.66 < 0.7 <= p(0) + p(1)
    draws = {Sampler(SamplingParams(1.0, 0, 0.7, seed=s)).sample_row(logits, []) for s in range(50)}
    assert draws == {0, 1}
    draws = {Sampler(SamplingParams(1.0, 0, 0.5, seed=s)).sample_row(logits, []) for s in range(20)}
    assert draws == {0}
    # Repetition penalty (CTRL): a seen positive logit is divided, a negative one multiplied.
    greedy_pen = Sampler(SamplingParams(0.0, repetition_penalty=2.0))
    assert greedy_pen.sample_row(logits, [0]) == 1
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)


def test_stop_token_ends_generation(model) -> None:  # type: ignore[no-untyped-def]
    g = golden("qwen2")
    prompt, want = g["prompts"][0], g["greedy"][0]
    stop = want[5]
    out = model.generate(prompt, 32, temperature=0, stop_token_ids=[stop])
    first = want.index(stop)
    assert out[len(prompt) :] == want[: first + 1]


def test_streaming_and_stats(model) -> None:  # type: ignore[no-untyped-def]
    g = golden("qwen2")
    st = GenerationStats()
    toks = list(stream(model, g["prompts"][0], 10, SamplingParams(0.0), stop_ids=(), stats=st))
    assert toks == g["greedy"][0][:10]
    assert st.prompt_tokens == len(g["prompts"][0]) and st.new_tokens == 10
    assert st.decode_steps == 9 and st.decode_tokens_per_s > 0 and st.prefill_tokens_per_s > 0
    steps = list(stream_batch(model, g["prompts"], 3, SamplingParams(0.0), stop_ids=()))
    assert steps[0] == [(0, g["greedy"][0][0]), (1, g["greedy"][1][0])]


def test_graph_decode_modes_on_the_cpu(model) -> None:  # type: ignore[no-untyped-def]
    """On the CPU the default decodes eagerly and says why; graph=True refuses by name."""
    import pygpukit as gp

    prompt = golden("qwen2")["prompts"][0]
    st = GenerationStats()
    out = model.generate(prompt, 4, temperature=0, stop_token_ids=(), stats=st)
    assert out[len(prompt) :] == golden("qwen2")["greedy"][0][:4]
    assert st.decode_mode.startswith("eager (") and "CPU device" in st.decode_mode
    with pytest.raises(RuntimeError, match=r"graph=True .* CPU device"):
        model.generate(prompt, 4, temperature=0, graph=True)
    model.generate(prompt, 4, temperature=0, graph=False, stats=st)
    assert st.decode_mode == "eager (graph=False)"
    model.generate(prompt, 1, temperature=0, graph=True, stats=st)  # nothing to replay
    assert st.decode_mode == "none (no decode steps)"
    own = model.new_cache(1, 32)
    list(stream(model, prompt, 3, SamplingParams(0.0), stats=st, cache=own))
    assert st.decode_mode == "eager (graphs are kept for the model's own cache, not a caller's)"
    assert "CPU device" in str(model._step_graphs[(1, 1, False)])  # a fixed reason is remembered
    with pytest.raises(gp.CaptureError, match="CPU device"):
        model.step_graph(1)
    model.cache = None  # replacing the cache forgets what was captured for it
    assert model._step_graphs == {}
    cache = model.new_cache(2, 8)
    ids, pos = gp.zeros((2, 1), "int64"), gp.zeros((2, 1), "int64")
    marks = gp.zeros((2, 2), "int32")
    with pytest.raises(ValueError, match="marks is int64"):
        model.forward_device_step(ids, pos, marks.astype("int64"), cache)
    with pytest.raises(ValueError, match=r"positions is int64 \(2,\)"):
        model.forward_device_step(ids, pos.reshape(2), marks, cache)
    with pytest.raises(ValueError, match="3 rows but the cache has 2"):
        model.forward_device_step(
            gp.zeros((3, 1), "int64"), gp.zeros((3, 1), "int64"), gp.zeros((2, 3), "int32"), cache
        )


def test_kv_cache_is_static(model) -> None:  # type: ignore[no-untyped-def]
    c = model.config
    cache = model.new_cache(2, 32)
    assert cache.k.shape == (c.num_layers, 2, c.num_kv_heads, 32, c.head_dim)
    k_ptr = cache.k.data_ptr()
    model.forward([[5, 6, 7], [8, 9, 10]], cache)
    model.forward([[1], [2]], cache)
    assert list(cache.lengths) == [4, 4] and cache.k.data_ptr() == k_ptr


QWEN3_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)


def test_chat_template_rendering() -> None:
    t = ChatTemplate(QWEN3_TEMPLATE)
    msgs = [{"role": "user", "content": "Hi \u00e9"}]
    text = t.render(msgs)
    assert text == "<|im_start|>user\nHi \u00e9<|im_end|>\n<|im_start|>assistant\n"
    assert "<think>\n\n</think>" in t.render(msgs, enable_thinking=False)
    assert not t.render(msgs, add_generation_prompt=False).endswith("assistant\n")
    with pytest.raises(ValueError, match="role"):
        t.render([{"content": "x"}])
    boom = ChatTemplate("{{ raise_exception('no system role') }}")
    with pytest.raises(Exception, match="no system role"):
        boom.render(msgs)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 100])
def test_think_filter_hides_blocks_across_chunks(chunk: int) -> None:
    text = "<think>\nlet me see...\n</think>\n\nThe answer is <b>4</b>."
    f = ThinkFilter("hide")
    out = "".join(f.push(text[i : i + chunk]) for i in range(0, len(text), chunk)) + f.flush()
    assert out == "The answer is <b>4</b>."
    show = ThinkFilter("show")
    assert "".join(show.push(text[i : i + chunk]) for i in range(0, len(text), chunk)) == text
    with pytest.raises(ValueError, match="think mode"):
        ThinkFilter("maybe")


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gpt2"])
def test_write_and_attention_in_one_launch(arch: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """decode_forms.APPEND_ATTENTION routes each layer's decode write and attention through
    gp.sdpa_decode_append (with RoPE, with Qwen3's head norms, without RoPE): the same logits
    on the NumPy backend, one call a layer; off (shipped), the two ops; and the deterministic
    mode and a route rule naming either op keep the two."""
    import pygpukit as gp
    import pygpukit.models.decode_forms as tr

    m = load_model(FIXTURES / arch, device="cpu")
    prompt = golden(arch)["prompts"][0]
    res = {}
    for on in (True, False):
        monkeypatch.setattr(tr, "APPEND_ATTENTION", on)
        cache = m.new_cache(1, len(prompt) + 8)
        m.forward([prompt], cache)
        gp.routing.reset_stats()
        res[on] = [m.forward([[t]], cache).to_numpy() for t in prompt[:4]]
        counts = {op: sum(c.values()) for op, c in gp.routing.stats().items()}
        layers = 4 * len(m.weights.layers)
        if on:
            assert counts.get("sdpa_decode_append") == layers, counts
            assert "kv_cache_write" not in counts, counts
        else:
            assert counts.get("kv_cache_write") == layers, counts
            assert "sdpa_decode_append" not in counts, counts
    np.testing.assert_array_equal(np.stack(res[True]), np.stack(res[False]))
    monkeypatch.setattr(tr, "APPEND_ATTENTION", True)
    assert tr.append_attention()
    with gp.deterministic(True):
        assert not tr.append_attention()
    with gp.route(sdpa_decode="cpu"):
        assert not tr.append_attention()


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_qkv_rope_write_at_decode(arch: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A decode step of a model without head norms starts its attention with
    gp.rmsnorm_qkv_rope_write: on the NumPy backend it runs gp.rmsnorm_linear and
    gp.kv_cache_write as before (the same logits as with decode_forms.QKV_ROPE_WRITE off); a
    route naming the op runs its own NumPy reference (one call a layer, no kv_cache_write; the
    float64 norm is not rounded, so the logits agree within float32's bound); route rules
    naming rmsnorm_linear or kv_cache_write keep the two calls; Qwen3 (head norms) never
    takes it."""
    import pygpukit as gp
    import pygpukit.models.decode_forms as forms

    m = load_model(FIXTURES / arch, device="cpu")
    prompt = golden(arch)["prompts"][0]
    layers = len(m.weights.layers)
    fused = 0 if arch == "qwen3" else layers

    def steps(route: dict[str, str]) -> tuple[np.ndarray, dict[str, int]]:
        cache = m.new_cache(1, len(prompt) + 8)
        m.forward([prompt], cache)
        gp.routing.reset_stats()
        with gp.route(**route):
            out = np.stack([m.forward([[t]], cache).to_numpy() for t in prompt[:3]])
        return out, {op: sum(c.values()) for op, c in gp.routing.stats().items()}

    monkeypatch.setattr(forms, "QKV_ROPE_WRITE", False)
    off, c_off = steps({})
    monkeypatch.setattr(forms, "QKV_ROPE_WRITE", True)
    on, c_on = steps({})
    np.testing.assert_array_equal(on, off)
    assert c_on == c_off and c_on.get("kv_cache_write") == 3 * layers, c_on
    own, c_own = steps({"rmsnorm_qkv_rope_write": "cpu"})
    assert c_own.get("rmsnorm_qkv_rope_write", 0) == 3 * fused, c_own
    assert c_own.get("kv_cache_write", 0) == 3 * (layers - fused), c_own
    np.testing.assert_allclose(own, off, rtol=1e-4, atol=1e-4)
    if fused:
        assert forms.qkv_rope_write(m.spec, m.weights.layers[0])
        for rule in ({"rmsnorm_linear": "cpu"}, {"kv_cache_write": "cpu"}):
            with gp.route(**rule):
                assert not forms.qkv_rope_write(m.spec, m.weights.layers[0]), rule
        monkeypatch.setattr(forms, "QKV_ROPE_WRITE", False)
        with gp.route(rmsnorm_qkv_rope_write="cpu"):
            assert forms.qkv_rope_write(m.spec, m.weights.layers[0])
