#include "backend/backend.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace selfspec {

std::string_view device_kind_name(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? "cuda" : "cpu";
}

std::string BackendDescription::summary() const {
  if (kind == DeviceKind::kCpu)
    return fmt::format("{} ({}, {} threads)", device, isa, host_threads);
  return fmt::format("{}, {}", device, isa);
}

DeviceKind parse_device_kind(std::string_view text) {
  if (text == "cpu") return DeviceKind::kCpu;
  if (text == "cuda") return DeviceKind::kCuda;
  fail("--device: unknown device '{}' (cpu, cuda)", text);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    bytes_ = other.bytes_;
    release_ = other.release_;
    other.data_ = nullptr;
    other.bytes_ = 0;
    other.release_ = nullptr;
  }
  return *this;
}

void DeviceBuffer::reset() noexcept {
  if (data_ != nullptr && release_ != nullptr) release_(data_);
  data_ = nullptr;
  bytes_ = 0;
}

std::uint64_t launch_key(const LaunchShape& shape) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  const auto mix = [&](std::uint64_t value) {
    hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  };
  for (std::uint64_t word : shape.plan_words) mix(word);
  mix(shape.plan_words.size());
  mix(static_cast<std::uint64_t>(shape.n_tokens));
  mix(shape.tree_mask ? 1 : 0);
  for (std::int32_t row : shape.logit_rows) mix(static_cast<std::uint64_t>(row) + 1);
  mix(shape.logit_rows.size());
  mix(reinterpret_cast<std::uintptr_t>(shape.kv_cache));
  mix(static_cast<std::uint64_t>(shape.kv_capacity));
  mix(reinterpret_cast<std::uintptr_t>(shape.draft_vocabulary));
  mix(shape.early_exit ? 1 : 0);
  mix(shape.draft_weights ? 1 : 0);
  mix(shape.segmented ? 1 : 0);
  return hash;
}

namespace {

// Segments cover the tokens in order, without a tree mask.
void check_segments(const ForwardInputs& inputs) {
  if (inputs.segments.empty()) return;
  SELFSPEC_CHECK(inputs.tree_mask == nullptr,
                 "a forward over several sequences takes no tree mask");
  std::int64_t next = 0;
  for (const KvSegment& segment : inputs.segments) {
    SELFSPEC_CHECK(segment.first_token == next && segment.n_tokens > 0 && segment.n_past >= 0 &&
                       segment.kv_offset >= 0,
                   "sequence segment (first token {}, {} tokens, n_past {}, KV offset {}) does "
                   "not follow the previous one (next token {})",
                   segment.first_token, segment.n_tokens, segment.n_past, segment.kv_offset, next);
    next += segment.n_tokens;
  }
  SELFSPEC_CHECK(next == static_cast<std::int64_t>(inputs.tokens.size()),
                 "the sequence segments cover {} tokens of {}", next, inputs.tokens.size());
}

}  // namespace

void Backend::run_forward(const ForwardInputs& inputs, const LaunchShape& shape,
                          const std::function<void()>& launches) {
  SELFSPEC_CHECK(shape.n_tokens == static_cast<std::int64_t>(inputs.tokens.size()),
                 "launch shape for {} tokens used with {} tokens", shape.n_tokens,
                 inputs.tokens.size());
  SELFSPEC_CHECK(shape.tree_mask == (inputs.tree_mask != nullptr),
                 "launch shape says {} tree mask but the inputs have {}",
                 shape.tree_mask ? "a" : "no", inputs.tree_mask != nullptr ? "one" : "none");
  SELFSPEC_CHECK(std::ranges::equal(shape.logit_rows, inputs.logit_rows),
                 "launch shape's logit rows differ from the inputs'");
  SELFSPEC_CHECK(shape.segmented == !inputs.segments.empty(),
                 "launch shape says {} sequences but the inputs have {}",
                 shape.segmented ? "several" : "one", inputs.segments.size());
  check_segments(inputs);
  SELFSPEC_CHECK(inputs.segments.empty() || host_memory(),
                 "a forward over several sequences runs on host-memory backends only (this one "
                 "is {})",
                 description().summary());
  forward_pass(inputs, shape, launches);
}

void Backend::forward_pass(const ForwardInputs& inputs, const LaunchShape& shape,
                           const std::function<void()>& launches) {
  (void)shape;
  begin_forward(inputs);
  launches();
  end_forward();
}

void Backend::matmul_many(const float* x, std::int64_t rows, std::span<const BackendWeight> ws,
                          std::span<float* const> ys) {
  SELFSPEC_CHECK(ws.size() == ys.size(), "matmul_many: {} matrices but {} outputs", ws.size(),
                 ys.size());
  for (std::size_t i = 0; i < ws.size(); ++i) matmul(x, rows, ws[i], ys[i]);
}

void Backend::matmul_swiglu(const float* x, std::int64_t rows, const BackendWeight& w_gate,
                            const BackendWeight& w_up, float* up_scratch, float* out) {
  const BackendWeight weights[] = {w_gate, w_up};
  float* const outputs[] = {out, up_scratch};
  matmul_many(x, rows, weights, outputs);
  swiglu(out, up_scratch, out, rows * w_gate.rows);
}

bool Backend::fuses_norm(std::int64_t rows, std::span<const BackendWeight> ws) const {
  (void)rows;
  (void)ws;
  return false;
}

