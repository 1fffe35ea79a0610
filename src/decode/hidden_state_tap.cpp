#include "decode/hidden_state_tap.hpp"

#include "core/error.hpp"

namespace selfspec {

HiddenStateTap::HiddenStateTap(std::int64_t hidden_size) : hidden_size_(hidden_size) {
  keep_ = [this](std::string_view name, int /*layer*/, std::span<const float> data,
                 std::int64_t /*rows*/) {
    if (name == "final_norm") rows_.assign(data.begin(), data.end());
  };
  both_ = [this](std::string_view name, int layer, std::span<const float> data, std::int64_t rows) {
    if (other_ != nullptr && *other_) (*other_)(name, layer, data, rows);
    keep_(name, layer, data, rows);
  };
}

const ForwardObserver* HiddenStateTap::next() {
  rows_.clear();
  return &keep_;
}

const ForwardObserver* HiddenStateTap::next_with(const ForwardObserver* other) {
  rows_.clear();
  other_ = other;
  return &both_;
}

std::span<const float> HiddenStateTap::row(std::int64_t row) const {
  const auto d = static_cast<std::size_t>(hidden_size_);
  const auto at = static_cast<std::size_t>(row) * d;
  SELFSPEC_CHECK(at + d <= rows_.size(), "final hidden state of row {} wanted, {} rows observed",
                 row, rows_.size() / d);
  return std::span<const float>(rows_).subspan(at, d);
}

void HiddenStateTap::set_root(std::int64_t row) {
  const std::span<const float> hidden = this->row(row);
  root_.assign(hidden.begin(), hidden.end());
}

}  // namespace selfspec
