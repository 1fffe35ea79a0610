// Tokenizers built from GGUF metadata (GGUF files written here with GgufWriter):
//  * "gpt2" vocabularies for each supported pre-tokenizer (gpt2, llama-bpe, qwen2, smollm) against
//    the ids HF `tokenizers` gives with that pre-tokenizer's own pipeline
//    (tests/data/tokenizer/gguf_bpe.json from scripts/dev/make_gguf_tokenizer_fixtures.py; its
//    merges cross pre-token boundaries, so any other splitting changes the ids);
//  * "llama" vocabularies: a LLaMA-2-like SentencePiece model trained here with spm_train, turned
//    into GGUF metadata piece by piece, must encode exactly as the model file itself, with control
//    and user-defined tokens split out; and a hand-made vocabulary whose merges by score are
//    worked out by hand;
//  * BOS/EOS flags and ids, the chat template, load_tokenizer/find_tokenizer on .gguf files, and
//    the errors for unsupported or inconsistent metadata (each naming the key).
#include "tokenizer/gguf_tokenizer.hpp"
#include "core/error.hpp"
#include "model_io/gguf_file.hpp"
#include "model_io/gguf_writer.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <functional>

namespace selfspec {
namespace {

using Ids = std::vector<std::int32_t>;
using nlohmann::json;
using testing::format_ids;
using ::testing::HasSubstr;
using testing::printable;

const std::filesystem::path kDataDir = SELFSPEC_TOKENIZER_DATA_DIR;
const std::filesystem::path kSpmTrain = SELFSPEC_SPM_TRAIN;

// GGUF bytes in memory and the tokenizer loaded from them.
std::unique_ptr<Tokenizer> load(const GgufWriter& writer) {
  const std::vector<std::byte> bytes = writer.to_bytes();
  const GgufFile file(bytes, "test.gguf");
  return load_gguf_tokenizer(file);
}

// The error message of loading `writer`'s file ("" when it loads).
std::string load_error(const GgufWriter& writer) {
  try {
    (void)load(writer);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// gpt2 vocabularies against HF tokenizers.
// ---------------------------------------------------------------------------------------------
const json& bpe_fixture() {
  static const json kFixture = json::parse(testing::read_file(kDataDir / "gguf_bpe.json"));
  return kFixture;
}

GgufWriter writer_from_metadata(const json& metadata) {
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  for (const auto& [key, value] : metadata.items()) {
    if (value.is_string()) {
      writer.set_string(key, value.get<std::string>());
    } else if (value.is_boolean()) {
      writer.set_bool(key, value.get<bool>());
    } else if (value.is_number_integer()) {
      writer.set_u32(key, value.get<std::uint32_t>());
    } else if (value.at(0).is_string()) {
      writer.set_string_array(key, value.get<std::vector<std::string>>());
    } else {
      writer.set_int_array(key, value.get<std::vector<std::int64_t>>());
    }
  }
  return writer;
}

class GgufBpeFixture : public ::testing::TestWithParam<std::string> {
 protected:
  const json& entry() const { return bpe_fixture().at("tokenizers").at(GetParam()); }
};

TEST_P(GgufBpeFixture, EncodeMatchesHfTokenizers) {
  const auto tokenizer = load(writer_from_metadata(entry().at("metadata")));
  EXPECT_EQ(tokenizer->kind(), "bpe");
  const json& cases = entry().at("cases");
  ASSERT_GE(cases.size(), 55U);
  for (const json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    for (const bool special : {false, true}) {
      const Ids expected = c.at(special ? "ids_with_special" : "ids_without_special").get<Ids>();
      const Ids got = tokenizer->encode(text, special);
      EXPECT_EQ(got, expected) << GetParam() << " special " << special << " text "
                               << printable(text) << ": expected " << format_ids(expected)
                               << ", got " << format_ids(got);
    }
    const Ids ids = c.at("ids_without_special").get<Ids>();
    EXPECT_EQ(tokenizer->decode(ids, false), c.at("decoded").get<std::string>()) << printable(text);
  }
}

TEST_P(GgufBpeFixture, SpecialIdsComeFromTheMetadata) {
  const json& metadata = entry().at("metadata");
  const auto tokenizer = load(writer_from_metadata(metadata));
  EXPECT_EQ(tokenizer->bos_id(), metadata.at("tokenizer.ggml.bos_token_id").get<std::int32_t>());
  EXPECT_EQ(tokenizer->eos_ids(),
            Ids{metadata.at("tokenizer.ggml.eos_token_id").get<std::int32_t>()});
  EXPECT_EQ(tokenizer->vocab_size(),
            static_cast<std::int32_t>(metadata.at("tokenizer.ggml.tokens").size()));
  EXPECT_EQ(tokenizer->chat_template(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(PreTokenizers, GgufBpeFixture,
                         ::testing::Values("gpt2", "llama-bpe", "qwen2", "smollm"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// ---------------------------------------------------------------------------------------------
// A tiny hand-made gpt2 vocabulary: flags, eos ids, chat template and the errors.
// ---------------------------------------------------------------------------------------------
// Tokens: 0 "a", 1 "b", 2 "c", 3 "Ġ", 4 "ab", 5 "abc", 6 "Ġab", 7 "<|s|>" (control),
// 8 "<|e|>" (control), 9 "<|eot|>" (control), 10 "<t>" (user-defined).
GgufWriter tiny_bpe() {
  GgufWriter writer;
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "gpt2");
  writer.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c", "Ġ", "ab", "abc", "Ġab", "<|s|>",
                                                    "<|e|>", "<|eot|>", "<t>"});
  writer.set_int_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 4});
  writer.set_string_array("tokenizer.ggml.merges", {"a b", "ab c", "Ġ ab"});
  writer.set_u32("tokenizer.ggml.bos_token_id", 7);
  writer.set_u32("tokenizer.ggml.eos_token_id", 8);
  return writer;
}

TEST(GgufTokenizer, TinyBpeEncodesWithMergesAndAddedTokens) {
  const auto tokenizer = load(tiny_bpe());
  EXPECT_EQ(tokenizer->encode("abc ab", false), (Ids{5, 6}));
  EXPECT_EQ(tokenizer->encode("<|s|>ab<t>c<|e|>", false), (Ids{7, 4, 10, 2, 8}));
  // No add_bos_token key: a gpt2 vocabulary adds nothing (llama.cpp's default).
  EXPECT_EQ(tokenizer->encode("ab", true), (Ids{4}));
  EXPECT_EQ(tokenizer->decode(Ids{7, 5, 6, 10, 8}, false), "<|s|>abc ab<t><|e|>");
  // Control tokens are special (skipped), user-defined ones are not.
  EXPECT_EQ(tokenizer->decode(Ids{7, 5, 6, 10, 8}, true), "abc ab<t>");
}

TEST(GgufTokenizer, BosAndEosFlags) {
  GgufWriter writer = tiny_bpe();
  writer.set_bool("tokenizer.ggml.add_bos_token", true);
  writer.set_bool("tokenizer.ggml.add_eos_token", true);
  const auto tokenizer = load(writer);
  EXPECT_EQ(tokenizer->encode("ab", true), (Ids{7, 4, 8}));
  EXPECT_EQ(tokenizer->encode("ab", false), (Ids{4}));
  EXPECT_EQ(tokenizer->encode("", true), (Ids{7, 8}));
  EXPECT_EQ(tokenizer->bos_id(), 7);
}

TEST(GgufTokenizer, LlamaBpeAddsBosWithoutTheFlag) {
  GgufWriter writer = tiny_bpe();
  writer.set_string("tokenizer.ggml.pre", "llama-bpe");
  EXPECT_EQ(load(writer)->encode("ab", true), (Ids{7, 4}));
  writer.set_bool("tokenizer.ggml.add_bos_token", false);
  EXPECT_EQ(load(writer)->encode("ab", true), (Ids{4}));
}

TEST(GgufTokenizer, EosIdsIncludeEotAndEom) {
  GgufWriter writer = tiny_bpe();
  writer.set_u32("tokenizer.ggml.eot_token_id", 9);
  writer.set_u32("tokenizer.ggml.eom_token_id", 8);
  EXPECT_EQ(load(writer)->eos_ids(), (Ids{8, 9}));
}

TEST(GgufTokenizer, ChatTemplateComesWithTheTokenizer) {
  GgufWriter writer = tiny_bpe();
  writer.set_string("tokenizer.chat_template",
                    testing::read_file(kDataDir / "chat_templates" / "llama3.jinja"));
  const auto tokenizer = load(writer);
  ASSERT_NE(tokenizer->chat_template(), nullptr);
  EXPECT_EQ(tokenizer->chat_template()->family(), ChatTemplate::Family::kLlama3);
  // bos_token is the text of tokenizer.ggml.bos_token_id.
  const std::vector<ChatMessage> chat = single_turn_chat("ab", std::nullopt);
  EXPECT_THAT(render_chat(*tokenizer, chat, true),
              ::testing::StartsWith("<|s|><|start_header_id|>"));

  GgufWriter unsupported = tiny_bpe();
  unsupported.set_string("tokenizer.chat_template", "{{ messages[0].content }} is unusual");
  const auto loaded = load(unsupported);  // loading works; only applying fails
  try {
    (void)render_chat(*loaded, chat, true);
    ADD_FAILURE() << "an unsupported template was applied";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.chat_template"));
    EXPECT_THAT(e.what(), HasSubstr("first line \"{{ messages[0].content }} is unusual\""));
  }
  try {
    (void)render_chat(*load(tiny_bpe()), chat, true);
    ADD_FAILURE() << "a model without template was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no chat template"));
  }
}

TEST(GgufTokenizer, EncodeChatDoesNotAddBosTwice) {
  GgufWriter writer = tiny_bpe();
  writer.set_string("tokenizer.ggml.pre", "llama-bpe");  // adds BOS by default
  writer.set_string("tokenizer.chat_template",
                    testing::read_file(kDataDir / "chat_templates" / "llama3.jinja"));
  const auto tokenizer = load(writer);
  const std::vector<ChatMessage> chat = single_turn_chat("ab", std::nullopt);
  const std::string text = render_chat(*tokenizer, chat, false);
  EXPECT_EQ(text, "<|s|><|start_header_id|>user<|end_header_id|>\n\nab<|eot_id|>");
  const Ids ids = encode_chat(*tokenizer, chat, false);
  EXPECT_EQ(ids, tokenizer->encode(text, false));
  EXPECT_EQ(ids.front(), 7);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 7), 1);
  const Ids plain = tokenizer->encode(text, true);  // a plain encode adds a second BOS
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 7), 2);
}

