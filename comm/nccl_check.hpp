// The NCCL member of the check-macro family (core/check.hpp, fmt-free so that nvcc-compiled code
// may use it too): a failed NCCL call becomes a selfspec::Error naming the statement, NCCL's
// string for the result code, NCCL's last error message (which says which peer, socket or CUDA
// call failed), file:line, rank and host.
//
//   SELFSPEC_NCCL_CHECK(ncclGetUniqueId(&id));
//   SELFSPEC_NCCL_CHECK_COMM(ncclCommCount(comm, &n), comm);   // the message of that comm
//
// These treat every result but ncclSuccess as a failure; calls on a non-blocking communicator
// that may answer ncclInProgress go through NcclComm, which completes them with a deadline.
#pragma once

#include "core/check.hpp"

#include <nccl.h>

#include <string>

namespace selfspec::detail {

// "<ncclGetErrorString(result)>: <ncclGetLastError(comm)>" (the last error is omitted when NCCL
// has none). `comm` may be null: NCCL then reports the thread's last error.
inline std::string nccl_error_detail(ncclResult_t result, ncclComm_t comm) {
  std::string detail = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') {
    detail += ": ";
    detail += last;
  }
  return detail;
}

}  // namespace selfspec::detail

#define SELFSPEC_NCCL_CHECK_COMM(statement, comm)                                               \
  do {                                                                                          \
    const ncclResult_t selfspec_nccl_rc_ = (statement);                                         \
    if (selfspec_nccl_rc_ != ncclSuccess)                                                       \
      ::selfspec::detail::api_call_failed(                                                      \
          "NCCL", #statement, ::selfspec::detail::nccl_error_detail(selfspec_nccl_rc_, (comm)), \
          __FILE__, __LINE__);                                                                  \
  } while (0)

#define SELFSPEC_NCCL_CHECK(statement) SELFSPEC_NCCL_CHECK_COMM(statement, nullptr)
