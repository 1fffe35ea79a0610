// --draft-weights FORMAT through the binary (the model drafting as itself in fewer bits), on a bf16
// model make-model writes (no download):
//  * greedy self-speculative output equals plain decoding at TP 1 and TP 2, with nothing skipped
//    (--skip-uniform 0) and with a skip set, for q4_0, q8_0 and q4_k, also with a tree and under
//    --reduction tp-invariant (whose plain output is the same at TP 1 and 2);
//  * the JSON names the draft format, and with nothing skipped most drafts are accepted;
//  * the option without --spec, or with an unknown format, is refused with the option's name.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

class DraftWeightsCli : public Cli {
 protected:
  // hidden 256 (one super-block per row), intermediate 1280 (TP 2 gives each rank 640 columns of
  // down_proj), heads 8 / 2 KV, 3 layers, vocab 512, bf16, tied embeddings.
  std::filesystem::path make_bf16_model() {
    const auto path = dir_ / "bf16";
    const CommandResult r = run(fmt::format(
        "make-model --out {} --layers 3 --hidden 256 --heads 8 --kv-heads 2 --intermediate 1280 "
        "--vocab 512 --seed 7 --dtype bf16 --tie-embeddings",
        path.string()));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
  }

  nlohmann::json generate(const std::filesystem::path& model, int ranks, const std::string& extra) {
    const CommandResult r =
        run(fmt::format("generate --model {} --prompt-ids 1,17,4,200,33,9,100 --max-new-tokens 24 "
                        "--ignore-eos --json {}",
                        model.string(), extra),
            ranks);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    return r.json();
  }
  std::vector<std::int32_t> tokens(const std::filesystem::path& model, int ranks,
                                   const std::string& extra) {
    const nlohmann::json j = generate(model, ranks, extra);
    return j.is_null() ? std::vector<std::int32_t>{} : j["tokens"].get<std::vector<std::int32_t>>();
  }
};

TEST_F(DraftWeightsCli, SpeculativeEqualsPlainAtTp1AndTp2) {
  const auto model = make_bf16_model();
  const std::vector<std::string> specs = {
      "--spec layer-skip --skip-uniform 0 --draft-weights q4_0 --max-draft 4",
      "--spec layer-skip --skip-uniform 0 --draft-weights q8_0 --max-draft 4 --tree 1:2",
      "--spec layer-skip --skip-attn 1 --skip-mlp 2 --draft-weights q4_k --max-draft 3"};
  std::vector<std::vector<std::int32_t>> invariant;
  for (const int ranks : {0, 2}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const std::vector<std::int32_t> plain = tokens(model, ranks, "");
    ASSERT_EQ(plain.size(), 24U);
    for (const std::string& spec : specs) {
      EXPECT_EQ(tokens(model, ranks, spec), plain) << "np " << ranks << ": " << spec;
    }
    invariant.push_back(tokens(model, ranks, "--reduction tp-invariant"));
    EXPECT_EQ(tokens(model, ranks, "--reduction tp-invariant " + specs[0]), invariant.back())
        << "np " << ranks << ", tp-invariant";
  }
  if (invariant.size() == 2) {
    EXPECT_EQ(invariant[1], invariant[0]);
  }
}

TEST_F(DraftWeightsCli, TheJsonNamesTheCopyAndItDraftsUsefully) {
  const auto model = make_bf16_model();
  const nlohmann::json j =
      generate(model, 0, "--spec layer-skip --skip-uniform 0 --draft-weights q8_0 --max-draft 4");
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["spec"]["draft_weights"], "q8_0");
  EXPECT_EQ(j["spec"]["skipped_sublayers"], 0);
  EXPECT_GT(j["acceptance_rate"].get<double>(), 0.5);
}

TEST_F(DraftWeightsCli, BadOptionsAreRefusedByName) {
  const auto model = make_bf16_model();
  const CommandResult no_spec = run(
      fmt::format("generate --model {} --prompt-ids 1,2 --max-new-tokens 2 --draft-weights q4_0",
                  model.string()));
  EXPECT_NE(no_spec.exit_code, 0);
  EXPECT_THAT(no_spec.err, HasSubstr("--draft-weights"));
  const CommandResult unknown = run(fmt::format(
      "generate --model {} --prompt-ids 1,2 --max-new-tokens 2 --spec layer-skip --skip-uniform 0 "
      "--draft-weights q3_k",
      model.string()));
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("--draft-weights"));
}

}  // namespace
}  // namespace selfspec::testing
