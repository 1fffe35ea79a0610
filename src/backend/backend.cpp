#include "backend/backend.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>

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
  return hash;
}

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
  forward_pass(inputs, shape, launches);
}

void Backend::forward_pass(const ForwardInputs& inputs, const LaunchShape& shape,
                           const std::function<void()>& launches) {
  (void)shape;
  begin_forward(inputs);
  launches();
  end_forward();
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
