// --lookup N through the binary (lookup drafts: copied text, no draft forward), on a bf16 model
// make-model writes: greedy output equals plain decoding at TP 1 and TP 2, alone (--spec lookup:
// plain steps where nothing matches), over a skip set and over a --draft-weights copy, drafting
// their rounds alone or grafted onto the skip draft (--lookup-tree, --lookup-min-reach), and the
// JSON reports the lookup rounds; it samples too (the chi-square test of decode_test checks the
// distribution); a lookup shorter than its minimum, --lookup without --spec, --spec lookup
// without --lookup and --lookup-tree over --spec lookup are refused by name.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

class LookupCli : public Cli {
 protected:
  std::filesystem::path make_model() {
    const auto path = dir_ / "bf16";
    const CommandResult r = run(fmt::format(
        "make-model --out {} --layers 3 --hidden 256 --heads 8 --kv-heads 2 --intermediate 1280 "
        "--vocab 512 --seed 11 --dtype bf16",
        path.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }
  // A prompt that repeats itself, so that lookups find matches from the first round.
  nlohmann::json generate(const std::filesystem::path& model, int ranks, const std::string& extra) {
    const CommandResult r =
        run(fmt::format("generate --model {} --prompt-ids 1,17,4,200,33,9,17,4,200,33,9,17,4 "
                        "--max-new-tokens 32 --ignore-eos --json {}",
                        model.string(), extra),
            ranks);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? r.json() : nlohmann::json();
  }
};

TEST_F(LookupCli, GreedyOutputEqualsPlainAtTp1AndTp2) {
  const auto model = make_model();
  const std::vector<std::string> specs = {
      "--spec lookup --lookup 3",
      "--spec layer-skip --skip-attn 1 --skip-mlp 2 --lookup 3 --max-draft 4",
      "--spec layer-skip --skip-uniform 0 --draft-weights q4_0 --lookup 4 --lookup-min-ngram 1 "
      "--lookup-max-draft 6 --max-draft 6 --tree 1:2",
      "--spec layer-skip --skip-attn 1 --skip-mlp 2 --lookup 3 --max-draft 2 --lookup-tree",
      "--spec layer-skip --skip-uniform 0 --lookup 3 --lookup-min-ngram 1 --max-draft 3 "
      "--tree 1:2 --lookup-tree --lookup-min-reach 0.2"};
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const nlohmann::json plain = generate(model, ranks, "");
    ASSERT_FALSE(plain.is_null());
    for (const std::string& spec : specs) {
      const nlohmann::json j = generate(model, ranks, spec);
      ASSERT_FALSE(j.is_null());
      EXPECT_EQ(j["tokens"], plain["tokens"]) << "np " << ranks << ": " << spec;
      EXPECT_GT(j["spec"]["drafter_state"]["lookup"]["rounds"].get<int>(), 0) << spec;
      EXPECT_EQ(j["spec"]["lookup"]["max_ngram"].get<int>() > 0, true);
      const bool tree = spec.find("--lookup-tree") != std::string::npos;
      EXPECT_EQ(j["spec"]["lookup"]["tree"].get<bool>(), tree) << spec;
      EXPECT_EQ(j["spec"]["drafter_state"]["lookup"]["tree_rounds"].get<int>() > 0, tree) << spec;
    }
  }
}

TEST_F(LookupCli, SamplingWithLookupsRunsOnEveryRank) {
  const auto model = make_model();
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const nlohmann::json j = generate(
        model, ranks, "--spec lookup --lookup 3 --lookup-min-ngram 1 --temperature 0.8 --seed 3");
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["tokens"].size(), 32U);
    EXPECT_GT(j["spec"]["drafter_state"]["lookup"]["rounds"].get<int>(), 0);
  }
}

TEST_F(LookupCli, BadCombinationsAreRefusedByName) {
  const auto model = make_model();
  const std::string base =
      fmt::format("generate --model {} --prompt-ids 1,2,1,2 --max-new-tokens 4 ", model.string());
  const CommandResult shorter =
      run(base + "--spec layer-skip --skip-attn 1 --lookup 2 --lookup-min-ngram 3");
  EXPECT_NE(shorter.exit_code, 0);
  EXPECT_THAT(shorter.err, HasSubstr("--lookup-min-ngram"));
  const CommandResult no_spec = run(base + "--lookup 3");
  EXPECT_NE(no_spec.exit_code, 0);
  EXPECT_THAT(no_spec.err, HasSubstr("--lookup"));
  const CommandResult no_n = run(base + "--spec lookup");
  EXPECT_NE(no_n.exit_code, 0);
  EXPECT_THAT(no_n.err, HasSubstr("--lookup N"));
  const CommandResult nothing_to_graft_onto = run(base + "--spec lookup --lookup 2 --lookup-tree");
  EXPECT_NE(nothing_to_graft_onto.exit_code, 0);
  EXPECT_THAT(nothing_to_graft_onto.err, HasSubstr("--lookup-tree"));
}

}  // namespace
}  // namespace selfspec::testing
