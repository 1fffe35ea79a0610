// The fixture of the CLI tests that collect data for a trained draft head, train it and draft with
// it (early_exit_cli_test, feature_head_cli_test): a tiny 4-layer model from `make-model`, the
// GPT-2-style test tokenizer, four calibration chat prompts, collect-exit-data at a given exit
// layer into dir_/data, and `generate` of a fixed prompt. The trainers need PyTorch:
// torch_available() says whether /usr/bin/python3 has it.
#pragma once

#include "tests/integration/cli_fixture.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace selfspec::testing {

inline bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") == 0;
}

class DraftHeadCli : public Cli {
 protected:
  void SetUp() override {
    model_ = make_model("m", 5);
    tokenizer_ = std::filesystem::path(SELFSPEC_SOURCE_DIR) /
                 "tests/data/tokenizer/gpt2_style.tokenizer.json";
    std::string text;
    int id = 0;
    for (const char* prompt : {"Hello! How are you today?", "Tell me about the sea and the sky.",
                               "What colour is the sky?", "Name three birds of the sea."}) {
      text += nlohmann::json{{"id", std::to_string(id++)},
                             {"task", "chat"},
                             {"split", "calibration"},
                             {"prompt", prompt}}
                  .dump() +
              "\n";
    }
    suite_ = dir_ / "suite.jsonl";
    std::ofstream(suite_) << text;
  }
  std::filesystem::path make_model(const std::string& name, int seed) {
    const auto path = dir_ / name;
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers 4 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 1210 --seed {}",
        path.string(), seed));
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return path;
  }
  // collect-exit-data of the calibration prompts at `exit_layer` (top-8 targets, 24 generated
  // tokens) into dir_/data (one exit layer: the files are in that directory itself).
  std::filesystem::path collect_at(int exit_layer) {
    const auto out = dir_ / "data";
    const CommandResult r = run(fmt::format(
        "collect-exit-data --model {} --tokenizer {} --prompts-file {} --exit-layer {} --top-k 8 "
        "--generate 24 --out {} --json",
        model_.string(), tokenizer_.string(), suite_.string(), exit_layer, out.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }
  std::string generate(const std::string& extra) const {
    return fmt::format(
        "generate --model {} --tokenizer {} --prompt 'the sea and the sky' --max-new-tokens 24 "
        "--ignore-eos --json {}",
        model_.string(), tokenizer_.string(), extra);
  }
  std::filesystem::path model_, tokenizer_, suite_;
};

}  // namespace selfspec::testing
