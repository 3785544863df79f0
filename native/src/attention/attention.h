// Scaled dot-product attention, the native twins of pygpukit/triton_kernels/attention.py (sdpa,
// sdpa_varlen) and, through the same row kernel, of attention_decode.py's sdpa_decode; same
// numerics as pygpukit/backends/cpu/attention.py: scores, softmax statistics and the output
// accumulator in float (double for float64), one rounding at the store.
//
// Addressing (element strides, any sign-free layout): query row i of unit b and head h is at
//   q + b * sq[0] + h * sq[1] + (qoff + i) * sq[2] (+ d * sq[3])
// where a unit is a batch entry (sdpa, sdpa_decode) or a packed sequence (sdpa_varlen, whose
// qoff = cu_q[b] and sq[0] = 0); keys likewise with kv head hk = h / (H / Hkv). The output uses
// the same addressing with so. Paged caches (decode): key j of unit b lives in block
// bt[b * bt_s0 + (j / page) * bt_s1] at slot j % page, the block at k + block * sk[0].
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

enum class AttnMode : int { dense = 0, varlen = 1, decode = 2 };

struct AttnArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;  // q, k, v, out
  AttnMode mode;
  std::int64_t units;  // batch entries, or packed sequences (varlen)
  std::int64_t heads, kv_heads;
  std::int64_t sq;  // query rows per unit (varlen: max_seqlen_q, rows past a sequence skipped)
  std::int64_t sk;  // keys per unit (dense only)
  std::int64_t d, dv;
  std::uintptr_t q, k, v, out;
  std::int64_t sq_s[4], sk_s[4], sv_s[4], so_s[4];  // (unit, head, position, dim)
  // varlen: int32 cumulative offsets [units + 1]
  std::uintptr_t cu_q, cu_k;
  std::int64_t cu_q_stride, cu_k_stride;
  // decode: int32 lengths [units], optional int32 block table [units, max_blocks]
  std::uintptr_t lens;
  std::int64_t lens_stride;
  std::uintptr_t block_table;  // 0: contiguous cache
  std::int64_t bt_s0, bt_s1;
  std::int64_t page;     // slots per block (paged)
  std::int64_t nblocks;  // blocks in the cache (paged)
  std::int64_t cap;      // keys a sequence can hold (decode): S_max or max_blocks * page
  double scale;
  bool causal;
};

constexpr int kMaxHeadDim = 256;

void attention_rows(const AttnArgs& a);

}  // namespace pgk
