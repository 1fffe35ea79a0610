// `selfspec search-skips` as a user runs it, on tiny random checkpoints with the GPT-2-style
// tokenizer fixture:
//  * a search writes a skip-set file that generate loads, a JSONL log with one line per
//    evaluation, a state file, and a summary whose winner is the best logged evaluation, measured
//    token-identical against plain decoding;
//  * a search killed with SIGKILL and resumed ends with exactly the evaluations and the skip set of
//    an uninterrupted search (both on the same cost table);
//  * under mpirun -np 2 the search evaluates the same masks to the same acceptance as on one rank;
//  * errors: the evaluation split, an existing state without --resume, --resume with other
//    settings, a malformed cost table.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <csignal>
#include <fstream>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

class SearchSkips : public Cli {
 protected:
  void SetUp() override {
    tokenizer_ = kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json";
    suite_ = dir_ / "suite.jsonl";
    std::ofstream suite(suite_);
    const auto add = [&](const std::string& id, const std::string& split, const std::string& p) {
      suite << nlohmann::json{{"id", id}, {"task", "chat"}, {"split", split}, {"prompt", p}}.dump()
            << "\n";
    };
    add("a", "calibration", "Hello! How are you today?");
    add("b", "calibration", "Tell me about the weather in spring.");
    add("c", "evaluation", "Can you suggest a name for my cat?");
  }

  // make_model's geometry with vocab 1210 (the tokenizer fixture's 1205 ids), `layers` layers.
  std::filesystem::path model(int layers, int hidden = 64) {
    const auto path = dir_ / fmt::format("m{}x{}", layers, hidden);
    if (std::filesystem::exists(path)) return path;
    const CommandResult made = run(fmt::format(
        "make-model --out {} --layers {} --hidden {} --heads 8 --kv-heads 2 --intermediate {} "
        "--vocab 1210 --seed 11",
        path.string(), layers, hidden, hidden * 3 / 2));
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return path;
  }

  std::string search(const std::filesystem::path& m, const std::filesystem::path& out,
                     const std::string& extra) {
    return fmt::format(
        "search-skips --model {} --tokenizer {} --prompts-file {} --out {} --threads 1 "
        "--cost-rounds 1 {}",
        m.string(), tokenizer_.string(), suite_.string(), out.string(), extra);
  }

  static nlohmann::json read_json(const std::filesystem::path& path) {
    return nlohmann::json::parse(read_file(path));
  }

  // make-model's planted-redundancy preset at 8 layers (vocabulary for the tokenizer fixture):
  // round(0.6 × 16) sublayers, never of the first or last layer, scaled down to near-identities.
  // Returns make-model's JSON, which lists them.
  nlohmann::json make_planted_model(const std::filesystem::path& path) {
    const CommandResult made = run(fmt::format(
        "make-model --out {} --preset planted-redundancy --layers 8 --hidden 64 --heads 4 "
        "--kv-heads 2 --intermediate 128 --vocab 1210 --json",
        path.string()));
    EXPECT_EQ(made.exit_code, 0) << made.err;
    return made.exit_code == 0 ? made.json() : nlohmann::json();
  }

  // How many of the skipped layers (`attention`, `mlp`) are planted-redundant ones.
  static std::size_t planted_found(const nlohmann::json& attention, const nlohmann::json& mlp,
                                   const nlohmann::json& planted) {
    std::size_t found = 0;
    for (const auto& l : attention) {
      for (const auto& p : planted["redundant_attention"]) found += l == p ? 1 : 0;
    }
    for (const auto& l : mlp) {
      for (const auto& p : planted["redundant_mlp"]) found += l == p ? 1 : 0;
    }
    return found;
  }

  // The evaluations of a state file without their wall times.
  static nlohmann::json evaluations(const std::filesystem::path& state) {
    nlohmann::json e = read_json(state)["evaluations"];
    for (auto& record : e) record.erase("seconds");
    return e;
  }

  std::filesystem::path tokenizer_;
  std::filesystem::path suite_;
};

