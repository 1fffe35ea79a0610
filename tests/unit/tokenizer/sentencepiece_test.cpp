// SentencePieceTokenizer exactness: small models are trained at test time with Debian's
// spm_train CLI (BPE and unigram, byte_fallback, LLaMA-2-like and default normalisation) on a
// corpus the test writes, and our encode must equal `spm_encode --output_format=id` (with
// --extra_options=bos for add_special_tokens) on many strings; decode must round-trip.
// spm_train / spm_encode missing is a failure, not a skip (scripts/setup.sh installs them).
#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

namespace selfspec {
namespace {

using Ids = std::vector<std::int32_t>;
using testing::format_ids;
using testing::printable;

const std::filesystem::path kSpmTrain = SELFSPEC_SPM_TRAIN;
const std::filesystem::path kSpmEncode = SELFSPEC_SPM_ENCODE;

// ---------------------------------------------------------------------------------------------
// Corpus and test strings.
// ---------------------------------------------------------------------------------------------
const std::vector<std::string>& sentences() {
  static const std::vector<std::string> kSentences = {
      "The quick brown fox jumps over the lazy dog.",
      "Hello world! This corpus trains a small SentencePiece model.",
      "I can't believe it's already time to go; we'll see you tomorrow.",
      "DON'T SHOUT. It's fine, isn't it? WE'RE HERE!",
      "Numbers like 1234567890, 3.14159 and 2024-05-17 appear in text.",
      "Prices rose by 12.5% to $1,299.99 last year.",
      "Speculative decoding drafts tokens with a small model and verifies them.",
      "Café, naïve, résumé and façade use accents; Über and grün use umlauts.",
      "Él está aquí. ¿Dónde está la biblioteca?",
      "日本語の文章を書きます。東京は大きい都市です。",
      "中文句子：我们在学习。",
      "Emoji are fun 😀 🎉 👍 and sometimes 🚀 too.",
      "Русский текст тоже встречается.",
      "def add(a, b): return a + b",
      "for i in range(10): print(i * i)",
      "int main() { std::cout << \"hi\" << std::endl; return 0; }",
      "{\"key\": \"value\", \"list\": [1, 2, 3], \"flag\": true}",
      "if (x > 0 && y < 10) { z = x + y; }",
      "<html><body><p>Paragraph</p></body></html>",
      "https://example.com/docs/index.html?lang=en&page=2",
      "    indented code line",
      "Tabs\tseparate\tcolumns",
      "Multiple   spaces   between   words",
  };
  return kSentences;
}

std::string corpus() {
  static const char* const kWords[] = {
      "the",    "of",      "and",    "to",      "in",      "is",     "was",    "for",
      "on",     "that",    "with",   "as",      "by",      "at",     "from",   "this",
      "time",   "people",  "year",   "way",     "day",     "world",  "school", "state",
      "family", "student", "group",  "country", "problem", "system", "token",  "model",
      "layer",  "tensor",  "kernel", "decode",  "encode",  "prompt", "batch",  "merge",
      "über",   "café",    "naïve",  "日本",    "語",      "😀",      "42",     "1999"};
  std::ostringstream out;
  for (int repeat = 0; repeat < 4; ++repeat) {
    for (const std::string& s : sentences()) out << s << '\n';
  }
  std::uint32_t state = 12345;
  for (int n = 0; n < 300; ++n) {
    const int length = 6 + n % 11;
    for (int i = 0; i < length; ++i) {
      state = state * 1103515245U + 12345U;
      out << (i > 0 ? " " : "") << kWords[(state >> 8) % std::size(kWords)];
    }
    out << ".!?,;"[n % 5] << '\n';
  }
  return out.str();
}

// Single-line strings: compared with spm_encode directly.
const std::vector<std::string>& line_texts() {
  static const std::vector<std::string> kTexts = {
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "Hello, world! How are you today?",
      "I'm sure you're right; they've said we'll go.",
      "DON'T STOP, IT'S FINE.",
      "unbelievably uncharacteristically",
      "café naïve résumé façade",
      "Über straße groß grün",
      "日本語のテキストです。",
      "emoji 😀👍🏽 family 👨‍👩‍👧",
      "한국어 문장입니다",  // not in the corpus: byte fallback
      "combining e\u0301 a\u0308",
      "עברית: שלום עולם",
      "Ελληνικά και русский",
      "\u2581literal meta symbol\u2581",
      "non\u00a0breaking space",
      "  leading spaces",
      "trailing spaces   ",
      "multiple     spaces     inside",
      "\ttab\tseparated\t",
      " ",
      "   ",
      "",
      "1234567890",
      "3.14159265358979",
      "Phone: +1 (555) 123-4567",
      "def add(a, b): return a + b",
      "int main() { return 0; }",
      "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
      "x+=1;y-=2;z*=3;",
      "<s> literal control text </s> <unk>",
      "https://example.com/path?q=1&r=2",
      "a",
      "zzzzqqqq",
      "~!@#$%^&*()_+`-=[]\\{}|;':\",./<>?",
  };
  return kTexts;
}

// Strings with newlines: round trip on every model; ids compared with spm_encode line by line
// on a model without the dummy prefix (no piece contains "\n", so the ids of a multi-line
// string are the lines' ids joined by the byte piece <0x0A>).
const std::vector<std::string>& multi_line_texts() {
  static const std::vector<std::string> kTexts = {
      "line one\nline two",
      "\n",
      "\n\n",
      "a\n\nb",
      "trailing\n",
      "\nleading",
      "code:\n    indented\n",
      " x \n y ",
      "windows\r\nline endings\r\n",
  };
  return kTexts;
}

// ---------------------------------------------------------------------------------------------
// Models trained once for the suite.
// ---------------------------------------------------------------------------------------------
struct ModelSpec {
  std::string name;
  std::string flags;
  bool identity;  // identity normalisation: decode(encode(x)) == x
};

const std::vector<ModelSpec>& model_specs() {
  static const std::vector<ModelSpec> kSpecs = {
      // LLaMA-2's settings (identity normalisation, digits split, byte fallback).
      {"bpe_llama2",
       "--model_type=bpe --normalization_rule_name=identity --remove_extra_whitespaces=false "
       "--split_digits=true --allow_whitespace_only_pieces=true --add_dummy_prefix=true",
       true},
      {"unigram_llama2",
       "--model_type=unigram --normalization_rule_name=identity --remove_extra_whitespaces=false "
       "--split_digits=true --add_dummy_prefix=true",
       true},
      // SentencePiece's defaults (nmt_nfkc, extra whitespace removed).
      {"unigram_default", "--model_type=unigram", false},
      {"bpe_no_dummy_prefix",
       "--model_type=bpe --normalization_rule_name=identity --remove_extra_whitespaces=false "
       "--split_digits=true --add_dummy_prefix=false",
       true},
  };
  return kSpecs;
}

class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<testing::TempDir>("tokenizer-spm");
    setup_error_.clear();
    if (!std::filesystem::exists(kSpmTrain) || !std::filesystem::exists(kSpmEncode)) {
      setup_error_ = fmt::format(
          "spm_train / spm_encode not found ({} / {}); install the Debian package "
          "'sentencepiece' (scripts/setup.sh does)",
          kSpmTrain.string(), kSpmEncode.string());
      return;
    }
    const auto corpus_file = *dir_ / "corpus.txt";
    testing::write_file(corpus_file, corpus());
    for (const ModelSpec& spec : model_specs()) {
      const auto prefix = *dir_ / spec.name;
      const auto log = *dir_ / (spec.name + ".log");
      const std::string command = fmt::format(
          "'{}' --input='{}' --model_prefix='{}' --vocab_size=1000 --hard_vocab_limit=false "
          "--byte_fallback=true --character_coverage=1.0 --num_threads=1 {} > '{}' 2>&1",
          kSpmTrain.string(), corpus_file.string(), prefix.string(), spec.flags, log.string());
      if (std::system(command.c_str()) != 0) {
        setup_error_ = fmt::format("spm_train failed: {}\n{}", command, testing::read_file(log));
        return;
      }
    }
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static std::filesystem::path model_path(const std::string& name) {
    return *dir_ / (name + ".model");
  }

