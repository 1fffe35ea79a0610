// SHA-256 digests of files, as lowercase hex (OpenSSL's EVP interface): what a data set records to
// tell whether the input files it was made from have changed (collect-exit-data's prompts_sha256).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

// The SHA-256 of the files' bytes concatenated in order (64 hex digits). Throws naming the file
// that cannot be read.
std::string sha256_of_files(const std::vector<std::string>& paths);
// The SHA-256 of bytes already in memory (the same digest as a file holding them).
std::string sha256_of_bytes(std::string_view bytes);

}  // namespace selfspec