void Backend::norm_matmul_many(const float* x, const float* norm_weight, float eps,
                               std::int64_t rows, std::span<const BackendWeight> ws,
                               std::span<float* const> ys) {
  (void)x, (void)norm_weight, (void)eps, (void)rows, (void)ws, (void)ys;
  fail("norm_matmul_many: the {} backend does not fuse the norm (ask fuses_norm)",
       device_kind_name(kind()));
}

void Backend::norm_matmul_swiglu(const float* x, const float* norm_weight, float eps,
                                 std::int64_t rows, const BackendWeight& w_gate,
                                 const BackendWeight& w_up, float* out) {
  (void)x, (void)norm_weight, (void)eps, (void)rows, (void)w_gate, (void)w_up, (void)out;
  fail("norm_matmul_swiglu: the {} backend does not fuse the norm (ask fuses_norm)",
       device_kind_name(kind()));
}

bool Backend::fuses_residual_add(std::int64_t rows, const BackendWeight& w) const {
  (void)rows;
  (void)w;
  return false;
}

void Backend::matmul_accumulate(const float* x, std::int64_t rows, const BackendWeight& w,
                                float* y) {
  (void)x, (void)rows, (void)w, (void)y;
  fail("matmul_accumulate: the {} backend does not fuse the residual add (ask fuses_residual_add)",
       device_kind_name(kind()));
}

bool Backend::fuses_rope_kv(std::int64_t rows, std::span<const BackendWeight> ws,
                            std::int64_t head_dim) const {
  (void)rows, (void)ws, (void)head_dim;
  return false;
}

void Backend::matmul_rope_kv(const float* x, const float* norm_weight, float eps, std::int64_t rows,
                             std::span<const BackendWeight> ws, const RopeKv& args,
                             const RopeTable& table, const KvLayer& cache) {
  (void)x, (void)norm_weight, (void)eps, (void)rows, (void)ws, (void)args, (void)table, (void)cache;
  fail("matmul_rope_kv: the {} backend does not fuse the position step (ask fuses_rope_kv)",
       device_kind_name(kind()));
}

void Backend::rope_write_kv(const RopeKv& args, const RopeTable& table, const KvLayer& cache) {
  const std::int64_t kv_width = args.kv_heads * args.head_dim;
  if (args.q != nullptr) rope(args.q, args.q_stride, args.n_q_heads, args.head_dim, table);
  rope(args.k, kv_width, args.kv_heads, args.head_dim, table);
  write_kv(args.k, args.v, args.kv_heads, args.head_dim, cache);
}

std::size_t dense_element_bytes(WeightFormat format) {
  const std::optional<DType> dtype = dense_dtype(format);
  SELFSPEC_CHECK(dtype.has_value(), "{} is not a dense format", weight_format_name(format));
  return dtype_size(*dtype);
}

DeviceBuffer select_dense_rows(Backend& backend, const BackendWeight& w,
                               std::span<const std::int32_t> rows) {
  const std::size_t row_bytes = static_cast<std::size_t>(w.cols) * dense_element_bytes(w.format);
  std::vector<std::byte> staged(rows.size() * row_bytes);
  const auto* base = static_cast<const std::byte*>(w.data);
  for (std::size_t j = 0; j < rows.size(); ++j) {
    SELFSPEC_CHECK(rows[j] >= 0 && rows[j] < w.rows, "select rows: row {} outside [0, {})", rows[j],
                   w.rows);
    backend.download(staged.data() + j * row_bytes,
                     base + static_cast<std::size_t>(rows[j]) * row_bytes, row_bytes);
  }
  DeviceBuffer out = backend.allocate(staged.size());
  backend.upload(out.data(), staged.data(), staged.size());
  return out;
}

DeviceBuffer select_dense_cols(Backend& backend, const BackendWeight& w, std::int64_t begin,
                               std::int64_t end) {
  SELFSPEC_CHECK(0 <= begin && begin < end && end <= w.cols, "select columns [{}, {}) of {}", begin,
                 end, w.cols);
  const std::size_t element = dense_element_bytes(w.format);
  std::vector<std::byte> host(static_cast<std::size_t>(w.rows * w.cols) * element);
  backend.download(host.data(), w.data, host.size());
  const std::size_t row_bytes = static_cast<std::size_t>(end - begin) * element;
  std::vector<std::byte> block(static_cast<std::size_t>(w.rows) * row_bytes);
  for (std::int64_t n = 0; n < w.rows; ++n) {
    std::copy_n(host.data() + static_cast<std::size_t>(n * w.cols + begin) * element, row_bytes,
                block.data() + static_cast<std::size_t>(n) * row_bytes);
  }
  DeviceBuffer out = backend.allocate(block.size());
  backend.upload(out.data(), block.data(), block.size());
  return out;
}

#if !defined(SELFSPEC_CUDA_BACKEND_BUILT)
std::unique_ptr<Backend> make_cuda_backend(int /*device*/) {
  fail("--device cuda: selfspec was built without CUDA (SELFSPEC_CUDA=OFF or no nvcc)");
}
std::optional<std::string> cuda_unavailable_reason() {
  return std::string("selfspec was built without CUDA");
}
int cuda_device_count() {
  return 0;
}
#endif

}  // namespace selfspec
