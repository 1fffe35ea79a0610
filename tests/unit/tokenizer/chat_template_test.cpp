// ChatTemplate against transformers' own renderer: the templates of
// tests/data/tokenizer/chat_templates/ (SmolLM2's and Qwen2.5-Coder's from their GGUF files,
// LLaMA-2's and LLaMA-3's from their tokenizer_config.json, plain and multi-line ChatML) rendered
// by scripts/dev/make_chat_template_fixtures.py on a set of conversations; every text must be
// identical, and the templates we do not render must be refused with an error naming them. Also
// the Jinja outline the recognition rests on (literals, escapes, whitespace control).
#include "tokenizer/chat_template.hpp"
#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/hf_chat_template.hpp"
#include "tokenizer/jinja_outline.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace selfspec {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::printable;

const std::filesystem::path kDataDir = SELFSPEC_TOKENIZER_DATA_DIR;

const json& fixture() {
  static const json kFixture = json::parse(testing::read_file(kDataDir / "chat_templates.json"));
  return kFixture;
}

ChatTemplate load_template(const std::string& name) {
  const json& spec = fixture().at("templates").at(name);
  return ChatTemplate(testing::read_file(kDataDir / spec.at("file").get<std::string>()),
                      {spec.at("bos").get<std::string>(), spec.at("eos").get<std::string>()}, name);
}

std::vector<ChatMessage> messages_of(const json& node) {
  std::vector<ChatMessage> messages;
  for (const json& m : node) {
    messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  }
  return messages;
}

TEST(ChatTemplate, RecognisesEachFamily) {
  ASSERT_EQ(fixture().at("templates").size(), 6U);
  for (const auto& [name, spec] : fixture().at("templates").items()) {
    const ChatTemplate chat = load_template(name);
    EXPECT_TRUE(chat.supported()) << name << ": " << chat.describe();
    EXPECT_EQ(chat.family_name(), spec.at("family").get<std::string>()) << name;
    if (spec.at("default_system").is_null()) {
      EXPECT_EQ(chat.default_system_prompt(), std::nullopt) << name;
    } else {
      EXPECT_EQ(chat.default_system_prompt(), spec.at("default_system").get<std::string>()) << name;
    }
  }
}

TEST(ChatTemplate, RendersExactlyAsTransformers) {
  const json& cases = fixture().at("cases");
  ASSERT_GE(cases.size(), 150U);
  std::size_t rendered = 0;
  std::size_t refused = 0;
  for (const json& c : cases) {
    const std::string name = c.at("template").get<std::string>();
    const ChatTemplate chat = load_template(name);
    const std::vector<ChatMessage> messages = messages_of(c.at("messages"));
    const bool generation_prompt = c.at("add_generation_prompt").get<bool>();
    if (c.contains("error")) {
      // The template itself raises (LLaMA-2's role alternation): so must we.
      EXPECT_THROW(chat.apply(messages, generation_prompt), Error) << name << " " << c.dump();
      ++refused;
      continue;
    }
    const std::string expected = c.at("text").get<std::string>();
    const std::string got = chat.apply(messages, generation_prompt);
    EXPECT_EQ(got, expected) << name << " " << c.at("messages").dump() << " generation prompt "
                             << generation_prompt << "\nexpected " << printable(expected)
                             << "\ngot      " << printable(got);
    ++rendered;
  }
  EXPECT_GE(refused, 4U);
  EXPECT_GE(rendered, 140U);
}

TEST(ChatTemplate, RefusesOtherTemplatesNamingThem) {
  const json& unsupported = fixture().at("unsupported");
  ASSERT_GE(unsupported.size(), 9U);
  const std::vector<ChatMessage> chat = single_turn_chat("hi", std::nullopt);
  for (const json& file : unsupported) {
    const std::string source = testing::read_file(kDataDir / file.get<std::string>());
    const ChatTemplate t(source, {"<s>", "</s>"}, file.get<std::string>());
    EXPECT_FALSE(t.supported()) << file << " was recognised as " << t.family_name();
    EXPECT_THAT(t.describe(), HasSubstr("unsupported chat template"));
    try {
      (void)t.apply(chat, true);
      ADD_FAILURE() << file << ": apply() did not throw";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_THAT(message, HasSubstr(file.get<std::string>()));
      EXPECT_THAT(message, HasSubstr("CRC-32"));
      EXPECT_THAT(message, HasSubstr("first line"));
    }
  }
}

TEST(ChatTemplate, ReasonsNameWhatIsMissing) {
  const auto reason = [](const std::string& name) {
    return ChatTemplate(testing::read_file(kDataDir / "chat_templates" / name), {"<s>", "</s>"},
                        name)
        .describe();
  };
  EXPECT_THAT(reason("unsupported_mistral_inst.jinja"), HasSubstr("Mistral"));
  EXPECT_THAT(reason("unsupported_llama31_dated.jinja"), HasSubstr("date_string"));
  EXPECT_THAT(reason("unsupported_qwen3_thinking.jinja"), HasSubstr("enable_thinking"));
  EXPECT_THAT(reason("unsupported_chatml_raw_newline.jinja"), HasSubstr("outside its tags"));
  EXPECT_THAT(reason("unsupported_chatml_trimmed.jinja"), HasSubstr("trims"));
  EXPECT_THAT(reason("unsupported_unterminated.jinja"), HasSubstr("not a well-formed"));
  EXPECT_THAT(reason("unsupported_gemma_turns.jinja"), HasSubstr("none of ChatML"));
  EXPECT_THAT(reason("unsupported_llama3_custom_prompt.jinja"), HasSubstr("generation prompt"));
  EXPECT_THAT(reason("unsupported_chatml_bos.jinja"), HasSubstr("bos_token"));
}