  // spm_encode's ids for each line of `lines` (none may contain '\n').
  static std::vector<Ids> spm_encode(const std::string& name, const std::vector<std::string>& lines,
                                     bool bos) {
    const auto input = *dir_ / "input.txt";
    const auto output = *dir_ / "output.txt";
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    testing::write_file(input, text);
    const std::string command =
        fmt::format("'{}' --model='{}' --output_format=id {} < '{}' > '{}'", kSpmEncode.string(),
                    model_path(name).string(), bos ? "--extra_options=bos" : "", input.string(),
                    output.string());
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::vector<Ids> result;
    std::istringstream in(testing::read_file(output));
    std::string line;
    while (std::getline(in, line)) {
      Ids ids;
      std::istringstream fields(line);
      std::int32_t id = 0;
      while (fields >> id) ids.push_back(id);
      result.push_back(std::move(ids));
    }
    EXPECT_EQ(result.size(), lines.size()) << "spm_encode output lines for " << name;
    return result;
  }

  static std::unique_ptr<testing::TempDir> dir_;
  static std::string setup_error_;
};

std::unique_ptr<testing::TempDir> SentencePieceTest::dir_;
std::string SentencePieceTest::setup_error_;

TEST_F(SentencePieceTest, EncodeMatchesSpmEncode) {
  for (const ModelSpec& spec : model_specs()) {
    const SentencePieceTokenizer tokenizer(model_path(spec.name));
    for (const bool bos : {false, true}) {
      const std::vector<Ids> expected = spm_encode(spec.name, line_texts(), bos);
      ASSERT_EQ(expected.size(), line_texts().size());
      for (std::size_t i = 0; i < line_texts().size(); ++i) {
        const std::string& text = line_texts()[i];
        const Ids got = tokenizer.encode(text, bos);
        EXPECT_EQ(got, expected[i])
            << spec.name << " bos " << bos << " text " << printable(text) << ": spm_encode "
            << format_ids(expected[i]) << ", ours " << format_ids(got);
      }
    }
  }
}

TEST_F(SentencePieceTest, ByteFallbackIsExercised) {
  const SentencePieceTokenizer tokenizer(model_path("bpe_llama2"));
  const Ids ids = tokenizer.encode("한국어", false);
  // Hangul is not in the corpus: 3 characters x 3 UTF-8 bytes, each a byte piece <0x..>,
  // plus the dummy-prefix "▁".
  EXPECT_GE(ids.size(), 9U) << format_ids(ids);
  EXPECT_EQ(tokenizer.decode(ids, true), "한국어");
}

TEST_F(SentencePieceTest, MultiLineTextsMatchSpmEncodeLineByLine) {
  const std::string name = "bpe_no_dummy_prefix";
  const SentencePieceTokenizer tokenizer(model_path(name));
  const Ids newline = tokenizer.encode("\n", false);
  ASSERT_EQ(newline.size(), 1U) << "expected the byte piece <0x0A>: " << format_ids(newline);
  for (const std::string& text : multi_line_texts()) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = text.find('\n', start);
      lines.push_back(text.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    const std::vector<Ids> per_line = spm_encode(name, lines, false);
    ASSERT_EQ(per_line.size(), lines.size());
    Ids expected;
    for (std::size_t i = 0; i < per_line.size(); ++i) {
      if (i > 0) expected.push_back(newline[0]);
      expected.insert(expected.end(), per_line[i].begin(), per_line[i].end());
    }
    EXPECT_EQ(tokenizer.encode(text, false), expected)
        << printable(text) << ": expected " << format_ids(expected) << ", ours "
        << format_ids(tokenizer.encode(text, false));
  }
}

TEST_F(SentencePieceTest, DecodeRoundTrips) {
  for (const ModelSpec& spec : model_specs()) {
    if (!spec.identity) continue;
    const SentencePieceTokenizer tokenizer(model_path(spec.name));
    std::vector<std::string> texts = line_texts();
    texts.insert(texts.end(), multi_line_texts().begin(), multi_line_texts().end());
    for (const std::string& text : texts) {
      // SentencePiece itself cannot round-trip its meta symbol: "▁" decodes to a space.
      if (text.find("\u2581") != std::string::npos) continue;
      const Ids ids = tokenizer.encode(text, true);
      EXPECT_EQ(tokenizer.decode(ids, true), text) << spec.name << " " << printable(text);
      EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false), false), text)
          << spec.name << " " << printable(text);
    }
  }
}

