// BpeTokenizer (see bpe_tokenizer.hpp): HF tokenizers' tokenizer.json byte-level BPE pipeline.
// Each stage follows the HF tokenizers (Rust, 0.2x) implementation it is named after:
//   AddedVocabulary::extract_and_normalize / find_matches   -> AddedTokenSplitter (added_tokens)
//   pre_tokenizers::{split::Split, byte_level::ByteLevel, digits::Digits, sequence::Sequence}
//                                                            -> PreTokenizer
//   models::bpe::BPE::tokenize (ignore_merges, cache, merge_word, Word::merge_all)
//                                                            -> BpeModel
//   processors::template::TemplateProcessing (single)        -> PostProcessor
//   Tokenizer::decode + decoders::byte_level::ByteLevel      -> BpeTokenizer::decode()
// Regular expressions run on PCRE2 (pcre2_regex.hpp), byte-level text uses GPT-2's table
// (byte_level.hpp).
#include "tokenizer/bpe_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/added_tokens.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/pcre2_regex.hpp"
#include "tokenizer/utf8.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <mutex>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>
#include <variant>

namespace selfspec {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenizer pattern, used by ByteLevel when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Pre-tokens longer than this (bytes) are not cached, as HF's BPE (MAX_LENGTH).
constexpr std::size_t kMaxCachedWordBytes = 256;
// HF's DEFAULT_CACHE_CAPACITY: the cache stops growing when full.
constexpr std::size_t kCacheCapacity = 10000;
// model.vocab's ids may leave holes, but reach at most twice its entry count plus this.
constexpr std::int64_t kMaxVocabIdSlack = 1024;

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

// ---------------------------------------------------------------------------------------------
// JSON access with errors that name the file and the key.
// ---------------------------------------------------------------------------------------------
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }

  template <typename... Args>
  [[noreturn]] void error(std::string_view key, fmt::format_string<Args...> format,
                          Args&&... args) const {
    fail("{}: key \"{}\": {}", source_, key, fmt::format(format, std::forward<Args>(args)...));
  }

  static std::string join(std::string_view path, std::string_view name) {
    return path.empty() ? std::string(name) : fmt::format("{}.{}", path, name);
  }
  static std::string index(std::string_view path, std::size_t i) {
    return fmt::format("{}[{}]", path, i);
  }

  const json& object(const json& node, std::string_view path) const {
    if (!node.is_object()) error(path, "expected a JSON object, found {}", node.type_name());
    return node;
  }
  const json& array(const json& node, std::string_view path) const {
    if (!node.is_array()) error(path, "expected a JSON array, found {}", node.type_name());
    return node;
  }
  // The member `name` of the object `node` at `path`; error when it is missing.
  const json& member(const json& node, std::string_view path, std::string_view name) const {
    object(node, path);
    const auto it = node.find(name);
    if (it == node.end()) error(join(path, name), "missing");
    return *it;
  }
  // The member or nullptr when missing or null.
  const json* optional_member(const json& node, std::string_view path,
                              std::string_view name) const {
    object(node, path);
    const auto it = node.find(name);
    if (it == node.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string string(const json& node, std::string_view path) const {
    if (!node.is_string()) error(path, "expected a string, found {}", node.type_name());
    return node.get<std::string>();
  }
  std::string string_member(const json& node, std::string_view path, std::string_view name) const {
    return string(member(node, path, name), join(path, name));
  }
  std::optional<std::string> optional_string_member(const json& node, std::string_view path,
                                                    std::string_view name) const {
    const json* value = optional_member(node, path, name);
    if (value == nullptr) return std::nullopt;
    return string(*value, join(path, name));
  }
  bool bool_member(const json& node, std::string_view path, std::string_view name,
                   bool fallback) const {
    const json* value = optional_member(node, path, name);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      error(join(path, name), "expected true or false, found {}", value->type_name());
    }
    return value->get<bool>();
  }
  std::int32_t id(const json& node, std::string_view path) const {
    if (!node.is_number_integer() || node.get<std::int64_t>() < 0 ||
        node.get<std::int64_t>() > INT32_MAX) {
      error(path, "expected a token id (non-negative integer), found {}", node.dump());
    }
    return static_cast<std::int32_t>(node.get<std::int64_t>());
  }

 private:
  std::string source_;
};

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers.
// ---------------------------------------------------------------------------------------------
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  std::shared_ptr<const Pcre2Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

