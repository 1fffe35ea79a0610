#include "core/error.hpp"

#include "core/process_identity.hpp"

#include <filesystem>

namespace selfspec::detail {

void check_failed(const std::string& message) {
  throw Error(message);
}

void throw_error(const std::string& message) {
  throw Error(message);
}

void api_call_failed(std::string_view api, std::string_view statement, std::string_view detail,
                     const char* file, int line) {
  const ProcessIdentity& id = process_identity();
  throw Error(fmt::format("{} call failed: {} -> {} (at {}:{}, rank {}/{} on {})", api, statement,
                          detail, std::filesystem::path(file).filename().string(), line, id.rank,
                          id.size, id.host));
}

}  // namespace selfspec::detail
