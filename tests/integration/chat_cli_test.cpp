// `generate --chat`, `tokenize --chat` and `bench --prompts-file --chat` through the real
// `selfspec` binary: a random model with a tokenizer.json and a ChatML template in
// tokenizer_config.json; the chat prompt's ids are the template's text encoded without special
// tokens, generation from --chat equals generation from those ids (at TP 1 and 2), bench's suite
// prompts are the same chats, and a model without (or with an unsupported) template, or a chat
// option misused, is an error that says so.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kTokenizerData =
    std::filesystem::path(SELFSPEC_SOURCE_DIR) / "tests" / "data" / "tokenizer";

class ChatCli : public Cli {
 protected:
  // A small random model with the GPT-2-style test tokenizer (ids < 1205) and, when given, a
  // chat template in tokenizer_config.json.
  std::filesystem::path make_chat_model(const std::string& name,
                                        const std::string& template_file = "chatml.jinja") {
    const auto path = dir_ / name;
    const CommandResult r = run(fmt::format(
        "make-model --out {} --layers 2 --hidden 64 --heads 8 --kv-heads 2 --intermediate 96 "
        "--vocab 1300 --seed 5",
        path.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::filesystem::copy_file(kTokenizerData / "gpt2_style.tokenizer.json",
                               path / "tokenizer.json");
    if (!template_file.empty()) {
      const nlohmann::json config = {
          {"chat_template", read_file(kTokenizerData / "chat_templates" / template_file)}};
      std::ofstream(path / "tokenizer_config.json") << config.dump();
    }
    return path;
  }
};

TEST_F(ChatCli, ChatPromptIsTheTemplatesTextEncoded) {
  const auto model = make_chat_model("m");
  CommandResult r =
      run(fmt::format("tokenize --model {} --text 'Hello there' --chat --json", model.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["chat_text"],
            "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int> ids = r.json()["ids"].get<std::vector<int>>();
  // The same text through the plain tokenizer (this tokenizer adds no special tokens).
  // (a newline inside single quotes reaches the program as it is)
  r = run(fmt::format("tokenize --model {} --text '{}' --json", model.string(),
                      "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["ids"].get<std::vector<int>>(), ids);

  const std::string generate = "--max-new-tokens 6 --ignore-eos --json";
  const CommandResult chat = run(fmt::format("generate --model {} --chat --prompt 'Hello there' {}",
                                             model.string(), generate));
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(chat.json()["n_prompt"], ids.size());
  const CommandResult by_ids = run(fmt::format("generate --model {} --prompt-ids {} {}",
                                               model.string(), fmt::join(ids, ","), generate));
  ASSERT_EQ(by_ids.exit_code, 0) << by_ids.err;
  EXPECT_EQ(chat.json()["tokens"], by_ids.json()["tokens"]);
  SELFSPEC_SKIP_WITHOUT_MPI();
  const CommandResult tp2 = run(
      fmt::format("generate --model {} --chat --prompt 'Hello there' {}", model.string(), generate),
      2);
  ASSERT_EQ(tp2.exit_code, 0) << tp2.err;
  EXPECT_EQ(tp2.json()["tokens"], chat.json()["tokens"]);
}

TEST_F(ChatCli, BenchSuitePromptsAsChats) {
  const auto model = make_chat_model("m");
  const auto suite = dir_ / "suite.jsonl";
  std::ofstream(suite) << nlohmann::json{{"id", "c1"},
                                         {"task", "chat"},
                                         {"split", "evaluation"},
                                         {"prompt", "Hello there"}}
                              .dump()
                       << "\n";
  const auto prompt_tokens = [&](const std::string& extra) {
    const CommandResult r = run(fmt::format(
        "bench --model {} --prompts-file {} --gen 4 --spec layer-skip --skip-uniform 0.3 --json {}",
        model.string(), suite.string(), extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? r.json()["per_prompt"][0]["prompt_tokens"].get<int>() : -1;
  };
  const auto tokenized = [&](const std::string& extra) {
    const CommandResult r = run(
        fmt::format("tokenize --model {} --text 'Hello there' --json {}", model.string(), extra));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? r.json()["n_tokens"].get<int>() : -2;
  };
  EXPECT_EQ(prompt_tokens("--chat"), tokenized("--chat"));
  EXPECT_EQ(prompt_tokens("--chat --system 'Be brief.'"), tokenized("--chat --system 'Be brief.'"));
  EXPECT_EQ(prompt_tokens(""), tokenized(""));
  EXPECT_NE(tokenized("--chat"), tokenized(""));
  expect_error(run(fmt::format("bench --model {} --chat", model.string())),
               "--chat requires --prompts-file");
}

TEST_F(ChatCli, SystemMessageComesFirst) {
  const auto model = make_chat_model("m");
  const CommandResult r = run(fmt::format(
      "tokenize --model {} --text hi --chat --system 'Be brief.' --json", model.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["chat_text"],
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST_F(ChatCli, ChatWithoutAUsableTemplateIsAnError) {
  const auto plain = make_chat_model("plain", "");
  expect_error(
      run(fmt::format("generate --model {} --chat --prompt hi --max-new-tokens 2", plain.string())),
      "no chat template");
  expect_error(run(fmt::format("tokenize --model {} --chat --text hi", plain.string())),
               "no chat template");
  const auto gemma = make_chat_model("gemma", "unsupported_gemma_turns.jinja");
  expect_error(
      run(fmt::format("generate --model {} --chat --prompt hi --max-new-tokens 2", gemma.string())),
      "unsupported chat template");
  const auto no_tokenizer = dir_ / "bare";
  ASSERT_EQ(run(fmt::format("make-model --out {} --layers 1 --hidden 64 --heads 8 --kv-heads 2 "
                            "--intermediate 96 --vocab 300",
                            no_tokenizer.string()))
                .exit_code,
            0);
  expect_error(run(fmt::format("generate --model {} --chat --prompt hi --max-new-tokens 2",
                               no_tokenizer.string())),
               "--chat needs the model's tokenizer");
  // Several ranks fail the same way (every rank renders the chat).
  SELFSPEC_SKIP_WITHOUT_MPI();
  expect_error(
      run(fmt::format("generate --model {} --chat --prompt hi --max-new-tokens 2", gemma.string()),
          2),
      "unsupported chat template");
}

TEST_F(ChatCli, ChatOptionsAreCheckedByName) {
  const auto model = make_chat_model("m");
  expect_error(run(fmt::format("generate --model {} --prompt hi --system x", model.string())),
               "--system requires --chat");
  expect_error(run(fmt::format("generate --model {} --chat --prompt-ids 1,2", model.string())),
               "--prompt-ids excludes --chat");
  expect_error(run(fmt::format("generate --model {} --chat --prompt hi --no-bos", model.string())),
               "--no-bos excludes --chat");
}

}  // namespace
}  // namespace selfspec::testing
