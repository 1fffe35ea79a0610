// The tokenizers and chat templates of the real models' GGUF files against the reference vectors
// recorded with HF transformers (tests/data/realmodel/<model>.json, scripts/dev/gguf_reference.py):
// every id of the tokenizer cases and of the prompts (plain and chat-templated), the decoded texts,
// the chat template's text, and the special ids. The GGUF files are not in the repository: the
// environment names them (scripts/get-model.sh prints the path), and a test whose variable is
// unset is skipped:
//   SELFSPEC_GGUF_SMOLLM2     smollm2-135m-instruct
//   SELFSPEC_GGUF_QWEN_1_5B   qwen2.5-coder-1.5b-instruct
#include "model_io/gguf_file.hpp"
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/gguf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace selfspec {
namespace {

using Ids = std::vector<std::int32_t>;
using nlohmann::json;
using testing::format_ids;
using testing::printable;

const std::filesystem::path kRealModelDir = SELFSPEC_REALMODEL_DATA_DIR;

class RealModelTokenizer : public ::testing::Test {
 protected:
  // Loads the reference vectors of `model` and the tokenizer of the GGUF file that
  // `variable` names; false (the test is skipped) when the variable is unset.
  bool load(const std::string& model, const char* variable) {
    const char* path = std::getenv(variable);
    if (path == nullptr || *path == '\0') return false;
    reference_ = json::parse(testing::read_file(kRealModelDir / (model + ".json")));
    EXPECT_EQ(reference_.at("model").get<std::string>(), model);
    EXPECT_TRUE(std::filesystem::exists(path)) << variable << "=" << path << " does not exist";
    tokenizer_ = load_gguf_tokenizer(GgufFile(std::filesystem::path(path)));
    return true;
  }

  void expect_tokenizer_cases() const {
    const json& cases = reference_.at("tokenizer").at("cases");
    ASSERT_GE(cases.size(), 20U);
    for (const json& c : cases) {
      const std::string text = c.at("text").get<std::string>();
      for (const bool special : {false, true}) {
        const Ids expected = c.at(special ? "ids_with_special" : "ids_without_special").get<Ids>();
        const Ids got = tokenizer_->encode(text, special);
        EXPECT_EQ(got, expected) << "special " << special << " text " << printable(text)
                                 << ": expected " << format_ids(expected) << ", got "
                                 << format_ids(got);
      }
      const Ids ids = c.at("ids_without_special").get<Ids>();
      EXPECT_EQ(tokenizer_->decode(ids, false), c.at("decoded").get<std::string>())
          << printable(text);
    }
  }

  void expect_prompts() const {
    const json& prompts = reference_.at("prompts");
    ASSERT_GE(prompts.size(), 4U);
    std::size_t chats = 0;
    for (const json& p : prompts) {
      const std::string name = p.at("name").get<std::string>();
      const std::string text = p.at("text").get<std::string>();
      const Ids expected = p.at("prompt_ids").get<Ids>();
      EXPECT_EQ(tokenizer_->encode(text, true), expected) << name;
      if (p.at("kind") != "chat") continue;
      ++chats;
      std::vector<ChatMessage> messages;
      for (const json& m : p.at("messages")) {
        messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
      }
      EXPECT_EQ(render_chat(*tokenizer_, messages, true), text) << name;
      EXPECT_TRUE(p.at("apply_chat_template_ids_equal").get<bool>()) << name;
      EXPECT_EQ(encode_chat(*tokenizer_, messages, true), expected) << name;
    }
    EXPECT_GE(chats, 2U);
  }

  void expect_special_ids() const {
    const json& section = reference_.at("tokenizer");
    const json& eos = section.at("eos_token").at(1);
    const Ids eos_ids = tokenizer_->eos_ids();
    EXPECT_NE(std::find(eos_ids.begin(), eos_ids.end(), eos.get<std::int32_t>()), eos_ids.end())
        << format_ids(eos_ids);
    EXPECT_GE(tokenizer_->vocab_size(), section.at("vocab_size").get<std::int32_t>());
  }

  json reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(RealModelTokenizer, SmolLM2) {
  if (!load("smollm2-135m-instruct", "SELFSPEC_GGUF_SMOLLM2")) {
    GTEST_SKIP() << "SELFSPEC_GGUF_SMOLLM2 is not set (scripts/get-model.sh smollm2-135m-instruct)";
  }
  ASSERT_NE(tokenizer_->chat_template(), nullptr);
  EXPECT_EQ(tokenizer_->chat_template()->family(), ChatTemplate::Family::kChatMl);
  expect_tokenizer_cases();
  expect_prompts();
  expect_special_ids();
}

TEST_F(RealModelTokenizer, Qwen2_5Coder1_5B) {
  if (!load("qwen2.5-coder-1.5b-instruct", "SELFSPEC_GGUF_QWEN_1_5B")) {
    GTEST_SKIP() << "SELFSPEC_GGUF_QWEN_1_5B is not set "
                    "(scripts/get-model.sh qwen2.5-coder-1.5b-instruct)";
  }
  ASSERT_NE(tokenizer_->chat_template(), nullptr);
  EXPECT_EQ(tokenizer_->chat_template()->default_system_prompt(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  expect_tokenizer_cases();
  expect_prompts();
  expect_special_ids();
}

}  // namespace
}  // namespace selfspec
