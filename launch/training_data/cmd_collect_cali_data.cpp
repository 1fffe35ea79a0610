// `selfspec collect-cali-data`: training data for Cali-TS's acceptance predictor (EESD §3.3,
// eq. 5; App. B), recorded by rank 0 while the model drafts with its early-exit head.
//
//   selfspec collect-cali-data --model M --exit-head H --prompts-file CALIB.jsonl --out DIR
//       [--generate 128] [--max-draft 10] [--chat] [--json]
//
// Steps: read the calibration prompts (the evaluation split is refused: the predictor is tuning),
// load the model and attach the exit head, then per prompt generate --generate tokens greedily by
// self-speculative decoding with the early-exit drafter and a fixed draft length K = --max-draft
// (every round drafts K tokens, so every draft step 1..K is seen), while a CaliDataRecorder
// (launch/training_data/cali_data.hpp) keeps one row per drafted token up to each round's first
// rejection. Rank 0 writes shards of about --shard-rows rows and DIR/manifest.json (format
// "selfspec-cali-data"); every rank runs the same forwards. The output equals plain decoding
// (lossless): only the draft lengths are fixed.
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/sha256_digest.hpp"
#include "core/text_file_output.hpp"
#include "decode/decoder.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/prompt_suite.hpp"
#include "launch/speculative_cli.hpp"
#include "launch/suite_prompts.hpp"
#include "launch/training_data/cali_data.hpp"
#include "model/exit_head.hpp"
#include "speculative/speculative_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <memory>

