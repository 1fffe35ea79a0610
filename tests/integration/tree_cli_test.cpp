// Token trees (--tree, SWIFT §4.2's dynamic verification) as a user runs them, on a tiny random
// checkpoint: `generate --tree` gives the plain output with every drafter (layer-skip, swift, asd)
// at TP 1 and under mpirun -np 2 with --debug-sync, and reports the alternatives it verified;
// `bench --tree` stays lossless; bad widths and misplaced options are refused naming the option.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class TreeCli : public Cli {
 protected:
  void SetUp() override {
    model_ = dir_ / "m";
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers 4 --hidden 64 --heads 8 --kv-heads 2 --intermediate 100 "
        "--vocab 1210 --seed 5",
        model_.string()));
    ASSERT_EQ(made.exit_code, 0) << made.err;
    tokenizer_ = kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json";
  }
  std::string generate(const std::string& extra) const {
    return fmt::format(
        "generate --model {} --tokenizer {} --prompt 'the sea and the sky' --max-new-tokens 24 "
        "--ignore-eos --json {}",
        model_.string(), tokenizer_.string(), extra);
  }
  std::filesystem::path model_, tokenizer_;
};

TEST_F(TreeCli, EveryDrafterWithTreesGivesThePlainOutputAtTp1AndTp2) {
  const CommandResult plain = run(generate(""));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto expected = plain.json()["tokens"];
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    std::int64_t alternatives = 0;
    for (const char* spec : {"--spec layer-skip --skip-uniform 0.3",
                             "--spec swift --swift-ratio 0.3 --swift-window 4 --swift-min-window 2",
                             "--spec asd --asd-alpha 0.5 --asd-n 1"}) {
      const CommandResult r =
          run(generate(fmt::format("{} --tree swift --tree-max-nodes 12 --debug-sync", spec)),
              ranks, 240);
      ASSERT_EQ(r.exit_code, 0) << spec << "\n" << r.err;
      const nlohmann::json out = r.json();
      EXPECT_EQ(out["tokens"], expected) << spec << " / ranks " << ranks;
      EXPECT_EQ(out["spec"]["tree"], "0.5:10,0.8:5,0.95:3,1:1");
      EXPECT_EQ(out["spec"]["tree_max_nodes"], 12);
      alternatives += out["alternatives"].get<std::int64_t>();
      EXPECT_LE(out["alternatives_accepted"].get<std::int64_t>(),
                out["accepted"].get<std::int64_t>());
    }
    EXPECT_GT(alternatives, 0) << "no tree was ever drafted at ranks " << ranks;
  }
}

TEST_F(TreeCli, BenchWithTreesIsLossless) {
  const auto out = dir_ / "bench.json";
  const CommandResult r =
      run(fmt::format("bench --model {} --prompt-len 8 --gen 16 --spec layer-skip "
                      "--skip-uniform 0.3 --tree 0.6:4,1:2 --out {}",
                      model_.string(), out.string()),
          0, 240);
  // bench fails (exit 1) when greedy speculative output differs from autoregressive output.
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bench = nlohmann::json::parse(read_file(out)).dump();
  EXPECT_THAT(bench, ::testing::HasSubstr("\"alternatives\""));
  EXPECT_THAT(bench, ::testing::HasSubstr("\"tree\":\"0.6:4,1:2\""));
}

TEST_F(TreeCli, BadWidthsAndMisplacedOptionsAreRefusedNamingTheOption) {
  const std::string spec = "--spec layer-skip --skip-uniform 0.3 ";
  expect_error(run(generate(spec + "--tree wide")), "--tree: 'wide' is not a bin");
  expect_error(run(generate(spec + "--tree 0.5:3")), "--tree: the last bin must end at 1");
  expect_error(run(generate(spec + "--tree 0.8:3,0.5:2,1:1")), "does not raise the upper bound");
  expect_error(run(generate(spec + "--tree 0.5:0,1:1")), "a width >= 1");
  expect_error(run(generate(spec + "--tree swift --tree-max-nodes 0")), "--tree-max-nodes");
  expect_error(run(generate(spec + "--tree swift --tree-max-nodes 64")), "--tree-max-nodes");
  expect_error(run(generate("--tree swift")), "need self-speculative decoding");
}

}  // namespace
}  // namespace selfspec::testing