TEST_F(SearchSkips, WritesALoadableSkipSetALogAndAMeasuredSummary) {
  const auto out = dir_ / "skips.json";
  const CommandResult r = run(search(model(6), out, "--budget 14 --tokens 12 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("search 14/14"));
  EXPECT_THAT(r.err, HasSubstr("cost table: full forward"));
  const nlohmann::json summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["evaluations"], 14);
  EXPECT_TRUE(summary["measured"]["lossless"].get<bool>());
  EXPECT_GT(summary["measured"]["ar_tokens_per_s"].get<double>(), 0.0);

  // The log: one record per evaluation, and the winner is the best of them.
  std::ifstream log(dir_ / "skips.jsonl");
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(log, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 14u);
  double best = -1;
  for (const auto& record : records) best = std::max(best, record["objective"].get<double>());
  EXPECT_DOUBLE_EQ(summary["best"]["objective"].get<double>(), best);
  EXPECT_EQ(records[0]["phase"], "initial");
  EXPECT_EQ(records.back()["phase"], "bo");

  // The skip-set file names the winner's layers and drives generate losslessly.
  const nlohmann::json skips = read_json(out);
  EXPECT_EQ(skips["attention"], summary["best"]["attention"]);
  EXPECT_EQ(skips["mlp"], summary["best"]["mlp"]);
  EXPECT_EQ(skips["num_layers"], 6);
  const std::string generate = fmt::format(
      "generate --model {} --tokenizer {} --prompt 'Hello there' --max-new-tokens 16 "
      "--ignore-eos --json",
      model(6).string(), tokenizer_.string());
  const CommandResult plain = run(generate);
  const CommandResult spec = run(generate + " --spec layer-skip --skip-config " + out.string());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(nlohmann::json::parse(spec.out)["tokens"], nlohmann::json::parse(plain.out)["tokens"]);
}

// With --draft-vocab the search scores drafts with the pruned head and its lower cost, and the
// skip-set file carries the kept ids, which generate then uses (losslessly).
TEST_F(SearchSkips, SearchesWithAPrunedDraftVocabulary) {
  const auto m = model(6);
  const auto vocab = dir_ / "vocab.json";
  const CommandResult counted =
      run(fmt::format("count-vocab --model {} --tokenizer {} --prompts-file {} --generate 16 "
                      "--threads 1 --out {}",
                      m.string(), tokenizer_.string(), suite_.string(), vocab.string()));
  ASSERT_EQ(counted.exit_code, 0) << counted.err;
  const auto full = dir_ / "full.json";
  ASSERT_EQ(run(search(m, full, "--budget 6 --tokens 12 --no-measure")).exit_code, 0);
  const auto table = dir_ / "cost.json";
  // The measured LM head of this tiny model (1210 × 64) takes microseconds, within timing noise,
  // and the table clamps it at 0 when the head-less forward happens to time slower; give it a
  // quarter of a full forward so that the pruned head's saving is certain to show.
  nlohmann::json cost_table = read_json(dir_ / "full.state.json")["cost_table"];
  double full_s = cost_table["fixed_s"].get<double>();
  for (const char* part : {"attention_s", "mlp_s"}) {
    for (const auto& s : cost_table[part]) full_s += s.get<double>();
  }
  cost_table["head_s"] = std::max(cost_table["head_s"].get<double>(), 0.25 * full_s);
  std::ofstream(table) << cost_table.dump();
  const auto pruned = dir_ / "pruned.json";
  const CommandResult r = run(search(
      m, pruned,
      fmt::format("--budget 6 --tokens 12 --cost-table {} --draft-vocab {} --draft-vocab-size 300 "
                  "--json",
                  table.string(), vocab.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["measured"]["lossless"].get<bool>());
  // Same masks in the same order (the first proposals do not depend on the objective), each
  // cheaper with the pruned head.
  const nlohmann::json a = evaluations(dir_ / "full.state.json");
  const nlohmann::json b = evaluations(dir_ / "pruned.state.json");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a[i]["mask"], b[i]["mask"]) << i;
    EXPECT_LT(b[i]["cost"].get<double>(), a[i]["cost"].get<double>()) << i;
  }
  const nlohmann::json skips = read_json(pruned);
  ASSERT_TRUE(skips.contains("draft_vocab"));
  EXPECT_GE(skips["draft_vocab"].size(), 300u);
  EXPECT_LE(skips["draft_vocab"].size(), 301u);  // + EOS when it is not among the 300
  const std::string generate = fmt::format(
      "generate --model {} --tokenizer {} --prompt 'Hello there' --max-new-tokens 16 "
      "--ignore-eos --json",
      m.string(), tokenizer_.string());
  const CommandResult plain = run(generate);
  const CommandResult spec = run(generate + " --spec layer-skip --skip-config " + pruned.string());
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.json()["tokens"], plain.json()["tokens"]);
  EXPECT_EQ(spec.json()["spec"]["draft_vocab"], skips["draft_vocab"].size());
  expect_error(run(search(m, dir_ / "x.json", "--budget 2 --draft-vocab " + vocab.string())),
               "--draft-vocab-size");
}

