// The one error type of selfspec and the checks that raise it.
//
// Library code throws selfspec::Error with a message that carries its context (file, tensor,
// option, rank). Only launch/ catches it and decides to end the job. External API calls (MPI,
// CUDA, cuBLAS, NCCL) go through the one check-macro family built on api_call_failed(), declared
// here and instantiated per API next to the code that includes that API's headers
// (comm/mpi_check.hpp, core/cuda_check.hpp, comm/nccl_check.hpp); core/check.hpp declares
// it without fmt so nvcc-compiled code can use it.
#pragma once

#include "core/check.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace selfspec {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws selfspec::Error with an fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

namespace detail {
[[noreturn]] void check_failed(const std::string& message);
}  // namespace detail

}  // namespace selfspec

// SELFSPEC_CHECK(cond, "format {}", args...) throws selfspec::Error when cond is false.
#define SELFSPEC_CHECK(cond, ...)                                              \
  do {                                                                         \
    if (!(cond)) ::selfspec::detail::check_failed(::fmt::format(__VA_ARGS__)); \
  } while (0)
