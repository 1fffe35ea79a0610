#include "core/sha256_digest.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>

namespace selfspec {
namespace {

struct DigestContextFree {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextFree>;

void hash_file(EVP_MD_CTX* context, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SELFSPEC_CHECK(in.good(), "{}: cannot open the file to hash it", path);
  std::array<char, 1 << 16> buffer{};
  while (in) {
    in.read(buffer.data(), buffer.size());
    const auto n = static_cast<std::size_t>(in.gcount());
    SELFSPEC_CHECK(EVP_DigestUpdate(context, buffer.data(), n) == 1, "{}: SHA-256 update failed",
                   path);
  }
  SELFSPEC_CHECK(in.eof(), "{}: read error while hashing", path);
}

DigestContext start_digest() {
  DigestContext context(EVP_MD_CTX_new());
  SELFSPEC_CHECK(context != nullptr && EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) == 1,
                 "cannot start a SHA-256 digest");
  return context;
}

std::string finish_digest(EVP_MD_CTX* context) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  SELFSPEC_CHECK(EVP_DigestFinal_ex(context, digest.data(), &length) == 1,
                 "cannot finish a SHA-256 digest");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace

std::string sha256_of_files(const std::vector<std::string>& paths) {
  const DigestContext context = start_digest();
  for (const std::string& path : paths) hash_file(context.get(), path);
  return finish_digest(context.get());
}

std::string sha256_of_bytes(std::string_view bytes) {
  const DigestContext context = start_digest();
  SELFSPEC_CHECK(EVP_DigestUpdate(context.get(), bytes.data(), bytes.size()) == 1,
                 "SHA-256 update failed");
  return finish_digest(context.get());
}

}  // namespace selfspec
