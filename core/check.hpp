// The base of the check-macro family, free of fmt so that it can be included from nvcc-compiled
// (.cu) translation units: api_call_failed() reports a failed external API call (MPI, CUDA,
// cuBLAS, NCCL) as a selfspec::Error naming the statement, the API's own error string, file:line,
// rank and host; throw_error() raises a selfspec::Error with a prepared message.
#pragma once

#include <string>
#include <string_view>

namespace selfspec::detail {

[[noreturn]] void api_call_failed(std::string_view api, std::string_view statement,
                                  std::string_view detail, const char* file, int line);
[[noreturn]] void throw_error(const std::string& message);

}  // namespace selfspec::detail