struct ByteLevelStep {
  bool add_prefix_space = false;
  std::shared_ptr<const Pcre2Regex> regex;  // null when use_regex is false
};

using PreTokenizerStep = std::variant<SplitStep, ByteLevelStep>;

struct Span {
  std::size_t begin;
  std::size_t end;
  bool is_match;
};

// HF Pattern::find_matches for a regex: the whole text covered by alternating spans.
std::vector<Span> regex_spans(const Pcre2Regex& regex, std::string_view text) {
  std::vector<Span> spans;
  std::size_t prev = 0;
  for (const auto& [begin, end] : regex.find_all(text)) {
    if (prev != begin) spans.push_back({prev, begin, false});
    spans.push_back({begin, end, true});
    prev = end;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

// HF NormalizedString::split: applies the delimiter behavior to the spans.
std::vector<Span> apply_behavior(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      return spans;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      return out;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      return out;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    }
  }
  return spans;
}

class PreTokenizer {
 public:
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }

  // The pre-tokens of `text` (empty pieces dropped, as PreTokenizedString::split does).
  std::vector<std::string> run(const std::string& text) const {
    std::vector<std::string> pieces;
    if (!text.empty()) pieces.push_back(text);
    for (const PreTokenizerStep& step : steps_) {
      std::vector<std::string> next;
      next.reserve(pieces.size());
      for (const std::string& piece : pieces) {
        if (const auto* split = std::get_if<SplitStep>(&step)) {
          apply_split(*split, piece, next);
        } else {
          apply_byte_level(std::get<ByteLevelStep>(step), piece, next);
        }
      }
      pieces = std::move(next);
    }
    return pieces;
  }

 private:
  static void push_spans(std::string_view text, const std::vector<Span>& spans,
                         std::vector<std::string>& out) {
    for (const Span& s : spans) {
      if (s.end > s.begin) out.emplace_back(text.substr(s.begin, s.end - s.begin));
    }
  }

  static void apply_split(const SplitStep& step, const std::string& piece,
                          std::vector<std::string>& out) {
    std::vector<Span> spans = regex_spans(*step.regex, piece);
    if (step.invert) {
      for (Span& s : spans) s.is_match = !s.is_match;
    }
    push_spans(piece, apply_behavior(std::move(spans), step.behavior), out);
  }

  static void apply_byte_level(const ByteLevelStep& step, const std::string& piece,
                               std::vector<std::string>& out) {
    std::string text = piece;
    if (step.add_prefix_space && !text.starts_with(' ')) text.insert(text.begin(), ' ');
    if (!step.regex) {
      if (!text.empty()) out.push_back(byte_level::encode(text));
      return;
    }
    for (const Span& s : regex_spans(*step.regex, text)) {
      if (s.end > s.begin) {
        out.push_back(byte_level::encode(std::string_view(text).substr(s.begin, s.end - s.begin)));
      }
    }
  }

  std::vector<PreTokenizerStep> steps_;
};

// ---------------------------------------------------------------------------------------------
// The BPE model (HF models::bpe).
// ---------------------------------------------------------------------------------------------
class BpeModel {
 public:
  StringMap<std::int32_t> vocab;
  // (left id, right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<std::int32_t> unk_id;

  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  // HF BPE::tokenize for one pre-token.
  void tokenize(const std::string& word, std::vector<std::int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges) {
      if (const auto it = vocab.find(word); it != vocab.end()) {
        out.push_back(it->second);
        return;
      }
    }
    {
      const std::lock_guard<std::mutex> lock(cache_mutex_);
      if (const auto it = cache_.find(word); it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<std::int32_t> ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() < kMaxCachedWordBytes) {
      const std::lock_guard<std::mutex> lock(cache_mutex_);
      if (cache_.size() < kCacheCapacity) cache_.emplace(word, std::move(ids));
    }
  }

