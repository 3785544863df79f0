// Launch configurations of the native decode GEMV kernels, timed one against another beside a
// pure read of the same bytes and the device copy rate.
//
//   bash benchmarks/tuning/gemv_configs.sh [shapes...]      (shapes as KxN, default below)
//
// One binary a format (-DFORMAT_INT4, _NVFP4, _FP8, _FP8B, _DENSE; the script builds them in
// parallel): each includes its format's .cu file from native/src/gemv, so that it instantiates
// the very kernels the extension ships, with other Config parameters (gemv_wa.cuh, the
// quantized formats: row tiles, warps, ring stages, blocks a multiprocessor; gemv_kernel.cuh,
// dense weights: warps, warp-steps a super-step, blocks a multiprocessor). The first entry of
// each list is the shipped launch and the second, for the 4-bit formats and dense weights, the
// launch before this tool (the 4-bit formats' third and fourth: one row of x read in the loop,
// then staged in shared memory, at every block count; the configurations marked "xs" stage it
// too); every other one is checked against the shipped output (max |diff| over max |y|: the K
// split differs, so the bits do). GEMV_M sets the rows of x (default 1), GEMV_ONLY times only
// the first entries, GEMV_PICK the shipped launch and the configurations it names
// (comma-separated), GEMV_GATED=1 the gated MLP's product (the 4-bit and fp8 formats).
//
// Timing: CUDA events around each launch, the L2 evicted by a read of 256 MiB before it, median
// of 30. The pure read: a kernel summing 16-byte words of the weight's bytes, best of several
// chunk sizes a block. Copy: a 1 GiB device-to-device cudaMemcpy, bytes read + written over
// time, as pygpukit.benchmark.timing.copy_rate counts it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#if defined(FORMAT_INT4) || defined(FORMAT_NVFP4)
#include "gemv/gemv_w4.cu"
#elif defined(FORMAT_FP8) || defined(FORMAT_FP8B)
#include "gemv/gemv_w8.cu"
#elif defined(FORMAT_DENSE)
#include "gemv/gemv_bf16.cu"
#else
#error "define one of FORMAT_INT4, FORMAT_NVFP4, FORMAT_FP8, FORMAT_FP8B, FORMAT_DENSE"
#endif

namespace {

using pgk::GemvArgs;
using T = __nv_bfloat16;
namespace gd = pgk::gemv_detail;

#define CK(call)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s (%s:%d)\n", #call, cudaGetErrorString(e_),     \
                   __FILE__, __LINE__);                                           \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

struct Launch {
  std::string name;
  std::function<void(const GemvArgs&)> run;
};