namespace selfspec::launch {
namespace {

// The predictor's step matrices W^1..W^S: EESD bounds i by 10 (§3.3).
constexpr int kPredictorSteps = 10;

struct CollectCaliDataOptions {
  EngineCliOptions engine;
  std::vector<std::string> prompts_files;
  PromptSelection selection{"calibration", {}, 0};
  ChatCli chat;
  std::string exit_head;
  std::int64_t generate = 128;
  int max_draft = kPredictorSteps;
  std::int64_t shard_rows = 8192;
  std::string out;
  bool json = false;
};

struct Collection {
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  std::int64_t rows = 0;
  std::int64_t accepted_rows = 0;
  std::int64_t rounds = 0;
  std::int64_t tokens = 0;
  double seconds = 0.0;
};

// Root: writes the pending rows as the next shard.
void flush_shard(const std::filesystem::path& dir, CaliRows& pending, Collection& collection) {
  if (pending.rows() == 0) return;
  const std::string file = fmt::format("shard-{:05}.safetensors", collection.shards.size());
  write_cali_shard(pending, dir / file);
  collection.shards.push_back({{"file", file}, {"rows", pending.rows()}});
  collection.rows += pending.rows();
  collection.accepted_rows += pending.accepted_rows();
  log::info("collect-cali-data: {} ({} rows); {} rows so far", file, pending.rows(),
            collection.rows);
  pending.clear();
}

GenerationOptions generation_options(const CollectCaliDataOptions& o, const Engine& engine) {
  GenerationOptions generation;
  generation.max_new_tokens = o.generate;
  generation.eos_ids = engine.eos_ids();
  generation.logits = LogitsMode::kLocal;
  return generation;
}

Collection collect(Engine& engine, const CollectCaliDataOptions& o, const SpeculativeSetup& setup,
                   const std::vector<std::vector<std::int32_t>>& prompts) {
  const bool root = engine.comm().is_root();
  CaliRows pending;
  pending.hidden_size = engine.config().hidden_size;
  Collection collection;
  const GenerationOptions generation = generation_options(o, engine);
  const auto start = std::chrono::steady_clock::now();
  log::Progress progress("collecting cali data (prompts)",
                         static_cast<std::int64_t>(prompts.size()));
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const std::unique_ptr<Drafter> drafter = setup.make_drafter(0);
    CaliDataRecorder recorder(setup.make_controller("fixed", 0), pending);
    recorder.set_sequence(static_cast<std::int64_t>(p));
    KvCache kv =
        engine.model().make_kv_cache(static_cast<std::int64_t>(prompts[p].size()) + o.generate);
    const GenerationResult result = Decoder(engine.model(), engine.comm(), *drafter, recorder)
                                        .generate(prompts[p], generation, kv);
    collection.rounds += recorder.rounds();
    collection.tokens += static_cast<std::int64_t>(result.tokens.size());
    progress.update(static_cast<std::int64_t>(p) + 1);
    if (root && pending.rows() >= o.shard_rows) flush_shard(o.out, pending, collection);
  }
  progress.finish();
  if (root) flush_shard(o.out, pending, collection);
  collection.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return collection;
}

nlohmann::ordered_json manifest_json(const CollectCaliDataOptions& o, const Engine& engine,
                                     int exit_layer, const Collection& c, std::size_t prompts) {
  return {{"format", kCaliDataFormat},
          {"version", kCaliDataVersion},
          {"model_identity", engine.model_identity()},
          {"model", o.engine.model_name()},
          {"exit_layer", exit_layer},
          {"exit_head", o.exit_head},
          {"hidden_size", engine.config().hidden_size},
          {"steps", kPredictorSteps},
          {"max_draft", o.max_draft},
          {"generate", o.generate},
          {"chat", o.chat.chat},
          {"prompts", prompts},
          {"prompts_file", fmt::format("{}", fmt::join(o.prompts_files, ","))},
          {"prompts_sha256", sha256_of_files(o.prompts_files)},
          {"split", o.selection.split},
          {"tp", engine.shard().tp},
          {"rows", c.rows},
          {"accepted_rows", c.accepted_rows},
          {"rounds", c.rounds},
          {"generated_tokens", c.tokens},
          {"seconds", c.seconds},
          {"shards", c.shards},
          {"complete", true}};
}

int run_collect_cali_data(const CollectCaliDataOptions& o) {
  return run_job(o.engine.threads, [&](Job& job) {
    Engine engine(o.engine.engine_options(), job.comm());
    SELFSPEC_CHECK(o.selection.split == "calibration",
                   "--split {}: collect-cali-data trains a predictor, so it reads calibration "
                   "prompts only (evaluation prompts are kept for reports)",
                   o.selection.split);
    const std::filesystem::path dir(o.out);
    SELFSPEC_CHECK(!std::filesystem::exists(dir / "manifest.json"),
                   "{} exists: remove it or choose another --out",
                   (dir / "manifest.json").string());
    const std::vector<SuitePrompt> suite =
        select_prompts(read_prompt_suite(o.prompts_files), o.selection);
    const auto prompts = tokenize_suite(engine, o.chat, suite, o.generate, "--generate");
    // Early-exit drafting of K = --max-draft tokens every round (the fixed controller).
    const auto setup =
        std::make_unique<SpeculativeSetup>(speculative_config({{"spec", "early-exit"},
                                                               {"exit-head", o.exit_head},
                                                               {"controller", "fixed"},
                                                               {"max-draft", o.max_draft}}),
                                           engine);
    engine.load();
    setup->attach(engine);
    const int exit_layer = setup->kind().exit_layer();
    if (job.is_root()) std::filesystem::create_directories(dir);
    const Collection collection = collect(engine, o, *setup, prompts);
    if (!job.is_root()) return 0;
    const nlohmann::ordered_json manifest =
        manifest_json(o, engine, exit_layer, collection, prompts.size());
    write_text_file_atomically(dir / "manifest.json", manifest.dump(2) + "\n", "manifest");
    nlohmann::ordered_json summary = manifest;
    summary.erase("shards");
    summary["out"] = o.out;
    if (o.json) {
      print_json_line(summary);
    } else {
      fmt::print(
          "collect-cali-data: {} prompts, {} generated tokens, {} rounds, {} rows ({} accepted) "
          "in {} shards, {:.1f} s; exit layer {}, K {}; {}\n",
          prompts.size(), collection.tokens, collection.rounds, collection.rows,
          collection.accepted_rows, collection.shards.size(), collection.seconds, exit_layer,
          o.max_draft, o.out);
    }
    return 0;
  });
}

}  // namespace

void add_collect_cali_data_command(CLI::App& app, CommandBody& run) {
  auto o = std::make_shared<CollectCaliDataOptions>();
  CLI::App* command = app.add_subcommand(
      "collect-cali-data",
      "collect training data for Cali-TS's acceptance predictor (EESD): per drafted token of "
      "early-exit drafting, the target's and the draft's final hidden states and whether it was "
      "accepted");
  o->engine.add_to(*command);
  add_prompt_selection_options(*command, o->prompts_files, o->selection,
                               "prompts to collect on: calibration (evaluation prompts are "
                               "refused)");
  o->chat.add_to(*command, "each prompt");
  command->add_option("--exit-head", o->exit_head, "the early-exit head file to draft with")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--generate", o->generate, "tokens generated (greedily) after each prompt")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_max_draft_option(*command, o->max_draft)
      ->description("K: every round drafts K tokens (fixed), so draft steps 1..K are recorded")
      ->capture_default_str();
  command->add_option("--shard-rows", o->shard_rows, "rows per shard file (whole prompts)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--out", o->out, "the data directory (manifest.json and shards)")->required();
  add_json_flag(*command, o->json, "the summary");
  command->callback([o, &run] { run = [o] { return run_collect_cali_data(*o); }; });
}

}  // namespace selfspec::launch