 private:
  struct Symbol {
    std::int32_t id;
    std::int64_t prev;
    std::int64_t next;
    std::size_t len;  // bytes of the word; 0 once merged into its left neighbour
  };
  struct Merge {
    std::int32_t rank;
    std::size_t pos;
    std::int32_t new_id;
  };
  struct MergeAfter {  // priority_queue comparator: lowest rank first, then leftmost
    bool operator()(const Merge& a, const Merge& b) const {
      return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    }
  };

  static void add_symbol(std::vector<Symbol>& symbols, std::int32_t id, std::size_t len) {
    const auto index = static_cast<std::int64_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, len});
  }

  const std::pair<std::int32_t, std::int32_t>* find_merge(std::int32_t a, std::int32_t b) const {
    const auto it = merges.find(pair_key(a, b));
    return it == merges.end() ? nullptr : &it->second;
  }

  // HF BPE::merge_word + Word::merge_all (without dropout).
  std::vector<std::int32_t> merge_word(std::string_view word) const {
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    // A pending unknown token (HF keeps it back so that fuse_unk can extend it).
    bool unk_pending = false;
    std::size_t unk_len = 0;
    std::size_t pos = 0;
    while (pos < word.size()) {
      std::size_t n = utf8::sequence_length(word, pos);
      if (n == 0) n = 1;  // cannot happen for valid input; keep going byte-wise
      const std::string_view ch = word.substr(pos, n);
      pos += n;
      if (const auto it = vocab.find(ch); it != vocab.end()) {
        if (unk_pending) {
          add_symbol(symbols, *unk_id, unk_len);
          unk_pending = false;
        }
        add_symbol(symbols, it->second, n);
        continue;
      }
      if (byte_fallback) {
        std::vector<std::int32_t> byte_ids;
        for (const char c : ch) {
          const auto it = vocab.find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(c)));
          if (it == vocab.end()) break;
          byte_ids.push_back(it->second);
        }
        if (byte_ids.size() == ch.size()) {
          for (const std::int32_t id : byte_ids) add_symbol(symbols, id, 1);
          continue;
        }
      }
      if (unk_id) {
        if (unk_pending && fuse_unk) {
          unk_len += n;
        } else {
          if (unk_pending) add_symbol(symbols, *unk_id, unk_len);
          unk_pending = true;
          unk_len = n;
        }
      }
      // Without an unk token HF drops the character.
    }
    if (unk_pending) add_symbol(symbols, *unk_id, unk_len);

    std::priority_queue<Merge, std::vector<Merge>, MergeAfter> queue;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      if (const auto* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
        queue.push({m->first, i, m->second});
      }
    }
    while (!queue.empty()) {
      const Merge top = queue.top();
      queue.pop();
      Symbol& current = symbols[top.pos];
      if (current.len == 0 || current.next == -1) continue;
      const auto next_pos = static_cast<std::size_t>(current.next);
      const Symbol right = symbols[next_pos];
      // Skip entries that no longer describe the pair at this position.
      const auto* m = find_merge(current.id, right.id);
      if (m == nullptr || m->second != top.new_id) continue;
      current.id = top.new_id;
      current.len += right.len;
      current.next = right.next;
      symbols[next_pos].len = 0;
      if (right.next >= 0 && static_cast<std::size_t>(right.next) < symbols.size()) {
        symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::int64_t>(top.pos);
      }
      if (current.prev >= 0) {
        const auto prev = static_cast<std::size_t>(current.prev);
        if (const auto* pm = find_merge(symbols[prev].id, current.id)) {
          queue.push({pm->first, prev, pm->second});
        }
      }
      if (current.next >= 0 && static_cast<std::size_t>(current.next) < symbols.size()) {
        if (const auto* nm =
                find_merge(current.id, symbols[static_cast<std::size_t>(current.next)].id)) {
          queue.push({nm->first, top.pos, nm->second});
        }
      }
    }
    std::vector<std::int32_t> ids;
    for (const Symbol& s : symbols) {
      if (s.len != 0) ids.push_back(s.id);
    }
    return ids;
  }

  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<std::int32_t>> cache_;
};

// ---------------------------------------------------------------------------------------------
// Post-processors: each is a "single" template, a list of fixed ids and the sequence.
// ---------------------------------------------------------------------------------------------
struct TemplateItem {
  std::vector<std::int32_t> ids;  // a special token's ids; empty for the sequence ($A)
  bool is_sequence = false;
};
using Template = std::vector<TemplateItem>;