#if defined(FORMAT_DENSE)
// Dense weights: gemv_kernel.cuh (W the B operand of the mma).
using F = gd::Dense;
const char* kFormat = "bf16";
template <int W, int U, int B = 0>
Launch cfg() {
  char name[64];
  std::snprintf(name, sizeof name, "w%d u%d b%d", W, U, B);
  return {name, [](const GemvArgs& a) {
            gd::launch_config<T, F, gd::Config<W, U, B>>(a, "gemv_configs");
          }};
}
std::vector<Launch> launches() {
  return {{"shipped", [](const GemvArgs& a) { gd::launch<T, F>(a, "gemv_configs"); }},
          // The launch before this tool: 4 warps from 1024 blocks, else 8; four warp-steps a
          // super-step.
          {"before", [](const GemvArgs& a) {
             if ((a.n + 15) / 16 >= 1024) {
               gd::launch_config<T, F, gd::Config<4, 4>>(a, "gemv_configs");
             } else {
               gd::launch_config<T, F, gd::Config<8, 4>>(a, "gemv_configs");
             }
           }},
          cfg<4, 1>(), cfg<4, 2>(), cfg<8, 1>(), cfg<8, 2>(), cfg<8, 4>(), cfg<16, 1>(),
          cfg<16, 2>(), cfg<8, 2, 2>()};
}
#else
// The quantized formats: gemv_wa.cuh (W the A operand of the mma).
#if defined(FORMAT_INT4)
using F = gd::Int4<__nv_bfloat16>;
const char* kFormat = "int4 (bf16 scales)";
#elif defined(FORMAT_NVFP4)
using F = gd::Nvfp4;
const char* kFormat = "nvfp4";
#elif defined(FORMAT_FP8)
using F = gd::Fp8<false>;
const char* kFormat = "fp8 (per channel)";
#else
using F = gd::Fp8<true>;
const char* kFormat = "fp8 (128-blocks)";
#endif
// Configuration C with x from Xf, the gated product's when the arguments ask for it
// (GEMV_GATED). x staged in shared memory holds one row: more rows take the shipped launch.
template <typename C, gd::wa::XFrom Xf = gd::wa::XFrom::global>
void launch_as(const GemvArgs& a) {
  if constexpr (Xf != gd::wa::XFrom::global) {
    if (a.m > 1) return gd::wa::launch<T, F>(a, "gemv_configs");
  }
  if (a.gated) return gd::wa::launch_config<T, F, C, true, Xf>(a, "gemv_configs");
  gd::wa::launch_config<T, F, C, false, Xf>(a, "gemv_configs");
}
// One row of x from Xf under the few-rows rule's configuration at every block count (the
// shipped launch stages by a block range, wa::launch_rule); more rows: the shipped launch.
template <gd::wa::XFrom Xf>
void few_rows_from(const GemvArgs& a) {
  if (a.m > 1) return gd::wa::launch<T, F>(a, "gemv_configs");
  if (a.gated) return gd::wa::launch_few_rows<T, F, true, Xf>(a, "gemv_configs");
  gd::wa::launch_few_rows<T, F, false, Xf>(a, "gemv_configs");
}
// RT row tiles, W warps, S ring stages, B blocks a multiprocessor, x from Xf ("xs": one row
// staged in shared memory, the 4-bit formats).
template <int RT, int W, int S, int B = 0, gd::wa::XFrom Xf = gd::wa::XFrom::global>
Launch wa_cfg() {
  char name[64];
  std::snprintf(name, sizeof name, "rt%d w%d s%d b%d%s", RT, W, S, B,
                Xf == gd::wa::XFrom::shared ? " xs" : "");
  return {name, [](const GemvArgs& a) { launch_as<gd::wa::Config<RT, 1, W, S, B>, Xf>(a); }};
}
#if defined(FORMAT_INT4) || defined(FORMAT_NVFP4)
template <int RT, int W, int S>
Launch wa_staged() {
  return wa_cfg<RT, W, S, 0, gd::wa::XFrom::shared>();
}
#endif
std::vector<Launch> launches() {
  return {{"shipped", [](const GemvArgs& a) { gd::wa::launch<T, F>(a, "gemv_configs"); }},
#if defined(FORMAT_INT4) || defined(FORMAT_NVFP4)
          // The 4-bit formats' launch before this tool (at up to 8 rows of x): two row tiles,
          // 4 warps from 256 blocks, else 8. (fp8 ran on gemv_kernel.cuh then, a kernel the
          // tree no longer has.)
          {"before", [](const GemvArgs& a) {
             const bool many = (a.n + 31) / 32 >= 256;
             if (a.m > 8) {  // unchanged
               gd::wa::launch<T, F>(a, "gemv_configs");
             } else if (many) {
               launch_as<gd::wa::Config<2, 1, 4, 2>>(a);
             } else {
               launch_as<gd::wa::Config<2, 1, 8, 2>>(a);
             }
           }},
          {"x in the loop", few_rows_from<gd::wa::XFrom::global>},
          {"x staged", few_rows_from<gd::wa::XFrom::shared>},
#endif
          // (Static shared memory caps a block at 48 KiB: no 16 warps with two row tiles.)
          wa_cfg<1, 4, 2>(), wa_cfg<1, 8, 2>(), wa_cfg<1, 16, 2>(), wa_cfg<1, 4, 3>(),
          wa_cfg<1, 8, 3>(), wa_cfg<2, 4, 2>(), wa_cfg<2, 8, 2>(), wa_cfg<2, 4, 3>(),
          wa_cfg<4, 4, 2>(), wa_cfg<1, 4, 2, 8>(), wa_cfg<1, 8, 2, 4>(),
#if defined(FORMAT_INT4) || defined(FORMAT_NVFP4)
          wa_staged<1, 8, 2>(), wa_staged<1, 16, 2>(), wa_staged<1, 4, 3>(),
          wa_staged<1, 8, 3>(), wa_staged<2, 4, 2>(), wa_staged<2, 8, 2>(),
#endif
  };
}
#endif

// Weight bytes a row and scale layout of the format.
struct Layout {
  std::int64_t row_bytes, scale_elems, scale_bytes, block;
  pgk::DType sdtype;
};
Layout layout(std::int64_t k) {
#if defined(FORMAT_INT4)
  return {k / 2, (k + 127) / 128, 2, 128, pgk::DType::bf16};
#elif defined(FORMAT_NVFP4)
  return {k / 2, k / 16, 1, 16, pgk::DType::e4m3};
#elif defined(FORMAT_FP8)
  return {k, 1, 4, 0, pgk::DType::f32};
#elif defined(FORMAT_FP8B)
  return {k, (k + 127) / 128, 4, 128, pgk::DType::f32};
#else
  return {2 * k, 0, 0, 0, pgk::DType::bf16};
#endif
}

