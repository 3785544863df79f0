// Bindings of the attention_decode family (sdpa_decode, kv_cache_write): keyword arguments
// straight into AttnArgs / KvWriteArgs; the GIL is released for the launch.
// pygpukit/backends/native_kernels/attention_decode.py validates and calls these.
#include "attention_decode/attention_decode.h"

#include <pybind11/stl.h>

#include <array>
#include <string>

#include "pygpukit_native/registry.h"

namespace py = pybind11;

namespace {

using Strides = std::array<std::int64_t, 4>;

void copy_n(std::int64_t* dst, const std::int64_t* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace

PGK_FAMILY(attention_decode) {
  m.def(
      "sdpa_decode",
      [](int device, std::uintptr_t stream, const std::string& dtype, std::int64_t batch,
         std::int64_t heads, std::int64_t kv_heads, std::int64_t sq, std::int64_t d,
         std::uintptr_t q, std::uintptr_t k_cache, std::uintptr_t v_cache, std::uintptr_t out,
         const Strides& sq_s, const Strides& sk_s, const Strides& sv_s, const Strides& so_s,
         std::uintptr_t lens, std::int64_t lens_stride, std::uintptr_t block_table,
         std::int64_t bt_s0, std::int64_t bt_s1, std::int64_t page, std::int64_t nblocks,
         std::int64_t cap, double scale, bool causal, std::int64_t splits, std::int64_t chunk,
         std::int64_t floor, std::int64_t tiles, std::int64_t entries, std::int64_t stages,
         std::uintptr_t parts, std::uintptr_t lse, std::uintptr_t counters) {
        pgk::AttnArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.mode = pgk::AttnMode::decode;
        a.units = batch;
        a.heads = heads;
        a.kv_heads = kv_heads;
        a.sq = sq;
        a.d = d;
        a.dv = d;
        a.q = q;
        a.k = k_cache;
        a.v = v_cache;
        a.out = out;
        copy_n(a.sq_s, sq_s.data(), 4);
        copy_n(a.sk_s, sk_s.data(), 4);
        copy_n(a.sv_s, sv_s.data(), 4);
        copy_n(a.so_s, so_s.data(), 4);
        a.lens = lens;
        a.lens_stride = lens_stride;
        a.block_table = block_table;
        a.bt_s0 = bt_s0;
        a.bt_s1 = bt_s1;
        a.page = page;
        a.nblocks = nblocks;
        a.cap = cap;
        a.scale = scale;
        a.causal = causal;
        if (splits == 0) {
          pgk::sdpa_decode_rows(a);
          return;
        }
        // floor 0: the capacity's chunk at every length
        const pgk::DecodeSplit sp{splits, chunk, floor ? floor : chunk, tiles, entries, stages,
                                  parts, lse, counters};
        pgk::sdpa_decode_split(a, sp);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("batch"), py::arg("heads"),
      py::arg("kv_heads"), py::arg("sq"), py::arg("d"), py::arg("q"), py::arg("k_cache"),
      py::arg("v_cache"), py::arg("out"), py::arg("sq_s"), py::arg("sk_s"), py::arg("sv_s"),
      py::arg("so_s"), py::arg("lens"), py::arg("lens_stride"), py::arg("block_table"),
      py::arg("bt_s0"), py::arg("bt_s1"), py::arg("page"), py::arg("nblocks"), py::arg("cap"),
      py::arg("scale"), py::arg("causal"), py::arg("splits") = 0, py::arg("chunk") = 0,
      py::arg("floor") = 0, py::arg("tiles") = 0, py::arg("entries") = 0, py::arg("stages") = 0,
      py::arg("parts") = 0, py::arg("lse") = 0, py::arg("counters") = 0, PGK_NOGIL,
      "decode attention of q [B, H, Sq, D] over the first lens[b] keys of a contiguous or paged "
      "cache (block_table 0: contiguous); splits 0: one warp per query row, else the split-key "
      "tensor-core kernel over the workspace parts/lse/counters, each split taking a length's "
      "keys spread over the splits within [floor, chunk] (floor 0: chunk at every length)");
  m.def("split_decode_smem", &pgk::split_decode_smem, py::arg("d"), py::arg("elem"),
        py::arg("entries"), py::arg("stages"),
        "dynamic shared memory (bytes) of one block of the split-key decode kernel");
  m.def(
      "kv_cache_write",
      [](int device, std::uintptr_t stream, const std::string& dtype,
         const std::string& table_dtype, std::int64_t batch, std::int64_t kv_heads,
         std::int64_t sq, std::int64_t d, std::int64_t half, bool gptj, std::uintptr_t k_cache,
         std::uintptr_t v_cache, std::uintptr_t k, std::uintptr_t v, const Strides& skc,
         const Strides& svc, const Strides& sk, const Strides& sv, std::uintptr_t positions,
         std::int64_t pos_stride, std::uintptr_t block_table, std::int64_t bt_s0,
         std::int64_t bt_s1, std::int64_t page, std::int64_t nblocks, std::int64_t cap,
         std::uintptr_t cos, std::uintptr_t sin, std::int64_t max_pos,
         const std::array<std::int64_t, 2>& scos, const std::array<std::int64_t, 2>& ssin) {
        pgk::KvWriteArgs a{};
        a.device = device;
        a.stream = stream;
        a.dtype = pgk::dtype_from_name(dtype);
        a.table_dtype = pgk::dtype_from_name(table_dtype);
        a.batch = batch;
        a.kv_heads = kv_heads;
        a.sq = sq;
        a.d = d;
        a.half = half;
        a.gptj = gptj;
        a.k_cache = k_cache;
        a.v_cache = v_cache;
        a.k = k;
        a.v = v;
        copy_n(a.skc, skc.data(), 4);
        copy_n(a.svc, svc.data(), 4);
        copy_n(a.sk, sk.data(), 4);
        copy_n(a.sv, sv.data(), 4);
        a.positions = positions;
        a.pos_stride = pos_stride;
        a.block_table = block_table;
        a.bt_s0 = bt_s0;
        a.bt_s1 = bt_s1;
        a.page = page;
        a.nblocks = nblocks;
        a.cap = cap;
        a.cos = cos;
        a.sin = sin;
        a.max_pos = max_pos;
        copy_n(a.scos, scos.data(), 2);
        copy_n(a.ssin, ssin.data(), 2);
        pgk::kv_cache_write(a);
      },
      py::arg("device"), py::arg("stream"), py::arg("dtype"), py::arg("table_dtype"),
      py::arg("batch"), py::arg("kv_heads"), py::arg("sq"), py::arg("d"), py::arg("half"),
      py::arg("gptj"), py::arg("k_cache"), py::arg("v_cache"), py::arg("k"), py::arg("v"),
      py::arg("skc"), py::arg("svc"), py::arg("sk"), py::arg("sv"), py::arg("positions"),
      py::arg("pos_stride"), py::arg("block_table"), py::arg("bt_s0"), py::arg("bt_s1"),
      py::arg("page"), py::arg("nblocks"), py::arg("cap"), py::arg("cos"), py::arg("sin"),
      py::arg("max_pos"), py::arg("scos"), py::arg("ssin"), PGK_NOGIL,
      "store k, v [B, Hkv, Sq, D] at slots positions[b] + j of the caches, k rotated when "
      "half > 0 (cos/sin [max_pos, half] in the compute type)");
}