enum class DecoderKind { kNone, kByteLevel };

}  // namespace

// ---------------------------------------------------------------------------------------------
// BpeTokenizer::Impl: loading.
// ---------------------------------------------------------------------------------------------
struct BpeTokenizer::Impl {
  std::string source;
  BpeModel model;
  std::vector<AddedToken> added_tokens;
  std::unordered_map<std::int32_t, std::size_t> added_by_id;  // id -> index in added_tokens
  AddedTokenSplitter non_normalized_splitter;
  AddedTokenSplitter normalized_splitter;
  PreTokenizer pre_tokenizer;
  std::vector<Template> post_processors;
  DecoderKind decoder = DecoderKind::kNone;
  std::vector<std::string> id_to_model_token;  // "" where the id is unused
  std::vector<bool> model_id_used;
  std::int32_t vocab_size = 0;
  std::optional<std::int32_t> template_bos;

  explicit Impl(std::string source_name) : source(std::move(source_name)) {}

  void load(std::string_view text);
  void load_model(const JsonReader& r, const json& node);
  void load_added_tokens(const JsonReader& r, const json& node);
  void load_normalizer(const JsonReader& r, const json& node, const std::string& path);
  void load_pre_tokenizer(const JsonReader& r, const json& node, const std::string& path);
  void load_post_processor(const JsonReader& r, const json& node, const std::string& path);
  void load_decoder(const JsonReader& r, const json& node, const std::string& path);
  Template load_template(const JsonReader& r, const json& node, const std::string& path);
  // A post-processor's token id, which must be a token of model.vocab or added_tokens.
  std::int32_t known_id(const JsonReader& r, const json& node, const std::string& path) const;
};

void BpeTokenizer::Impl::load(std::string_view text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: malformed JSON (not a tokenizer.json): {}", source, e.what());
  }
  const JsonReader r(source);
  r.object(root, "(root)");
  load_model(r, r.member(root, "", "model"));
  if (const json* added = r.optional_member(root, "", "added_tokens")) load_added_tokens(r, *added);
  if (const json* n = r.optional_member(root, "", "normalizer"))
    load_normalizer(r, *n, "normalizer");
  if (const json* p = r.optional_member(root, "", "pre_tokenizer")) {
    load_pre_tokenizer(r, *p, "pre_tokenizer");
  }
  if (const json* p = r.optional_member(root, "", "post_processor")) {
    load_post_processor(r, *p, "post_processor");
  }
  if (const json* d = r.optional_member(root, "", "decoder")) load_decoder(r, *d, "decoder");

  // Splitters (HF refresh_added_tokens): non-normalized tokens match the raw input, normalized
  // ones the normalized pieces in between.
  std::vector<const AddedToken*> raw;
  std::vector<const AddedToken*> normalized;
  for (const AddedToken& t : added_tokens) {
    if (t.content.empty()) continue;
    (t.normalized ? normalized : raw).push_back(&t);
  }
  non_normalized_splitter = AddedTokenSplitter(std::move(raw));
  normalized_splitter = AddedTokenSplitter(std::move(normalized));
}