// ---------------------------------------------------------------------------------------------
// Errors, each naming the key.
// ---------------------------------------------------------------------------------------------
struct BadMetadata {
  std::string name;
  std::function<void(GgufWriter&)> edit;
  std::string key;
};

TEST(GgufTokenizer, BadMetadataIsAnErrorNamingTheKey) {
  const std::vector<BadMetadata> cases = {
      {"model", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "bert"); },
       "tokenizer.ggml.model"},
      {"pre", [](GgufWriter& w) { w.set_string("tokenizer.ggml.pre", "deepseek-llm"); },
       "tokenizer.ggml.pre"},
      {"types length",
       [](GgufWriter& w) {
         w.set_int_array("tokenizer.ggml.token_type", {1, 1});
       },
       "tokenizer.ggml.token_type"},
      {"type value",
       [](GgufWriter& w) {
         w.set_int_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 9});
       },
       "tokenizer.ggml.token_type"},
      {"scores length", [](GgufWriter& w) { w.set_f32_array("tokenizer.ggml.scores", {0.0}); },
       "tokenizer.ggml.scores"},
      {"bos range", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 11); },
       "tokenizer.ggml.bos_token_id"},
      {"eot range", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.eot_token_id", 99); },
       "tokenizer.ggml.eot_token_id"},
      {"merge format", [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"ab"}); },
       "tokenizer.ggml.merges"},
      {"merge token",
       [](GgufWriter& w) {
         w.set_string_array("tokenizer.ggml.merges", {"a b", "b c"});
       },
       "tokenizer.ggml.merges"},
      {"no merges", [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {}); },
       "tokenizer.ggml.merges"},
      {"tokens type", [](GgufWriter& w) { w.set_u32("tokenizer.ggml.tokens", 3); },
       "tokenizer.ggml.tokens"},
      {"empty vocabulary", [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.tokens", {}); },
       "tokenizer.ggml.tokens"},
      {"invalid utf-8",
       [](GgufWriter& w) {
         w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "c", "Ġ", "ab", "abc", "Ġab",
                                                      "<|s|>", "<|e|>", "\xFF", "<t>"});
       },
       "tokenizer.ggml.tokens"},
      {"add_bos without bos",
       [](GgufWriter& w) {
         GgufWriter fresh;
         w = fresh;
         w.set_string("tokenizer.ggml.model", "gpt2");
         w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
         w.set_string_array("tokenizer.ggml.merges", {"a b"});
         w.set_bool("tokenizer.ggml.add_bos_token", true);
       },
       "tokenizer.ggml.add_bos_token"},
  };
  ASSERT_EQ(load_error(tiny_bpe()), "");
  for (const BadMetadata& c : cases) {
    GgufWriter writer = tiny_bpe();
    c.edit(writer);
    const std::string error = load_error(writer);
    EXPECT_THAT(error, HasSubstr(c.key)) << c.name;
    EXPECT_THAT(error, HasSubstr("test.gguf")) << c.name;
  }
  GgufWriter no_model;
  no_model.set_string_array("tokenizer.ggml.tokens", {"a"});
  EXPECT_THAT(load_error(no_model), HasSubstr("tokenizer.ggml.model"));
}

