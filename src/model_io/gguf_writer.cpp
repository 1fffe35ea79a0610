// GgufWriter (see gguf_writer.hpp): serialises metadata and tensor infos little-endian, pads to
// the alignment, then the tensors' bytes, each at an aligned offset.
#include "model_io/gguf_writer.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <cstring>
#include <fstream>
#include <limits>

namespace selfspec {
namespace {

// Builds the file in a std::string (GCC 12 at -O3 misreports growing a vector<std::byte> a few
// bytes at a time as an overflow).
class ByteWriter {
 public:
  template <typename T>
  void scalar(T value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void string(const std::string& text) {
    scalar<std::uint64_t>(text.size());
    bytes_.append(text);
  }
  void pad_to(std::uint64_t alignment) {
    bytes_.append((alignment - bytes_.size() % alignment) % alignment, '\0');
  }
  void append(std::span<const std::byte> data) {
    bytes_.append(reinterpret_cast<const char*>(data.data()), data.size());
  }
  std::vector<std::byte> take() const {
    std::vector<std::byte> out(bytes_.size());
    std::memcpy(out.data(), bytes_.data(), bytes_.size());
    return out;
  }

 private:
  std::string bytes_;
};

template <typename T>
void write_checked_integer(ByteWriter& out, std::int64_t value, const std::string& key) {
  const bool fits = value < 0 ? value >= static_cast<std::int64_t>(std::numeric_limits<T>::min())
                              : static_cast<std::uint64_t>(value) <=
                                    static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  SELFSPEC_CHECK(fits, "GGUF metadata key '{}': value {} does not fit its type", key, value);
  out.scalar<T>(static_cast<T>(value));
}

void write_integer(ByteWriter& out, GgufValueType type, std::int64_t value,
                   const std::string& key) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kBool:
      return write_checked_integer<std::uint8_t>(out, value, key);
    case GgufValueType::kInt8:
      return write_checked_integer<std::int8_t>(out, value, key);
    case GgufValueType::kUint16:
      return write_checked_integer<std::uint16_t>(out, value, key);
    case GgufValueType::kInt16:
      return write_checked_integer<std::int16_t>(out, value, key);
    case GgufValueType::kUint32:
      return write_checked_integer<std::uint32_t>(out, value, key);
    case GgufValueType::kInt32:
      return write_checked_integer<std::int32_t>(out, value, key);
    case GgufValueType::kUint64:
      SELFSPEC_CHECK(value >= 0, "GGUF metadata key '{}': negative u64 {}", key, value);
      return out.scalar<std::uint64_t>(static_cast<std::uint64_t>(value));
    case GgufValueType::kInt64:
      return out.scalar<std::int64_t>(value);
    default:
      fail("GGUF metadata key '{}': {} is not an integer type", key, gguf_value_type_name(type));
  }
}

void write_float(ByteWriter& out, GgufValueType type, double value) {
  if (type == GgufValueType::kFloat32) {
    out.scalar<float>(static_cast<float>(value));
  } else {
    out.scalar<double>(value);
  }
}

void write_scalar(ByteWriter& out, GgufValueType type, const GgufValue& value,
                  const std::string& key) {
  if (type == GgufValueType::kString) {
    out.string(std::get<std::string>(value.value));
  } else if (type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64) {
    write_float(out, type, std::get<double>(value.value));
  } else {
    write_integer(out, type, std::get<std::int64_t>(value.value), key);
  }
}

void write_array(ByteWriter& out, const GgufValue& value, const std::string& key) {
  out.scalar<std::uint32_t>(static_cast<std::uint32_t>(value.element_type));
  std::visit(
      [&](const auto& held) {
        using Held = std::decay_t<decltype(held)>;
        if constexpr (std::is_same_v<Held, std::vector<std::string>>) {
          out.scalar<std::uint64_t>(held.size());
          for (const std::string& s : held) out.string(s);
        } else if constexpr (std::is_same_v<Held, std::vector<double>>) {
          out.scalar<std::uint64_t>(held.size());
          for (double d : held) write_float(out, value.element_type, d);
        } else if constexpr (std::is_same_v<Held, std::vector<std::int64_t>>) {
          out.scalar<std::uint64_t>(held.size());
          for (std::int64_t i : held) write_integer(out, value.element_type, i, key);
        } else {
          fail("GGUF metadata key '{}': an array value must hold a vector", key);
        }
      },
      value.value);
}

}  // namespace

