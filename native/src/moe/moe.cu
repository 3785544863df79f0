// The MoE grouped product (moe.h): the entry point and its checks, the gather of x rows into
// moe_align's slot order, and the finish step (silu(gate) * up, routing weight, one rounding,
// the store to each slot's routed row). The grouped GEMM itself is grouped_gemm.cuh's.
//
// Why a gather and a float32 intermediate, where the Triton twin gathers inside its loads and
// finishes in its epilogue: CUTLASS's TMA mainloop loads whole tiles of a dense A, so the rows
// are gathered first (P x K x 2 bytes, a few percent of the weight bytes at decode); and storing
// the GEMM's float32 sums lets the gate/up pair round once after silu(g) * u, as the Triton and
// NumPy twins do, instead of rounding g and u first.
#include "moe/moe.h"

#include <string>

#include "moe/grouped_gemm.h"
#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/device_facts.h"
#include "pygpukit_native/sigmoid.cuh"

namespace pgk {
namespace {

constexpr std::size_t kAlign = 256;
std::size_t up_to(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The CUTLASS instance for a dtype and block_m: the tile follows block_m alone (see
// grouped_gemm.cuh), 128 x 256 for block_m >= 64, 64 x 128 below.
struct Instance {
  std::size_t (*meta_bytes)(int groups, int sm_count);
  void (*run)(const GroupedProblem& p);
};

Instance instance(DType dt, std::int64_t block_m) {
  const bool bf = dt == DType::bf16;
  if (block_m >= 64) {
    return bf ? Instance{grouped_meta_bytes_bf16_n256, grouped_run_bf16_n256}
              : Instance{grouped_meta_bytes_f16_n256, grouped_run_f16_n256};
  }
  return bf ? Instance{grouped_meta_bytes_bf16_n128, grouped_run_bf16_n128}
            : Instance{grouped_meta_bytes_f16_n128, grouped_run_f16_n128};
}

// The size checks both entry points make (the scratch is sized from the same numbers).
void check_sizes(const char* who, DType dt, std::int64_t experts, std::int64_t n, std::int64_t k,
                 std::int64_t slots) {
  PGK_REQUIRE_AS(who, dt == DType::f16 || dt == DType::bf16,
                 std::string("dtype must be float16 or bfloat16, got ") + dtype_name(dt));
  PGK_REQUIRE_AS(who, experts >= 1 && experts <= 1024,
                 "experts must be in [1, 1024], got " + std::to_string(experts));
  PGK_REQUIRE_AS(who, n >= 1 && k >= 1 && slots >= 0 && slots < (std::int64_t{1} << 31),
                 "n and k must be positive and the slots fewer than 2^31");
}

// Scratch layout: xg [P, K] (x's dtype), d_g [P, N] and d_u [P, N] float32, then the group
// arrays and CUTLASS's workspace.
struct Scratch {
  std::size_t xg, dg, du, meta, total;
  Scratch(DType dt, std::int64_t experts, std::int64_t n, std::int64_t k, std::int64_t slots,
          bool gated, std::int64_t block_m, int sms) {
    const auto p = static_cast<std::size_t>(slots);
    xg = 0;
    dg = xg + up_to(p * static_cast<std::size_t>(k) * 2);
    du = dg + up_to(p * static_cast<std::size_t>(n) * 4);
    meta = du + (gated ? up_to(p * static_cast<std::size_t>(n) * 4) : 0);
    const int groups = static_cast<int>(gated ? 2 * experts : experts);
    total = meta + instance(dt, block_m).meta_bytes(groups, sms);
  }
};

// Block s: slot s's x row into xg (16-byte chunks), zeros for a padding slot. Blocks of no
// expert are left alone: no group covers them.
__global__ void gather_rows(const uint4* x, std::int64_t x_stride16, const std::int32_t* rows,
                            const std::int32_t* be, std::int64_t bm, int experts, std::int64_t r_rows,
                            std::int64_t top_k, std::int64_t chunks, uint4* xg) {
  const std::int64_t s = blockIdx.x;
  const int e = be[s / bm];
  if (e < 0 || e >= experts) return;
  const std::int64_t r = rows[s];
  const bool ok = r >= 0 && r < r_rows;
  const uint4* src = x + (ok ? r / top_k : 0) * x_stride16;
  uint4* dst = xg + s * chunks;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    dst[c] = ok ? src[c] : make_uint4(0, 0, 0, 0);
  }
}

template <typename T>
struct alignas(4 * sizeof(T)) Four {
  T v[4];
};

// Block s: y[rows[s]] from slot s's float32 sums, in the Triton epilogue's order (silu(g) * u,
// then the routing weight, then one rounding); a block of the out-of-range group writes zeros;
// slots outside [0, R) and blocks of no group touch nothing.
template <typename T>
__global__ void finish_rows(const float* dg, const float* du, const float* scale,
                            const std::int32_t* rows, const std::int32_t* be, std::int64_t bm,
                            int experts, std::int64_t r_rows, std::int64_t n, T* y) {
  const std::int64_t s = blockIdx.x;
  const int e = be[s / bm];
  if (e < 0 || e > experts) return;
  const std::int64_t r = rows[s];
  if (r < 0 || r >= r_rows) return;
  auto* out = reinterpret_cast<Four<T>*>(y + r * n);
  const std::int64_t quads = n / 4;
  if (e == experts) {
    Four<T> z;
    for (int i = 0; i < 4; ++i) z.v[i] = Store<T>::cvt(0.0f);
    for (std::int64_t c = threadIdx.x; c < quads; c += blockDim.x) out[c] = z;
    return;
  }
  const auto* g4 = reinterpret_cast<const float4*>(dg + s * n);
  const auto* u4 = du ? reinterpret_cast<const float4*>(du + s * n) : nullptr;
  const float sc = scale ? scale[r] : 1.0f;
  for (std::int64_t c = threadIdx.x; c < quads; c += blockDim.x) {
    const float4 g = g4[c];
    float v[4] = {g.x, g.y, g.z, g.w};
    if (u4) {
      const float4 u = u4[c];
      const float uu[4] = {u.x, u.y, u.z, u.w};
      for (int i = 0; i < 4; ++i) v[i] = v[i] * sigmoid_c(v[i]) * uu[i];
    }
    if (scale) {
      for (int i = 0; i < 4; ++i) v[i] = v[i] * sc;
    }
    Four<T> o;
    for (int i = 0; i < 4; ++i) o.v[i] = Store<T>::cvt(v[i]);
    out[c] = o;
  }
}

bool aligned16(std::uintptr_t p) { return p % 16 == 0; }

}  // namespace

std::size_t moe_grouped_workspace(int device, DType dtype, std::int64_t experts, std::int64_t n,
                                  std::int64_t k, std::int64_t slots, bool gated,
                                  std::int64_t block_m) {
  check_sizes(__func__, dtype, experts, n, k, slots);
  use_device(device);
  return Scratch(dtype, experts, n, k, slots, gated, block_m, device_facts(device).sms).total;
}

void moe_grouped(const MoeGroupedArgs& a) {
  check_sizes(__func__, a.dtype, a.experts, a.n, a.k, a.nb * a.block_m);
  PGK_REQUIRE(a.n >= 8 && a.k >= 8 && a.n % 8 == 0 && a.k % 8 == 0 && a.n < (1 << 30) &&
                  a.k < (1 << 30),
              "n and k must be positive multiples of 8 (16-byte rows), got n=" +
                  std::to_string(a.n) + " k=" + std::to_string(a.k));
  PGK_REQUIRE(a.block_m >= 16 && a.block_m <= 256 && (a.block_m & (a.block_m - 1)) == 0,
              "block_m must be a power of two in [16, 256]");
  PGK_REQUIRE(a.top_k >= 1 && a.x_rows >= 0 && a.nb >= 1,
              "top_k and nb must be positive and x_rows not negative");
  PGK_REQUIRE((a.x_rows <= 1 || a.x_row_stride % 8 == 0) && aligned16(a.x) && aligned16(a.w) &&
                  aligned16(a.w_up) && aligned16(a.y),
              "x, w, w_up and y must be 16-byte aligned (x rows too, with several rows)");
  // CUTLASS places its tensor maps at 64-byte offsets from the base; the group arrays at 256.
  PGK_REQUIRE(a.workspace % 256 == 0, "the workspace must be 256-byte aligned");
  const DeviceFacts dev = hopper_device(__func__, a.device, "the CUTLASS grouped GEMM");
  const bool gated = a.w_up != 0;
  const std::int64_t slots = a.nb * a.block_m;
  const int sms = dev.sms;
  const Scratch sc(a.dtype, a.experts, a.n, a.k, slots, gated, a.block_m, sms);
  PGK_REQUIRE(a.workspace_bytes >= sc.total,
              "workspace has " + std::to_string(a.workspace_bytes) + " bytes, needs " +
                  std::to_string(sc.total) + " (moe_grouped_workspace)");
  const std::int64_t r_rows = a.x_rows * a.top_k;
  if (r_rows == 0) return;
  cudaStream_t stream = as_stream(a.stream);
  char* ws = ptr<char>(a.workspace);
  const auto* rows = ptr<const std::int32_t>(a.rows);
  const auto* be = ptr<const std::int32_t>(a.block_expert);
  const int experts = static_cast<int>(a.experts);

  gather_rows<<<static_cast<unsigned>(slots), 128, 0, stream>>>(
      ptr<const uint4>(a.x), a.x_row_stride / 8, rows, be, a.block_m, experts, r_rows, a.top_k,
      a.k / 8, reinterpret_cast<uint4*>(ws + sc.xg));
  PGK_CHECK_LAUNCH("moe_grouped gather_rows");

  GroupedProblem p{};
  p.device = a.device;
  p.stream = stream;
  p.sm_count = sms;
  p.block_expert = be;
  p.nb = a.nb;
  p.block_m = a.block_m;
  p.experts = experts;
  p.n = a.n;
  p.k = a.k;
  p.gated = gated;
  p.xg = ws + sc.xg;
  p.w = ptr<const void>(a.w);
  p.w_up = gated ? ptr<const void>(a.w_up) : ptr<const void>(a.w);
  p.dg = reinterpret_cast<float*>(ws + sc.dg);
  p.du = gated ? reinterpret_cast<float*>(ws + sc.du) : nullptr;
  p.meta = ws + sc.meta;
  p.meta_bytes = sc.total - sc.meta;
  instance(a.dtype, a.block_m).run(p);

  const auto* scale = ptr<const float>(a.row_scale);
  if (a.dtype == DType::bf16) {
    finish_rows<<<static_cast<unsigned>(slots), 256, 0, stream>>>(
        p.dg, p.du, scale, rows, be, a.block_m, experts, r_rows, a.n, ptr<__nv_bfloat16>(a.y));
  } else {
    finish_rows<<<static_cast<unsigned>(slots), 256, 0, stream>>>(
        p.dg, p.du, scale, rows, be, a.block_m, experts, r_rows, a.n, ptr<__half>(a.y));
  }
  PGK_CHECK_LAUNCH("moe_grouped finish_rows");
}

}  // namespace pgk