void BpeTokenizer::Impl::load_model(const JsonReader& r, const json& node) {
  r.object(node, "model");
  const std::optional<std::string> type = r.optional_string_member(node, "model", "type");
  if (type && *type != "BPE") {
    r.error("model.type", "unsupported model type \"{}\" (only \"BPE\" is supported)", *type);
  }
  if (!type && !node.contains("merges")) {
    r.error("model.type", "missing, and the model has no merges (only BPE is supported)");
  }
  if (const json* dropout = r.optional_member(node, "model", "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      r.error("model.dropout", "BPE dropout {} is not supported (must be null)", dropout->dump());
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const std::optional<std::string> value = r.optional_string_member(node, "model", key);
    if (value && !value->empty()) {
      r.error(JsonReader::join("model", key), "\"{}\" is not supported (must be null)", *value);
    }
  }
  model.ignore_merges = r.bool_member(node, "model", "ignore_merges", false);
  model.byte_fallback = r.bool_member(node, "model", "byte_fallback", false);
  model.fuse_unk = r.bool_member(node, "model", "fuse_unk", false);

  const json& vocab = r.object(r.member(node, "model", "vocab"), "model.vocab");
  model.vocab.reserve(vocab.size());
  std::int32_t model_ids = 0;  // the largest id + 1
  for (const auto& [token, id_node] : vocab.items()) {
    const std::int32_t id = r.id(id_node, fmt::format("model.vocab.\"{}\"", token));
    model.vocab.emplace(token, id);
    model_ids = std::max(model_ids, id + 1);
  }
  // The id -> token table is dense: ids far beyond the entries (a malformed or hostile file;
  // the fuzzer found one asking for 8 GB) are refused rather than allocated.
  const auto entries = static_cast<std::int64_t>(vocab.size());
  if (model_ids > 2 * entries + kMaxVocabIdSlack) {
    r.error("model.vocab", "ids reach {} with only {} entries (ids are 0 to about the entry count)",
            model_ids - 1, entries);
  }
  vocab_size = std::max(vocab_size, model_ids);
  id_to_model_token.assign(static_cast<std::size_t>(model_ids), std::string());
  model_id_used.assign(static_cast<std::size_t>(model_ids), false);
  for (const auto& [token, id] : model.vocab) {
    const auto i = static_cast<std::size_t>(id);
    if (!model_id_used[i]) {
      id_to_model_token[i] = token;
      model_id_used[i] = true;
    }
  }
  if (const std::optional<std::string> unk = r.optional_string_member(node, "model", "unk_token")) {
    const auto it = model.vocab.find(*unk);
    if (it == model.vocab.end()) {
      r.error("model.unk_token", "unk token \"{}\" is not in model.vocab", *unk);
    }
    model.unk_id = it->second;
  }

  const json& merges = r.array(r.member(node, "model", "merges"), "model.merges");
  model.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string path = JsonReader::index("model.merges", i);
    std::string left;
    std::string right;
    if (merges[i].is_string()) {
      const std::string line = merges[i].get<std::string>();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        r.error(path, "merge \"{}\" is not two tokens separated by one space", line);
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merges[i].is_array() && merges[i].size() == 2 && merges[i][0].is_string() &&
               merges[i][1].is_string()) {
      left = merges[i][0].get<std::string>();
      right = merges[i][1].get<std::string>();
    } else {
      r.error(path, "expected \"a b\" or [\"a\", \"b\"], found {}", merges[i].dump());
    }
    const auto find = [&](const std::string& token) {
      const auto it = model.vocab.find(token);
      if (it == model.vocab.end()) {
        r.error(path, "merge references token \"{}\" that is not in model.vocab", token);
      }
      return it->second;
    };
    const std::int32_t a = find(left);
    const std::int32_t b = find(right);
    const std::int32_t merged = find(left + right);
    // Later duplicates replace earlier ones, as collecting HF's merge map does.
    model.merges[BpeModel::pair_key(a, b)] = {static_cast<std::int32_t>(i), merged};
  }
}

void BpeTokenizer::Impl::load_added_tokens(const JsonReader& r, const json& node) {
  r.array(node, "added_tokens");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string path = JsonReader::index("added_tokens", i);
    const json& item = r.object(node[i], path);
    AddedToken t;
    t.id = r.id(r.member(item, path, "id"), JsonReader::join(path, "id"));
    t.content = r.string_member(item, path, "content");
    t.special = r.bool_member(item, path, "special", false);
    t.single_word = r.bool_member(item, path, "single_word", false);
    t.lstrip = r.bool_member(item, path, "lstrip", false);
    t.rstrip = r.bool_member(item, path, "rstrip", false);
    t.normalized = r.bool_member(item, path, "normalized", !t.special);
    vocab_size = std::max(vocab_size, t.id + 1);
    if (added_by_id.contains(t.id)) continue;  // HF keeps one token per id
    added_by_id.emplace(t.id, added_tokens.size());
    added_tokens.push_back(std::move(t));
  }
}

