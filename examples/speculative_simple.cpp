// The library the way llama.cpp's `speculative-simple` uses its own: load a model, set up a
// drafter from a SpeculativeConfig given as JSON, decode a prompt plainly and self-speculatively,
// check that the tokens are the same, and print the statistics. One process, one rank.
//
//   speculative_simple MODEL SETTINGS_JSON [PROMPT] [NEW_TOKENS]
//
//   speculative_simple model.gguf '{"spec": "layer-skip", "draft_weights": "q4_0",
//       "skip_uniform": 0, "controller": "fixed", "max_draft": 5}' "def fib(n):" 64
//
// MODEL is a GGUF file or an HF checkpoint directory; SETTINGS_JSON the settings of
// speculative/speculative_config.hpp (the keys of `selfspec generate`'s options); PROMPT text
// (needs the model's tokenizer) or comma-separated token ids (default "1,2,3"). Exit status 0 when
// the self-speculative tokens equal the plain ones, 1 otherwise or on an error.
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "decode/decoder.hpp"
#include "engine/engine.hpp"
#include "speculative/speculative_setup.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace selfspec;

// Text through the model's tokenizer, or "1,2,3" as ids.
std::vector<std::int32_t> prompt_tokens(const Engine& engine, const std::string& prompt) {
  const bool ids = !prompt.empty() && prompt.find_first_not_of("0123456789,") == std::string::npos;
  if (ids) {
    std::vector<std::int32_t> tokens;
    for (const std::string& item : split_list(prompt)) tokens.push_back(std::stoi(item));
    return tokens;
  }
  SELFSPEC_CHECK(engine.tokenizer() != nullptr, "prompt text needs a tokenizer; give token ids");
  return engine.tokenizer()->encode(prompt, /*add_special_tokens=*/true);
}

std::string text_of(const Engine& engine, const std::vector<std::int32_t>& tokens) {
  if (engine.tokenizer() == nullptr) return fmt::format("{} token ids", tokens.size());
  return engine.tokenizer()->decode(tokens, /*skip_special_tokens=*/true);
}

// Plain decoding, then self-speculative decoding of the same prompt with the setup's drafter.
struct Runs {
  GenerationResult plain;
  GenerationResult speculative;
};

Runs decode_both(Engine& engine, const SpeculativeSetup& setup,
                 const std::vector<std::int32_t>& prompt, std::int64_t new_tokens) {
  GenerationOptions generation;
  generation.max_new_tokens = new_tokens;
  generation.eos_ids = engine.eos_ids();
  generation.logits = setup.config().logits.front();
  const std::int64_t capacity = static_cast<std::int64_t>(prompt.size()) + new_tokens;

  Runs runs;
  KvCache plain_kv = engine.model().make_kv_cache(capacity);
  runs.plain = Decoder(engine.model(), engine.comm()).generate(prompt, generation, plain_kv);

  const std::uint64_t seed = 0;
  const std::unique_ptr<Drafter> drafter = setup.make_drafter(seed);
  const std::unique_ptr<DraftLengthController> controller =
      setup.make_controller(setup.config().controllers.front(), seed);
  KvCache kv = engine.model().make_kv_cache(capacity);
  Decoder decoder(engine.model(), engine.comm(), *drafter, *controller);
  runs.speculative = decoder.generate(prompt, setup.generation(generation, nullptr), kv);
  return runs;
}

void print_statistics(const Engine& engine, const SpeculativeSetup& setup, const Runs& runs) {
  const DecodingStats& stats = runs.speculative.stats;
  const double plain = runs.plain.timings.decode_tokens_per_second();
  const double spec = runs.speculative.timings.decode_tokens_per_second();
  fmt::print("drafter     {} ({} controller, max draft {})\n", setup.label(),
             setup.config().controllers.front(), setup.config().controller.max_draft);
  fmt::print("output      {}\n", text_of(engine, runs.speculative.tokens));
  fmt::print("plain       {:.2f} tok/s, {} tokens\n", plain, runs.plain.tokens.size());
  fmt::print("speculative {:.2f} tok/s, {} tokens: speedup {:.2f}x\n", spec,
             runs.speculative.tokens.size(), plain > 0 ? spec / plain : 0.0);
  fmt::print("drafted     {}, accepted {} (α {:.3f}), {:.2f} tokens per verification\n",
             stats.drafted, stats.accepted, stats.acceptance_rate(), stats.mean_accepted_length());
  fmt::print("identical   {}\n", runs.plain.tokens == runs.speculative.tokens ? "yes" : "NO");
}

int run(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    fmt::print(stderr, "usage: {} MODEL SETTINGS_JSON [PROMPT] [NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  const SpeculativeConfig config = speculative_config(nlohmann::json::parse(argv[2]));
  SELFSPEC_CHECK(config.enabled(), "SETTINGS_JSON must choose a drafter (\"spec\")");
  const std::string prompt = argc > 3 ? argv[3] : "1,2,3";
  const std::int64_t new_tokens = argc > 4 ? std::stoll(argv[4]) : 32;

  LocalComm comm;
  EngineOptions options;
  options.source.model_path = argv[1];
  options.device = "cpu";
  options.quantized_draft_weights = config.quantized_draft_weights();
  Engine engine(options, comm);
  SpeculativeSetup setup(config, engine);  // every check before any weight is read
  engine.load();
  setup.attach(engine);

  const std::vector<std::int32_t> tokens = prompt_tokens(engine, prompt);
  engine.check_context(static_cast<std::int64_t>(tokens.size()), new_tokens);
  const Runs runs = decode_both(engine, setup, tokens, new_tokens);
  print_statistics(engine, setup, runs);
  return runs.plain.tokens == runs.speculative.tokens ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // selfspec::Error, and JSON's parse errors
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
