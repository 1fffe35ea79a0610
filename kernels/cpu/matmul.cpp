// Matmul dispatch and the portable scalar path.
//
// matmul() validates its arguments, then splits the output rows into chunks (parallel_for, the
// chunk size a multiple of 16 rows, 48 for several tokens, chosen so each chunk has enough work)
// and runs the active ISA's single-threaded row kernel on each (the AVX2 path prepares x once for
// all chunks); a reduction is never split across threads, so the thread count cannot change any
// result.
//
// The scalar path emulates the canonical order of matmul.hpp literally: 16 accumulators, one
// std::fmaf per element (correctly rounded, exactly what VFMADD computes per lane), the tail
// padded with zeros in both x and w (so a -0 accumulator becomes +0 exactly as in the AVX2 code),
// then the fixed reduction tree. The weight conversions (bf16 shift, f16 decode) are exact, so the
// result is bit-identical to the AVX2 path. For T > 1 the weight row is reused from L1 for every
// token before moving on to the next row.
#include "kernels/cpu/matmul.hpp"

#include "core/aligned_buffer.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "kernels/cpu/matmul_avx2.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace selfspec::kernels::cpu {
namespace {

constexpr int kLanes = 16;

struct LoadF32 {
  using Elem = float;
  static float load(Elem v) { return v; }
};
struct LoadBf16 {
  using Elem = std::uint16_t;
  static float load(Elem v) { return bf16_to_f32(v); }
};
struct LoadF16 {
  using Elem = std::uint16_t;
  static float load(Elem v) { return f16_to_f32(v); }
};

// The fixed reduction tree of matmul.hpp.
float reduce_lanes(const float (&acc)[kLanes]) {
  float a[8];
  for (int i = 0; i < 8; ++i) a[i] = acc[i] + acc[i + 8];
  float b[4];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  float c[2];
  for (int i = 0; i < 2; ++i) c[i] = b[i] + b[i + 2];
  return c[0] + c[1];
}

template <class L>
float dot_canonical(const float* x, const typename L::Elem* w, std::int64_t n) {
  float acc[kLanes] = {};
  const std::int64_t n_full = n / kLanes * kLanes;
  for (std::int64_t k = 0; k < n_full; k += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = std::fmaf(x[k + j], L::load(w[k + j]), acc[j]);
  }
  if (n_full < n) {
    const int rem = static_cast<int>(n - n_full);
    for (int j = 0; j < kLanes; ++j) {
      const float xv = j < rem ? x[n_full + j] : 0.0f;
      const float wv = j < rem ? L::load(w[n_full + j]) : 0.0f;
      acc[j] = std::fmaf(xv, wv, acc[j]);
    }
  }
  return reduce_lanes(acc);
}

template <class L>
void rows_canonical(const float* x, std::int64_t n_tokens, const WeightView& w,
                    std::int64_t row_begin, std::int64_t row_end, float* y) {
  const auto* base = static_cast<const typename L::Elem*>(w.data);
  for (std::int64_t n = row_begin; n < row_end; ++n) {
    const typename L::Elem* row = base + n * w.cols;
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + n] = dot_canonical<L>(x + t * w.cols, row, w.cols);
    }
  }
}

void check_dtype(DType dtype) {
  SELFSPEC_CHECK(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
                 "matmul: unsupported weight dtype {}", static_cast<int>(dtype));
}

}  // namespace