TEST_F(SearchSkips, AKilledSearchResumesToTheUninterruptedResult) {
  // A model big enough that 40 evaluations take a few seconds, so the kill lands mid-search.
  const auto m = model(8, 256);
  const auto whole = dir_ / "whole.json";
  const CommandResult first = run(search(m, whole, "--budget 40 --tokens 48 --no-measure"), 0, 300);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // Both runs use the first run's cost table: timings differ between runs, the search must not.
  const auto table = dir_ / "cost.json";
  std::ofstream(table) << read_json(dir_ / "whole.state.json")["cost_table"].dump();

  const auto killed = dir_ / "killed.json";
  const std::string args =
      search(m, killed, "--budget 40 --tokens 48 --no-measure --cost-table " + table.string());
  {
    BackgroundCommand job(fmt::format("{} {}", SELFSPEC_BINARY, args), dir_.path());
    const auto state = dir_ / "killed.state.json";
    const bool midway = job.wait_until(
        [&] {
          if (!std::filesystem::exists(state)) return false;
          try {
            return read_json(state)["evaluations"].size() >= 5;
          } catch (const std::exception&) {
            return false;
          }
        },
        120);
    ASSERT_TRUE(midway) << job.err();
    job.signal(SIGKILL);
    EXPECT_EQ(job.wait_exit(30), 128 + SIGKILL) << "the search ended before it was killed";
  }
  const std::size_t done = read_json(dir_ / "killed.state.json")["evaluations"].size();
  EXPECT_LT(done, 40u);
  const CommandResult resumed = run(args + " --resume --json", 0, 300);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(resumed.out)["resumed_from"], done);
  const nlohmann::json a = evaluations(dir_ / "whole.state.json");
  const nlohmann::json b = evaluations(dir_ / "killed.state.json");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    // α, the mask and the phase are the search's own; c, the objective and γ come from the table,
    // which is the same.
    EXPECT_EQ(a[i], b[i]) << "evaluation " << i;
  }
  const nlohmann::json wa = read_json(whole), wb = read_json(killed);
  EXPECT_EQ(wa["attention"], wb["attention"]);
  EXPECT_EQ(wa["mlp"], wb["mlp"]);
}

TEST_F(SearchSkips, FindsThePlantedRedundantSublayers) {
  // With the skip count pinned to the planted sublayers' count, the search must find a set that
  // drafts about as well as the planted one; random sets of that size do not.
  const auto m = dir_ / "planted";
  const nlohmann::json planted = make_planted_model(m);
  ASSERT_FALSE(planted.is_null());
  const std::size_t n = planted["redundant_attention"].size() + planted["redundant_mlp"].size();
  const double ratio = static_cast<double>(n) / 12.0;  // of the 2 × 6 interior sublayers
  const auto out = dir_ / "found.json";
  const CommandResult r =
      run(search(m, out,
                 fmt::format("--budget 40 --tokens 16 --min-skip-ratio {0} --max-skip-ratio "
                             "{0} --no-measure --json",
                             ratio)),
          0, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json best = nlohmann::json::parse(r.out)["best"];
  EXPECT_EQ(best["skipped"], n);
  EXPECT_GE(best["alpha"].get<double>(), 0.8) << best.dump();
  const std::size_t found = planted_found(best["attention"], best["mlp"], planted);
  EXPECT_GE(found + 1, n) << "found " << found << " of the " << n
                          << " planted sublayers: " << best.dump() << " vs " << planted.dump();
}

TEST_F(SearchSkips, TwoRanksEvaluateLikeOne) {
  SELFSPEC_SKIP_WITHOUT_MPI();
  const auto m = model(6);
  const auto one = dir_ / "one.json";
  ASSERT_EQ(run(search(m, one, "--budget 10 --tokens 12 --no-measure")).exit_code, 0);
  const auto table = dir_ / "cost.json";
  std::ofstream(table) << read_json(dir_ / "one.state.json")["cost_table"].dump();
  const auto one_b = dir_ / "one_b.json";
  ASSERT_EQ(
      run(search(m, one_b, "--budget 10 --tokens 12 --cost-table " + table.string())).exit_code, 0);
  const auto two = dir_ / "two.json";
  const CommandResult r =
      run(search(m, two, "--budget 10 --tokens 12 --cost-table " + table.string()), 2, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json a = evaluations(dir_ / "one_b.state.json");
  nlohmann::json b = evaluations(dir_ / "two.state.json");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["mask"], b[i]["mask"]) << i;
    EXPECT_EQ(a[i]["matches"], b[i]["matches"]) << i;
  }
}

