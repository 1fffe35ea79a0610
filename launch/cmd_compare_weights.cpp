// `selfspec compare-weights`: how far a model's outputs move when its weights are held another
// way — a GGUF's quantized tensors run as stored with int8 activations (--weights-dtype native),
// or bf16 with bf16 activations — measured against a reference encoding of the same file
// (--reference-dtype, f32 by default: the file's values exactly). Both copies of the model are
// loaded in one process and fed the same token sequences (teacher forcing), every position at
// once; per source of sequences it reports:
//   top-1 agreement   the share of positions whose argmax is the same;
//   mean / max KL     KL(p_reference || p_candidate) of the next-token distributions, in nats;
//   perplexity        exp(mean NLL of the sequence's actual next tokens), for both.
// Sequences: --ids-json FILE (the committed reference vectors, tests/data/realmodel/*.json: each
// prompt's ids and the greedy continuation HF transformers produced; the positions that predict
// the continuation count), and --text-file FILE (a held-out text, tokenized and cut into windows of
// --window tokens; every position but the first of a window counts). One rank (TP 1).
#include "core/error.hpp"
#include "core/logging.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "model/kv_cache.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace selfspec::launch {
namespace {

struct CompareOptions {
  EngineCliOptions engine;
  std::string reference_dtype = "f32";
  std::vector<std::string> ids_json;
  std::vector<std::string> text_files;
  std::int64_t window = 256;
  std::int64_t max_windows = 8;
  std::string out;
  bool json = false;
};

// A token sequence and the first position whose next-token prediction counts.
struct Sequence {
  std::string name;
  std::vector<std::int32_t> ids;
  std::int64_t first_scored = 0;
};

std::vector<Sequence> sequences_from_ids_json(const std::string& path) {
  std::ifstream in(path);
  SELFSPEC_CHECK(in.good(), "--ids-json: cannot read {}", path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("--ids-json {}: not JSON ({})", path, e.what());
  }
  SELFSPEC_CHECK(doc.contains("prompts") && doc["prompts"].is_array(),
                 "--ids-json {}: expected an object with a 'prompts' array", path);
  std::vector<Sequence> out;
  for (const nlohmann::json& p : doc["prompts"]) {
    SELFSPEC_CHECK(p.contains("prompt_ids") && p.contains("greedy_ids"),
                   "--ids-json {}: a prompt lacks 'prompt_ids' or 'greedy_ids'", path);
    Sequence s;
    s.name = p.value("name", std::string("prompt"));
    s.ids = p["prompt_ids"].get<std::vector<std::int32_t>>();
    s.first_scored = static_cast<std::int64_t>(s.ids.size()) - 1;
    const auto greedy = p["greedy_ids"].get<std::vector<std::int32_t>>();
    s.ids.insert(s.ids.end(), greedy.begin(), greedy.end());
    SELFSPEC_CHECK(s.first_scored >= 0 && greedy.size() >= 1,
                   "--ids-json {}: prompt '{}' has no prompt or no continuation", path, s.name);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sequence> sequences_from_text(const Engine& engine, const std::string& path,
                                          std::int64_t window, std::int64_t max_windows) {
  std::ifstream in(path);
  SELFSPEC_CHECK(in.good(), "--text-file: cannot read {}", path);
  std::stringstream text;
  text << in.rdbuf();
  SELFSPEC_CHECK(engine.tokenizer() != nullptr,
                 "--text-file needs a tokenizer, but {} has none (use --tokenizer FILE)",
                 engine.source().name);
  const std::vector<std::int32_t> ids = engine.tokenizer()->encode(text.str(), false);
  std::vector<Sequence> out;
  for (std::int64_t begin = 0; begin + 2 <= static_cast<std::int64_t>(ids.size()) &&
                               static_cast<std::int64_t>(out.size()) < max_windows;
       begin += window) {
    const std::int64_t end = std::min<std::int64_t>(begin + window, ids.size());
    out.push_back({fmt::format("{}[{}:{}]", path, begin, end),
                   std::vector<std::int32_t>(ids.begin() + begin, ids.begin() + end), 0});
  }
  SELFSPEC_CHECK(!out.empty(), "--text-file {}: fewer than 2 tokens", path);
  return out;
}

// Logits of every position of `ids` [T × vocab] (one forward).
std::vector<float> all_logits(Engine& engine, const std::vector<std::int32_t>& ids) {
  const auto n = static_cast<std::int64_t>(ids.size());
  KvCache kv = engine.model().make_kv_cache(n);
  std::vector<std::int32_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<std::int32_t> rows(ids.size());
  std::iota(rows.begin(), rows.end(), 0);
  ForwardArgs args;
  args.tokens = ids;
  args.positions = positions;
  args.logit_rows = rows;
  std::vector<float> logits;
  engine.model().forward(args, kv, logits);
  return logits;
}

// log-softmax of one row, in double.
std::vector<double> log_softmax(const float* row, std::int64_t vocab) {
  double max = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < vocab; ++i) max = std::max(max, static_cast<double>(row[i]));
  double sum = 0.0;
  for (std::int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  const double log_z = max + std::log(sum);
  std::vector<double> out(static_cast<std::size_t>(vocab));
  for (std::int64_t i = 0; i < vocab; ++i) out[static_cast<std::size_t>(i)] = row[i] - log_z;
  return out;
}

struct Totals {
  std::int64_t positions = 0;
  std::int64_t top1_equal = 0;
  double kl_sum = 0.0;
  double kl_max = 0.0;
  double nll_reference = 0.0;
  double nll_candidate = 0.0;

  nlohmann::json to_json() const {
    const auto n = static_cast<double>(std::max<std::int64_t>(positions, 1));
    return {{"positions", positions},
            {"top1_agreement", static_cast<double>(top1_equal) / n},
            {"kl_mean", kl_sum / n},
            {"kl_max", kl_max},
            {"perplexity_reference", std::exp(nll_reference / n)},
            {"perplexity_candidate", std::exp(nll_candidate / n)}};
  }
};

void score(const Sequence& s, const std::vector<float>& reference,
           const std::vector<float>& candidate, std::int64_t vocab, Totals& totals) {
  for (std::int64_t t = s.first_scored; t + 1 < static_cast<std::int64_t>(s.ids.size()); ++t) {
    const std::vector<double> p = log_softmax(reference.data() + t * vocab, vocab);
    const std::vector<double> q = log_softmax(candidate.data() + t * vocab, vocab);
    double kl = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) kl += std::exp(p[i]) * (p[i] - q[i]);
    const auto argmax = [](const std::vector<double>& v) {
      return std::max_element(v.begin(), v.end()) - v.begin();
    };
    const auto next = static_cast<std::size_t>(s.ids[static_cast<std::size_t>(t + 1)]);
    ++totals.positions;
    totals.top1_equal += argmax(p) == argmax(q) ? 1 : 0;
    totals.kl_sum += kl;
    totals.kl_max = std::max(totals.kl_max, kl);
    totals.nll_reference -= p[next];
    totals.nll_candidate -= q[next];
  }
}

Totals compare_sequences(Engine& reference, Engine& candidate,
                         const std::vector<Sequence>& sequences, const std::string& source) {
  Totals totals;
  const std::int64_t vocab = reference.config().vocab_size;
  log::Progress progress(fmt::format("comparing on {} (sequences)", source),
                         static_cast<std::int64_t>(sequences.size()));
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const Sequence& s = sequences[i];
    reference.check_context(static_cast<std::int64_t>(s.ids.size()), 0);
    score(s, all_logits(reference, s.ids), all_logits(candidate, s.ids), vocab, totals);
    progress.update(static_cast<std::int64_t>(i + 1));
  }
  progress.finish();
  return totals;
}

// "q4_k+q6_k+f32": the formats a loaded engine holds its weights in.
std::string weights_label(Engine& engine) {
  std::vector<std::string> parts;
  for (const auto& [format, bytes] : engine.model().weights().bytes_by_format()) {
    parts.push_back(format);
  }
  return fmt::format("{}", fmt::join(parts, "+"));
}

int run_compare(const CompareOptions& options) {
  return run_job(options.engine.threads, [&](Job& job) {
    SELFSPEC_CHECK(job.comm().size() == 1,
                   "compare-weights runs one rank (it holds two copies of the model); launch it "
                   "without mpirun");
    SELFSPEC_CHECK(!options.ids_json.empty() || !options.text_files.empty(),
                   "compare-weights needs --ids-json or --text-file");
    EngineOptions candidate_options = options.engine.engine_options();
    EngineOptions reference_options = candidate_options;
    reference_options.weights_dtype = parse_weights_dtype(options.reference_dtype);
    reference_options.native_weights_required = false;
    SELFSPEC_CHECK(reference_options.weights_dtype.has_value(),
                   "--reference-dtype must be f32, bf16 or f16 (got '{}')",
                   options.reference_dtype);
    Engine reference(reference_options, job.comm());
    Engine candidate(candidate_options, job.comm());
    std::vector<std::pair<std::string, std::vector<Sequence>>> sources;
    for (const std::string& path : options.ids_json) {
      sources.emplace_back(path, sequences_from_ids_json(path));
    }
    for (const std::string& path : options.text_files) {
      sources.emplace_back(
          path, sequences_from_text(candidate, path, options.window, options.max_windows));
    }
    reference.load();
    candidate.load();
    nlohmann::json out;
    out["model"] = options.engine.model_name();
    out["reference"] = weights_label(reference);
    out["candidate"] = weights_label(candidate);
    out["isa"] = candidate.backend().description().isa;
    out["sources"] = nlohmann::json::array();
    for (const auto& [name, sequences] : sources) {
      const Totals totals = compare_sequences(reference, candidate, sequences, name);
      nlohmann::json entry = totals.to_json();
      entry["source"] = name;
      entry["sequences"] = sequences.size();
      out["sources"].push_back(entry);
      fmt::print(
          "{}: {} positions, top-1 agreement {:.4f}, KL mean {:.5f} max {:.4f} nats, perplexity "
          "{:.3f} ({}) vs {:.3f} ({})\n",
          name, totals.positions, entry["top1_agreement"].get<double>(),
          entry["kl_mean"].get<double>(), totals.kl_max,
          entry["perplexity_reference"].get<double>(), out["reference"].get<std::string>(),
          entry["perplexity_candidate"].get<double>(), out["candidate"].get<std::string>());
    }
    if (!options.out.empty()) {
      std::ofstream file(options.out);
      SELFSPEC_CHECK(file.good(), "--out: cannot write {}", options.out);
      file << out.dump(2) << "\n";
    }
    if (options.json) print_json_line(out);
    return 0;
  });
}

}  // namespace

