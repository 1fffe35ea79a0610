#include "backend/backend.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

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