void BpeTokenizer::Impl::load_normalizer(const JsonReader& r, const json& node,
                                         const std::string& path) {
  const std::string type = r.string_member(node, path, "type");
  if (type == "Sequence") {
    const std::string list_path = JsonReader::join(path, "normalizers");
    const json& list = r.array(r.member(node, path, "normalizers"), list_path);
    for (std::size_t i = 0; i < list.size(); ++i) {
      load_normalizer(r, list[i], JsonReader::index(list_path, i));
    }
    return;
  }
  r.error(JsonReader::join(path, "type"),
          "unsupported normalizer \"{}\" (only a null normalizer is supported)", type);
}

void BpeTokenizer::Impl::load_pre_tokenizer(const JsonReader& r, const json& node,
                                            const std::string& path) {
  const std::string type = r.string_member(node, path, "type");
  if (type == "Sequence") {
    const std::string list_path = JsonReader::join(path, "pretokenizers");
    const json& list = r.array(r.member(node, path, "pretokenizers"), list_path);
    for (std::size_t i = 0; i < list.size(); ++i) {
      load_pre_tokenizer(r, list[i], JsonReader::index(list_path, i));
    }
  } else if (type == "ByteLevel") {
    ByteLevelStep step;
    step.add_prefix_space = r.bool_member(node, path, "add_prefix_space", true);
    if (r.bool_member(node, path, "use_regex", true)) {
      step.regex = std::make_shared<const Pcre2Regex>(kGpt2Pattern, Pcre2Regex::Syntax::kOniguruma,
                                                      fmt::format("{}: key \"{}\"", source, path));
    }
    pre_tokenizer.add(std::move(step));
  } else if (type == "Split") {
    const std::string pattern_path = JsonReader::join(path, "pattern");
    const json& pattern = r.object(r.member(node, path, "pattern"), pattern_path);
    const std::string what = fmt::format("{}: key \"{}\"", source, pattern_path);
    SplitStep step;
    if (const json* regex = r.optional_member(pattern, pattern_path, "Regex")) {
      step.regex = std::make_shared<const Pcre2Regex>(
          r.string(*regex, JsonReader::join(pattern_path, "Regex")), Pcre2Regex::Syntax::kOniguruma,
          what);
    } else if (const json* literal = r.optional_member(pattern, pattern_path, "String")) {
      step.regex = std::make_shared<const Pcre2Regex>(
          r.string(*literal, JsonReader::join(pattern_path, "String")),
          Pcre2Regex::Syntax::kLiteral, what);
    } else {
      r.error(pattern_path, "expected {{\"Regex\": ...}} or {{\"String\": ...}}");
    }
    const std::string behavior = r.string_member(node, path, "behavior");
    static const std::unordered_map<std::string, SplitBehavior> kBehaviors = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    const auto it = kBehaviors.find(behavior);
    if (it == kBehaviors.end()) {
      r.error(JsonReader::join(path, "behavior"), "unknown split behavior \"{}\"", behavior);
    }
    step.behavior = it->second;
    step.invert = r.bool_member(node, path, "invert", false);
    pre_tokenizer.add(std::move(step));
  } else if (type == "Digits") {
    // HF Digits: char::is_numeric (general category N), isolated one by one or as runs.
    const bool individual = r.bool_member(node, path, "individual_digits", false);
    SplitStep step;
    step.regex = std::make_shared<const Pcre2Regex>(individual ? R"(\p{N})" : R"(\p{N}+)",
                                                    Pcre2Regex::Syntax::kOniguruma,
                                                    fmt::format("{}: key \"{}\"", source, path));
    step.behavior = SplitBehavior::kIsolated;
    pre_tokenizer.add(std::move(step));
  } else {
    r.error(JsonReader::join(path, "type"),
            "unsupported pre-tokenizer \"{}\" (supported: ByteLevel, Split, Digits, Sequence)",
            type);
  }
}