GgufWriter::GgufWriter(std::uint64_t alignment) : alignment_(alignment) {
  SELFSPEC_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0,
                 "GGUF alignment {} is not a power of two", alignment);
  if (alignment != 32) set_u32("general.alignment", static_cast<std::uint32_t>(alignment));
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [existing, held] : metadata_) {
    if (existing == key) {
      held = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::set_string(const std::string& key, std::string value) {
  set(key, GgufValue{GgufValueType::kString, GgufValueType::kUint32, std::move(value)});
}
void GgufWriter::set_u32(const std::string& key, std::uint32_t value) {
  set(key, GgufValue{GgufValueType::kUint32, GgufValueType::kUint32, std::int64_t{value}});
}
void GgufWriter::set_i32(const std::string& key, std::int32_t value) {
  set(key, GgufValue{GgufValueType::kInt32, GgufValueType::kUint32, std::int64_t{value}});
}
void GgufWriter::set_f32(const std::string& key, float value) {
  set(key, GgufValue{GgufValueType::kFloat32, GgufValueType::kUint32, double{value}});
}
void GgufWriter::set_bool(const std::string& key, bool value) {
  set(key, GgufValue{GgufValueType::kBool, GgufValueType::kUint32, std::int64_t{value ? 1 : 0}});
}
void GgufWriter::set_string_array(const std::string& key, std::vector<std::string> values) {
  set(key, GgufValue{GgufValueType::kArray, GgufValueType::kString, std::move(values)});
}
void GgufWriter::set_int_array(const std::string& key, std::vector<std::int64_t> values,
                               GgufValueType element_type) {
  set(key, GgufValue{GgufValueType::kArray, element_type, std::move(values)});
}
void GgufWriter::set_f32_array(const std::string& key, std::vector<double> values) {
  set(key, GgufValue{GgufValueType::kArray, GgufValueType::kFloat32, std::move(values)});
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> dims,
                            std::vector<std::byte> data) {
  SELFSPEC_CHECK(!dims.empty(), "GGUF tensor '{}': no dimensions", name);
  std::uint64_t rows = 1;
  for (std::size_t d = 1; d < dims.size(); ++d) rows *= static_cast<std::uint64_t>(dims[d]);
  const std::uint64_t expected = ggml_row_bytes(type, dims[0]) * rows;
  SELFSPEC_CHECK(data.size() == expected, "GGUF tensor '{}': {} bytes given, {} expected", name,
                 data.size(), expected);
  tensors_.push_back(Tensor{name, type, std::move(dims), std::move(data)});
}

void GgufWriter::add_f32_tensor(const std::string& name, std::vector<std::int64_t> dims,
                                std::span<const float> values, GgmlType type) {
  std::vector<std::byte> data;
  if (type == GgmlType::kF32) {
    data.resize(values.size_bytes());
    std::memcpy(data.data(), values.data(), data.size());
  } else {
    SELFSPEC_CHECK(type == GgmlType::kF16 || type == GgmlType::kBF16,
                   "GGUF tensor '{}': add_f32_tensor converts to F32, F16 or BF16 only", name);
    std::vector<std::uint16_t> halves(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      halves[i] = type == GgmlType::kF16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
    }
    data.resize(halves.size() * 2);
    std::memcpy(data.data(), halves.data(), data.size());
  }
  add_tensor(name, type, std::move(dims), std::move(data));
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  ByteWriter out;
  for (char c : std::string_view("GGUF")) out.scalar<std::uint8_t>(static_cast<std::uint8_t>(c));
  out.scalar<std::uint32_t>(3);
  out.scalar<std::uint64_t>(tensors_.size());
  out.scalar<std::uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    out.string(key);
    out.scalar<std::uint32_t>(static_cast<std::uint32_t>(value.type));
    if (value.type == GgufValueType::kArray) {
      write_array(out, value, key);
    } else {
      write_scalar(out, value.type, value, key);
    }
  }
  std::uint64_t offset = 0;
  for (const Tensor& tensor : tensors_) {
    out.string(tensor.name);
    out.scalar<std::uint32_t>(static_cast<std::uint32_t>(tensor.dims.size()));
    for (std::int64_t d : tensor.dims) out.scalar<std::uint64_t>(static_cast<std::uint64_t>(d));
    out.scalar<std::uint32_t>(static_cast<std::uint32_t>(tensor.type));
    out.scalar<std::uint64_t>(offset);
    offset = (offset + tensor.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.pad_to(alignment_);
  for (const Tensor& tensor : tensors_) {
    out.append(tensor.data);
    out.pad_to(alignment_);
  }
  return out.take();
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::vector<std::byte> bytes = to_bytes();
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  SELFSPEC_CHECK(file.good(), "cannot create {}", path.string());
  file.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  SELFSPEC_CHECK(file.good(), "cannot write {}", path.string());
}

}  // namespace selfspec