// Host bytes of the weight and its scales with values the format accepts.
void fill(std::vector<unsigned char>& w, std::vector<unsigned char>& s, std::mt19937& rng) {
  for (auto& b : w) {
    b = static_cast<unsigned char>(rng());
#if defined(FORMAT_FP8) || defined(FORMAT_FP8B)
    if ((b & 0x7F) == 0x7F) b &= 0xF7;  // no NaN codes
#elif defined(FORMAT_DENSE)
    b &= 0xBF;  // bf16 high bytes below 2^1: finite, moderate values
#endif
  }
  std::uniform_real_distribution<float> u(0.5f, 2.f);
#if defined(FORMAT_INT4)
  for (std::size_t i = 0; i < s.size(); i += 2) {
    __nv_bfloat16 v = __float2bfloat16(u(rng) / 8.f);
    std::memcpy(&s[i], &v, 2);
  }
#elif defined(FORMAT_NVFP4)
  for (auto& b : s) b = static_cast<unsigned char>(0x30 + rng() % 16);  // e4m3 near 0.25..1
#elif defined(FORMAT_FP8) || defined(FORMAT_FP8B)
  for (std::size_t i = 0; i < s.size(); i += 4) {
    float v = u(rng) / 64.f;
    std::memcpy(&s[i], &v, 4);
  }
#else
  (void)s;
  (void)u;
#endif
}

__global__ void read_kernel(const uint4* __restrict__ p, std::int64_t n, std::int64_t chunk,
                            unsigned* out) {
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * chunk;
  unsigned acc = 0;
  for (std::int64_t i = base + threadIdx.x; i < std::min(base + chunk, n); i += blockDim.x) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;  // keeps the loads
}

// The L2 is evicted by READING a 256 MiB buffer (as pygpukit.benchmark.timing.L2Flush does): a
// memset would leave dirty lines whose write-back lands inside the timed kernel.
struct Timer {
  void* flush = nullptr;
  unsigned* sink = nullptr;
  std::int64_t flush_words = (std::int64_t(256) << 20) / 16;
  int rounds;
  explicit Timer(int r) : rounds(r) {
    CK(cudaMalloc(&flush, flush_words * 16));
    CK(cudaMemset(flush, 0, flush_words * 16));
    CK(cudaMalloc(&sink, 1 << 20));
  }
  float median_us(const std::function<void()>& fn) {
    for (int i = 0; i < 3; ++i) fn();
    std::vector<float> t;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < rounds; ++i) {
      read_kernel<<<static_cast<unsigned>(flush_words / 16384), 512>>>(
          static_cast<const uint4*>(flush), flush_words, 16384, sink);
      CK(cudaEventRecord(a));
      fn();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0.f;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

float bf16_to_float(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {4096, 14336}, {8192, 29568}, {2048, 8192}, {8192, 2048}, {4096, 4096}};
  if (argc > 1) {
    shapes.clear();
    for (int i = 1; i < argc; ++i) {
      long long k = 0, n = 0;
      if (std::sscanf(argv[i], "%lldx%lld", &k, &n) != 2) {
        std::fprintf(stderr, "shape '%s' is not KxN\n", argv[i]);
        return 2;
      }
      shapes.push_back({k, n});
    }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  Timer timer(30);
  const std::size_t cbytes = std::size_t(1) << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, cbytes));
  CK(cudaMalloc(&dst, cbytes));
  const float copy_us = timer.median_us(
      [&] { CK(cudaMemcpyAsync(dst, src, cbytes, cudaMemcpyDeviceToDevice)); });
  CK(cudaFree(src));
  CK(cudaFree(dst));
  const double copy_gbs = 2.0 * cbytes / copy_us / 1e3;
  std::printf("# %s, %s, copy %.0f GB/s\n", prop.name, kFormat, copy_gbs);
  std::mt19937 rng(1234);
  // GEMV_M: rows of x (default 1); GEMV_ONLY: time only the first this many configurations.
  const std::int64_t m = std::getenv("GEMV_M") ? std::atoll(std::getenv("GEMV_M")) : 1;
  auto list = launches();
  // GEMV_PICK: the shipped launch and the configurations named (comma-separated, exact names),
  // then GEMV_ONLY: the first this many of what is left. A format without any of the names
  // (the "xs" configurations are the 4-bit formats' own) times its shipped launch alone.
  const char* pick = std::getenv("GEMV_PICK");
  if (pick != nullptr && *pick != '\0') {
    const std::string names = std::string(",") + pick + ",";
    std::vector<Launch> kept = {list[0]};
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (names.find("," + list[i].name + ",") != std::string::npos) kept.push_back(list[i]);
    }
    if (kept.size() == 1) std::printf("# GEMV_PICK: no configuration of %s named\n", kFormat);
    list = kept;
  }
  if (const char* only = std::getenv("GEMV_ONLY")) {
    list.resize(std::min<std::size_t>(list.size(), std::atoi(only)));
  }
  std::printf("# M = %lld\n", static_cast<long long>(m));
  for (const auto& [k, n] : shapes) {
    const Layout L = layout(k);
    const std::int64_t wbytes = L.row_bytes * n, sbytes = L.scale_elems * L.scale_bytes * n;
    std::vector<unsigned char> hw(wbytes), hs(std::max<std::int64_t>(sbytes, 4));
    fill(hw, hs, rng);
    std::vector<std::uint16_t> hx(m * k);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& v : hx) {
      __nv_bfloat16 b = __float2bfloat16(u(rng));
      std::memcpy(&v, &b, 2);
    }
    unsigned char *w, *s;
    void *x, *y;
    unsigned* part;
    CK(cudaMalloc(&w, wbytes));
    CK(cudaMalloc(&s, hs.size()));
    CK(cudaMalloc(&x, 2 * m * k));
    CK(cudaMalloc(&y, 2 * m * n));
    CK(cudaMalloc(&part, 1 << 20));
    CK(cudaMemcpy(w, hw.data(), wbytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s, hs.data(), hs.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x, hx.data(), 2 * m * k, cudaMemcpyHostToDevice));
    GemvArgs a{};
    a.device = 0;
    a.stream = 0;
    a.dtype = pgk::DType::bf16;
    a.sdtype = L.sdtype;
    a.m = m;
    a.n = n;
    a.k = k;
    a.x = reinterpret_cast<std::uintptr_t>(x);
    a.x_row_stride = k;
    a.w = reinterpret_cast<std::uintptr_t>(w);
    a.w_row_bytes = L.row_bytes;
    a.scales = sbytes ? reinterpret_cast<std::uintptr_t>(s) : 0;
    a.s_row_stride = L.scale_elems;
    a.block = L.block;
    a.global_scale = 1.f;
    a.bias = 0;
    // GEMV_GATED: the gated MLP's fused product (n = 2I rows, gate then up; I outputs a row).
    const char* gated = std::getenv("GEMV_GATED");
    a.gated = gated != nullptr && std::strcmp(gated, "1") == 0;