Template BpeTokenizer::Impl::load_template(const JsonReader& r, const json& node,
                                           const std::string& path) {
  const std::string single_path = JsonReader::join(path, "single");
  const json& single = r.array(r.member(node, path, "single"), single_path);
  const std::string specials_path = JsonReader::join(path, "special_tokens");
  const json* specials = r.optional_member(node, path, "special_tokens");
  Template result;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string item_path = JsonReader::index(single_path, i);
    const json& item = r.object(single[i], item_path);
    if (const json* seq = r.optional_member(item, item_path, "Sequence")) {
      const std::string seq_path = JsonReader::join(item_path, "Sequence");
      const std::string id = r.string_member(*seq, seq_path, "id");
      if (id != "A") {
        r.error(JsonReader::join(seq_path, "id"), "the single template uses sequence \"{}\"", id);
      }
      result.push_back({{}, true});
    } else if (const json* special = r.optional_member(item, item_path, "SpecialToken")) {
      const std::string special_path = JsonReader::join(item_path, "SpecialToken");
      const std::string name = r.string_member(*special, special_path, "id");
      if (specials == nullptr || !specials->contains(name)) {
        r.error(specials_path, "special token \"{}\" used by {} is not defined", name,
                special_path);
      }
      const std::string entry_path = fmt::format("{}.\"{}\"", specials_path, name);
      const json& ids = r.array(r.member((*specials)[name], entry_path, "ids"),
                                JsonReader::join(entry_path, "ids"));
      TemplateItem t;
      for (std::size_t k = 0; k < ids.size(); ++k) {
        t.ids.push_back(
            known_id(r, ids[k], JsonReader::index(JsonReader::join(entry_path, "ids"), k)));
      }
      result.push_back(std::move(t));
    } else {
      r.error(item_path, "expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}");
    }
  }
  return result;
}

std::int32_t BpeTokenizer::Impl::known_id(const JsonReader& r, const json& node,
                                          const std::string& path) const {
  const std::int32_t id = r.id(node, path);
  const bool in_model = static_cast<std::size_t>(id) < model_id_used.size() &&
                        model_id_used[static_cast<std::size_t>(id)];
  if (!in_model && !added_by_id.contains(id)) {
    r.error(path, "token id {} is in neither model.vocab nor added_tokens", id);
  }
  return id;
}

void BpeTokenizer::Impl::load_post_processor(const JsonReader& r, const json& node,
                                             const std::string& path) {
  const std::string type = r.string_member(node, path, "type");
  if (type == "Sequence") {
    const std::string list_path = JsonReader::join(path, "processors");
    const json& list = r.array(r.member(node, path, "processors"), list_path);
    for (std::size_t i = 0; i < list.size(); ++i) {
      load_post_processor(r, list[i], JsonReader::index(list_path, i));
    }
  } else if (type == "ByteLevel") {
    // Only adjusts offsets.
  } else if (type == "TemplateProcessing") {
    post_processors.push_back(load_template(r, node, path));
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    // single: cls $A sep, with "cls"/"sep" as [token, id].
    const auto token_id = [&](std::string_view key) {
      const std::string key_path = JsonReader::join(path, key);
      const json& pair = r.array(r.member(node, path, key), key_path);
      if (pair.size() != 2) r.error(key_path, "expected [token, id]");
      return known_id(r, pair[1], JsonReader::index(key_path, 1));
    };
    post_processors.push_back(
        Template{{{token_id("cls")}, false}, {{}, true}, {{token_id("sep")}, false}});
  } else {
    r.error(JsonReader::join(path, "type"),
            "unsupported post-processor \"{}\" (supported: TemplateProcessing, ByteLevel, "
            "RobertaProcessing, BertProcessing, Sequence)",
            type);
  }
  // BOS: the first fixed id of the first template that puts one before the sequence.
  if (!template_bos && !post_processors.empty()) {
    for (const TemplateItem& item : post_processors.back()) {
      if (item.is_sequence) break;
      if (!item.ids.empty()) {
        template_bos = item.ids.front();
        break;
      }
    }
  }
}

void BpeTokenizer::Impl::load_decoder(const JsonReader& r, const json& node,
                                      const std::string& path) {
  const std::string type = r.string_member(node, path, "type");
  if (type == "ByteLevel") {
    decoder = DecoderKind::kByteLevel;
  } else {
    r.error(JsonReader::join(path, "type"), "unsupported decoder \"{}\" (only ByteLevel)", type);
  }
}

// ---------------------------------------------------------------------------------------------
// BpeTokenizer.
// ---------------------------------------------------------------------------------------------
BpeTokenizer::BpeTokenizer(const std::filesystem::path& file)
    : impl_(std::make_unique<Impl>(file.string())) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("{}: cannot open tokenizer.json", file.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) fail("{}: cannot read tokenizer.json", file.string());
  impl_->load(buffer.str());
}

