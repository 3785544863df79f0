"""Whisper checkpoint tensors (HF names) to device parameters.

Layouts chosen for the ops: Linear weights stay [out, in]; the self-attention q/k/v projections
are concatenated into one ``wqkv`` (one GEMM), the cross-attention k/v into ``wkv`` (computed once
per window from the encoder output); Conv1d weights [out, in, 3] become [out, 3 * in] so a
convolution is one linear over a window of three time steps (im2col, time-major). HF multiplies
the q projection by head_dim ** -0.5 before attention (WhisperAttention.scaling, "to follow the
original implementation"); that factor is folded into wq and bq here. It is a power of two for
every Whisper size (head_dim 64), so the folded weights are exact and attention runs with
scale 1. k_proj has no bias in Whisper; its slot in bqkv is zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pygpukit.array import GPUArray
from pygpukit.dtypes import DataType
from pygpukit.models.weights import TensorSource, _Reader
from pygpukit.models.whisper.config import WhisperConfig
from pygpukit.runtime import Device

__all__ = ["AttentionWeights", "EncoderLayer", "DecoderLayer", "WhisperWeights", "load"]


@dataclass
class AttentionWeights:
    """Self-attention: wqkv [3d, d]; cross-attention: wq [d, d] and wkv [2d, d]."""

    norm: GPUArray
    norm_bias: GPUArray
    wo: GPUArray
    bo: GPUArray
    wqkv: GPUArray | None = None
    bqkv: GPUArray | None = None
    wq: GPUArray | None = None
    bq: GPUArray | None = None
    wkv: GPUArray | None = None
    bkv: GPUArray | None = None


@dataclass
class EncoderLayer:
    attn: AttentionWeights
    mlp_norm: GPUArray
    mlp_norm_bias: GPUArray
    w_fc1: GPUArray
    b_fc1: GPUArray
    w_fc2: GPUArray
    b_fc2: GPUArray


@dataclass
class DecoderLayer(EncoderLayer):
    cross: AttentionWeights | None = None


@dataclass
class WhisperWeights:
    conv1_w: GPUArray  # [d, 3 * num_mel_bins]
    conv1_b: GPUArray
    conv2_w: GPUArray  # [d, 3 * d]
    conv2_b: GPUArray
    encoder_positions: GPUArray  # [max_source_positions, d], sinusoids stored as weights
    encoder_layers: list[EncoderLayer]
    encoder_norm: GPUArray
    encoder_norm_bias: GPUArray
    embed_tokens: GPUArray  # also the output projection (proj_out is tied to it)
    decoder_positions: GPUArray  # [max_target_positions, d], learned
    decoder_layers: list[DecoderLayer]
    decoder_norm: GPUArray
    decoder_norm_bias: GPUArray


def _conv(r: _Reader, name: str, c_out: int, c_in: int) -> GPUArray:
    w = r.host(name, (c_out, c_in, 3))
    # [out, in, k] -> [out, k, in]: the im2col window holds time steps t-1, t, t+1 one after
    # another, each with all input channels.
    return r.upload(np.ascontiguousarray(np.transpose(w, (0, 2, 1))).reshape(c_out, 3 * c_in))


def _attention(r: _Reader, p: str, norm: str, d: int, heads: int, cross: bool) -> AttentionWeights:
    scaling = np.float32(1.0 / math.sqrt(d // heads))
    wq = r.host(p + "q_proj.weight", (d, d)).astype(np.float32) * scaling
    bq = r.host(p + "q_proj.bias", (d,)).astype(np.float32) * scaling
    wk, wv = r.host(p + "k_proj.weight", (d, d)), r.host(p + "v_proj.weight", (d, d))
    bk = np.zeros(d, np.float32)
    bv = r.host(p + "v_proj.bias", (d,)).astype(np.float32)
    a = AttentionWeights(
        norm=r.get(norm + ".weight", (d,)),
        norm_bias=r.get(norm + ".bias", (d,)),
        wo=r.get(p + "out_proj.weight", (d, d)),
        bo=r.get(p + "out_proj.bias", (d,)),
    )
    if cross:
        a.wq, a.bq = r.upload(wq), r.upload(bq)
        a.wkv = r.upload(np.concatenate([wk, wv]).astype(np.float32))
        a.bkv = r.upload(np.concatenate([bk, bv]))
    else:
        a.wqkv = r.upload(np.concatenate([wq, wk.astype(np.float32), wv.astype(np.float32)]))
        a.bqkv = r.upload(np.concatenate([bq, bk, bv]))
    return a


def _layer(r: _Reader, p: str, c: WhisperConfig, decoder: bool) -> DecoderLayer:
    d = c.d_model
    heads = c.decoder_attention_heads if decoder else c.encoder_attention_heads
    ffn = c.decoder_ffn_dim if decoder else c.encoder_ffn_dim
    layer = DecoderLayer(
        attn=_attention(r, p + "self_attn.", p + "self_attn_layer_norm", d, heads, False),
        mlp_norm=r.get(p + "final_layer_norm.weight", (d,)),
        mlp_norm_bias=r.get(p + "final_layer_norm.bias", (d,)),
        w_fc1=r.get(p + "fc1.weight", (ffn, d)),
        b_fc1=r.get(p + "fc1.bias", (ffn,)),
        w_fc2=r.get(p + "fc2.weight", (d, ffn)),
        b_fc2=r.get(p + "fc2.bias", (d,)),
    )
    if decoder:
        layer.cross = _attention(
            r, p + "encoder_attn.", p + "encoder_attn_layer_norm", d, heads, True
        )
    return layer


def load(
    source: TensorSource,
    config: WhisperConfig,
    dtype: DataType,
    device: Device,
    progress: Callable[[int], None] | None = None,
    where: str = "checkpoint",
) -> WhisperWeights:
    """The parameters of WhisperForConditionalGeneration (``model.`` prefix) or WhisperModel
    (no prefix) from ``source``, converted to ``dtype`` on ``device``."""
    r = _Reader(source, dtype, device, progress, where)
    pre = "model." if r.has("model.encoder.conv1.weight") else ""
    c, d = config, config.d_model
    e, dec = pre + "encoder.", pre + "decoder."
    return WhisperWeights(
        conv1_w=_conv(r, e + "conv1.weight", d, c.num_mel_bins),
        conv1_b=r.get(e + "conv1.bias", (d,)),
        conv2_w=_conv(r, e + "conv2.weight", d, d),
        conv2_b=r.get(e + "conv2.bias", (d,)),
        encoder_positions=r.get(e + "embed_positions.weight", (c.max_source_positions, d)),
        encoder_layers=[_layer(r, f"{e}layers.{i}.", c, False) for i in range(c.encoder_layers)],
        encoder_norm=r.get(e + "layer_norm.weight", (d,)),
        encoder_norm_bias=r.get(e + "layer_norm.bias", (d,)),
        embed_tokens=r.get(dec + "embed_tokens.weight", (c.vocab_size, d)),
        decoder_positions=r.get(dec + "embed_positions.weight", (c.max_target_positions, d)),
        decoder_layers=[_layer(r, f"{dec}layers.{i}.", c, True) for i in range(c.decoder_layers)],
        decoder_norm=r.get(dec + "layer_norm.weight", (d,)),
        decoder_norm_bias=r.get(dec + "layer_norm.bias", (d,)),
    )
