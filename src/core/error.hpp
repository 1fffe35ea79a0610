// The one error type of selfspec and the checks that raise it.
//
// Library code throws selfspec::Error with a message that carries its context (file, tensor,
// option, rank). Only launch/ catches it and decides to end the job. External API calls (MPI,
// CUDA, cuBLAS, NCCL) go through the one check-macro family built on api_call_failed(), declared
// here and instantiated per API next to the code that includes that API's headers
// (comm/mpi_check.hpp, kernels/cuda/cuda_check.hpp).
#pragma once

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
// Reports a failed external API call: which API, the statement, the API's own description of the
// failure, where, and on which rank/host (from process_identity()).
[[noreturn]] void api_call_failed(std::string_view api, std::string_view statement,
                                  std::string_view detail, const char* file, int line);
}  // namespace detail

}  // namespace selfspec

// SELFSPEC_CHECK(cond, "format {}", args...) throws selfspec::Error when cond is false.
#define SELFSPEC_CHECK(cond, ...)                                              \
  do {                                                                         \
    if (!(cond)) ::selfspec::detail::check_failed(::fmt::format(__VA_ARGS__)); \
  } while (0)
