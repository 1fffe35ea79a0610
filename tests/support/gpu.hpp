// GPU tests (ctest label gpu) skip themselves, with the reason, where no CUDA device is usable:
//   SELFSPEC_REQUIRE_GPU();  at the top of a test body.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace selfspec::testing {

// Empty when a CUDA device is usable, else why not ("built without CUDA", "no CUDA device: ...").
std::string gpu_unavailable_reason();

}  // namespace selfspec::testing

#define SELFSPEC_REQUIRE_GPU()                                                              \
  do {                                                                                      \
    const std::string selfspec_gpu_reason_ = ::selfspec::testing::gpu_unavailable_reason(); \
    if (!selfspec_gpu_reason_.empty()) GTEST_SKIP() << selfspec_gpu_reason_;                \
  } while (0)
