// Decode attention over a contiguous or paged KV cache and the KV-cache write with fused RoPE:
// the native twins of pygpukit/triton_kernels/attention_decode.py, numerics of
// pygpukit/backends/cpu/attention_decode.py. Lengths, write positions and block tables are int32
// device arrays read by the kernels (no host sync; a launch replays under a CUDA graph).
#pragma once

#include <cstdint>

#include "attention/attention.h"
#include "pygpukit_native/dtype.h"

namespace pgk {

// sdpa_decode: AttnArgs in decode mode (lens, block_table, page, nblocks, cap set; units = B).
// A length outside [0, cap] or a block id outside [0, nblocks) makes that row NaN.
void sdpa_decode_rows(const AttnArgs& a);

// The split-key tensor-core kernel (split_decode.cu): float16/bfloat16, head dim 64, 80, 96,
// 128 or 256, unit-stride head dims, 16-byte aligned cache rows. The caller plans the split
// (pygpukit/backends/native_kernels/attention_decode.py) and owns the workspace.
struct DecodeSplit {
  std::int64_t splits;  // key splits per (sequence, kv head, tile)
  std::int64_t chunk;   // keys per split at full capacity, a multiple of 16; splits * chunk >= cap
  // The fewest keys a split takes, a multiple of 16 in [16, chunk]: a sequence of len keys
  // spreads its 16-key steps over the splits, each split taking min(chunk, max(floor, that))
  // keys (pygpukit/backends/_support/scratch.split_chunk); floor == chunk: the capacity's split.
  std::int64_t floor;
  std::int64_t tiles;   // 16-row tiles of the heads / kv_heads * sq query rows
  std::int64_t entries;  // block-table entries a split loads into shared memory (paged)
  std::int64_t stages;   // 16-key steps in each warp's cp.async ring: 3 or 4 (D <= 128), 2 (256)
  // fp32 partials [units][splits][16][D], log2-sum-exp [units][splits][16], int32 counters
  // [units] that start at 0 (unit = (b * kv_heads + hk) * tiles + tile); unused at 1 split.
  std::uintptr_t parts, lse, counters;
};
void sdpa_decode_split(const AttnArgs& a, const DecodeSplit& sp);

// Dynamic shared memory of one split block (bytes), for the planner's check against the
// device's opt-in limit.
std::int64_t split_decode_smem(std::int64_t d, int elem, std::int64_t entries, int stages);

struct KvWriteArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;        // caches, k, v
  DType table_dtype;  // cos/sin: the compute type (float32; float64 for float64 caches)
  std::int64_t batch, kv_heads, sq, d;
  std::int64_t half;  // rotary_dim / 2; 0: no rotation
  bool gptj;          // pairs (2i, 2i + 1) instead of (i, i + half)
  std::uintptr_t k_cache, v_cache, k, v;
  std::int64_t skc[4], svc[4], sk[4], sv[4];  // element strides (block/batch, head, slot, dim)
  std::uintptr_t positions;                  // int32 [batch]
  std::int64_t pos_stride;
  std::uintptr_t block_table;  // 0: contiguous caches
  std::int64_t bt_s0, bt_s1, page, nblocks;
  std::int64_t cap;  // slots per sequence
  std::uintptr_t cos, sin;
  std::int64_t max_pos, scos[2], ssin[2];
};

// Token j of sequence b goes to slot positions[b] + j; a slot outside [0, cap) or a block id
// outside the cache is skipped (never written); a position past the tables rotates with NaN.
void kv_cache_write(const KvWriteArgs& a);

}  // namespace pgk