// ---------------------------------------------------------------------------------------------
// llama (SentencePiece) vocabularies.
// ---------------------------------------------------------------------------------------------
// Tokens: 0 <unk>, 1 <s>, 2 </s>, 3 "▁", 4 "a", 5 "b", 6 "▁a", 7 "ab", 8 "▁ab", 9 "<x>"
// (user-defined). Scores make "ab" the best merge, then "▁ab", then "▁a".
GgufWriter tiny_llama() {
  GgufWriter writer;
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\u2581", "a", "b",
                                                    "\u2581a", "ab", "\u2581ab", "<x>"});
  writer.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -3, -30, -10, -20, 0});
  writer.set_int_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1, 1, 4});
  writer.set_u32("tokenizer.ggml.bos_token_id", 1);
  writer.set_u32("tokenizer.ggml.eos_token_id", 2);
  writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
  return writer;
}

TEST(GgufSentencePiece, MergesByScoreWithPrefixSpaces) {
  const auto tokenizer = load(tiny_llama());
  EXPECT_EQ(tokenizer->kind(), "sentencepiece");
  // "▁ab": "a"+"b" (-10) beats "▁"+"a" (-30), then "▁"+"ab" (-20).
  EXPECT_EQ(tokenizer->encode("ab", false), (Ids{8}));
  EXPECT_EQ(tokenizer->encode("a", false), (Ids{6}));
  // add_bos_token absent: a llama vocabulary adds BOS (llama.cpp's and HF's default).
  EXPECT_EQ(tokenizer->encode("ab", true), (Ids{1, 8}));
  // Control and user-defined tokens are split out; each piece of text after one gets the prefix
  // space again (llama.cpp; HF's legacy LLaMA tokenizer).
  EXPECT_EQ(tokenizer->encode("ab<s>ab<x>a</s>", false), (Ids{8, 1, 8, 9, 6, 2}));
  EXPECT_EQ(tokenizer->decode(Ids{1, 8, 9, 6, 2}, true), "ab<x> a");
  // A character outside the vocabulary (no byte tokens): <unk>.
  EXPECT_EQ(tokenizer->encode("ac", false), (Ids{6, 0}));
}

