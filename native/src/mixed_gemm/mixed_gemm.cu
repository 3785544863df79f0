// The int4 mixed-input GEMM (mixed_gemm.h): the entry point and its checks, the scales'
// transpose into the layout CUTLASS's mainloop reads, and the choice of instance. The GEMM
// itself is mixed_gemm.cuh's.
//
// Why a transpose a call rather than a second copy of the scales at load: the scales are at
// most 1/16 of the weight's bytes (one float32 per 128 int4 values), a pass over them is a few
// microseconds against the tens to hundreds of the products this kernel takes, and the
// QuantizedWeight keeps one layout that the GEMV, the Triton kernel and this GEMM all read.
#include "mixed_gemm/mixed_gemm.h"

#include <cuda_runtime.h>

#include <string>

#include "mixed_gemm/instances.h"
#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/device_facts.h"

namespace pgk {
namespace {

constexpr std::size_t kAlign = 256;

// A scale as the type the instance reads: itself, or widened to float32 (exact).
template <typename D>
struct Widen {
  template <typename S>
  __device__ static D from(S v) {
    return v;
  }
};
template <>
struct Widen<float> {
  template <typename S>
  __device__ static float from(S v) {
    return to_compute(v);
  }
};
std::size_t up_to(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Instance {
  std::size_t (*workspace)(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t group,
                           int sm_count);
  void (*run)(const MixedProblem& p);
};

// Tile N (rows of x a tile) 64 up to 64 rows, else 128: at 64 rows a 128-row tile would be
// half padding; from 128 rows the wider tile reads each weight tile half as often. Scales of
// x's dtype go to the instances that read them as they are (same_scales), any other dtype to
// the float32 ones.
Instance instance(DType dt, bool same_scales, std::int64_t m) {
  const bool wide = m > 64;
#define PGK_PICK(NAME) Instance{mixed_workspace_##NAME, mixed_run_##NAME}
  if (dt == DType::bf16) {
    if (same_scales) return wide ? PGK_PICK(int4_bf16_xs_n128) : PGK_PICK(int4_bf16_xs_n64);
    return wide ? PGK_PICK(int4_bf16_f32s_n128) : PGK_PICK(int4_bf16_f32s_n64);
  }
  if (same_scales) return wide ? PGK_PICK(int4_f16_xs_n128) : PGK_PICK(int4_f16_xs_n64);
  return wide ? PGK_PICK(int4_f16_f32s_n128) : PGK_PICK(int4_f16_f32s_n64);
#undef PGK_PICK
}

void check_sizes(const char* who, DType dt, DType sdt, std::int64_t m, std::int64_t n,
                 std::int64_t k, std::int64_t group) {
  PGK_REQUIRE_AS(who, dt == DType::f16 || dt == DType::bf16,
                 std::string("x must be float16 or bfloat16, got ") + dtype_name(dt));
  PGK_REQUIRE_AS(who, sdt == DType::f32 || sdt == DType::f16 || sdt == DType::bf16,
                 std::string("scales must be float32, float16 or bfloat16, got ") +
                     dtype_name(sdt));
  PGK_REQUIRE_AS(who, group == 128, "the scale group must be 128, got " + std::to_string(group));
  PGK_REQUIRE_AS(who,
                 m >= 1 && m < (std::int64_t{1} << 31) && n >= 8 && n % 8 == 0 &&
                     n < (std::int64_t{1} << 31) && k >= group && k % group == 0 &&
                     k < (std::int64_t{1} << 27),
                 "needs m >= 1 and n a positive multiple of 8, each below 2^31, and k a positive "
                 "multiple of 128 below 2^27; got m=" + std::to_string(m) + " n=" +
                     std::to_string(n) + " k=" + std::to_string(k));
}

// Scratch: the scales [groups, n] (float32, or x's dtype when they are of it), then
// CUTLASS's workspace.
struct Scratch {
  std::size_t scales, cutlass, total;
  Scratch(DType dt, DType sdt, std::int64_t m, std::int64_t n, std::int64_t k,
          std::int64_t group, int sms) {
    const bool same = sdt == dt;
    scales = 0;
    cutlass = up_to(static_cast<std::size_t>(n) * static_cast<std::size_t>(k / group) *
                    (same ? 2 : 4));
    total = cutlass + instance(dt, same, m).workspace(m, n, k, group, sms);
  }
};

// st[g, j] = s[j, g] as D (float32, exact for every scale dtype, or S itself): 32 x 32 tiles
// through shared memory, so both the reads and the writes are coalesced.
template <typename S, typename D>
__global__ void transpose_scales(const S* s, std::int64_t n, std::int64_t groups, D* st) {
  __shared__ S tile[32][33];
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * 32;
  const std::int64_t g0 = static_cast<std::int64_t>(blockIdx.y) * 32;
  for (int r = threadIdx.y; r < 32; r += blockDim.y) {
    const std::int64_t j = j0 + r, g = g0 + threadIdx.x;
    if (j < n && g < groups) tile[r][threadIdx.x] = s[j * groups + g];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += blockDim.y) {
    const std::int64_t g = g0 + r, j = j0 + threadIdx.x;
    if (g < groups && j < n) st[g * n + j] = Widen<D>::from(tile[threadIdx.x][r]);
  }
}

bool aligned16(std::uintptr_t p) { return p % 16 == 0; }

}  // namespace

std::size_t mixed_gemm_int4_workspace(int device, DType dtype, DType scale_dtype, std::int64_t m,
                                      std::int64_t n, std::int64_t k, std::int64_t group) {
  check_sizes(__func__, dtype, scale_dtype, m, n, k, group);
  use_device(device);
  return Scratch(dtype, scale_dtype, m, n, k, group, device_facts(device).sms).total;
}

void mixed_gemm_int4(const MixedGemmArgs& a) {
  check_sizes(__func__, a.dtype, a.scale_dtype, a.m, a.n, a.k, a.group);
  PGK_REQUIRE((a.m == 1 || (a.x_row_stride >= a.k && a.x_row_stride % 8 == 0)) &&
                  a.x && a.data && a.y && a.scales && aligned16(a.x) && aligned16(a.data) &&
                  aligned16(a.y),
              "x, data, scales and y must be device pointers, x, data and y 16-byte aligned, and "
              "x's rows too (a row stride of at least k, a multiple of 8)");
  PGK_REQUIRE(a.bias == 0 || aligned16(a.bias), "bias must be 16-byte aligned");
  PGK_REQUIRE(a.workspace % 256 == 0, "the workspace must be 256-byte aligned");
  use_device(a.device);
  const DeviceFacts dev = device_facts(a.device);
  PGK_REQUIRE(dev.cc == 90,
              "the CUTLASS mixed-input GEMM is built for sm_90a (Hopper); device has compute "
              "capability " + std::to_string(dev.cc / 10) + "." + std::to_string(dev.cc % 10));
  const Scratch sc(a.dtype, a.scale_dtype, a.m, a.n, a.k, a.group, dev.sms);
  PGK_REQUIRE(a.workspace_bytes >= sc.total,
              "workspace has " + std::to_string(a.workspace_bytes) + " bytes, needs " +
                  std::to_string(sc.total) + " (mixed_gemm_int4_workspace)");
  cudaStream_t stream = as_stream(a.stream);
  char* ws = ptr<char>(a.workspace);
  void* st = ws + sc.scales;
  const std::int64_t groups = a.k / a.group;
  const dim3 grid(static_cast<unsigned>((a.n + 31) / 32),
                  static_cast<unsigned>((groups + 31) / 32));
  const dim3 block(32, 8);
  const bool same = a.scale_dtype == a.dtype;
  auto transpose = [&](auto s_type) {
    using S = decltype(s_type);
    const S* src = ptr<const S>(a.scales);
    if (same) {
      transpose_scales<S, S><<<grid, block, 0, stream>>>(src, a.n, groups, static_cast<S*>(st));
    } else {
      transpose_scales<S, float>
          <<<grid, block, 0, stream>>>(src, a.n, groups, static_cast<float*>(st));
    }
  };
  switch (a.scale_dtype) {
    case DType::f32:
      transpose(float{});
      break;
    case DType::f16:
      transpose(__half{});
      break;
    default:
      transpose(__nv_bfloat16{});
  }
  PGK_CHECK_LAUNCH("mixed_gemm_int4 transpose_scales");
  MixedProblem p{};
  p.device = a.device;
  p.stream = stream;
  p.sm_count = dev.sms;
  p.x = ptr<const void>(a.x);
  p.m = a.m;
  p.k = a.k;
  p.ldx = a.m == 1 ? a.k : a.x_row_stride;
  p.w = ptr<const void>(a.data);
  p.n = a.n;
  p.scales_t = st;
  p.group = a.group;
  p.bias = a.bias ? ptr<const void>(a.bias) : nullptr;
  p.d = ptr<void>(a.y);
  p.workspace = ws + sc.cutlass;
  p.workspace_bytes = a.workspace_bytes - sc.cutlass;
  instance(a.dtype, same, a.m).run(p);
}

}  // namespace pgk
