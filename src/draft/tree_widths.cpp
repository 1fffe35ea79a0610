#include "draft/tree_widths.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace selfspec {

TreeWidths TreeWidths::chain() {
  return TreeWidths({{1.0, 1}});
}

TreeWidths TreeWidths::swift() {
  return TreeWidths({{0.5, 10}, {0.8, 5}, {0.95, 3}, {1.0, 1}});
}

TreeWidths TreeWidths::parse(std::string_view text, std::string_view option) {
  if (text == "none") return chain();
  if (text == "swift") return swift();
  std::vector<Bin> bins;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, end - begin);
    const std::size_t colon = item.find(':');
    Bin bin;
    bool ok = colon != std::string_view::npos;
    if (ok) {
      const std::string_view upper = item.substr(0, colon);
      const std::string_view width = item.substr(colon + 1);
      const auto u = std::from_chars(upper.data(), upper.data() + upper.size(), bin.upper);
      const auto w = std::from_chars(width.data(), width.data() + width.size(), bin.width);
      ok = u.ec == std::errc{} && u.ptr == upper.data() + upper.size() && w.ec == std::errc{} &&
           w.ptr == width.data() + width.size();
    }
    SELFSPEC_CHECK(ok,
                   "{}: '{}' is not a bin UPPER:WIDTH (e.g. 0.5:10); the option takes none, "
                   "swift, or bins like 0.5:10,0.8:5,0.95:3,1:1",
                   option, item);
    SELFSPEC_CHECK(bin.upper > 0.0 && bin.upper <= 1.0 && bin.width >= 1,
                   "{}: bin '{}' needs an upper bound in (0, 1] and a width >= 1", option, item);
    SELFSPEC_CHECK(bins.empty() || bin.upper > bins.back().upper,
                   "{}: bin '{}' does not raise the upper bound (bins go by ascending bound)",
                   option, item);
    bins.push_back(bin);
    begin = end + 1;
  }
  SELFSPEC_CHECK(bins.back().upper == 1.0,
                 "{}: the last bin must end at 1 (it covers confidences up to 1), not at {}",
                 option, bins.back().upper);
  return TreeWidths(std::move(bins));
}

int TreeWidths::width(double confidence) const {
  for (const Bin& bin : bins_) {
    if (confidence <= bin.upper) return bin.width;
  }
  return bins_.back().width;
}

int TreeWidths::max_width() const {
  int widest = 1;
  for (const Bin& bin : bins_) widest = std::max(widest, bin.width);
  return widest;
}

std::string TreeWidths::describe() const {
  if (is_chain()) return "none";
  std::string text;
  for (const Bin& bin : bins_) {
    text += fmt::format("{}{}:{}", text.empty() ? "" : ",", bin.upper, bin.width);
  }
  return text;
}

}  // namespace selfspec
