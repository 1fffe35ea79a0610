#include "decode/control_message.hpp"

#include <cstring>

namespace selfspec {

std::uint64_t ControlMessage::checksum() const {
  unsigned char bytes[sizeof(ControlMessage)];
  std::memcpy(bytes, this, sizeof(ControlMessage));
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char b : bytes) {
    hash ^= b;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace selfspec
