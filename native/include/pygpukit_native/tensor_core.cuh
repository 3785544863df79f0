// Tensor-core and async-copy primitives shared by the kernels that use them (gemv, the split
// decode attention): mma.sync m16n8k16 with fp32 accumulation, ldmatrix, and cp.async 16-byte
// copies into shared memory. sm_80+ (the build's oldest architecture).
//
// Fragment mapping (PTX ISA, mma.m16n8k16 .bf16/.f16): lane = 4 g + t holds A rows g and g + 8,
// B column n = g; its k-slots are {2t, 2t+1} (a0, a1, b0) and {2t+8, 2t+9} (a2, a3, b1); C
// entries c0..c3 are (row g, col 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace pgk {

template <typename T>
struct Mma;

template <>
struct Mma<__nv_bfloat16> {
  __device__ static void run(float* c, std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                             std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  // (lo, hi) -> one register, lo in the low half: an A or B fragment's k-slot pair.
  __device__ static std::uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
  __device__ static std::uint16_t bits(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
};

template <>
struct Mma<__half> {
  __device__ static void run(float* c, std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                             std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  __device__ static std::uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
  __device__ static std::uint16_t bits(__half v) { return __half_as_ushort(v); }
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8m..8m+7 give the row addresses of matrix m, and lane 4g + t
// receives row g, columns 2t, 2t+1 of each (TRANS: row 2t, 2t+1, column g).
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row)));
  }
}

// 16 bytes global -> shared, bypassing L1, 256-byte L2 prefetch; zero-filled without a read when
// !pred (past the end; gmem must still be a valid address). smem: a shared-memory address
// (smem_addr), for loops that keep their slots' addresses in registers.
__device__ __forceinline__ void cp_async16_to(unsigned smem, const void* gmem, bool pred) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem),
               "l"(gmem), "r"(pred ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool pred) {
  cp_async16_to(smem_addr(smem), gmem, pred);
}
// 16 bytes from a shared-memory address (smem_addr). asm volatile keeps it in program order
// with the other volatile asm (the cp.async issue and wait that guard its slot).
__device__ __forceinline__ uint4 lds128(unsigned smem) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem));
  return v;
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace pgk