TEST(GgufSentencePiece, SpacePrefixFlag) {
  GgufWriter writer = tiny_llama();
  writer.set_bool("tokenizer.ggml.add_space_prefix", false);
  writer.set_bool("tokenizer.ggml.add_bos_token", false);
  const auto tokenizer = load(writer);
  EXPECT_EQ(tokenizer->encode("ab", true), (Ids{7}));
  EXPECT_EQ(tokenizer->encode(" ab", false), (Ids{8}));
}

TEST(GgufSentencePiece, ErrorsNameTheKey) {
  GgufWriter rebuilt;
  rebuilt.set_string("tokenizer.ggml.model", "llama");
  rebuilt.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a"});
  rebuilt.set_int_array("tokenizer.ggml.token_type", {2, 1});
  rebuilt.set_bool("tokenizer.ggml.add_bos_token", false);
  EXPECT_THAT(load_error(rebuilt), HasSubstr("tokenizer.ggml.scores"));  // none
  GgufWriter no_unknown = tiny_llama();
  no_unknown.set_int_array("tokenizer.ggml.token_type", {1, 3, 3, 1, 1, 1, 1, 1, 1, 4});
  EXPECT_THAT(load_error(no_unknown), HasSubstr("tokenizer.ggml.token_type"));
  EXPECT_THAT(load_error(no_unknown), HasSubstr("unknown"));
}

