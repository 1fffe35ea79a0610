#include "speculative/list_options.hpp"

#include <algorithm>

namespace selfspec {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

CLI::Validator member_or_list(std::vector<std::string> allowed, bool lists) {
  return CLI::Validator(
      [allowed, lists](std::string& value) -> std::string {
        const std::vector<std::string> items =
            lists ? split_list(value) : std::vector<std::string>{value};
        for (const std::string& item : items) {
          if (std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
            std::string known;
            for (const auto& a : allowed) known += (known.empty() ? "" : ", ") + a;
            return "'" + item + "' is not one of: " + known;
          }
        }
        return {};
      },
      lists ? "LIST" : "VALUE");
}

}  // namespace selfspec