TEST_F(SentencePieceTest, SpecialIdsAndControlPieces) {
  const auto tokenizer = load_tokenizer(model_path("bpe_llama2"));
  ASSERT_EQ(tokenizer->kind(), "sentencepiece");
  EXPECT_EQ(tokenizer->bos_id(), 1);  // spm_train defaults: unk 0, bos 1, eos 2
  EXPECT_EQ(tokenizer->eos_ids(), (Ids{2}));
  EXPECT_GE(tokenizer->vocab_size(), 600);
  const Ids hello = tokenizer->encode("Hello world", false);
  Ids with_control = {1};
  with_control.insert(with_control.end(), hello.begin(), hello.end());
  with_control.push_back(2);
  EXPECT_EQ(tokenizer->encode("Hello world", true),
            (Ids{with_control.begin(), with_control.end() - 1}));
  EXPECT_EQ(tokenizer->decode(with_control, true), "Hello world");
  EXPECT_EQ(tokenizer->decode(with_control, false), "<s>Hello world</s>");
  // The unknown id decodes to SentencePiece's " ⁇ " unless skipped; ids outside the vocabulary
  // are ignored.
  Ids with_unknown = hello;
  with_unknown.push_back(0);
  with_unknown.push_back(tokenizer->vocab_size() + 5);
  EXPECT_EQ(tokenizer->decode(with_unknown, true), "Hello world");
  EXPECT_EQ(tokenizer->decode(with_unknown, false), "Hello world \xE2\x81\x87 ");
}