// A LLaMA-2-like SentencePiece model trained with spm_train, as GGUF metadata.
class GgufSentencePieceTrained : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<testing::TempDir>("gguf-spm");
    ASSERT_TRUE(std::filesystem::exists(kSpmTrain))
        << kSpmTrain << " not found; install the Debian package 'sentencepiece'";
    std::string corpus;
    for (int i = 0; i < 30; ++i) {
      corpus +=
          "The quick brown fox jumps over the lazy dog. Numbers 12345 and 3.14 appear.\n"
          "Café naïve über 日本語 text with emoji 😀 and code: def f(x): return x + 1\n"
          "    indented lines, tabs\tand   multiple spaces.\n";
    }
    testing::write_file(*dir_ / "corpus.txt", corpus);
    const std::string command = fmt::format(
        "'{}' --input='{}' --model_prefix='{}' --vocab_size=400 --model_type=bpe "
        "--byte_fallback=true --character_coverage=1.0 --normalization_rule_name=identity "
        "--remove_extra_whitespaces=false --split_digits=true --allow_whitespace_only_pieces=true "
        "--add_dummy_prefix=true --user_defined_symbols='<tool>' --control_symbols='<ctl>' "
        "--num_threads=1 > '{}' 2>&1",
        kSpmTrain.string(), (*dir_ / "corpus.txt").string(), (*dir_ / "m").string(),
        (*dir_ / "train.log").string());
    ASSERT_EQ(std::system(command.c_str()), 0) << testing::read_file(*dir_ / "train.log");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  static std::filesystem::path model_file() { return *dir_ / "m.model"; }

  // The model's pieces as llama.cpp's converter writes them.
  static GgufWriter as_gguf() {
    sentencepiece::SentencePieceProcessor sp;
    EXPECT_TRUE(sp.Load(model_file().string()).ok());
    std::vector<std::string> tokens;
    std::vector<double> scores;
    std::vector<std::int64_t> types;
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
      tokens.push_back(sp.IdToPiece(id));
      scores.push_back(sp.GetScore(id));
      types.push_back(sp.IsUnknown(id)               ? 2
                      : sp.IsControl(id)             ? 3
                      : sp.IsByte(id)                ? 6
                      : sp.IsUnused(id)              ? 5
                      : sp.IdToPiece(id) == "<tool>" ? 4
                                                     : 1);
    }
    GgufWriter writer;
    writer.set_string("tokenizer.ggml.model", "llama");
    writer.set_string_array("tokenizer.ggml.tokens", tokens);
    writer.set_f32_array("tokenizer.ggml.scores", scores);
    writer.set_int_array("tokenizer.ggml.token_type", types);
    writer.set_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(sp.bos_id()));
    writer.set_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(sp.eos_id()));
    writer.set_u32("tokenizer.ggml.unknown_token_id", static_cast<std::uint32_t>(sp.unk_id()));
    writer.set_bool("tokenizer.ggml.add_bos_token", true);
    return writer;
  }

  static std::unique_ptr<testing::TempDir> dir_;
};

std::unique_ptr<testing::TempDir> GgufSentencePieceTrained::dir_;

const std::vector<std::string>& plain_texts() {
  static const std::vector<std::string> kTexts = {
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "  leading spaces",
      "trailing   ",
      "tabs\tand\nnewlines\n\n",
      "12345 3.14159",
      "Café naïve über",
      "日本語 😀 한국어 (byte fallback)",
      "",
      " ",
      "\u2581meta\u2581",
      "def f(x): return x + 1",
  };
  return kTexts;
}

TEST_F(GgufSentencePieceTrained, EncodesAsTheModelFile) {
  const SentencePieceTokenizer reference(model_file());
  const auto tokenizer = load(as_gguf());
  EXPECT_EQ(tokenizer->vocab_size(), reference.vocab_size());
  EXPECT_EQ(tokenizer->bos_id(), reference.bos_id());
  EXPECT_EQ(tokenizer->eos_ids(), reference.eos_ids());
  for (const std::string& text : plain_texts()) {
    for (const bool special : {false, true}) {
      const Ids expected = reference.encode(text, special);
      const Ids got = tokenizer->encode(text, special);
      EXPECT_EQ(got, expected) << printable(text) << " special " << special << ": expected "
                               << format_ids(expected) << ", got " << format_ids(got);
    }
    const Ids ids = reference.encode(text, false);
    EXPECT_EQ(tokenizer->decode(ids, true), reference.decode(ids, true)) << printable(text);
  }
}

