// Embedding gather: a row copy per id, dtype-blind (words of the element size), 16-byte packs
// when the table's columns are contiguous and rows, out rows and both pointers are aligned.
// Threads are laid out as in the row-map engine (tx along a row, ty rows a block, two packs a
// thread), so short rows still fill a block and a decode batch of a few long rows spreads over
// several blocks per row. bias_add is the row-map engine with the bias as a stride-0 row.
#include "embedding/embedding.h"

#include "pygpukit_native/check.h"
#include "pygpukit_native/convert.cuh"
#include "pygpukit_native/rowmap.cuh"

namespace pgk {
namespace {

__device__ __forceinline__ std::int64_t load_id(const void* p, std::int64_t off, DType kind) {
  switch (kind) {
    case DType::i64:
      return static_cast<const std::int64_t*>(p)[off];
    case DType::i32:
      return static_cast<const std::int32_t*>(p)[off];
    case DType::i16:
      return static_cast<const std::int16_t*>(p)[off];
    case DType::i8:
      return static_cast<const std::int8_t*>(p)[off];
    default:
      return static_cast<const std::uint8_t*>(p)[off];
  }
}

template <typename E, int V>
__global__ void __launch_bounds__(kMapThreads, 4)
    embedding_kernel(const void* ids, DType kind, std::int64_t ids_stride, const E* table,
                     std::int64_t num_rows, std::int64_t dim, std::int64_t str, std::int64_t stc,
                     E* y, std::int64_t sy, std::int64_t n_ids, std::int64_t col_blocks, E fill) {
  const std::int64_t rb = blockIdx.x / col_blocks;
  const std::int64_t cb = blockIdx.x - rb * col_blocks;
  const std::int64_t row = rb * blockDim.y + threadIdx.y;
  if (row >= n_ids) return;
  const std::int64_t id = load_id(ids, row * ids_stride, kind);
  const bool valid = id >= 0 && id < num_rows;
  const E* tr = table + (valid ? id : 0) * str;
  E* yr = y + row * sy;
  const std::int64_t step = std::int64_t(blockDim.x) * V;
  const std::int64_t j0 = cb * kMapUnroll * step + std::int64_t(threadIdx.x) * V;
  Pack<E, V> v[kMapUnroll];
#pragma unroll
  for (int u = 0; u < kMapUnroll; ++u) {
    const std::int64_t j = j0 + u * step;
    if (j + V <= dim) {
      if (valid) {
        if constexpr (V > 1) {
          v[u] = load_pack<V>(tr + j);  // packs only with contiguous table columns
        } else {
          v[u].v[0] = tr[j * stc];
        }
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) v[u].v[k] = fill;
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kMapUnroll; ++u) {
    const std::int64_t j = j0 + u * step;
    if (j + V <= dim) {
      store_pack<V>(yr + j, v[u]);
    } else {
      for (std::int64_t k = j; k < dim && k < j + V; ++k) yr[k] = valid ? tr[k * stc] : fill;
    }
  }
}

template <typename E>
void launch_embedding(const EmbeddingArgs& a) {
  constexpr int V = 16 / sizeof(E);
  const bool vec = a.table_col_stride == 1 && aligned_to(a.table, 16) && aligned_to(a.y, 16) &&
                   stride_ok(a.num_rows, a.table_row_stride, V) &&
                   stride_ok(a.n_ids, a.y_row_stride, V);
  const E fill = E(a.fill);
  const cudaStream_t stream = as_stream(a.stream);
  auto go = [&](auto width) {
    constexpr int W = decltype(width)::value;
    const RowLaunch L = row_launch(a.n_ids, a.dim, W, kMapUnroll, kMapThreads, "embedding");
    embedding_kernel<E, W><<<L.blocks, L.block, 0, stream>>>(
        ptr<const void>(a.ids), a.ids_dtype, a.ids_stride, ptr<const E>(a.table), a.num_rows,
        a.dim, a.table_row_stride, a.table_col_stride, ptr<E>(a.y), a.y_row_stride, a.n_ids,
        L.col_blocks, fill);
  };
  if (vec) {
    go(std::integral_constant<int, V>{});
  } else {
    go(std::integral_constant<int, 1>{});
  }
  PGK_CHECK_LAUNCH("embedding_kernel");
}

struct Add {
  static constexpr int kArity = 2;
  template <typename C>
  __device__ static C apply(C a, C b) {
    return a + b;
  }
};

}  // namespace

void embedding(const EmbeddingArgs& a) {
  PGK_REQUIRE(a.n_ids >= 0 && a.dim >= 0 && a.num_rows >= 0, "sizes must be >= 0");
  if (a.n_ids == 0 || a.dim == 0) return;
  PGK_REQUIRE(a.ids && a.y && (a.table || a.num_rows == 0), "ids, table and y must be pointers");
  const DType k = a.ids_dtype;
  PGK_REQUIRE(k == DType::i64 || k == DType::i32 || k == DType::i16 || k == DType::i8 ||
                  k == DType::u8,
              std::string("ids must be int8/uint8/int16/int32/int64, got ") + dtype_name(k));
  use_device(a.device);
  switch (a.elem_bytes) {
    case 1:
      return launch_embedding<std::uint8_t>(a);
    case 2:
      return launch_embedding<std::uint16_t>(a);
    case 4:
      return launch_embedding<std::uint32_t>(a);
    case 8:
      return launch_embedding<std::uint64_t>(a);
    default:
      fail("embedding", "elem_bytes must be 1, 2, 4 or 8, got " + std::to_string(a.elem_bytes));
  }
}

void bias_add(const BiasAddArgs& a) {
  PGK_REQUIRE(a.rows >= 0 && a.n >= 0, "rows and n must be >= 0");
  if (a.rows == 0 || a.n == 0) return;
  const RowMap m{a.rows, a.n, a.x, a.x_row_stride, a.bias, 0, a.y, a.y_row_stride};
  check_rowmap(m, true, "bias_add");
  use_device(a.device);
  const cudaStream_t stream = as_stream(a.stream);
  dispatch_float(a.dtype, "bias_add", [&](auto t) {
    using T = decltype(t);
    using C = typename Compute<T>::type;
    if (a.bias_dtype == a.dtype) {
      launch_rowmap<Add, C, T, T, T>(m, stream, "bias_add");
    } else if constexpr (!std::is_same<T, C>::value) {
      PGK_REQUIRE_AS("bias_add", a.bias_dtype == DType::f32,
                     "bias must be x's dtype or float32");
      launch_rowmap<Add, C, T, C, T>(m, stream, "bias_add");
    } else {
      fail("bias_add", std::string("bias must be ") + dtype_name(a.dtype) + ", got " +
                           dtype_name(a.bias_dtype));
    }
  });
}

}  // namespace pgk