// --spec swift (SWIFT's on-the-fly search) through generate: token-identical to plain decoding at
// TP 1 and under mpirun -np 2 with --debug-sync, the same search on both, and on the
// planted-redundancy model it settles on sets that draft well.
TEST_F(SearchSkips, SwiftSearchesOnTheFlyLosslesslyAtEveryTp) {
  const auto m = dir_ / "planted";
  const nlohmann::json planted = make_planted_model(m);
  ASSERT_FALSE(planted.is_null());
  const std::string generate = fmt::format(
      "generate --model {} --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 96 --ignore-eos --json",
      m.string());
  const CommandResult plain = run(generate);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const std::string swift =
      generate + " --spec swift --swift-ratio 0.625 --swift-window 16 --swift-bayes-every 4";
  const CommandResult one = run(swift);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.json()["tokens"], plain.json()["tokens"]);
  const nlohmann::json state = one.json()["spec"]["drafter_state"];
  // r = 0.625 skips 10 of the 16 sublayers: as many as were planted weak, so the search has to
  // find (nearly) exactly those.
  EXPECT_GE(state["best_matchness"].get<double>(), 0.9) << state.dump();
  const std::size_t found = planted_found(state["best_attention"], state["best_mlp"], planted);
  EXPECT_GE(found, 9u) << state.dump() << " vs " << planted.dump();
  EXPECT_GT(one.json()["acceptance_rate"].get<double>(), 0.5);
  expect_error(run(generate + " --spec swift --skip-uniform 0.2"), "--spec swift chooses");
  expect_error(run(generate + " --spec layer-skip --skip-uniform 0.2 --swift-ratio 0.3"),
               "the --swift-... options need --spec swift");
  expect_error(run(generate + " --spec swift --swift-ratio 1.5"), "--swift-ratio");
  SELFSPEC_SKIP_WITHOUT_MPI();
  const CommandResult two = run(swift + " --debug-sync", 2, 300);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.json()["tokens"], plain.json()["tokens"]);
  EXPECT_EQ(two.json()["spec"]["drafter_state"]["best_attention"], state["best_attention"]);
  EXPECT_EQ(two.json()["spec"]["drafter_state"]["best_mlp"], state["best_mlp"]);
}

TEST_F(SearchSkips, RefusesTheEvaluationSplitAndMismatchedStates) {
  const auto m = model(6);
  const auto out = dir_ / "s.json";
  expect_error(run(search(m, out, "--split evaluation --budget 3")),
               "search-skips tunes a skip set, so it reads calibration prompts only");
  ASSERT_EQ(run(search(m, out, "--budget 3 --tokens 8 --no-measure")).exit_code, 0);
  expect_error(run(search(m, out, "--budget 3 --tokens 8")), "pass --resume");
  expect_error(run(search(m, out, "--budget 5 --tokens 9 --resume")), "settings differ");
  const auto bad = dir_ / "bad_cost.json";
  std::ofstream(bad) << R"({"num_layers": 6, "fixed_s": 1.0})";
  expect_error(run(search(m, dir_ / "t.json", "--budget 3 --cost-table " + bad.string())),
               "bad_cost.json: cost table key 'attention_s'");
}

}  // namespace
}  // namespace selfspec::testing
