// The mixed-input GEMM (mixed_gemm.h): the entry point and its checks, the 128-block scales'
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
std::size_t up_to(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

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

struct Instance {
  std::size_t (*workspace)(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t group,
                           int sm_count);
  void (*run)(const MixedProblem& p);
};

// Tile N (rows of x a tile) 64 up to 64 rows, else 128: at 64 rows a 128-row tile would be
// half padding; from 128 rows the wider tile reads each weight tile half as often. int4 scales
// of x's dtype go to the instances that read them as they are (same_scales), any other scales
// to the float32 ones.
Instance instance(MixedFormat fmt, DType dt, bool same_scales, std::int64_t m) {
  const bool wide = m > 64;
  const bool bf = dt == DType::bf16;
#define PGK_PICK(NAME) Instance{mixed_workspace_##NAME, mixed_run_##NAME}
#define PGK_TILE(PREFIX) (wide ? PGK_PICK(PREFIX##_n128) : PGK_PICK(PREFIX##_n64))
  if (fmt == MixedFormat::fp8) return bf ? PGK_TILE(e4m3_bf16_f32s) : PGK_TILE(e4m3_f16_f32s);
  if (same_scales) return bf ? PGK_TILE(int4_bf16_xs) : PGK_TILE(int4_f16_xs);
  return bf ? PGK_TILE(int4_bf16_f32s) : PGK_TILE(int4_f16_f32s);
#undef PGK_TILE
#undef PGK_PICK
}

// Whether the call reads its scales as they are: fp8 per-channel scales ([n] float32, one group
// of k), else they go through transpose_scales.
bool direct_scales(MixedFormat fmt, std::int64_t block) {
  return fmt == MixedFormat::fp8 && block == 0;
}

void check_sizes(const char* who, MixedFormat fmt, DType dt, DType sdt, std::int64_t m,
                 std::int64_t n, std::int64_t k, std::int64_t block) {
  PGK_REQUIRE_AS(who, dt == DType::f16 || dt == DType::bf16,
                 std::string("x must be float16 or bfloat16, got ") + dtype_name(dt));
  if (fmt == MixedFormat::int4) {
    PGK_REQUIRE_AS(who, sdt == DType::f32 || sdt == DType::f16 || sdt == DType::bf16,
                   std::string("int4 scales must be float32, float16 or bfloat16, got ") +
                       dtype_name(sdt));
    PGK_REQUIRE_AS(who, block == 128,
                   "int4 scales are per group of 128, got block " + std::to_string(block));
  } else {
    PGK_REQUIRE_AS(who, sdt == DType::f32,
                   std::string("fp8 scales must be float32, got ") + dtype_name(sdt));
    PGK_REQUIRE_AS(who, block == 0 || block == 128,
                   "fp8 scales are per output channel (block 0) or per block of 128, got block " +
                       std::to_string(block));
  }
  PGK_REQUIRE_AS(who,
                 m >= 1 && m < (std::int64_t{1} << 31) && n >= 8 && n % 8 == 0 &&
                     n < (std::int64_t{1} << 31) && k >= 128 && k % 128 == 0 &&
                     k < (std::int64_t{1} << 27),
                 "needs m >= 1 and n a positive multiple of 8, each below 2^31, and k a positive "
                 "multiple of 128 below 2^27; got m=" + std::to_string(m) + " n=" +
                     std::to_string(n) + " k=" + std::to_string(k));
}

// Scratch: the transposed scales [k / 128, n] at its start (float32, or x's dtype when int4
// scales are of it; none for direct scales), then CUTLASS's workspace at `cutlass`.
struct Scratch {
  std::size_t cutlass, total;
  Scratch(MixedFormat fmt, DType dt, DType sdt, std::int64_t m, std::int64_t n, std::int64_t k,
          std::int64_t block, int sms) {
    const bool same = sdt == dt;
    const bool direct = direct_scales(fmt, block);
    const std::int64_t group = direct ? k : block;
    cutlass = direct ? 0
                     : up_to(static_cast<std::size_t>(n) * static_cast<std::size_t>(k / block) *
                             (same ? 2 : 4));
    total = cutlass + instance(fmt, dt, same, m).workspace(m, n, k, group, sms);
  }
};

// st[g, j] = s[j, g] as D (float32, exact for every scale dtype, or S itself): 32 x 32 tiles
// through shared memory, so both the reads and the writes are coalesced (the copy family's
// cast takes a transposed view too, but element by element: its reads of s would step
// `groups` values apart).
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

MixedFormat mixed_format_from_name(const std::string& name) {
  if (name == "int4") return MixedFormat::int4;
  if (name == "fp8") return MixedFormat::fp8;
  fail("mixed_gemm", "unknown weight format '" + name + "' (int4, fp8)");
}

std::size_t mixed_gemm_workspace(int device, MixedFormat format, DType dtype, DType scale_dtype,
                                 std::int64_t m, std::int64_t n, std::int64_t k,
                                 std::int64_t block) {
  check_sizes(__func__, format, dtype, scale_dtype, m, n, k, block);
  use_device(device);
  return Scratch(format, dtype, scale_dtype, m, n, k, block, device_facts(device).sms).total;
}

void mixed_gemm(const MixedGemmArgs& a) {
  check_sizes(__func__, a.format, a.dtype, a.scale_dtype, a.m, a.n, a.k, a.block);
  const bool direct = direct_scales(a.format, a.block);
  PGK_REQUIRE((a.m == 1 || (a.x_row_stride >= a.k && a.x_row_stride % 8 == 0)) &&
                  a.x && a.data && a.y && a.scales && aligned16(a.x) && aligned16(a.data) &&
                  aligned16(a.y) && (!direct || aligned16(a.scales)),
              "x, data, scales and y must be device pointers, x, data and y 16-byte aligned "
              "(fp8 per-channel scales too), and x's rows too (a row stride of at least k, a "
              "multiple of 8)");
  PGK_REQUIRE(a.bias == 0 || aligned16(a.bias), "bias must be 16-byte aligned");
  PGK_REQUIRE(a.workspace % 256 == 0, "the workspace must be 256-byte aligned");
  const DeviceFacts dev = hopper_device(__func__, a.device, "the CUTLASS mixed-input GEMM");
  const Scratch sc(a.format, a.dtype, a.scale_dtype, a.m, a.n, a.k, a.block, dev.sms);
  PGK_REQUIRE(a.workspace_bytes >= sc.total,
              "workspace has " + std::to_string(a.workspace_bytes) + " bytes, needs " +
                  std::to_string(sc.total) + " (mixed_gemm_workspace)");
  cudaStream_t stream = as_stream(a.stream);
  char* ws = ptr<char>(a.workspace);
  const bool same = a.scale_dtype == a.dtype;
  const void* scales = ptr<const void>(a.scales);
  if (!direct) {
    void* st = ws;
    const std::int64_t groups = a.k / a.block;
    const dim3 grid(static_cast<unsigned>((a.n + 31) / 32),
                    static_cast<unsigned>((groups + 31) / 32));
    const dim3 block(32, 8);
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
    PGK_CHECK_LAUNCH("mixed_gemm transpose_scales");
    scales = st;
  }
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
  p.scales_t = scales;
  p.group = direct ? a.k : a.block;
  p.bias = a.bias ? ptr<const void>(a.bias) : nullptr;
  p.d = ptr<void>(a.y);
  p.workspace = ws + sc.cutlass;
  p.workspace_bytes = a.workspace_bytes - sc.cutlass;
  instance(a.format, a.dtype, same, a.m).run(p);
}

}  // namespace pgk
