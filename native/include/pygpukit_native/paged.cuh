// Where a token lives in a KV cache, shared by kv_cache_write (attention_decode.cu), which stores
// the key and value of token pos, and sdpa_decode (decode mode of attention/attn_rows.cuh), which
// reads them back. The two must agree bit for bit on the block, the slot and the address: a key
// written by one is read by the other, and a lookup that differed in either would attend to a
// wrong or never-written slot without any error. The Triton twins (triton_kernels/kv_write.py,
// attention_decode.py) follow the same rule, as does the NumPy reference.
//
// Paged cache: token pos of sequence row is in block table[row * bt_s0 + (pos / page) * bt_s1]
// (int32 ids) at slot pos % page. Contiguous cache (no table; the callers' default): block row
// (the batch entry), slot pos.
#pragma once

#include <cstdint>

namespace pgk {

// Block id and slot of token pos of sequence row through the block table at address table
// (element strides bt_s0, bt_s1; page slots per block). Returns false when the id lies outside
// [0, nblocks): the writer then skips the token, the reader poisons the row.
__device__ __forceinline__ bool paged_slot(std::uintptr_t table, std::int64_t bt_s0,
                                           std::int64_t bt_s1, std::int64_t page,
                                           std::int64_t nblocks, std::int64_t row,
                                           std::int64_t pos, std::int64_t& blk,
                                           std::int64_t& slot) {
  blk = reinterpret_cast<const int*>(table)[row * bt_s0 + (pos / page) * bt_s1];
  slot = pos % page;
  return blk >= 0 && blk < nblocks;
}

// Element offset of [blk, head, slot, 0] in a cache of element strides s (block or batch entry,
// head, slot, dim); dim d is d * s[3] further. The attention kernel passes these offsets between
// lanes; kv_cache_write adds them to the cache pointers.
__device__ __forceinline__ std::int64_t kv_offset(const std::int64_t (&s)[4], std::int64_t blk,
                                                  std::int64_t head, std::int64_t slot) {
  return blk * s[0] + head * s[1] + slot * s[2];
}

}  // namespace pgk
