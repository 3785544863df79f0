// sdpa_decode: the decode mode of the shared attention row kernel (attention/attn_rows.cuh).
// kv_cache_write: one block per (new token, kv head); threads over the head dim. v is copied as
// is; k is copied, or rotated in the compute type with gp.rope's arithmetic (rotate.cuh: float32
// and float64 equal NumPy's bit for bit) and rounded once to the cache dtype.
#include "attention_decode/attention_decode.h"

#include <limits>
#include <string>

#include "attention/attn_rows.cuh"
#include "pygpukit_native/check.h"
#include "pygpukit_native/paged.cuh"
#include "pygpukit_native/rotate.cuh"
#include "pygpukit_native/convert.cuh"

namespace pgk {
namespace {

using attn::dptr;

template <typename T>
__global__ void kv_write_kernel(const KvWriteArgs a) {
  using C = typename Compute<T>::type;
  const std::int64_t tok = blockIdx.x;
  const std::int64_t b = tok / a.sq, j = tok % a.sq;
  const std::int64_t hk = blockIdx.y;
  const std::int64_t pos = static_cast<std::int64_t>(dptr<const int>(a.positions)[b * a.pos_stride]) + j;
  if (pos < 0 || pos >= a.cap) return;  // the block leaves together: nothing written
  std::int64_t slot = pos, blk = b;
  if (a.block_table &&
      !paged_slot(a.block_table, a.bt_s0, a.bt_s1, a.page, a.nblocks, b, pos, blk, slot)) {
    return;  // a block id outside the cache: nothing written
  }
  const T* ks = dptr<const T>(a.k) + b * a.sk[0] + hk * a.sk[1] + j * a.sk[2];
  const T* vs = dptr<const T>(a.v) + b * a.sv[0] + hk * a.sv[1] + j * a.sv[2];
  T* kd = dptr<T>(a.k_cache) + kv_offset(a.skc, blk, hk, slot);
  T* vd = dptr<T>(a.v_cache) + kv_offset(a.svc, blk, hk, slot);
  const C* cs = dptr<const C>(a.cos);
  const C* sn = dptr<const C>(a.sin);
  const bool in_table = pos < a.max_pos;
  for (std::int64_t d = threadIdx.x; d < a.d; d += blockDim.x) {
    vd[d * a.svc[3]] = vs[d * a.sv[3]];
    if (d < 2 * a.half) {
      std::int64_t i, ia, ib;
      bool first;
      if (a.gptj) {
        i = d / 2;
        ia = 2 * i;
        ib = ia + 1;
        first = (d & 1) == 0;
      } else {
        first = d < a.half;
        i = first ? d : d - a.half;
        ia = i;
        ib = i + a.half;
      }
      const C xa = to_compute(ks[ia * a.sk[3]]);
      const C xb = to_compute(ks[ib * a.sk[3]]);
      const C nan = std::numeric_limits<C>::quiet_NaN();
      const C c = in_table ? cs[pos * a.scos[0] + i * a.scos[1]] : nan;
      const C s = in_table ? sn[pos * a.ssin[0] + i * a.ssin[1]] : nan;
      const C r = first ? rotate_first(xa, xb, c, s) : rotate_second(xa, xb, c, s);
      kd[d * a.skc[3]] = from_compute<T>(r);
    } else {
      kd[d * a.skc[3]] = ks[d * a.sk[3]];
    }
  }
}

}  // namespace

void sdpa_decode_rows(const AttnArgs& a) {
  PGK_REQUIRE_AS("sdpa_decode", a.mode == AttnMode::decode,
                 "sdpa_decode_rows takes decode-mode arguments");
  attn::launch_rows<AttnMode::decode>(a, "sdpa_decode");
}

void kv_cache_write(const KvWriteArgs& a) {
  PGK_REQUIRE(a.batch >= 0 && a.kv_heads >= 0 && a.sq >= 0 && a.d >= 0, "negative sizes");
  PGK_REQUIRE(a.half >= 0 && 2 * a.half <= a.d, "rotary_dim must lie in [0, head dim]");
  if (a.batch * a.kv_heads * a.sq * a.d == 0) return;
  PGK_REQUIRE(a.k_cache && a.v_cache && a.k && a.v && a.positions,
              "caches, k, v and positions must be device pointers");
  PGK_REQUIRE(!a.block_table || (a.page > 0 && a.nblocks > 0), "paged: page and nblocks > 0");
  PGK_REQUIRE(a.batch * a.sq <= 0x7fffffff, "more than 2^31-1 new tokens");
  PGK_REQUIRE(a.kv_heads <= 65535, "more than 65535 kv heads");
  if (a.half > 0) {
    PGK_REQUIRE(a.cos && a.sin, "rotation needs cos and sin tables");
    const DType ct = a.dtype == DType::f64 ? DType::f64 : DType::f32;
    PGK_REQUIRE(a.table_dtype == ct, std::string("cos/sin must be ") + dtype_name(ct) +
                                         " (the compute type), got " + dtype_name(a.table_dtype));
  }
  use_device(a.device);
  const int threads = a.d >= 128 ? 128 : (a.d >= 64 ? 64 : 32);
  const dim3 grid(static_cast<unsigned>(a.batch * a.sq), static_cast<unsigned>(a.kv_heads));
  dispatch_float(a.dtype, "kv_cache_write", [&](auto t) {
    using T = decltype(t);
    kv_write_kernel<T><<<grid, threads, 0, as_stream(a.stream)>>>(a);
  });
  PGK_CHECK_LAUNCH("kv_write_kernel");
}

}  // namespace pgk
