// `selfspec bench-serving` as a user runs it, on a tiny random checkpoint: a record per round ×
// concurrency × mode with the documented figures and per-request records, summaries with the
// speedup over plain decoding; greedy requests get the same tokens in every mode, at every
// concurrency and at TP 1 and 2 (and sampled ones their own reproducible stream); Poisson arrivals
// are recorded and paced; bad options and a request that cannot fit are refused with one clear
// line.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

class BenchServing : public Cli {
 protected:
  void SetUp() override { model_ = make_model("m"); }

  std::string serving(const std::string& extra) const {
    return fmt::format(
        "bench-serving --model {} --prompt-len 6 --prompts 4 --gen 8 --spec layer-skip "
        "--skip-uniform 0.3 {}",
        model_.string(), extra);
  }

  // Every request's tokens by (mode, concurrency, round), from a --json-tokens result.
  using Tokens = std::map<std::int64_t, nlohmann::json>;
  static std::map<std::string, Tokens> tokens_by_run(const nlohmann::json& j) {
    std::map<std::string, Tokens> out;
    for (const auto& run : j["runs"]) {
      const std::string key = fmt::format("{} B{} round {}", run["mode"].get<std::string>(),
                                          run["concurrency"].get<int>(), run["round"].get<int>());
      for (const auto& request : run["requests"]) {
        out[key][request["request"].get<std::int64_t>()] = request["tokens"];
      }
    }
    return out;
  }

  std::filesystem::path model_;
};

TEST_F(BenchServing, RecordsEveryRunWithItsFiguresAndRequests) {
  const auto out = dir_ / "serving.json";
  const auto jsonl = dir_ / "serving.jsonl";
  const CommandResult r = run(serving(fmt::format(
      "--concurrency 1,3 --modes plain,fixed,goodput --requests 5 --json --out {} --out-jsonl {}",
      out.string(), jsonl.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["command"], "bench-serving");
  EXPECT_EQ(j["model"], model_.string());
  EXPECT_EQ(j["tp"], 1);
  EXPECT_EQ(j["spec"]["drafter"], "layer-skip");
  EXPECT_EQ(j["concurrency"], (nlohmann::json{1, 3}));
  EXPECT_EQ(j["modes"], (nlohmann::json{"plain", "fixed", "goodput"}));
  EXPECT_EQ(j["requests"], 5);
  EXPECT_EQ(j["prompts"], 4);
  EXPECT_EQ(j["arrivals_s"], (nlohmann::json{0.0, 0.0, 0.0, 0.0, 0.0}));
  EXPECT_FALSE(j["interrupted"].get<bool>());
  ASSERT_EQ(j["runs"].size(), 6u) << "2 concurrencies x 3 modes, one round";
  EXPECT_EQ(j["completed_runs"], 6);
  const std::vector<std::string> figures = {"wall_s",
                                            "generated_tokens",
                                            "tokens_per_s",
                                            "mean_request_tokens_per_s",
                                            "ttft_s",
                                            "itl_s",
                                            "e2e_s",
                                            "mean_acceptance_rate",
                                            "mean_accepted_length",
                                            "batch",
                                            "speedup_vs_plain"};
  for (const auto& run : j["runs"]) {
    const std::string label = run["mode"].get<std::string>() + " B" + run["concurrency"].dump();
    for (const std::string& key : figures) EXPECT_TRUE(run.contains(key)) << label << " " << key;
    EXPECT_EQ(run["generated_tokens"], 40) << "random prompts run to --gen";
    EXPECT_GT(run["tokens_per_s"].get<double>(), 0.0) << label;
    EXPECT_LE(run["ttft_s"]["p50"].get<double>(), run["ttft_s"]["p99"].get<double>()) << label;
    EXPECT_EQ(run["itl_s"]["count"], 5 * 7) << label;
    for (const char* key : {"passes", "draft_passes", "tokens", "max_sequences"}) {
      EXPECT_TRUE(run["batch"].contains(key)) << key;
    }
    const int concurrency = run["concurrency"].get<int>();
    EXPECT_LE(run["batch"]["max_sequences"].get<int>(), concurrency) << label;
    if (concurrency == 3) {
      EXPECT_GT(run["batch"]["max_sequences"].get<int>(), 1) << label;
    }
    if (run["mode"] == "plain") {
      EXPECT_DOUBLE_EQ(run["speedup_vs_plain"].get<double>(), 1.0);
      EXPECT_EQ(run["batch"]["draft_passes"], 0);
      EXPECT_EQ(run["mean_acceptance_rate"], 0.0);
    } else {
      EXPECT_GT(run["batch"]["draft_passes"].get<int>(), 0) << label;
      EXPECT_GT(run["speedup_vs_plain"].get<double>(), 0.0) << label;
    }
    ASSERT_EQ(run["requests"].size(), 5u);
    for (const auto& request : run["requests"]) {
      for (const char* key :
           {"request", "prompt", "prompt_tokens", "arrival_s", "first_token_s", "end_s", "ttft_s",
            "e2e_s", "tokens_per_s", "acceptance_rate", "mean_accepted_length", "itl_s"}) {
        EXPECT_TRUE(request.contains(key)) << key;
      }
      EXPECT_FALSE(request.contains("tokens")) << "only with --json-tokens";
      EXPECT_EQ(request["generated_tokens"], 8);
      EXPECT_EQ(request["prompt_tokens"], 6);
      EXPECT_EQ(request["prompt"], request["request"].get<int>() % 4) << "prompts are cycled";
      EXPECT_EQ(request["itl_s"].size(), 7u);
      EXPECT_GE(request["ttft_s"].get<double>(), 0.0);
      EXPECT_GE(request["e2e_s"].get<double>(), request["ttft_s"].get<double>());
    }
  }
  ASSERT_EQ(j["summary"].size(), 6u);
  for (const auto& summary : j["summary"]) {
    EXPECT_EQ(summary["rounds"], 1);
    for (const std::string& key : figures) EXPECT_TRUE(summary.contains(key)) << key;
  }
  EXPECT_EQ(nlohmann::json::parse(read_file(out)), j) << "--out writes the same object";
  std::ifstream in(jsonl);
  std::string line;
  std::vector<std::string> records;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line)["record"]);
  EXPECT_EQ(records,
            (std::vector<std::string>{"run", "run", "run", "run", "run", "run", "summary"}));
  // The table (stderr with --json) and the progress lines.
  EXPECT_THAT(r.err, HasSubstr("TTFT p50/p99 ms"));
  EXPECT_THAT(r.err, HasSubstr("round 1/1, concurrency 3, goodput"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("TTFT"))) << "stdout carries the JSON only";
}