TEST(ChatTemplate, MessagesAreChecked) {
  const ChatTemplate chat = load_template("chatml");
  EXPECT_THROW(chat.apply({}, true), Error);
  const std::vector<ChatMessage> tool = {{"tool", "{}"}};
  try {
    (void)chat.apply(tool, true);
    ADD_FAILURE() << "a tool message was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"tool\""));
  }
}

TEST(ChatTemplate, SingleTurnChat) {
  const auto plain = single_turn_chat("question", std::nullopt);
  ASSERT_EQ(plain.size(), 1U);
  EXPECT_EQ(plain[0].role, "user");
  EXPECT_EQ(plain[0].content, "question");
  const auto with_system = single_turn_chat("question", "be brief");
  ASSERT_EQ(with_system.size(), 2U);
  EXPECT_EQ(with_system[0].role, "system");
  EXPECT_EQ(with_system[0].content, "be brief");
  EXPECT_EQ(load_template("smollm2").apply(with_system, true),
            "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nquestion<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(HfChatTemplate, ReadsTokenizerConfigAndJinjaFile) {
  const testing::TempDir dir("chat-template-hf");
  EXPECT_EQ(find_hf_chat_template(dir.path()), std::nullopt);
  const std::string llama3 = testing::read_file(kDataDir / "chat_templates" / "llama3.jinja");
  const json config = {{"bos_token", {{"content", "<|begin_of_text|>"}, {"special", true}}},
                       {"eos_token", "<|eot_id|>"},
                       {"chat_template", llama3}};
  testing::write_file(dir / "tokenizer_config.json", config.dump());
  const std::optional<ChatTemplate> chat = find_hf_chat_template(dir.path());
  ASSERT_TRUE(chat.has_value());
  EXPECT_EQ(chat->family(), ChatTemplate::Family::kLlama3);
  EXPECT_EQ(chat->apply(single_turn_chat("hi", std::nullopt), true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // chat_template.jinja wins over the config's template.
  testing::write_file(dir / "chat_template.jinja",
                      testing::read_file(kDataDir / "chat_templates" / "chatml.jinja"));
  EXPECT_EQ(find_hf_chat_template(dir.path())->family(), ChatTemplate::Family::kChatMl);
}

TEST(HfChatTemplate, NamedTemplateListsAndErrors) {
  const testing::TempDir dir("chat-template-list");
  const std::string chatml = testing::read_file(kDataDir / "chat_templates" / "chatml.jinja");
  json config = {{"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}},
                                                {{"name", "default"}, {"template", chatml}}})}};
  testing::write_file(dir / "tokenizer_config.json", config.dump());
  EXPECT_EQ(find_hf_chat_template(dir.path())->family(), ChatTemplate::Family::kChatMl);
  config["chat_template"] = json::array({{{"name", "tool_use"}, {"template", "x"}}});
  testing::write_file(dir / "tokenizer_config.json", config.dump());
  EXPECT_THROW(find_hf_chat_template(dir.path()), Error);
  testing::write_file(dir / "tokenizer_config.json", "{not json");
  EXPECT_THROW(find_hf_chat_template(dir.path()), Error);
}

TEST(JinjaOutline, LiteralsAndEscapes) {
  const JinjaOutline outline = outline_jinja(
      R"({{ 'a\nb' + "c\"d" + 'e\x41\u00e9\101\q' }}{% if x %}{{ '}}' }}{% endif %})");
  ASSERT_FALSE(outline.error.has_value());
  ASSERT_EQ(outline.literals.size(), 4U);
  EXPECT_EQ(outline.literals[0], "a\nb");
  EXPECT_EQ(outline.literals[1], "c\"d");
  EXPECT_EQ(outline.literals[2],
            "eA\xC3\xA9"
            "A\\q");
  EXPECT_EQ(outline.literals[3], "}}");
  EXPECT_FALSE(outline.raw_output.has_value());
  EXPECT_TRUE(outline.code_has_word("x"));
  EXPECT_TRUE(outline.code_has_word("if x"));
  EXPECT_FALSE(outline.code_has_word("f x"));
  EXPECT_FALSE(outline.code_has_word("endi"));
}

TEST(JinjaOutline, WhitespaceControlDecidesWhatRawTextIsOutput) {
  // trim_blocks removes the newline after a block tag; lstrip_blocks the indentation before one.
  EXPECT_FALSE(outline_jinja("{% if x %}\n    {% endif %}\n").raw_output.has_value());
  // A newline after an expression stays.
  EXPECT_EQ(outline_jinja("{{ x }}\n{% if y %}{% endif %}").raw_output, "\n");
  // "-" strips every white space character on its side.
  EXPECT_FALSE(outline_jinja("{{ x -}}\n\n  {{ y }}").raw_output.has_value());
  EXPECT_FALSE(outline_jinja("{{ x }}\n\n  {{- y }}").raw_output.has_value());
  // "+" turns lstrip_blocks off.
  EXPECT_EQ(outline_jinja("{{ x }}\n  {%+ if y %}{% endif %}").raw_output, "\n  ");
  EXPECT_EQ(outline_jinja("{{ x }}  {% if y %}{% endif %}").raw_output, "  ");
  EXPECT_EQ(outline_jinja("text {{ x }}").raw_output, "text ");
  EXPECT_FALSE(outline_jinja("{# comment #}\n{{ x }}\n").raw_output.has_value());
  EXPECT_TRUE(outline_jinja("{{ 'open }}").error.has_value());
  EXPECT_TRUE(outline_jinja("{% if x").error.has_value());
}

}  // namespace
}  // namespace selfspec