BpeTokenizer::BpeTokenizer(JsonText json)
    : impl_(std::make_unique<Impl>(std::string(json.source))) {
  impl_->load(json.text);
}

BpeTokenizer::~BpeTokenizer() = default;

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
  const Impl& m = *impl_;
  const std::string input = utf8::is_valid(text) ? std::string(text) : utf8::to_valid_lossy(text);

  // Added tokens: non-normalized ones on the input, then normalized ones on what is left (the
  // normalizer, when there is one, would run in between).
  std::vector<Segment> first;
  m.non_normalized_splitter.split(input, first);
  std::vector<Segment> segments;
  for (Segment& s : first) {
    if (s.added_id) {
      segments.push_back(std::move(s));
    } else {
      m.normalized_splitter.split(s.text, segments);
    }
  }

  std::vector<std::int32_t> ids;
  ids.reserve(input.size() / 3 + 4);
  for (const Segment& s : segments) {
    if (s.added_id) {
      ids.push_back(*s.added_id);
      continue;
    }
    for (const std::string& word : m.pre_tokenizer.run(s.text)) m.model.tokenize(word, ids);
  }

  if (add_special_tokens) {
    for (const Template& t : m.post_processors) {
      std::vector<std::int32_t> out;
      out.reserve(ids.size() + 4);
      for (const TemplateItem& item : t) {
        if (item.is_sequence) {
          out.insert(out.end(), ids.begin(), ids.end());
        } else {
          out.insert(out.end(), item.ids.begin(), item.ids.end());
        }
      }
      ids = std::move(out);
    }
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids,
                                 bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (const auto it = m.added_by_id.find(id); it != m.added_by_id.end()) {
      const AddedToken& t = m.added_tokens[it->second];
      if (!(skip_special_tokens && t.special)) tokens.push_back(t.content);
      continue;
    }
    if (id < 0 || static_cast<std::size_t>(id) >= m.model_id_used.size() ||
        !m.model_id_used[static_cast<std::size_t>(id)]) {
      continue;  // HF drops ids it does not know
    }
    tokens.push_back(m.id_to_model_token[static_cast<std::size_t>(id)]);
  }
  if (m.decoder == DecoderKind::kNone) {
    std::string text;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text.append(tokens[i]);
    }
    return text;
  }
  std::string bytes;
  for (const std::string_view token : tokens) byte_level::append_decoded_token(token, bytes);
  return utf8::to_valid_lossy(bytes);
}

std::int32_t BpeTokenizer::vocab_size() const {
  return impl_->vocab_size;
}

std::optional<std::int32_t> BpeTokenizer::bos_id() const {
  if (impl_->template_bos) return impl_->template_bos;
  for (const std::string_view name : {"<|begin_of_text|>", "<s>"}) {
    for (const AddedToken& t : impl_->added_tokens) {
      if (t.content == name) return t.id;
    }
  }
  return std::nullopt;
}

std::vector<std::int32_t> BpeTokenizer::eos_ids() const {
  static const std::set<std::string, std::less<>> kNames = {
      "</s>", "<|end_of_text|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|im_end|>"};
  std::set<std::int32_t> ids;
  for (const AddedToken& t : impl_->added_tokens) {
    if (kNames.contains(t.content)) ids.insert(t.id);
  }
  return {ids.begin(), ids.end()};
}

std::optional<std::int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : impl_->added_tokens) {
    if (t.content == token) return t.id;
  }
  if (const auto it = impl_->model.vocab.find(token); it != impl_->model.vocab.end()) {
    return it->second;
  }
  return std::nullopt;
}

std::optional<std::string> BpeTokenizer::id_to_token(std::int32_t id) const {
  if (const auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) {
    return impl_->added_tokens[it->second].content;
  }
  if (id >= 0 && static_cast<std::size_t>(id) < impl_->model_id_used.size() &&
      impl_->model_id_used[static_cast<std::size_t>(id)]) {
    return impl_->id_to_model_token[static_cast<std::size_t>(id)];
  }
  return std::nullopt;
}

}  // namespace selfspec