TEST_F(BenchServing, GreedyTokensAreTheSameInEveryModeAndAtEveryConcurrency) {
  const CommandResult r = run(
      serving("--concurrency 1,3 --modes plain,fixed,goodput --requests 6 --rounds 2 --max-draft 3 "
              "--json-tokens --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  const std::map<std::string, Tokens> runs = tokens_by_run(j);
  ASSERT_EQ(runs.size(), 12u);
  const Tokens& reference = runs.at("plain B1 round 0");
  ASSERT_EQ(reference.size(), 6u);
  for (const auto& [key, tokens] : runs) {
    EXPECT_EQ(tokens, reference) << key;
  }
  EXPECT_NE(reference.at(0), reference.at(1)) << "different prompts, different tokens";
  double accepted = 0.0;
  for (const auto& run : j["runs"]) {
    if (run["mode"] != "plain") accepted += run["mean_acceptance_rate"].get<double>();
  }
  EXPECT_GT(accepted, 0.0) << "no draft token was ever accepted: verification untested";
}

TEST_F(BenchServing, SampledRequestsDrawTheirOwnReproducibleStreams) {
  const std::string args = serving(
      "--concurrency 1,3 --modes plain,fixed --requests 4 --temperature 0.9 --top-k 20 --seed 5 "
      "--json-tokens --json");
  const CommandResult a = run(args);
  const CommandResult b = run(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const auto runs = tokens_by_run(a.json());
  EXPECT_EQ(runs, tokens_by_run(b.json())) << "same seed, same tokens";
  EXPECT_EQ(runs.at("plain B1 round 0"), runs.at("plain B3 round 0"));
  EXPECT_EQ(runs.at("fixed B1 round 0"), runs.at("fixed B3 round 0"));
  EXPECT_NE(runs.at("plain B1 round 0").at(0), runs.at("plain B1 round 0").at(3))
      << "requests 0 and 3 share a prompt but not a seed";
}

TEST_F(BenchServing, PoissonArrivalsAreRecordedAndPaced) {
  const auto out = dir_ / "serving.json";
  const CommandResult r = run(serving(
      fmt::format("--concurrency 2 --modes plain,fixed --requests 6 --rate 100 --seed 3 --out {}",
                  out.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("TTFT p50/p99 ms")) << "without --json the table is on stdout";
  EXPECT_THAT(r.out, HasSubstr("100 requests/s (Poisson)"));
  const nlohmann::json j = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(j["rate"], 100.0);
  const std::vector<double> arrivals = j["arrivals_s"].get<std::vector<double>>();
  ASSERT_EQ(arrivals.size(), 6u);
  EXPECT_EQ(arrivals[0], 0.0);
  for (std::size_t i = 1; i < arrivals.size(); ++i) EXPECT_GE(arrivals[i], arrivals[i - 1]);
  EXPECT_GT(arrivals.back(), 0.0);
  EXPECT_LT(arrivals.back(), 1.0) << "6 requests at 100/s";
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& run : j["runs"]) {
    EXPECT_GE(run["wall_s"].get<double>(), arrivals.back()) << "the last request waited to arrive";
    for (const auto& request : run["requests"]) {
      const auto index = request["request"].get<std::size_t>();
      EXPECT_EQ(request["arrival_s"].get<double>(), arrivals[index]);
      EXPECT_GE(request["first_token_s"].get<double>(), arrivals[index])
          << "request " << index << " started before it arrived";
    }
  }
  const CommandResult again = run(serving(
      fmt::format("--concurrency 2 --modes plain --requests 6 --rate 100 --seed 3 --json")));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.json()["arrivals_s"], j["arrivals_s"]) << "seeded arrivals";
}

TEST_F(BenchServing, BadOptionsAreRefusedWithOneClearLine) {
  const auto one_line_error = [&](const CommandResult& r, const std::string& message) {
    expect_error(r, message);
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("terminate"))) << "no crash";
    EXPECT_LT(r.exit_code, 128) << "no signal";
  };
  one_line_error(run(serving("--concurrency 1,0")), "--concurrency: 0 slots");
  one_line_error(run(serving("--modes plain,turbo")),
                 "--modes: unknown mode 'turbo' (the modes are plain, fixed, goodput)");
  one_line_error(run(serving("--modes plain,plain")), "--modes: 'plain' is given twice");
  one_line_error(run(serving("--rate -1")), "--rate: -1 requests per second < 0");
  one_line_error(
      run(fmt::format("bench-serving --model {} --prompt-len 6 --gen 4", model_.string())),
      "--modes fixed speculates: give --spec");
  const auto empty = dir_ / "empty.jsonl";
  std::ofstream(empty) << "\n";
  one_line_error(run(fmt::format("bench-serving --model {} --prompts-file {} --modes plain",
                                 model_.string(), empty.string())),
                 empty.string() + ": holds no prompts");
  // A request beyond a sequence's KV slots: SpeculativeBatch names it, before any forward.
  const CommandResult full = run(serving("--capacity 12 --concurrency 2"));
  one_line_error(full,
                 "request 0: its prompt (6 tokens) and max_new_tokens (8) exceed a "
                 "sequence's 12 KV slots");
  EXPECT_EQ(full.exit_code, 1);
}

TEST_F(BenchServing, TensorParallelRunsGiveTheSameTokens) {
  const std::string args =
      serving("--concurrency 1,2 --modes plain,fixed,goodput --requests 4 --json-tokens --json");
  const CommandResult single = run(args);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const auto reference = tokens_by_run(single.json()).at("plain B1 round 0");
  SELFSPEC_SKIP_WITHOUT_MPI();
  const CommandResult two = run(args + " --tp 2", 2);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.json()["tp"], 2);
  const auto runs = tokens_by_run(two.json());
  ASSERT_EQ(runs.size(), 6u);
  for (const auto& [key, tokens] : runs) EXPECT_EQ(tokens, reference) << "TP 2 " << key;
}

}  // namespace
}  // namespace selfspec::testing