TEST_F(SentencePieceTest, FindTokenizerUsesTokenizerModel) {
  const testing::TempDir model_dir("tokenizer-spm-find");
  std::filesystem::copy_file(model_path("unigram_llama2"), model_dir / "tokenizer.model");
  auto tokenizer = find_tokenizer(model_dir.path());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->kind(), "sentencepiece");
  // A tokenizer.json that cannot be used (here: a SentencePiece-style normalizer) next to it
  // falls back to tokenizer.model.
  testing::write_file(model_dir / "tokenizer.json",
                      R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend",
                          "prepend": "\u2581"}]}, "model": {"type": "BPE", "vocab": {},
                          "merges": []}})");
  tokenizer = find_tokenizer(model_dir.path());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->kind(), "sentencepiece");
}

TEST_F(SentencePieceTest, StreamingKeepsLeadingSpaceAfterContext) {
  const SentencePieceTokenizer tokenizer(model_path("bpe_llama2"));
  const Ids context = tokenizer.encode("Hello", true);
  const Ids all = tokenizer.encode("Hello world again 한국어 end", true);
  ASSERT_TRUE(std::equal(context.begin(), context.end(), all.begin()));
  const Ids generated(all.begin() + static_cast<std::ptrdiff_t>(context.size()), all.end());
  // decode(generated) alone would drop the space before "world".
  ASSERT_EQ(tokenizer.decode(generated, true), "world again 한국어 end");
  StreamingDecoder decoder(tokenizer, context);
  std::string streamed;
  int empty_chunks = 0;
  for (const std::int32_t id : generated) {
    const std::string chunk = decoder.push(id);
    EXPECT_EQ(chunk.find("\xEF\xBF\xBD"), std::string::npos) << printable(chunk);
    empty_chunks += chunk.empty() ? 1 : 0;
    streamed += chunk;
  }
  streamed += decoder.flush();
  EXPECT_EQ(streamed, " world again 한국어 end");
  EXPECT_GT(empty_chunks, 0) << "the byte pieces of 한국어 should be held back";
  // Without context the first word's space is dropped, as in a full decode.
  StreamingDecoder fresh(tokenizer, {});
  std::string text;
  for (const std::int32_t id : tokenizer.encode("Hello world", false)) text += fresh.push(id);
  text += fresh.flush();
  EXPECT_EQ(text, "Hello world");
}

TEST_F(SentencePieceTest, LoadErrorsNameTheFile) {
  const auto missing = *dir_ / "missing.model";
  try {
    const SentencePieceTokenizer tokenizer(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(missing.string()));
  }
  const auto truncated = *dir_ / "truncated.model";
  const std::string content = testing::read_file(model_path("bpe_llama2"));
  testing::write_file(truncated, content.substr(0, content.size() / 3));
  try {
    const SentencePieceTokenizer tokenizer(truncated);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(truncated.string()));
  }
}

// ---------------------------------------------------------------------------------------------
// Models from memory, and bad models found by fuzzing (tests/fuzz/regressions/sentencepiece):
// fields appended to a trained model override or extend it, as protobuf merges a repeated
// occurrence of a field.
// ---------------------------------------------------------------------------------------------
void append_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// A length-delimited protobuf field (a string, bytes or a nested message).
std::string proto_field(std::uint32_t number, std::string_view payload) {
  std::string out;
  append_varint(out, (static_cast<std::uint64_t>(number) << 3) | 2);
  append_varint(out, payload.size());
  out.append(payload);
  return out;
}

