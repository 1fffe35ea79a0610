// The tokenizer and chat template of a real model's GGUF file (SELFSPEC_REALMODEL_GGUF, fetched by
// with_model.sh) against the vectors HF transformers recorded from the same file
// (tests/data/realmodel/<SELFSPEC_REALMODEL_NAME>.json, scripts/dev/gguf_reference.py): every id
// of the tokenizer cases and of the prompts (plain and chat-templated), the decoded texts, the
// chat template's text, and the special ids.
#include "model_io/gguf_file.hpp"
#include "tokenizer/gguf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace selfspec {
namespace {

using Ids = std::vector<std::int32_t>;
using nlohmann::json;

std::string format_ids(const Ids& ids) {
  return fmt::format("[{}]", fmt::join(ids, ", "));
}

// `text` as a JSON string: control characters escaped, for failure messages.
std::string printable(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

class RealModelTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* name = std::getenv("SELFSPEC_REALMODEL_NAME");
    const char* gguf = std::getenv("SELFSPEC_REALMODEL_GGUF");
    ASSERT_TRUE(name != nullptr && gguf != nullptr)
        << "run through tests/realmodel/with_model.sh (ctest -L realmodel): "
           "SELFSPEC_REALMODEL_NAME and SELFSPEC_REALMODEL_GGUF are not set";
    name_ = name;
    const auto path =
        std::filesystem::path(SELFSPEC_SOURCE_DIR) / "tests/data/realmodel" / (name_ + ".json");
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << "no reference vectors at " << path;
    reference_ = json::parse(in);
    ASSERT_EQ(reference_.at("model").get<std::string>(), name_);
    tokenizer_ = load_gguf_tokenizer(GgufFile(std::filesystem::path(gguf)));
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

  std::string name_;
  json reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(RealModelTokenizer, IdsAndChatTemplateMatchTransformers) {
  ASSERT_NE(tokenizer_->chat_template(), nullptr);
  EXPECT_EQ(tokenizer_->chat_template()->family(), ChatTemplate::Family::kChatMl);
  const std::string default_system =
      name_.starts_with("smollm2")
          ? "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
          : "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  EXPECT_EQ(tokenizer_->chat_template()->default_system_prompt(), default_system);
  expect_tokenizer_cases();
  expect_prompts();
  expect_special_ids();
}

}  // namespace
}  // namespace selfspec