TEST_F(GgufSentencePieceTrained, SplitsControlAndUserDefinedTokens) {
  const SentencePieceTokenizer reference(model_file());
  const auto tokenizer = load(as_gguf());
  const auto id_of = [&](const std::string& piece) {
    const Ids ids = tokenizer->encode(piece, false);
    EXPECT_EQ(ids.size(), 1U) << piece << " " << format_ids(ids);
    return ids.empty() ? -1 : ids[0];
  };
  const std::int32_t bos = *reference.bos_id();
  const std::int32_t tool = id_of("<tool>");
  const std::int32_t control = id_of("<ctl>");
  const auto plain = [&](const std::string& text) { return reference.encode(text, false); };
  // Expected: each piece of text encoded on its own (with its prefix space), the tokens between.
  Ids expected = {bos};
  for (const Ids& part : {plain("Hello"), Ids{tool}, plain(" world"), Ids{control},
                          Ids{*reference.eos_ids().begin()}, plain("x")}) {
    expected.insert(expected.end(), part.begin(), part.end());
  }
  EXPECT_EQ(tokenizer->encode("<s>Hello<tool> world<ctl></s>x", false), expected);
}

// ---------------------------------------------------------------------------------------------
// Files: load_tokenizer and find_tokenizer.
// ---------------------------------------------------------------------------------------------
TEST(GgufTokenizerFiles, LoadAndFind) {
  const testing::TempDir dir("gguf-tokenizer-files");
  GgufWriter writer = tiny_bpe();
  writer.set_string("tokenizer.chat_template",
                    testing::read_file(kDataDir / "chat_templates" / "chatml.jinja"));
  writer.write(dir / "model.gguf");
  for (const auto& tokenizer : {load_tokenizer(dir / "model.gguf"),
                                find_tokenizer(dir / "model.gguf"), find_tokenizer(dir.path())}) {
    ASSERT_NE(tokenizer, nullptr);
    EXPECT_EQ(tokenizer->encode("abc ab", false), (Ids{5, 6}));
    ASSERT_NE(tokenizer->chat_template(), nullptr);
    EXPECT_EQ(tokenizer->chat_template()->family(), ChatTemplate::Family::kChatMl);
  }
  // Two GGUF files: the directory names no single tokenizer.
  writer.write(dir / "other.gguf");
  EXPECT_EQ(find_tokenizer(dir.path()), nullptr);
  // A tokenizer.json next to them wins, with tokenizer_config.json's chat template.
  std::filesystem::copy_file(kDataDir / "gpt2_style.tokenizer.json", dir / "tokenizer.json");
  testing::write_file(
      dir / "tokenizer_config.json",
      json{{"chat_template", testing::read_file(kDataDir / "chat_templates" / "llama2.jinja")}}
          .dump());
  const auto hf = find_tokenizer(dir.path());
  ASSERT_NE(hf, nullptr);
  ASSERT_NE(hf->chat_template(), nullptr);
  EXPECT_EQ(hf->chat_template()->family(), ChatTemplate::Family::kLlama2);
  // --tokenizer FILE: the template beside the file comes with it.
  const auto by_file = load_tokenizer(dir / "tokenizer.json");
  ASSERT_NE(by_file->chat_template(), nullptr);
  EXPECT_EQ(by_file->chat_template()->family(), ChatTemplate::Family::kLlama2);
  // A GGUF file without tokenizer metadata has no tokenizer to find (the model runs on
  // --prompt-ids), but loading it as a tokenizer names the missing key.
  const testing::TempDir bare("gguf-tokenizer-bare");
  GgufWriter weights_only;
  weights_only.set_string("general.architecture", "llama");
  weights_only.write(bare / "model.gguf");
  EXPECT_EQ(find_tokenizer(bare / "model.gguf"), nullptr);
  EXPECT_EQ(find_tokenizer(bare.path()), nullptr);
  EXPECT_THROW(
      {
        try {
          (void)load_tokenizer(bare / "model.gguf");
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("tokenizer.ggml.model"));
          throw;
        }
      },
      Error);
  // A malformed tokenizer_config.json costs only the template.
  testing::write_file(dir / "tokenizer_config.json", "{");
  const auto without_template = find_tokenizer(dir.path());
  ASSERT_NE(without_template, nullptr);
  EXPECT_EQ(without_template->chat_template(), nullptr);
}

}  // namespace
}  // namespace selfspec