#if defined(FORMAT_DENSE)
    if (a.gated) {  // the dense kernel has no gated form: it would time a plain product
      std::fprintf(stderr, "GEMV_GATED: the dense GEMV has no gated product\n");
      return 2;
    }
#endif
    a.y = reinterpret_cast<std::uintptr_t>(y);
    // The pure read of the weight's bytes plus its scales' (one buffer of that many bytes).
    const std::int64_t words = (wbytes + sbytes + 15) / 16;
    unsigned char* rbuf;
    CK(cudaMalloc(&rbuf, words * 16));
    CK(cudaMemset(rbuf, 1, words * 16));
    float read_us = 1e30f;
    for (std::int64_t chunk : {2048, 4096, 8192, 16384, 32768}) {
      const std::int64_t blocks = (words + chunk - 1) / chunk;
      for (int threads : {256, 512}) {
        read_us = std::min(read_us, timer.median_us([&] {
          read_kernel<<<static_cast<unsigned>(blocks), threads>>>(
              reinterpret_cast<const uint4*>(rbuf), words, chunk, part);
        }));
      }
    }
    CK(cudaFree(rbuf));
    const double mb = (wbytes + sbytes) / 1e6;
    std::printf("\nK%lld N%lld: %.1f MB, pure read %.2f us (%.0f%% of copy)\n",
                static_cast<long long>(k), static_cast<long long>(n), mb, read_us,
                100.0 * mb / read_us * 1e3 / copy_gbs);
    std::printf("%-16s %9s %7s %8s %9s\n", "config", "us", "%copy", "%read", "rel.diff");
    std::vector<std::uint16_t> ref(m * n), out(m * n);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const float us = timer.median_us([&] { list[i].run(a); });
      CK(cudaMemset(y, 0, 2 * m * n));
      list[i].run(a);
      CK(cudaMemcpy(i == 0 ? ref.data() : out.data(), y, 2 * m * n, cudaMemcpyDeviceToHost));
      double diff = 0.0, scale = 0.0;
      for (std::int64_t j = 0; j < m * n; ++j) {
        const double r = bf16_to_float(ref[j]);
        scale = std::max(scale, std::abs(r));
        if (i > 0) diff = std::max(diff, std::abs(bf16_to_float(out[j]) - r));
      }
      std::printf("%-16s %9.2f %6.1f%% %7.1f%% %9.2e\n", list[i].name.c_str(), us,
                  100.0 * mb / us * 1e3 / copy_gbs, 100.0 * read_us / us,
                  scale > 0 ? diff / scale : diff);
    }
    CK(cudaFree(w));
    CK(cudaFree(s));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(part));
  }
  return 0;
}
