"""One causal decoder-only transformer, assembled from pygpukit ops (so every op goes through the
routing table and runs wherever the weights live).

The block is the pre-norm residual block of GPT-2 / Llama (HF modeling_gpt2.py GPT2Block,
modeling_llama.py LlamaDecoderLayer):
    h = x + Attention(Norm1(x));  x' = h + MLP(Norm2(h))
with the family's choices from its ModelSpec: RMSNorm or LayerNorm, RoPE (neox rotate_half
layout, HF apply_rotary_pos_emb) or learned positions, q/k/v biases (Qwen2, GPT-2), RMSNorm of q
and k over head_dim before RoPE (Qwen3, modeling_qwen3.py Qwen3Attention), and a gated SiLU MLP,
GPT-2's dense GELU MLP, or the sparse MoE of Mixtral and Qwen3-MoE (moe.py). The residual add of
one sub-block is fused into the next norm (rmsnorm(..., residual=) returns both the sum and its
norm), and an RMSNorm into the dense projection after it (gp.rmsnorm_linear: one kernel at
decode).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pygpukit import determinism, ops, runtime
from pygpukit.array import GPUArray
from pygpukit.creation import arange, empty, empty_like, from_numpy
from pygpukit.dtypes import DataType, int64
from pygpukit.errors import CaptureError
from pygpukit.models._linear import Weight, embed, linear
from pygpukit.models.config import ModelConfig, ModelSpec
from pygpukit.models.decode_forms import append_attention, qkv_rope_write
from pygpukit.models.errors import ContextLengthError
from pygpukit.models.kv_cache import StaticKVCache
from pygpukit.models.moe import moe_forward
from pygpukit.models.weights import LayerWeights, ModelWeights
from pygpukit.ops.gemv import constant_weights
from pygpukit.qweight import QuantizedWeight
from pygpukit.runtime import Device

if TYPE_CHECKING:
    from pygpukit.models.decode_loop import DecodeRun
    from pygpukit.models.sampling import Sampler
    from pygpukit.models.step_graph import StepGraph

__all__ = ["CausalTransformerModel"]

# New tokens per row up to which a forward step reads the cache with sdpa_decode and writes it
# with kv_cache_write (RoPE on k and q fused into the write); longer steps (prefill) use flash sdpa,
# except under the deterministic mode, where every step takes the decode path.
DECODE_TOKENS = 16
# The deterministic mode's prefill runs in forward calls of at most this many tokens: its results
# do not depend on the chunking, and the decode attention's partials (one per 16 query rows and
# 256-key split) stay bounded.
DETERMINISTIC_CHUNK = 256


class CausalTransformerModel:
    """A loaded model: weights on one device plus the forward pass over a static KV cache.

    ``generate(input_ids, ...)`` is the 0.2.x entry point (token ids in, token ids out); the
    streaming, batched and chat-aware paths live in pygpukit.models.generation.
    """

    def __init__(
        self,
        config: ModelConfig,
        weights: ModelWeights,
        dtype: DataType,
        device: Device,
        tokenizer: Any = None,
        source: str = "",
    ) -> None:
        self.config = config
        self.weights = weights
        self.dtype = dtype
        self.device = device
        self.tokenizer = tokenizer
        self.source = source
        self._rope: tuple[GPUArray, GPUArray] | None = None
        self._positions: GPUArray | None = None
        # Captured decode steps of self.cache by row count, or why one cannot be captured; the
        # cache setter drops them, so they never outlive or point past the model's cache.
        # (rows, tokens, mode): step graphs; (rows, -steps, mode): greedy runs and
        # (rows, -steps, mode, draw): the one kept sampled run (models.decode_loop)
        self._step_graphs: dict[tuple[Any, ...], StepGraph | DecodeRun | str] = {}
        self._cache: StaticKVCache | None = None

    @property
    def cache(self) -> StaticKVCache | None:
        """The model's own KV cache (ensure_cache), which generation reuses across calls."""
        return self._cache

    @cache.setter
    def cache(self, value: StaticKVCache | None) -> None:
        if value is not self._cache:
            self.drop_step_graphs()  # captured against the old cache
        self._cache = value

    @property
    def spec(self) -> ModelSpec:
        return self.config.spec

    def __repr__(self) -> str:
        c = self.config
        return (
            f"CausalTransformerModel({c.spec.name}, layers={c.num_layers}, hidden={c.hidden_size}"
            f", heads={c.num_heads}/{c.num_kv_heads}, vocab={c.vocab_size}, "
            f"dtype={self.dtype.name}, device='{self.device}')"
        )

    # ----- cache and tables ------------------------------------------------------------------
    def new_cache(self, batch_size: int = 1, max_seq_len: int | None = None) -> StaticKVCache:
        """Allocate a static KV cache (and the RoPE tables and position row it needs)."""
        n = self.config.max_context if max_seq_len is None else int(max_seq_len)
        cache = StaticKVCache(self.config, batch_size, n, self.dtype, self.device)
        self._ensure_tables(n)
        return cache

    def ensure_cache(self, batch_size: int, max_seq_len: int) -> StaticKVCache:
        """The model's own cache, reallocated only when it is too small for the request."""
        c = self.cache
        if c is None or c.batch_size < batch_size or c.max_seq_len < max_seq_len:
            self.cache = None  # free the old one (and its graphs) before allocating the new one
            c = self.cache = self.new_cache(batch_size, max_seq_len)
        c.reset()
        return c

    def step_graph(self, rows: int, tokens: int = 1) -> StepGraph:
        """The decode step of rows 0..rows-1 of the model's own cache (``self.cache``) captured
        in a CUDA graph (models.step_graph), made on first use and kept until the cache is
        replaced: the generation loop replays it for every decode step. Capturing runs the step
        once, which writes slot 0 of those rows, so a first capture needs those rows empty (call
        it before the prefill). Raises RuntimeError with the reason when the step cannot be
        captured; a CaptureError (the step can never be captured: not a GPU, a host read inside
        the step) is remembered and raised again, so it is not retried. A graph recorded on
        another SM partition than the current stream's (pygpukit.scheduler) is recorded again.
        Graphs are kept per mode (gp.set_deterministic): each replays the kernels of the mode it
        was recorded in."""
        from pygpukit.models.step_graph import StepGraph

        if self.cache is not None and not 1 <= rows <= self.cache.batch_size:
            raise ValueError(f"step_graph: rows must be in 1..{self.cache.batch_size}, got {rows}")
        key = (rows, tokens, determinism.is_deterministic())
        return self._kept_graph(key, rows, lambda c: StepGraph(self, c, rows, tokens))

    def decode_run(self, rows: int, steps: int, sampler: Sampler | None = None) -> DecodeRun:
        """``steps`` decode steps of rows 0..rows-1 of the model's own cache captured in one
        CUDA graph (models.decode_loop): greedy, or drawn on the device by ``sampler``. Kept
        with the step graphs under the same rules (capture before the prefill; a CaptureError
        is remembered). The draw's parameters and Philox key are recorded in the graph: one
        sampled run is kept per (rows, steps, mode), replaced when they change (a sampler
        without a seed draws a fresh key, so such a generation captures its own run)."""
        from pygpukit.models.decode_loop import DecodeRun, device_draw

        base = (rows, -steps, determinism.is_deterministic())  # negative: not a step graph's
        draw = device_draw(sampler)
        key: tuple[Any, ...] = base
        if draw is not None:
            key = (*base, tuple(sorted(draw.items())))
            for old in [k for k in self._step_graphs if len(k) == 4 and k[:3] == base]:
                got = self._step_graphs[old]
                if isinstance(got, str):  # the step can never be captured, whatever the draw
                    raise CaptureError(got)
                if old != key:
                    del self._step_graphs[old]
        # A fresh key a generation (a sampler without a seed) makes a run used once: graphs of
        # fewer steps for its last run would cost more to record than the steps they save.
        once = (
            draw is not None
            and sampler is not None
            and sampler.params.seed is None
            and not sampler.params.greedy
        )
        return self._kept_graph(
            key,
            rows,
            lambda c: DecodeRun(
                self, c, rows, steps, graph=True, sampler=sampler, short_graphs=not once
            ),
        )

    def greedy_run(self, rows: int, steps: int) -> DecodeRun:
        """decode_run without a sampler: ``steps`` greedy steps in one CUDA graph."""
        return self.decode_run(rows, steps)

    def _kept_graph(self, key: tuple[Any, ...], rows: int, make: Any) -> Any:
        """The graph kept under key, or make(cache)'s, kept (step_graph's rules)."""
        cache = self.cache
        if cache is None:
            raise RuntimeError("the model has no cache: ensure_cache() first")
        got = self._step_graphs.get(key)
        if isinstance(got, str):
            raise CaptureError(got)
        if got is not None:
            if got.partition_id == runtime.current_stream(self.device).partition_id:
                return got
            # Recorded on other SMs (another scheduler context's partition): record it again
            # where the caller runs now, so its kernels run on the caller's SMs.
            del self._step_graphs[key]
        if any(int(n) for n in cache.lengths[:rows]):
            raise RuntimeError(
                f"rows 0..{rows - 1} of the cache hold tokens, and a first capture writes the "
                "first slots of each: capture before the prefill"
            )
        try:
            got = make(cache)
        except CaptureError as exc:
            self._step_graphs[key] = str(exc)  # fixed for this model
            raise
        self._step_graphs[key] = got
        return got

    @property
    def decode_reads_positions(self) -> bool:
        """Whether a decode step reads its positions (forward_device_step's positions): only
        learned position embeddings do (GPT-2); RoPE rotates q and k at the cache write marks,
        so a caller advancing the positions of such a model on the device may skip it."""
        return self.weights.pos_embed is not None

    def drop_step_graphs(self) -> None:
        """Forget the captured decode steps; each graph's memory goes once nothing holds it (a
        paused generation loop may still be replaying one against the old cache)."""
        self._step_graphs.clear()

    def _ensure_tables(self, n: int) -> None:
        if self._positions is None or self._positions.shape[0] < n:
            self._positions = arange(n, dtype=int64, device=self.device)
        if self.spec.position == "rope" and (self._rope is None or self._rope[0].shape[0] < n):
            c = self.config
            factors = c.extra.get("rope_freq_factors")
            if factors is not None:
                self._rope = _factor_tables(n, c.head_dim, c.rope_theta, factors, self.device)
            else:
                # float32 tables whatever the model dtype: the rope op computes in float32.
                self._rope = ops.rope_tables(
                    n, c.head_dim, c.rope_theta, c.rope_scaling, device=self.device
                )

    # ----- forward ---------------------------------------------------------------------------
    def forward(
        self,
        input_ids: GPUArray | np.ndarray | Sequence[Sequence[int]],
        cache: StaticKVCache,
        row0: int = 0,
        all_logits: bool = False,
    ) -> GPUArray:
        """Run ids [B, S] for cache rows row0..row0+B-1, each continuing at its cached length.

        Writes the new keys/values into the cache, advances the rows' lengths, and returns the
        logits [B, S, vocab] (all_logits) or [B, 1, vocab] (last position).
        """
        ids = input_ids if isinstance(input_ids, GPUArray) else self._ids(input_ids)
        if ids.ndim != 2:
            raise ValueError(f"forward: input_ids must be [batch, seq], got shape {ids.shape}")
        b, s = ids.shape
        if row0 < 0 or row0 + b > cache.batch_size:
            raise ValueError(
                f"forward: rows {row0}..{row0 + b - 1} are outside the cache's "
                f"{cache.batch_size} rows"
            )
        for r in range(row0, row0 + b):
            cache.check_room(r, s)
        det = determinism.is_deterministic()
        if s > DETERMINISTIC_CHUNK and det:
            return self._forward_chunks(ids, cache, row0, all_logits)
        starts = [int(n) for n in cache.lengths[row0 : row0 + b]]
        self._ensure_tables(cache.max_seq_len)
        pos = self._position_ids(starts, s)
        # Decode-sized steps read the cache through sdpa_decode: each row's write position and
        # new length on the device (int32), one small copy per forward shared by every layer.
        decode: tuple[GPUArray, GPUArray] | None = None
        # The deterministic mode prefills through the decode path too: otherwise a prompt
        # prefilled whole runs flash sdpa and one cut into decode-sized chunks sdpa_decode, two
        # kernels with two sets of bits.
        if s <= DECODE_TOKENS or det:
            se = np.asarray([starts, [st + s for st in starts]], dtype=np.int32)
            marks = from_numpy(se, device=self.device)
            decode = (marks[0], marks[1])
        logits = self._run(ids, pos, cache, row0, starts, decode, all_logits)
        cache.lengths[row0 : row0 + b] += s
        return logits

    def _forward_chunks(
        self, ids: GPUArray, cache: StaticKVCache, row0: int, all_logits: bool
    ) -> GPUArray:
        """forward() in calls of DETERMINISTIC_CHUNK tokens (the deterministic mode's prefill)."""
        s = ids.shape[1]
        parts = []
        for c0 in range(0, s, DETERMINISTIC_CHUNK):
            parts.append(
                self.forward(ids[:, c0 : c0 + DETERMINISTIC_CHUNK], cache, row0, all_logits)
            )
        if not all_logits:
            return parts[-1]
        whole = empty((ids.shape[0], s, parts[0].shape[-1]), parts[0].dtype, self.device)
        for i, part in enumerate(parts):
            c0 = i * DETERMINISTIC_CHUNK
            whole[:, c0 : c0 + part.shape[1]] = part
        return whole

    def forward_device_step(
        self, ids: GPUArray, positions: GPUArray, marks: GPUArray, cache: StaticKVCache
    ) -> GPUArray:
        """One decode step of cache rows 0..B-1 whose inputs are already on the device: ids
        int64 [B, S] (S new tokens a row, 1..DECODE_TOKENS: 1 for decode, more to verify
        speculative drafts), positions int64 [B, S] (each new token's position, its cache slot
        marks[0, b] + j; read only where decode_reads_positions: RoPE rotates q and k at the
        write marks), marks int32 [2, B] (each row's write position and new length, which is
        the write position + S). Nothing here reads host values that
        change between steps, so the step can be captured in a CUDA graph and replayed with new
        inputs written into the same arrays (models.step_graph). cache.lengths is left to the
        caller. Logits [B, S, vocab]."""
        b, s = ids.shape if ids.ndim == 2 else (0, 0)
        for name, a, shape, dtype in (
            ("ids", ids, (b, s), "int64"),
            ("positions", positions, (b, s), "int64"),
            ("marks", marks, (2, b), "int32"),
        ):
            if b < 1 or not 1 <= s <= DECODE_TOKENS or a.shape != shape or a.dtype.name != dtype:
                raise ValueError(
                    "forward_device_step: ids int64 [B, S], positions int64 [B, S] and marks "
                    f"int32 [2, B] expected, 1 <= S <= {DECODE_TOKENS}; {name} is "
                    f"{a.dtype.name} {a.shape}"
                )
        if b > cache.batch_size:
            raise ValueError(f"forward_device_step: {b} rows but the cache has {cache.batch_size}")
        self._ensure_tables(cache.max_seq_len)
        return self._run(ids, positions, cache, 0, [0] * b, (marks[0], marks[1]), s > 1)

    # No kernel inside writes the weights, nor the step's positions and lengths (written before
    # it starts): the decode GEMVs, the cache write and decode attention may load them early.
    @constant_weights()
    def _run(
        self,
        ids: GPUArray,
        pos: GPUArray,
        cache: StaticKVCache,
        row0: int,
        starts: list[int],
        decode: tuple[GPUArray, GPUArray] | None,
        all_logits: bool,
    ) -> GPUArray:
        """The layers: decode (device write positions and lengths) for decode-sized steps, else
        the prefill path over the host-known starts."""
        s = ids.shape[1]
        w = self.weights
        x = embed(ids, w.embed_tokens, self.dtype)
        # The one read of pos at decode (decode_reads_positions: DecodeRun advances pos only
        # for such models); RoPE takes the decode step's positions from the write marks.
        if w.pos_embed is not None:
            x = ops.add(x, ops.embedding(pos, w.pos_embed))
        delta: GPUArray | None = None
        append = decode is not None and append_attention()
        for i, lw in enumerate(w.layers):
            attn, x = self._attention(i, lw, x, delta, pos, cache, row0, starts, decode, append)
            h, x = self._add_norm(x, attn, lw.mlp_norm, lw.mlp_norm_bias)
            delta = self._mlp(lw, h)
        if not all_logits:  # the norm is per row: only the last position's is needed
            x = x[:, s - 1 :, :]
            delta = None if delta is None else delta[:, s - 1 :, :]
        return self._norm_linear(x, delta, w.final_norm, w.final_norm_bias, w.lm_head, None)[0]

    def _ids(self, ids: Any) -> GPUArray:
        a = np.asarray(ids, dtype=np.int64)
        if a.ndim == 1:
            a = a[None, :]
        return from_numpy(a, device=self.device)

    def _position_ids(self, starts: list[int], s: int) -> GPUArray:
        assert self._positions is not None
        if all(st == starts[0] for st in starts):
            return self._positions[starts[0] : starts[0] + s]  # a view, broadcast over the batch
        rows = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(s, dtype=np.int64)
        return from_numpy(rows, device=self.device)

    def _norm_linear(
        self,
        x: GPUArray,
        delta: GPUArray | None,
        nw: GPUArray,
        nb: GPUArray | None,
        weight: Weight,
        bias: GPUArray | None,
    ) -> tuple[GPUArray, GPUArray]:
        """(Norm(x + delta) @ weight^T + bias, x + delta). An RMSNorm before a dense or quantized
        weight is one call, gp.rmsnorm_linear, which at decode reads the norm into the GEMV:
        one kernel instead of two (the qkv projection and the lm_head; for an fp8 / int4 /
        nvfp4 weight where ops/gemv.QUANT_NORM_MAX_K and QUANT_NORM_MAX_N allow; the GGUF
        formats and w8a8 run gp.rmsnorm, then the product)."""
        if self.spec.norm == "rmsnorm" and isinstance(weight, (GPUArray, QuantizedWeight)):
            eps = self.config.norm_eps
            if delta is None:
                return ops.rmsnorm_linear(x, nw, weight, bias, eps=eps), x
            return ops.rmsnorm_linear(
                delta, nw, weight, bias, eps=eps, residual=x
            )  # (y, x + delta)
        h, x = self._add_norm(x, delta, nw, nb)
        return linear(h, weight, bias), x

    def _add_norm(
        self, x: GPUArray, delta: GPUArray | None, w: GPUArray, b: GPUArray | None
    ) -> tuple[GPUArray, GPUArray]:
        """(Norm(x + delta), x + delta), delta None meaning no residual add."""
        eps = self.config.norm_eps
        if self.spec.norm == "rmsnorm":
            if delta is None:
                return ops.rmsnorm(x, w, eps), x
            y, s = ops.rmsnorm(delta, w, eps, residual=x)
            return y, s
        s = x if delta is None else ops.add(x, delta)
        return ops.layernorm(s, w, b, eps), s

    def _attention(
        self,
        layer: int,
        lw: LayerWeights,
        x: GPUArray,
        delta: GPUArray | None,
        pos: GPUArray,
        cache: StaticKVCache,
        row0: int,
        starts: list[int],
        decode: tuple[GPUArray, GPUArray] | None,
        append: bool = False,
    ) -> tuple[GPUArray, GPUArray]:
        """(attention's output, the residual stream x + delta) of the block's first half.
        decode: (write positions, lengths) on the device for a decode-sized step, else None;
        append: the cache write and attention as one launch (gp.sdpa_decode_append; the lengths
        are then the write positions + S, as every decode step has them)."""
        c = self.config
        b, s, _ = x.shape
        nh, nkv, d = c.num_heads, c.num_kv_heads, c.head_dim
        cos, sin = self._rope if self._rope is not None else (None, None)
        rot = cos is not None and sin is not None
        full_rope = cos is not None and 2 * cos.shape[1] == d
        scale = c.layer_attn_scale(layer)
        if decode is not None and not append and full_rope and qkv_rope_write(self.spec, lw):
            # One call: the qkv product with its norm, RoPE and the cache write
            # (gp.rmsnorm_qkv_rope_write), then attention over each row's own length.
            assert cos is not None and sin is not None and isinstance(lw.wqkv, GPUArray)
            kc, vc = cache.rows(layer, row0, b)
            h = x if delta is None else delta
            r = ops.rmsnorm_qkv_rope_write(
                h, lw.attn_norm, lw.wqkv, kc, vc, decode[0], cos, sin, num_heads=nh,
                bias=lw.bqkv, residual=None if delta is None else x, eps=c.norm_eps,
            )  # fmt: skip
            q, x = r if delta is not None else (r, x)
            o = ops.sdpa_decode(q.transpose(0, 2, 1, 3), kc, vc, decode[1], scale=scale)
            return linear(o.transpose(0, 2, 1, 3).reshape(b, s, nh * d), lw.wo, lw.bo), x
        qkv, x = self._norm_linear(x, delta, lw.attn_norm, lw.attn_norm_bias, lw.wqkv, lw.bqkv)
        q = qkv[:, :, : nh * d].reshape(b, s, nh, d)
        k = qkv[:, :, nh * d : (nh + nkv) * d].reshape(b, s, nkv, d)
        v = qkv[:, :, (nh + nkv) * d :].reshape(b, s, nkv, d)
        # Qwen3Attention: q_norm/k_norm are RMSNorms over head_dim, applied before RoPE. At
        # decode with RoPE over the whole head, kv_cache_write applies them in its launch.
        fused_norms = decode is not None and rot and full_rope
        if lw.q_norm is not None and lw.k_norm is not None and not fused_norms:
            q = ops.rmsnorm(q, lw.q_norm, c.norm_eps)
            k = ops.rmsnorm(k, lw.k_norm, c.norm_eps)
        vt = v.transpose(0, 2, 1, 3)  # [B, H, S, D]: the attention ops' head-major layout (views)
        if decode is not None and append:
            # One launch: each split of the keys writes the new tokens among its keys (k
            # rotated, Qwen3's head norms first) and attends with q rotated in registers.
            kc, vc = cache.rows(layer, row0, b)
            o = ops.sdpa_decode_append(
                q.transpose(0, 2, 1, 3), kc, vc, k.transpose(0, 2, 1, 3), vt, decode[1],
                cos=cos, sin=sin, q_norm=lw.q_norm if fused_norms else None,
                k_norm=lw.k_norm if fused_norms else None, norm_eps=c.norm_eps, scale=scale,
            )  # fmt: skip
        elif decode is not None:
            # kv_cache_write stores k and v, rotating k, and rotates q in place at the same
            # positions (normalising both heads first for Qwen3), all in one launch; then
            # sdpa_decode attends over each row's own length (rows may differ).
            qt = q.transpose(0, 2, 1, 3)
            kc, vc = cache.rows(layer, row0, b)
            kt = k.transpose(0, 2, 1, 3)
            ops.kv_cache_write(
                kc, vc, kt, vt, decode[0], cos=cos, sin=sin, q=qt if rot else None,
                q_norm=lw.q_norm if fused_norms else None,
                k_norm=lw.k_norm if fused_norms else None, norm_eps=c.norm_eps,
            )  # fmt: skip
            o = ops.sdpa_decode(qt, kc, vc, decode[1], scale=scale)
        else:
            if cos is not None and sin is not None:
                q = ops.rope(q, cos, sin, pos)
                k = ops.rope(k, cos, sin, pos)
            qt = q.transpose(0, 2, 1, 3)
            o = self._prefill(layer, qt, k.transpose(0, 2, 1, 3), vt, cache, row0, starts, scale)
        o = o.transpose(0, 2, 1, 3).reshape(b, s, nh * d)
        return linear(o, lw.wo, lw.bo), x

    @staticmethod
    def _prefill(
        layer: int,
        qt: GPUArray,
        kt: GPUArray,
        vt: GPUArray,
        cache: StaticKVCache,
        row0: int,
        starts: list[int],
        scale: float | None,
    ) -> GPUArray:
        """Store kt, vt [B, Hkv, S, D] and run flash sdpa over each row's cached prefix."""
        b, _, s, _ = qt.shape
        if all(st == starts[0] for st in starts):
            cache.write(layer, row0, starts[0], kt, vt)
            kc, vc = cache.view(layer, row0, b, starts[0] + s)
            return ops.sdpa(qt, kc, vc, causal=True, scale=scale)
        # Rows of different lengths (a direct forward of more than DECODE_TOKENS tokens; the
        # generation loop prefills rows of equal length together): each row attends over its own
        # prefix.
        o = empty_like(qt)
        for r in range(b):
            cache.write(layer, row0 + r, starts[r], kt[r : r + 1], vt[r : r + 1])
            kc, vc = cache.view(layer, row0 + r, 1, starts[r] + s)
            ops.sdpa(qt[r : r + 1], kc, vc, causal=True, scale=scale, out=o[r : r + 1])
        return o

    def _mlp(self, lw: LayerWeights, h: GPUArray) -> GPUArray:
        # The gated MLP's gate/up product keeps its own norm kernel (_add_norm): read into that
        # GEMV (gp.rmsnorm_linear's kernel), the norm made the decode step slower
        # (BENCHMARKS.md "Batch-1 decode").
        if lw.w_router is not None:  # a sparse layer (Qwen3-MoE may also have dense ones)
            return moe_forward(h, lw, self.config)
        if self.spec.mlp == "dense":
            assert lw.w_fc is not None and lw.w_proj is not None
            # GPT2MLP: c_proj(act(c_fc(x))), gelu_new = the tanh approximation
            a = ops.linear(h, lw.w_fc, lw.b_fc, activation=self.config.activation)
            return ops.linear(a, lw.w_proj, lw.b_proj)
        assert lw.w_gate_up is not None and lw.w_down is not None
        # LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), gate and up stacked by rows
        if not isinstance(lw.w_gate_up, tuple):  # dense or one QuantizedWeight: one call
            a = ops.linear_silu_mul(h, lw.w_gate_up)
        else:
            gu = linear(h, lw.w_gate_up)
            i = gu.shape[-1] // 2
            a = ops.silu_mul(gu[..., :i], gu[..., i:])
        return linear(a, lw.w_down)

    # ----- the 0.2.x generate ----------------------------------------------------------------
    def generate(
        self,
        input_ids: Any,
        max_new_tokens: int = 32,
        temperature: float = 0.7,
        top_k: int = 50,
        top_p: float = 0.9,
        use_cache: bool = True,
        **kwargs: Any,
    ) -> list[int] | list[list[int]]:
        """Token ids in, the prompt plus new token ids out (the 0.2.x call form).

        The engine's generate (pygpukit.models.generation.generate, whose defaults are these),
        with this model first: the same loop, so the same tokens. ``input_ids``: one sequence
        (list of ints) or a batch (list of lists, lengths may differ). temperature 0 is greedy.
        Extra keywords (repetition_penalty, seed, min_p, stop_token_ids, max_seq_len, stats,
        graph, speculative, draft_tokens, steps_per_sync) go through. use_cache=False re-runs
        the whole sequence every step (slow; kept for the old call form and checks).
        """
        from pygpukit.models.generation import generate as _generate

        return _generate(
            self,
            input_ids,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            use_cache=use_cache,
            **kwargs,
        )

    def check_context(self, n_tokens: int) -> None:
        if n_tokens > self.config.max_context:
            raise ContextLengthError(
                f"{n_tokens} tokens exceed the model's context of {self.config.max_context}"
            )


def _factor_tables(
    n: int, head_dim: int, theta: float, factors: Any, device: Device
) -> tuple[GPUArray, GPUArray]:
    """cos/sin tables with per-frequency divisors (GGUF rope_freqs.weight, llama.cpp's
    ggml_rope_ext freq_factors): angle = p * theta^(-2i/d) / factor[i], in float64."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    inv = inv / np.asarray(factors, dtype=np.float64).reshape(-1)[: head_dim // 2]
    ang = np.outer(np.arange(n, dtype=np.float64), inv)
    return (
        from_numpy(np.cos(ang).astype(np.float32), device=device),
        from_numpy(np.sin(ang).astype(np.float32), device=device),
    )
