#include "core/process_identity.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <mutex>

namespace selfspec {
namespace {

ProcessIdentity make_default_identity() {
  ProcessIdentity identity;
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) == 0) identity.host = name.data();
  return identity;
}

ProcessIdentity& identity_storage() {
  static ProcessIdentity identity = make_default_identity();
  return identity;
}

}  // namespace

const ProcessIdentity& process_identity() {
  return identity_storage();
}

void set_process_identity(ProcessIdentity identity) {
  if (identity.host.empty()) identity.host = identity_storage().host;
  identity_storage() = std::move(identity);
}

std::string rank_prefix() {
  const ProcessIdentity& id = process_identity();
  return fmt::format("[rank {}/{} {}]", id.rank, id.size, id.host);
}

}  // namespace selfspec