constexpr std::uint32_t kPiecesField = 1;          // ModelProto.pieces (SentencePiece.piece = 1)
constexpr std::uint32_t kNormalizerSpecField = 3;  // NormalizerSpec.precompiled_charsmap = 2

// A precompiled character map in libsentencepiece's layout (<u32 trie bytes><trie units>
// <NUL-terminated strings>) over one 256-unit darts-clone block that maps the byte 'A' to the
// string at `string_offset`: the root (unit 0, offset `root_offset`) has base 1; the child
// 'A' sits at 1 ^ 'A' = 0x40 with a leaf at base 0x80, whose value is the string's offset.
std::string one_rule_charsmap(std::uint32_t root_offset, std::uint32_t string_offset,
                              std::string_view strings) {
  std::vector<std::uint32_t> units(256, 0);
  units[0] = root_offset << 10;
  units[0x40] = (0x40u ^ 0x80u) << 10 | 1u << 8 | 'A';
  units[0x80] = 1u << 31 | string_offset;
  std::string trie;
  for (const std::uint32_t unit : units) {
    for (int i = 0; i < 4; ++i) trie.push_back(static_cast<char>((unit >> (8 * i)) & 0xFF));
  }
  std::string blob;
  for (int i = 0; i < 4; ++i) blob.push_back(static_cast<char>((trie.size() >> (8 * i)) & 0xFF));
  return blob + trie + std::string(strings);
}

std::string with_charsmap(const std::string& model, const std::string& charsmap) {
  return model + proto_field(kNormalizerSpecField, proto_field(2, charsmap));
}

TEST_F(SentencePieceTest, InMemoryModelEncodesAsTheFile) {
  const std::string bytes = testing::read_file(model_path("bpe_llama2"));
  const SentencePieceTokenizer from_file(model_path("bpe_llama2"));
  const SentencePieceTokenizer from_memory(
      SentencePieceTokenizer::SerializedModel{bytes, "bpe_llama2 (in memory)"});
  for (const std::string& text : line_texts()) {
    EXPECT_EQ(from_memory.encode(text, true), from_file.encode(text, true)) << printable(text);
  }
}

TEST_F(SentencePieceTest, WellFormedCharsMapIsApplied) {
  const std::string model = testing::read_file(model_path("bpe_llama2"));
  const SentencePieceTokenizer plain(model_path("bpe_llama2"));
  const SentencePieceTokenizer mapped(SentencePieceTokenizer::SerializedModel{
      with_charsmap(model, one_rule_charsmap(1, 0, std::string("a\0", 2))), "A-to-a.model"});
  EXPECT_EQ(mapped.encode("Apple And", false), plain.encode("apple and", false));
}

TEST_F(SentencePieceTest, CorruptCharsMapIsRefused) {
  const std::string model = testing::read_file(model_path("bpe_llama2"));
  const std::string strings("a\0", 2);
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The root's children would lie in units [1024, 1279] of a 256-unit trie.
      {one_rule_charsmap(1024, 0, strings), "trie unit 0 points to units [1024, 1279]"},
      // The leaf names a string past the end of the strings.
      {one_rule_charsmap(1, 5, strings), "replacement string at offset 5"},
      {one_rule_charsmap(1, 0, "a"), "does not end (NUL)"},
  };
  for (const auto& [charsmap, expected] : cases) {
    try {
      const SentencePieceTokenizer tokenizer(
          SentencePieceTokenizer::SerializedModel{with_charsmap(model, charsmap), "corrupt.model"});
      ADD_FAILURE() << "no error for: " << expected;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::AllOf(::testing::HasSubstr("corrupt.model"),
                                             ::testing::HasSubstr("normalizer_spec"),
                                             ::testing::HasSubstr(expected)));
    }
  }
}

// libsentencepiece's trie builder throws its own exception for an empty piece of a unigram model.
TEST_F(SentencePieceTest, EmptyPieceIsRefused) {
  const std::string model = testing::read_file(model_path("unigram_llama2"));
  const std::string empty_piece = proto_field(kPiecesField, proto_field(1, ""));
  try {
    const SentencePieceTokenizer tokenizer(
        SentencePieceTokenizer::SerializedModel{model + empty_piece, "empty-piece.model"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::AllOf(::testing::HasSubstr("empty-piece.model"),
                                           ::testing::HasSubstr("not a valid SentencePiece")));
  }
}

}  // namespace
}  // namespace selfspec