namespace detail {

float dot_scalar(const float* x, const void* w, DType w_dtype, std::int64_t n) {
  switch (w_dtype) {
    case DType::kF32:
      return dot_canonical<LoadF32>(x, static_cast<const float*>(w), n);
    case DType::kBF16:
      return dot_canonical<LoadBf16>(x, static_cast<const std::uint16_t*>(w), n);
    case DType::kF16:
      return dot_canonical<LoadF16>(x, static_cast<const std::uint16_t*>(w), n);
  }
  return 0.0f;
}

void matmul_rows_scalar(const float* x, std::int64_t n_tokens, const WeightView& w,
                        std::int64_t row_begin, std::int64_t row_end, float* y) {
  switch (w.dtype) {
    case DType::kF32:
      rows_canonical<LoadF32>(x, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kBF16:
      rows_canonical<LoadBf16>(x, n_tokens, w, row_begin, row_end, y);
      return;
    case DType::kF16:
      rows_canonical<LoadF16>(x, n_tokens, w, row_begin, row_end, y);
      return;
  }
}

void matmul_rows(Isa isa, const float* x, std::int64_t n_tokens, const WeightView& w,
                 std::int64_t row_begin, std::int64_t row_end, float* y) {
  if (isa >= Isa::kAvx2) {
    matmul_rows_avx2(x, n_tokens, w, row_begin, row_end, y);
  } else {
    matmul_rows_scalar(x, n_tokens, w, row_begin, row_end, y);
  }
}

}  // namespace detail

float dot(const float* x, const void* w, DType w_dtype, std::int64_t n) {
  check_dtype(w_dtype);
  SELFSPEC_CHECK(n >= 0, "dot: negative length {}", n);
  if (n == 0) return 0.0f;
  SELFSPEC_CHECK(x != nullptr && w != nullptr, "dot: null operand");
  return active_isa() >= Isa::kAvx2 ? detail::dot_avx2(x, w, w_dtype, n)
                                    : detail::dot_scalar(x, w, w_dtype, n);
}

void matmul(const float* x, std::int64_t n_tokens, const WeightView& w, float* y) {
  check_dtype(w.dtype);
  SELFSPEC_CHECK(n_tokens >= 0 && w.rows >= 0 && w.cols >= 0,
                 "matmul: bad shape (tokens {}, rows {}, cols {})", n_tokens, w.rows, w.cols);
  if (n_tokens == 0 || w.rows == 0) return;
  SELFSPEC_CHECK(y != nullptr, "matmul: null output");
  if (w.cols == 0) {  // empty reductions: every accumulator stays +0
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
  SELFSPEC_CHECK(x != nullptr && w.data != nullptr, "matmul: null operand");

  const Isa isa = active_isa();
  // Rows per chunk: enough work that a chunk outweighs waking a thread, a multiple of 16 rows
  // (whole row tiles, whole cache lines of y). Several tokens: a multiple of 48 rows (whole groups
  // of 6 rows in the AVX2 kernel) and more work per chunk, since a chunk streams its weights
  // through column blocks and prefetches ahead only within itself.
  const bool several = n_tokens > 1;
  const std::int64_t min_work = several ? std::int64_t{1} << 19 : std::int64_t{1} << 16;
  const std::int64_t row_align = several ? 48 : 16;
  const std::int64_t work_per_row = w.cols * n_tokens;
  std::int64_t grain = std::max<std::int64_t>(1, (min_work + work_per_row - 1) / work_per_row);
  grain = (grain + row_align - 1) / row_align * row_align;
  if (isa >= Isa::kAvx2) {
    // x is padded and laid out for the kernel once, shared (read-only) by all chunks.
    thread_local AlignedBuffer<float> prepared;
    prepared.ensure(static_cast<std::size_t>(detail::prepared_x_floats(n_tokens, w.cols)));
    detail::prepare_x_avx2(x, n_tokens, w, prepared.data());
    const float* x_prepared = prepared.data();
    parallel_for(w.rows, grain, [&](std::int64_t begin, std::int64_t end) {
      detail::matmul_rows_prepared_avx2(x_prepared, n_tokens, w, begin, end, y);
    });
    return;
  }
  parallel_for(w.rows, grain, [&](std::int64_t begin, std::int64_t end) {
    detail::matmul_rows_scalar(x, n_tokens, w, begin, end, y);
  });
}

}  // namespace selfspec::kernels::cpu
