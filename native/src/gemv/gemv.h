// Decode GEMV / skinny GEMM: y[M, N] = x[M, K] @ dequant(W)^T (+ bias), W stored [N, K] row-major
// (the torch.nn.Linear layout), x and y float16 or bfloat16, fp32 accumulation, one rounding at
// the store. Built for M = 1..16 (one pass over W serves 16 rows of x); larger M walks x in
// tiles of 16 rows (grid.y), re-reading W once per tile.
//
// Weight formats (`format`), all packed along K (the row of W):
//   dense  W in x's dtype.                                        K % 8 == 0 (16-byte rows)
//   fp8    W float8_e4m3fn, fp32 scales: per output channel [N] (block 0) or per block of 128
//          along K [N, ceil(K/128)] (block 128).                   K % 16 == 0
//   int4   W int4 two's complement (-8..7), two a byte, the LOW nibble holds the EVEN k (the
//          layout of pygpukit's int4 dtype); scales float32/bfloat16/float16 per group of 128
//          along K [N, ceil(K/128)].                               K % 32 == 0
//   nvfp4  W fp4 e2m1 codes (sign, 2 exponent bits, 1 mantissa bit), two a byte, low nibble =
//          even k; float8_e4m3fn scales per block of 16 along K [N, K/16]; times one fp32
//          global scale.                                           K % 32 == 0
// Pointers must be 16-byte aligned (x, W), row strides multiples of 16 bytes; scales and bias
// contiguous along their last dim; y contiguous [M, N]. Errors: see the top of each .cu file.
#pragma once

#include <cstdint>

#include "pygpukit_native/dtype.h"

namespace pgk {

struct GemvArgs {
  int device;
  std::uintptr_t stream;
  DType dtype;   // x, bias, y: float16 or bfloat16
  DType sdtype;  // scales (fp8: float32; int4: float32/bfloat16/float16; nvfp4: float8_e4m3fn)
  std::int64_t m, n, k;
  std::uintptr_t x;
  std::int64_t x_row_stride;  // elements
  std::uintptr_t w;
  std::int64_t w_row_bytes;  // bytes between rows of W
  std::uintptr_t scales;     // 0 for dense
  std::int64_t s_row_stride;  // elements between rows of the scales (per-channel fp8: 1)
  std::int64_t block;        // fp8: 0 (per channel) or 128; int4: 128; nvfp4: 16
  float global_scale;        // nvfp4 (1 elsewhere)
  std::uintptr_t bias;       // 0: none; else contiguous [N] of dtype
  std::uintptr_t y;          // contiguous [M, N] of dtype
  // Programmatic dependent launch (sm_90+, pygpukit_native/pdl.cuh): the kernel may start while
  // the one before it on the stream finishes, and waits on it before it reads x or writes y.
  bool pdl = false;
  // With pdl: W and its scales are constant for the kernels in flight (the engine's
  // constant_weights()), so the first weight loads are issued before the wait.
  bool prefetch = false;
  // The gated MLP's fused product (quantized formats): W holds n = 2I rows, the gate rows, then
  // the up rows; y [M, I] = silu(x @ Wg^T) * (x @ Wu^T), both sums finished in fp32 (their
  // scales), silu(g) * u in fp32, one rounding. No bias.
  bool gated = false;
  // The pre-norm block's RMSNorm read in (quantized formats, one row of x, no gated product):
  // h = x (+ residual) rounded to dtype, y = rmsnorm(h) @ dequant(W)^T (+ bias) with
  // rmsnorm(h)[k] = dtype(h[k] * rstd * norm_w[k]), rstd = 1 / sqrt(mean(h^2) + eps) in fp32:
  // gp.rmsnorm's formula, rounded to dtype as the mma's operand. Each block normalises the row
  // into shared memory; block 0 stores h (contiguous [k] of dtype) when residual is given.
  // norm_w, residual and h: contiguous [k] of dtype, 16-byte aligned; h must not overlap x or
  // residual (the other blocks still read them).
  bool norm = false;
  std::uintptr_t norm_w = 0;
  std::uintptr_t residual = 0;  // 0: h = x
  std::uintptr_t h = 0;         // with residual: where h goes
  float eps = 0.f;
};

// The norm form's largest k: the row lives in shared memory (2 bytes a value).
constexpr std::int64_t kGemvNormMaxK = 16384;

// format: "dense", "fp8", "int4" or "nvfp4" (std::invalid_argument for anything else).
void gemv(const GemvArgs& a, const char* format);

// The per-format launchers (one .cu file each, so each compiles on its own).
void gemv_dense(const GemvArgs& a);
void gemv_fp8(const GemvArgs& a);
void gemv_int4(const GemvArgs& a);
void gemv_nvfp4(const GemvArgs& a);

}  // namespace pgk