void add_compare_weights_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* command = app.add_subcommand(
      "compare-weights",
      "how far the outputs move with the weights held another way (--weights-dtype, default: "
      "as stored, a GGUF's quantized tensors natively) against --reference-dtype (f32): top-1 "
      "agreement, KL divergence and perplexity, teacher-forced");
  options->engine.add_to(*command);
  command
      ->add_option("--reference-dtype", options->reference_dtype,
                   "the weights compared against: f32 (the file's values exactly), bf16 or f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  command
      ->add_option("--ids-json", options->ids_json,
                   "reference vectors (tests/data/realmodel/*.json): each prompt's ids and its "
                   "greedy continuation, whose positions are scored")
      ->check(CLI::ExistingFile)
      ->delimiter(',');
  command
      ->add_option("--text-file", options->text_files,
                   "a held-out text, tokenized and cut into windows; every position is scored")
      ->check(CLI::ExistingFile)
      ->delimiter(',');
  command->add_option("--window", options->window, "tokens per window of --text-file")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20))
      ->capture_default_str();
  command->add_option("--max-windows", options->max_windows, "windows of each --text-file")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--out", options->out, "write the results as JSON to this file");
  add_json_flag(*command, options->json, "the summary lines");
  command->callback([options, &run] { run = [options] { return run_compare(*options); }; });
}

}  // namespace selfspec::launch
