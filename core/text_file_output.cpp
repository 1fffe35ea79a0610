#include "core/text_file_output.hpp"

#include "core/error.hpp"

#include <fstream>
#include <system_error>

namespace selfspec {

void write_text_file_atomically(const std::filesystem::path& path, std::string_view text,
                                std::string_view what) {
  const std::filesystem::path staging = path.string() + ".partial";
  {
    std::ofstream out(staging, std::ios::trunc);
    SELFSPEC_CHECK(out.good(), "{}: cannot write the {}", staging.string(), what);
    out << text;
    out.close();
    SELFSPEC_CHECK(out.good(), "{}: writing the {} failed", staging.string(), what);
  }
  std::error_code error;
  std::filesystem::rename(staging, path, error);
  SELFSPEC_CHECK(!error, "{}: cannot rename {} into place: {}", path.string(), staging.string(),
                 error.message());
}

}  // namespace selfspec
