// The MPI member of the check-macro family: a failed MPI call becomes a selfspec::Error that
// names the statement, MPI's own error string, file:line, rank and host.
#pragma once

#include "core/error.hpp"

#include <mpi.h>

#include <string>

namespace selfspec::detail {
std::string mpi_error_string(int code);
}  // namespace selfspec::detail

#define SELFSPEC_MPI_CHECK(statement)                                                             \
  do {                                                                                            \
    const int selfspec_mpi_rc_ = (statement);                                                     \
    if (selfspec_mpi_rc_ != MPI_SUCCESS)                                                          \
      ::selfspec::detail::api_call_failed("MPI", #statement,                                      \
                                          ::selfspec::detail::mpi_error_string(selfspec_mpi_rc_), \
                                          __FILE__, __LINE__);                                    \
  } while (0)
