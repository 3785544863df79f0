// Dense GEMV: y[M, N] = x[M, K] @ W^T + bias with W [N, K] in x's dtype (bfloat16 or float16).
//
// Layout: W row-major, row n of W (its K values, 16-byte aligned, row stride a multiple of 16
// bytes) is output column n; x [M, K] with its last dim contiguous and a row stride that is a
// multiple of 8 elements; K % 8 == 0; y contiguous [M, N].
// Granule: 8 values (16 bytes) of one W row; thread t's granule supplies k-slots {2t, 2t+1}
// (values 0, 1), {2t+8, 2t+9} (2, 3) of one mma and the same of a second (4..7): x pairs are
// read as they lie in memory, no permutes.
//
// Numerics: products of two half-precision values are exact in fp32; the tensor cores add them
// into fp32 accumulators (K/16 mma steps over all warps), the warps' partial sums are added in
// fp32 in a fixed order, the bias in fp32, then one rounding to x's dtype. Error bound against
// the float64 product of the same inputs (checked by tests/native/test_native_gemv.py):
//   |y - ref| <= u |ref| + (K/4 + 32) * 2^-24 * (sum_k |x_k w_k| + |bias|)
// with u = 2^-8 (bfloat16) or 2^-11 (float16): the store's rounding plus a loose worst case of
// the fp32 accumulation (one ulp per mma step, whatever rounding the tensor cores use inside).
#include "gemv/gemv_kernel.cuh"

namespace pgk {
namespace gemv_detail {
namespace {

struct Dense {
  static constexpr int kElems = 8;
  // Warp-steps a super-step (gemv_kernel.cuh's launch): 2, or 1 with many blocks of short rows.
  static constexpr int kUnroll = 2;
  static constexpr bool one_step(std::int64_t k) { return k <= 4096; }

  template <typename T>
  __device__ __forceinline__ static void step(const Params&, const Ctx<T>& c,
                                              const uint4 (&w)[kTiles], float (&acc)[kTiles][4],
                                              std::int64_t step) {
    const std::int64_t gi = step * 4 + c.t;
    const bool ok = gi < c.granules;
    const uint4 ra = ld_x(c.xa, gi * kElems, ok);
    const uint4 rb = ld_x(c.xb, gi * kElems, ok);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      Ops<T>::mma(acc[j], ra.x, rb.x, ra.y, rb.y, w[j].x, w[j].y);
      Ops<T>::mma(acc[j], ra.z, rb.z, ra.w, rb.w, w[j].z, w[j].w);
    }
  }

  __device__ static float finish(const Params&, float v, std::int64_t) { return v; }
};

}  // namespace
}  // namespace gemv_detail

void gemv_dense(const GemvArgs& a) {
  gemv_detail::check_common(a, gemv_detail::Dense::kElems, "gemv_dense");
  // The dense gated product is the Triton kernel's (op linear_silu_mul); this kernel has none.
  PGK_REQUIRE(!a.gated, "the dense gemv has no gated product");
  // Likewise the dense product with the RMSNorm read in (op rmsnorm_linear).
  PGK_REQUIRE(!a.norm, "the dense gemv has no RMSNorm form");
  gemv_detail::dispatch_half(a.dtype, [&](auto t) {
    using T = decltype(t);
    gemv_detail::launch<T, gemv_detail::Dense>(a, "gemv_dense_kernel");
  });
}

}  // namespace pgk
