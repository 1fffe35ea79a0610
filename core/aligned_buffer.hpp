// An owning, 64-byte aligned array of trivially copyable elements (RAII, no raw new/delete).
// Used for weights and activations so SIMD loads stay aligned and cache lines are not shared.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <type_traits>

namespace selfspec {

template <typename T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr std::size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t count) { resize(count); }

  // Reallocates to `count` elements; contents are zero-initialised (never stale or NaN).
  void resize(std::size_t count) {
    if (count == size_) {
      zero();
      return;
    }
    data_.reset();
    size_ = 0;
    if (count == 0) return;
    std::size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* raw = std::aligned_alloc(kAlignment, bytes);
    if (raw == nullptr) throw std::bad_alloc();
    data_.reset(static_cast<T*>(raw));
    size_ = count;
    zero();
  }

  // Grows to at least `count` elements without shrinking; contents are not preserved.
  void ensure(std::size_t count) {
    if (count > size_) resize(count);
  }

  void zero() {
    if (size_ != 0) std::memset(static_cast<void*>(data_.get()), 0, size_ * sizeof(T));
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data_.get()[i]; }
  const T& operator[](std::size_t i) const { return data_.get()[i]; }
  std::span<T> span() { return {data_.get(), size_}; }
  std::span<const T> span() const { return {data_.get(), size_}; }

 private:
  struct FreeDeleter {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, FreeDeleter> data_;
  std::size_t size_ = 0;
};

}  // namespace selfspec
