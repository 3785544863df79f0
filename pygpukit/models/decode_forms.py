"""Which fused forms a decode step of the transformer takes (models/transformer.py asks): the
knobs, with the measurements behind them, and the rules that keep a user's route rules in
charge of the ops they name."""

from __future__ import annotations

from pygpukit import determinism
from pygpukit.array import GPUArray
from pygpukit.models.config import ModelSpec
from pygpukit.models.weights import LayerWeights
from pygpukit.routing.overrides import forced_backend, named_backend

__all__ = ["APPEND_ATTENTION", "QKV_ROPE_WRITE", "append_attention", "qkv_rope_write"]

# True: a decode step writes the cache and attends in one launch (gp.sdpa_decode_append) instead
# of kv_cache_write then sdpa_decode (see append_attention). False: measured slower. H100,
# 2026-11-27 (benchmarks/tuning/decode_ab.py --experiment append, one process, two rounds), the
# graph-replayed batch-1 step: Llama-3.2-1B shape 1104.5-1106.2 us in one launch launched early,
# 1062.0-1062.3 launched plainly, 1038.6-1039.0 in two launches; Qwen3-8B 5609.1-5609.6,
# 5574.9-5578.2, 5562.2-5562.9. The write's round trips (new k and v, the tables, the store and
# a barrier) sit in front of every split's key loads, and launched early the kernel's programs
# (195-255 registers a thread) become resident beside the qkv GEMV still streaming its weight.
# Again on an H200, 2026-11-30, with attention's one-loop few-programs class, a step inside the
# 32-step graph (Llama-3.2-1B shape): 823.6-823.9 us in one launch launched early, 797.7-798.0
# plainly, 774.4-774.8 in two.
APPEND_ATTENTION = False
# True: a decode step of a model with RoPE over the whole head and no head norms (Llama, Qwen2,
# Mistral) starts its attention with gp.rmsnorm_qkv_rope_write (the qkv product with its norm,
# RoPE on q and k and the cache write in one launch where the decode GEMV serves; the two ops
# otherwise) instead of gp.rmsnorm_linear then gp.kv_cache_write. The same bits either way.
# False: measured slower. H200, 2026-11-29 (benchmarks/tuning/decode_ab.py --experiment
# qkv-write, one process, two rounds, a step inside the 32-step graph): Llama-3.2-1B shape
# 798.7-798.9 us in one launch against 792.6 in two (the same call); a build with the kernel's
# wait outside the GEMV body 802.8-803.6 against 797.3-799.5 (two calls) and, Llama-3.1-8B,
# 4184.9-4186.0 against 4047.1-4060.7. The kernel alone is faster (8.4 us against 7.3 + 2.8,
# Nsight Compute); inside the early-launched chain it is not
# (backends/triton_kernels/qkv_write.py).
QKV_ROPE_WRITE = False


def append_attention() -> bool:
    """Whether this decode step writes the cache and attends in one launch: APPEND_ATTENTION,
    outside the deterministic mode (whose batch-invariant prefill runs the two launches at every
    chunk length, so its decode steps do too), and unless a route rule names kv_cache_write or
    sdpa_decode (or a "*" rule forces a backend): the user asked for those ops' backends. A rule
    naming sdpa_decode_append itself keeps the one launch whatever the other rules say."""
    if not APPEND_ATTENTION or determinism.is_deterministic():
        return False
    if named_backend("sdpa_decode_append") is not None:
        return True
    return forced_backend("kv_cache_write")[0] is None and forced_backend("sdpa_decode")[0] is None


def qkv_rope_write(spec: ModelSpec, lw: LayerWeights) -> bool:
    """Whether a decode step's attention (RoPE over the whole head) starts with
    gp.rmsnorm_qkv_rope_write: QKV_ROPE_WRITE, an RMSNorm block with a dense qkv weight and no
    head norms (Qwen3's stay in kv_cache_write's launch), and unless a route rule names
    rmsnorm_linear or kv_cache_write (or a "*" rule forces a backend): the user asked for those
    ops. A rule naming rmsnorm_qkv_rope_write itself keeps the one call."""
    if spec.norm != "rmsnorm" or not isinstance(lw.wqkv, GPUArray):
        return False
    if lw.q_norm is not None or lw.k_norm is not None:
        return False
    if named_backend("rmsnorm_qkv_rope_write") is not None:
        return True
    if not QKV_ROPE_WRITE:
        return False
    return (
        forced_backend("rmsnorm_linear")[0] is None and forced_backend("kv_cache_write")[0] is None
    )
