// The count-vocab file: ranking counts, writing and reading the file, choosing the kept ids.
#include "model_io/draft_vocab_file.hpp"

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <limits>
#include <numeric>
#include <unordered_set>

namespace selfspec {
namespace {

// The value of a required key, of the expected JSON type.
const nlohmann::json& required(const nlohmann::json& root, const char* key,
                               bool (nlohmann::json::*is)() const noexcept, const char* what,
                               std::string_view option, const std::filesystem::path& file) {
  const auto it = root.find(key);
  SELFSPEC_CHECK(it != root.end(), "{} {}: missing key '{}'", option, file.string(), key);
  SELFSPEC_CHECK(((*it).*is)(), "{} {}: '{}' must be {}", option, file.string(), key, what);
  return *it;
}

std::vector<std::int32_t> read_ids(const nlohmann::json& list, std::string_view option,
                                   const std::filesystem::path& file) {
  std::vector<std::int32_t> ids;
  std::unordered_set<std::int64_t> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& id = list[i];
    SELFSPEC_CHECK(id.is_number_integer() && id.get<std::int64_t>() >= 0 &&
                       id.get<std::int64_t>() <= std::numeric_limits<std::int32_t>::max(),
                   "{} {}: ids[{}] = {} is not a token id (an integer >= 0)", option, file.string(),
                   i, id.dump());
    const auto value = id.get<std::int64_t>();
    SELFSPEC_CHECK(seen.insert(value).second, "{} {}: ids[{}] = {} is listed twice", option,
                   file.string(), i, value);
    ids.push_back(static_cast<std::int32_t>(value));
  }
  return ids;
}

}  // namespace

DraftVocabFile rank_token_counts(std::span<const std::int64_t> counts) {
  std::vector<std::int32_t> ids(counts.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return counts[static_cast<std::size_t>(a)] > counts[static_cast<std::size_t>(b)];
  });
  DraftVocabFile vocab;
  vocab.ids = std::move(ids);
  for (const std::int32_t id : vocab.ids)
    vocab.counts.push_back(counts[static_cast<std::size_t>(id)]);
  vocab.tokens_counted = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  return vocab;
}

void save_draft_vocab_file(const std::filesystem::path& file, const DraftVocabFile& vocab) {
  nlohmann::ordered_json json;
  json["model"] = vocab.model;
  json["source"] = vocab.source;
  json["tokens_counted"] = vocab.tokens_counted;
  json["ids"] = vocab.ids;
  json["counts"] = vocab.counts;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  SELFSPEC_CHECK(out.good(), "{}: cannot open the vocabulary file for writing", file.string());
  out << json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << '\n';
  out.close();
  SELFSPEC_CHECK(out.good(), "{}: cannot write the vocabulary file", file.string());
}

DraftVocabFile load_draft_vocab_file(const std::filesystem::path& file, std::string_view option) {
  std::ifstream in(file, std::ios::binary);
  SELFSPEC_CHECK(in.good(), "{} {}: cannot open the vocabulary file", option, file.string());
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{} {}: not a count-vocab JSON file: {}", option, file.string(), e.what());
  }
  SELFSPEC_CHECK(root.is_object(), "{} {}: a count-vocab file is a JSON object with ids, counts",
                 option, file.string());
  DraftVocabFile vocab;
  if (const auto it = root.find("model"); it != root.end() && it->is_string())
    vocab.model = it->get<std::string>();
  if (const auto it = root.find("source"); it != root.end() && it->is_string())
    vocab.source = it->get<std::string>();
  if (const auto it = root.find("tokens_counted"); it != root.end() && it->is_number_integer())
    vocab.tokens_counted = it->get<std::int64_t>();
  vocab.ids = read_ids(
      required(root, "ids", &nlohmann::json::is_array, "a list of token ids", option, file), option,
      file);
  SELFSPEC_CHECK(!vocab.ids.empty(), "{} {}: 'ids' is empty", option, file.string());
  const nlohmann::json& counts =
      required(root, "counts", &nlohmann::json::is_array, "a list of counts", option, file);
  SELFSPEC_CHECK(counts.size() == vocab.ids.size(), "{} {}: {} counts for {} ids", option,
                 file.string(), counts.size(), vocab.ids.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    SELFSPEC_CHECK(counts[i].is_number_integer() && counts[i].get<std::int64_t>() >= 0,
                   "{} {}: counts[{}] = {} is not a count", option, file.string(), i,
                   counts[i].dump());
    vocab.counts.push_back(counts[i].get<std::int64_t>());
  }
  return vocab;
}

std::vector<std::int32_t> select_draft_vocab(std::span<const std::int32_t> ranked,
                                             std::optional<std::int64_t> size,
                                             std::span<const std::int32_t> eos_ids,
                                             std::int64_t vocab_size, std::string_view size_option,
                                             std::string_view origin) {
  const auto available = static_cast<std::int64_t>(ranked.size());
  const std::int64_t n = size.value_or(available);
  SELFSPEC_CHECK(n >= 1 && n <= available, "{} {} is outside [1, {}] (the ids of {})", size_option,
                 n, available, origin);
  std::vector<std::int32_t> kept(ranked.begin(), ranked.begin() + n);
  for (const std::int32_t id : kept) {
    SELFSPEC_CHECK(id >= 0 && id < vocab_size,
                   "{}: token id {} is outside the model's vocabulary [0, {}) (counted for "
                   "another model?)",
                   origin, id, vocab_size);
  }
  for (const std::int32_t eos : eos_ids) {
    if (std::find(kept.begin(), kept.end(), eos) == kept.end()) kept.push_back(eos);
  }
  return kept;
}

}  // namespace selfspec
