"""Whisper's encoder and decoder on pygpukit ops (HF modeling_whisper.py, WhisperEncoder /
WhisperDecoder), so every op goes through the routing table: Triton/native on CUDA, NumPy on
the CPU.

Encoder, once per 30 s window: x = gelu(conv1(mel)); x = gelu(conv2(x)) (kernel 3, padding 1,
stride 1 then 2); x += the stored sinusoidal positions; pre-LayerNorm blocks
(x += attn(LN(x)); x += fc2(gelu(fc1(LN(x))))) with non-causal attention; a final LayerNorm.
Each convolution is one gp.linear over a strided im2col view (three consecutive time steps of
a zero-padded, time-major copy are contiguous in memory).

Decoder step: token embedding + learned position; pre-LN blocks of causal self-attention over a
static KV cache (gp.kv_cache_write / gp.sdpa_decode, with the write position and lengths in
device memory), cross-attention over the window's K/V (computed once per window into fixed
buffers), and the GELU MLP; a final LayerNorm and the tied output projection. Nothing in the
step reads a value back to the host, so it can be recorded in a CUDA graph (graph.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pygpukit import ops
from pygpukit.array import GPUArray
from pygpukit.creation import arange, empty, from_numpy, zeros
from pygpukit.dtypes import DataType, float32, int32, int64
from pygpukit.models.kv_cache import StaticKVCache
from pygpukit.models.whisper.config import WhisperConfig, WhisperGenerationConfig
from pygpukit.models.whisper.weights import AttentionWeights, EncoderLayer, WhisperWeights
from pygpukit.runtime import Device

__all__ = ["WhisperModel", "DecoderState"]


class DecoderState:
    """What one batch of windows keeps between decoder steps: the self-attention cache, the
    cross-attention K/V of the current windows ([layers, batch, frames, 2 * d_model], written by
    WhisperModel.set_encoder_output) and the step's device inputs. All rows hold the same
    number of tokens (the prompts have one length), kept on the host in ``length``."""

    def __init__(self, model: WhisperModel, batch_size: int) -> None:
        c = model.config
        self.batch_size = batch_size
        self.cache = StaticKVCache(
            c.decoder_cache_dims, batch_size, c.max_target_positions, model.dtype, model.device
        )
        shape = (c.decoder_layers, batch_size, c.max_source_positions, 2 * c.d_model)
        self.cross = empty(shape, model.dtype, model.device)
        # The single-token step's inputs, rewritten in place each step (a graph replays them).
        self.ids = zeros((batch_size, 1), int64, model.device)
        self.positions = zeros((batch_size, 1), int64, model.device)
        self.marks = zeros((2, batch_size), int32, model.device)
        self.length = 0

    def reset(self) -> None:
        self.length = 0
        self.cache.reset()


class WhisperModel:
    """A loaded Whisper checkpoint (weights on one device) with its tokenizer and decoding
    settings; transcription lives in pygpukit.models.whisper.decode."""

    def __init__(
        self,
        config: WhisperConfig,
        weights: WhisperWeights,
        dtype: DataType,
        device: Device,
        generation: WhisperGenerationConfig,
        tokenizer: Any = None,
        source: str = "",
    ) -> None:
        self.config = config
        self.weights = weights
        self.dtype = dtype
        self.device = device
        self.generation = generation
        self.tokenizer = tokenizer
        self.source = source
        self._positions = arange(config.max_target_positions, dtype=int64, device=device)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"WhisperModel(d_model={c.d_model}, layers={c.encoder_layers}+{c.decoder_layers}, "
            f"heads={c.encoder_attention_heads}, mels={c.num_mel_bins}, vocab={c.vocab_size}, "
            f"dtype={self.dtype.name}, device='{self.device}')"
        )

    # ----- encoder -------------------------------------------------------------------------
    def _conv(self, x: GPUArray, w: GPUArray, b: GPUArray, stride: int) -> GPUArray:
        """gelu(Conv1d(kernel 3, padding 1, stride)) of time-major x [B, T, C] -> [B, T', d]."""
        bsz, t, ch = x.shape
        padded = zeros((bsz, t + 2, ch), x.dtype, x.device)
        padded[:, 1 : t + 1] = x
        t_out = (t - 1) // stride + 1
        # Window j covers padded rows stride*j .. stride*j + 2: 3 * ch consecutive elements.
        cols = padded._view((bsz, t_out, 3 * ch), ((t + 2) * ch, stride * ch, 1), padded._offset)
        return ops.linear(cols.contiguous(), w, b, activation="gelu")

    def encode(self, features: GPUArray) -> GPUArray:
        """Encoder output [B, max_source_positions, d_model] of log-mel features
        [B, num_mel_bins, 2 * max_source_positions] (one 30 s window per row)."""
        c, w = self.config, self.weights
        if features.ndim == 2:
            features = features.reshape(1, *features.shape)
        want = (c.num_mel_bins, c.num_frames)
        if features.ndim != 3 or tuple(features.shape[1:]) != want:
            raise ValueError(
                f"encode: features must be [batch, {want[0]}, {want[1]}] (log-mel frames of a "
                f"30 s window), got shape {features.shape}"
            )
        x = features.astype(self.dtype) if features.dtype is not self.dtype else features
        x = x.to(self.device) if x.device != self.device else x
        x = self._conv(x.transpose(0, 2, 1), w.conv1_w, w.conv1_b, 1)
        x = self._conv(x, w.conv2_w, w.conv2_b, 2)
        x = ops.add(x, w.encoder_positions)
        heads = c.encoder_attention_heads
        for layer in w.encoder_layers:
            x = ops.add(x, self._self_attention(layer.attn, x, heads))
            x = ops.add(x, self._mlp(layer, x))
        return ops.layernorm(x, w.encoder_norm, w.encoder_norm_bias, c.layer_norm_eps)

    def _norm(self, x: GPUArray, a: AttentionWeights) -> GPUArray:
        return ops.layernorm(x, a.norm, a.norm_bias, self.config.layer_norm_eps)

    def _split_heads(self, x: GPUArray, heads: int) -> GPUArray:
        """[B, S, H * D] (a view is fine) -> the [B, H, S, D] view attention reads."""
        b, s, n = x.shape
        return x.reshape(b, s, heads, n // heads).transpose(0, 2, 1, 3)

    def _merge_heads(self, o: GPUArray) -> GPUArray:
        b, h, s, d = o.shape
        return o.transpose(0, 2, 1, 3).reshape(b, s, h * d)

    def _self_attention(self, a: AttentionWeights, x: GPUArray, heads: int) -> GPUArray:
        assert a.wqkv is not None
        d = self.config.d_model
        qkv = ops.linear(self._norm(x, a), a.wqkv, a.bqkv)
        q, k, v = (self._split_heads(qkv[:, :, i * d : (i + 1) * d], heads) for i in range(3))
        o = ops.sdpa(q, k, v, causal=False, scale=1.0)  # q carries the 1/sqrt(D) (weights.py)
        return ops.linear(self._merge_heads(o), a.wo, a.bo)

    def _mlp(self, layer: EncoderLayer, x: GPUArray) -> GPUArray:
        h = ops.layernorm(x, layer.mlp_norm, layer.mlp_norm_bias, self.config.layer_norm_eps)
        h = ops.linear(h, layer.w_fc1, layer.b_fc1, activation="gelu")
        return ops.linear(h, layer.w_fc2, layer.b_fc2)

    # ----- decoder -------------------------------------------------------------------------
    def new_state(self, batch_size: int = 1) -> DecoderState:
        return DecoderState(self, batch_size)

    def set_encoder_output(self, state: DecoderState, encoded: GPUArray) -> None:
        """Compute each layer's cross-attention K/V of ``encoded`` [B, frames, d] into the
        state's fixed buffers (rows beyond B keep their old values) and forget the tokens."""
        b = encoded.shape[0]
        if b > state.batch_size:
            raise ValueError(f"{b} windows but the decoder state has {state.batch_size} rows")
        for i, layer in enumerate(self.weights.decoder_layers):
            assert layer.cross is not None and layer.cross.wkv is not None
            kv = ops.linear(encoded, layer.cross.wkv, layer.cross.bkv)
            state.cross[i, :b] = kv
        state.reset()

    def forward(self, state: DecoderState, ids: Any) -> GPUArray:
        """Feed ids [B, S] (host ints or a device int64 array) after the state's tokens; the
        float32 logits [B, vocab] of the last position. Positions and cache marks come from the
        host-known length (the prompt step, and eager decode steps)."""
        b = state.batch_size
        if not isinstance(ids, GPUArray):
            ids = from_numpy(np.asarray(ids, dtype=np.int64).reshape(b, -1), device=self.device)
        s = ids.shape[1]
        state.cache.check_room(0, s)
        start = state.length
        pos = self._positions[start : start + s]
        marks = from_numpy(np.array([[start] * b, [start + s] * b], np.int32), device=self.device)
        logits = self.step(state, ids, pos, marks)
        state.length += s
        state.cache.lengths[:] = state.length
        return logits

    def step(
        self, state: DecoderState, ids: GPUArray, positions: GPUArray, marks: GPUArray
    ) -> GPUArray:
        """One decoder pass whose inputs are all on the device: ids int64 [B, S], positions
        int64 [S] or [B, S], marks int32 [2, B] (each row's cache write position and new
        length). Reads nothing back to the host (capturable); the length is left to the
        caller. Returns float32 logits [B, vocab] of the last position."""
        c, w = self.config, self.weights
        heads, d = c.decoder_attention_heads, c.d_model
        x = ops.add(
            ops.embedding(ids, w.embed_tokens), ops.embedding(positions, w.decoder_positions)
        )
        b, s, _ = x.shape
        for i, layer in enumerate(w.decoder_layers):
            a = layer.attn
            assert a.wqkv is not None and layer.cross is not None
            qkv = ops.linear(self._norm(x, a), a.wqkv, a.bqkv)
            q, k, v = (self._split_heads(qkv[:, :, j * d : (j + 1) * d], heads) for j in range(3))
            kc, vc = state.cache.rows(i, 0, b)
            ops.kv_cache_write(kc, vc, k, v, marks[0])
            o = ops.sdpa_decode(q, kc, vc, marks[1], scale=1.0)
            x = ops.add(x, ops.linear(self._merge_heads(o), a.wo, a.bo))
            x = ops.add(x, self._cross_attention(layer.cross, x, state.cross[i, :b]))
            x = ops.add(x, self._mlp(layer, x))
        h = ops.layernorm(x[:, s - 1 :], w.decoder_norm, w.decoder_norm_bias, c.layer_norm_eps)
        logits = ops.linear(h, w.embed_tokens).reshape(b, c.vocab_size)
        return logits if logits.dtype is float32 else ops.cast(logits, float32)

    def _cross_attention(self, a: AttentionWeights, x: GPUArray, kv: GPUArray) -> GPUArray:
        assert a.wq is not None
        heads, d = self.config.decoder_attention_heads, self.config.d_model
        q = self._split_heads(ops.linear(self._norm(x, a), a.wq, a.bq), heads)
        k = self._split_heads(kv[:, :, :d], heads)
        v = self._split_heads(kv[:, :, d:], heads)
        o = ops.sdpa(q, k, v, causal=False, scale=1.0)
        return ops.linear(self._merge_heads(o), a.wo, a.bo)
