// Row-wise and elementwise kernels: RMSNorm, SwiGLU, residual add, bias, embedding lookup.
//
// Plain loops the compiler vectorises (baseline SSE2; no reassociation, no FMA contraction, so
// every element is computed the same way whatever the ISA). Each output element depends only on
// its own inputs in a fixed order: RMSNorm sums squares in double in ascending i and rounds
// r = 1 / sqrt(mean + eps) to f32 once per row; SwiGLU is swiglu_canonical of vector_exp.hpp
// (its exp written out, vectorised for AVX2 and AVX-512 with the same bits; the CUDA kernel has
// the same formula with CUDA's expf). Work is split over tokens (or over element
// ranges) with parallel_for once it is large enough to pay for the threads; arguments are
// validated before any parallel region (nothing throws inside one).
#include "kernels/cpu/elementwise.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/elementwise_simd.hpp"
#include "kernels/cpu/vector_exp.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace selfspec::kernels::cpu {
namespace {

// Elements per parallel chunk for memory-bound elementwise work.
constexpr std::int64_t kElementGrain = 1 << 15;

// Rows per chunk so that a chunk holds at least kElementGrain elements.
std::int64_t row_grain(std::int64_t dim) {
  return std::max<std::int64_t>(1, kElementGrain / std::max<std::int64_t>(dim, 1));
}

template <class Elem, class Convert>
void convert_row(const Elem* src, std::int64_t n, float* dst, Convert convert) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = convert(src[i]);
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float eps, std::int64_t n_tokens,
             std::int64_t dim, float* y) {
  SELFSPEC_CHECK(n_tokens >= 0 && dim > 0, "rmsnorm: bad shape (tokens {}, dim {})", n_tokens, dim);
  if (n_tokens == 0) return;
  parallel_for(n_tokens, row_grain(dim), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const float* xt = x + t * dim;
      float* yt = y + t * dim;
      double sum_squares = 0.0;
      for (std::int64_t i = 0; i < dim; ++i) {
        const double v = xt[i];
        sum_squares += v * v;
      }
      const double mean = sum_squares / static_cast<double>(dim);
      const float r = static_cast<float>(1.0 / std::sqrt(mean + static_cast<double>(eps)));
      for (std::int64_t i = 0; i < dim; ++i) yt[i] = weight[i] * (xt[i] * r);
    }
  });
}

void swiglu(const float* gate, const float* up, float* out, std::int64_t n) {
  SELFSPEC_CHECK(n >= 0, "swiglu: negative length {}", n);
  const Isa isa = active_isa();
  parallel_for(n, kElementGrain / 4, [&](std::int64_t begin, std::int64_t end) {
    if (isa == Isa::kAvx512) {
      detail::swiglu_avx512(gate + begin, up + begin, out + begin, end - begin);
    } else if (isa == Isa::kAvx2) {
      detail::swiglu_avx2(gate + begin, up + begin, out + begin, end - begin);
    } else {
      for (std::int64_t i = begin; i < end; ++i) out[i] = swiglu_canonical(gate[i], up[i]);
    }
  });
}

void add_inplace(float* x, const float* y, std::int64_t n) {
  SELFSPEC_CHECK(n >= 0, "add_inplace: negative length {}", n);
  parallel_for(n, kElementGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) x[i] += y[i];
  });
}

void add_bias(float* x, const float* bias, std::int64_t n_tokens, std::int64_t dim) {
  SELFSPEC_CHECK(n_tokens >= 0 && dim >= 0, "add_bias: bad shape (tokens {}, dim {})", n_tokens,
                 dim);
  if (dim == 0) return;
  parallel_for(n_tokens, row_grain(dim), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      float* xt = x + t * dim;
      for (std::int64_t i = 0; i < dim; ++i) xt[i] += bias[i];
    }
  });
}

void store_as(const float* src, std::int64_t n, DType dtype, void* dst, std::int64_t first) {
  SELFSPEC_CHECK(n >= 0 && first >= 0, "store_as: bad range (first {}, n {})", first, n);
  if (dtype == DType::kF32) {
    std::memcpy(static_cast<float*>(dst) + first, src, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    store_from_f32(dtype, dst, static_cast<std::size_t>(first + i), src[i]);
  }
}

void embedding_lookup(const WeightView& table, std::int64_t vocab_begin, const std::int32_t* tokens,
                      std::int64_t n_tokens, float* out) {
  SELFSPEC_CHECK(n_tokens >= 0 && table.rows >= 0 && table.cols > 0 && vocab_begin >= 0,
                 "embedding_lookup: bad shape (tokens {}, rows {}, cols {}, vocab_begin {})",
                 n_tokens, table.rows, table.cols, vocab_begin);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    if (tokens[t] < 0) fail("embedding_lookup: negative token id {} at position {}", tokens[t], t);
  }
  SELFSPEC_CHECK(
      table.dtype == DType::kF32 || table.dtype == DType::kBF16 || table.dtype == DType::kF16,
      "embedding_lookup: unsupported table dtype {}", static_cast<int>(table.dtype));
  if (table.rows > 0) SELFSPEC_CHECK(table.data != nullptr, "embedding_lookup: null table");
  const std::int64_t dim = table.cols;
  parallel_for(n_tokens, row_grain(dim), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      float* dst = out + t * dim;
      const std::int64_t row = static_cast<std::int64_t>(tokens[t]) - vocab_begin;
      if (row < 0 || row >= table.rows) {
        std::fill(dst, dst + dim, 0.0f);
        continue;
      }
      switch (table.dtype) {
        case DType::kF32:
          std::memcpy(dst, static_cast<const float*>(table.data) + row * dim,
                      static_cast<std::size_t>(dim) * sizeof(float));
          break;
        case DType::kBF16:
          convert_row(static_cast<const std::uint16_t*>(table.data) + row * dim, dim, dst,
                      bf16_to_f32);
          break;
        case DType::kF16:
          convert_row(static_cast<const std::uint16_t*>(table.data) + row * dim, dim, dst,
                      f16_to_f32);
          break;
      }
    }
  });
}

}  // namespace selfspec::kernels::cpu

namespace selfspec::kernels::cpu {

void embedding_lookup(const PackedView& table, std::int64_t vocab_begin, const std::int32_t* tokens,
                      std::int64_t n_tokens, float* out) {
  SELFSPEC_CHECK(n_tokens >= 0 && table.rows > 0 && table.cols > 0 && vocab_begin >= 0,
                 "embedding_lookup: bad shape (tokens {}, rows {}, cols {}, vocab_begin {})",
                 n_tokens, table.rows, table.cols, vocab_begin);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    if (tokens[t] < 0) fail("embedding_lookup: negative token id {} at position {}", tokens[t], t);
  }
  const std::int64_t dim = table.cols;
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    float* dst = out + t * dim;
    const std::int64_t row = static_cast<std::int64_t>(tokens[t]) - vocab_begin;
    if (row < 0 || row >= table.rows) {
      std::fill(dst, dst + dim, 0.0f);
    } else {
      dequantize_packed_row(table, row, {dst, static_cast<std::size_t>(dim)});
    }
  }
}

}  // namespace selfspec::kernels::cpu
