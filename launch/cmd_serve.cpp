// `selfspec serve`: an OpenAI-compatible server (serve/http_api.hpp) in front of the batched
// speculative loop (decode/speculative_batch.hpp).
//
//   mpirun -np N selfspec serve --model FILE|DIR [--config RUN.yaml] [--host 127.0.0.1]
//       [--port 8080] [--parallel S] [--ctx-size C] [--max-queued Q] [--api-key KEY]
//       [--spec ... as generate takes it] [--goodput]
//
// Rank 0 listens (loopback by default) as soon as the model's files have been checked, answering
// /health with 503 until the weights are loaded; then it schedules: the engine runs on the main
// thread of every rank, rank 0 admitting the queued requests between passes and broadcasting them
// (serve/serve_feed.hpp), the other ranks following. Each request decodes exactly as `selfspec
// generate` would decode it alone (greedy: the same tokens; sampled: its own seeded stream).
//
// SIGTERM or SIGINT drains: /health and new requests get 503, the queued and running requests
// finish, the server exits 0. An engine error fails every waiting request with a 500 and ends the
// job with the error (several ranks: all of them); a rank that dies ends the job through the
// collectives' deadline (launch/job.hpp).
#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "core/stop_request.hpp"
#include "decode/speculative_batch.hpp"
#include "engine/engine.hpp"
#include "launch/commands.hpp"
#include "launch/job.hpp"
#include "launch/options.hpp"
#include "launch/speculative_cli.hpp"
#include "serve/http_api.hpp"
#include "serve/request_board.hpp"
#include "serve/serve_feed.hpp"
#include "serve/server_metrics.hpp"
#include "speculative/speculative_setup.hpp"

#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

namespace selfspec::launch {
namespace {

// The context a request gets when --ctx-size is not given (the model's own can be 32k+ tokens,
// which every slot would reserve).
constexpr std::int64_t kDefaultServeContext = 4096;

struct ServeOptions {
  EngineCliOptions engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::int64_t parallel = 4;
  std::int64_t max_queued = 64;
  std::string api_key;
  std::string model_name;  // empty: the model file's or directory's name
  int http_threads = 0;    // 0: parallel + max_queued + 8
  std::int64_t pass_tokens = SpeculativeBatchOptions{}.pass_tokens;
  bool goodput = false;
  std::uint64_t seed = 0;
  SpeculativeCli spec;
};

std::string served_name(const ServeOptions& options) {
  if (!options.model_name.empty()) return options.model_name;
  const std::filesystem::path path(options.engine.model_name());
  return path.has_filename() ? path.filename().string() : path.parent_path().filename().string();
}

// What the engine needs on every rank, once the weights are in.
struct Serving {
  const ServeOptions& options;
  Engine& engine;
  SpeculativeSetup& setup;
  const SpeculativeConfig& spec;
  GenerationOptions base;  // every request's, before its own budget, sampling and drafts
  const DraftVocabulary* vocabulary = nullptr;

  SpeculativeRequest build(const std::vector<std::int32_t>& prompt,
                           const serve::RequestSettings& settings) const {
    SpeculativeRequest request;
    request.prompt = prompt;
    GenerationOptions generation = base;
    generation.max_new_tokens = settings.max_tokens;
    generation.sampling.temperature = settings.temperature;
    generation.sampling.top_p = settings.top_p;
    generation.sampling.top_k = static_cast<std::int32_t>(settings.top_k);
    generation.sampling.seed = settings.seed;
    generation.ignore_eos = settings.ignore_eos;
    request.speculate = settings.speculate && setup.enabled();
    request.options = request.speculate ? setup.generation(generation, vocabulary) : generation;
    return request;
  }
};

GenerationOptions base_generation(const Engine& engine, const SpeculativeConfig& spec) {
  GenerationOptions generation;
  generation.eos_ids = engine.eos_ids();
  generation.logits = spec.logits.front();
  return generation;
}

serve::HttpSettings http_settings(const ServeOptions& options, const Engine& engine,
                                  const SpeculativeSetup& setup) {
  serve::HttpSettings s;
  s.host = options.host;
  s.port = options.port;
  s.api_key = options.api_key;
  s.model_name = served_name(options);
  s.context = engine.context_limit();
  s.slots = options.parallel;
  s.threads = options.http_threads > 0
                  ? options.http_threads
                  : static_cast<int>(options.parallel + options.max_queued + 8);
  s.speculation = setup.enabled();
  s.speculative_config = setup.enabled() ? setup.label() : "none";
  s.seed = options.seed;
  return s;
}

// Rank 0's server side: the board, the metrics, the HTTP API, and a watch that drains the board
// when a stop signal comes (at once, whatever the engine is doing; the engine's feed ends once
// the board is drained).
struct Frontend {
  serve::RequestBoard board;
  serve::ServerMetrics metrics;
  serve::HttpApi http;
  std::jthread stop_watch;

  Frontend(const ServeOptions& options, serve::HttpSettings settings)
      : board(options.max_queued),
        http(std::move(settings), board, metrics),
        stop_watch([this](std::stop_token stop) {
          while (!stop.stop_requested()) {
            if (pending_stop_signal() != 0) {
              log::info("serve: {}: draining (new requests get 503)",
                        stop_signal_name(pending_stop_signal()));
              board.drain();
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
};

// The batch's hooks: tokens to their requests (rank 0), each finished request's result to its
// handler (rank 0) and out of the feed (every rank).
SpeculativeBatch::Hooks batch_hooks(serve::ServeFeed& feed, Frontend* frontend) {
  SpeculativeBatch::Hooks hooks;
  if (frontend != nullptr) {
    hooks.on_token = [frontend](std::int64_t id, std::int32_t token) {
      if (const serve::RequestHandle handle = frontend->board.running(id)) handle->add_token(token);
    };
  }
  hooks.on_done = [&feed, frontend](std::int64_t id, GenerationResult&& result) {
    feed.forget(id);
    if (frontend == nullptr) return;
    if (const serve::RequestHandle handle = frontend->board.running(id)) {
      handle->finish(std::move(result));
    }
    frontend->board.ended(id);
  };
  return hooks;
}

void run_engine(const Serving& s, Job& job, Frontend* frontend) {
  serve::ServeFeed feed(
      job.comm(), frontend != nullptr ? &frontend->board : nullptr,
      [&s](const std::vector<std::int32_t>& prompt, const serve::RequestSettings& settings) {
        return s.build(prompt, settings);
      });
  SpeculativeBatch::MakeSpeculators make;
  if (s.setup.enabled()) {
    make = [&s, &feed](std::int64_t id) {
      const serve::RequestSettings& settings = feed.settings(id);
      return SequenceSpeculators{
          s.setup.make_drafter(settings.seed),
          s.setup.make_controller(s.spec.controllers.front(), settings.seed, settings.max_draft)};
    };
  }
  SpeculativeBatchOptions batch_options;
  batch_options.batch = s.options.parallel;
  batch_options.capacity = s.engine.context_limit();
  batch_options.pass_tokens = s.options.pass_tokens;
  batch_options.goodput = s.options.goodput;
  SpeculativeBatch batch(s.engine.model(), job.comm(), batch_options, std::move(make));
  if (frontend != nullptr) {
    frontend->http.ready(*s.engine.tokenizer());
    log::info("serve: ready: {} slot(s) of {} tokens, drafter {}, goodput sizing {}",
              s.options.parallel, batch_options.capacity,
              s.setup.enabled() ? s.setup.label() : std::string("none (plain decoding)"),
              s.options.goodput ? "on" : "off");
  }
  try {
    batch.serve(feed, batch_hooks(feed, frontend));
  } catch (const std::exception& e) {
    if (frontend != nullptr) {
      // Every waiting client gets its 500 before the job ends.
      frontend->board.fail_all(fmt::format("the engine failed: {}", e.what()));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      frontend->http.stop();
    }
    throw;
  }
}

int run_serve(const ServeOptions& options) {
  // A client that closes its connection mid-write must not end the server.
  std::signal(SIGPIPE, SIG_IGN);
  return run_job(options.engine.threads, [&](Job& job) {
    const SpeculativeConfig spec = options.spec.config();
    SELFSPEC_CHECK(options.parallel >= 1, "--parallel {}: at least one slot", options.parallel);
    EngineOptions engine_options = options.engine.engine_options();
    if (engine_options.ctx_size <= 0) engine_options.ctx_size = kDefaultServeContext;
    engine_options.quantized_draft_weights = spec.quantized_draft_weights();
    Engine engine(engine_options, job.comm());
    SpeculativeSetup setup(spec, engine, options.spec.kinds());
    std::unique_ptr<Frontend> frontend;
    if (job.is_root()) {
      SELFSPEC_CHECK(engine.tokenizer() != nullptr,
                     "serve needs the model's tokenizer (none found beside {}; give --tokenizer)",
                     options.engine.model_name());
      frontend = std::make_unique<Frontend>(options, http_settings(options, engine, setup));
      frontend->http.start();
      log::info("serve: listening on http://{}:{} (model '{}'); loading", options.host,
                frontend->http.port(), served_name(options));
    }
    engine.load();
    setup.attach(engine);
    Serving s{options, engine, setup, spec, base_generation(engine, spec), nullptr};
    if (setup.enabled()) {
      s.vocabulary =
          setup.draft_vocabulary(static_cast<std::int64_t>(setup.draft_vocab_ids().front().size()));
    }
    run_engine(s, job, frontend.get());
    if (frontend != nullptr) {
      frontend->http.stop();
      log::info("serve: drained; exiting");
    }
    return 0;
  });
}

void add_server_options(CLI::App& command, ServeOptions& options) {
  command.add_option("--host", options.host, "address to listen on (loopback by default)")
      ->capture_default_str();
  command.add_option("--port", options.port, "port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command.add_option("--parallel", options.parallel, "requests decoded at once (batch slots)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--max-queued", options.max_queued,
                  "requests waiting for a slot; more get 503 with Retry-After")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--api-key", options.api_key,
                     "require 'Authorization: Bearer KEY' on /v1/ (default: none)");
  command.add_option("--model-name", options.model_name,
                     "the model id clients give (default: the model file's name)");
  command
      .add_option("--http-threads", options.http_threads,
                  "connection threads (default: parallel + max-queued + 8)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--pass-tokens", options.pass_tokens, "the most tokens of one forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_flag("--goodput", options.goodput,
                   "size each request's drafts by the batch's goodput (down to plain decoding)");
  command
      .add_option("--seed", options.seed, "seed of requests that give none (request i: seed + i)")
      ->capture_default_str();
}

}  // namespace

void add_serve_command(CLI::App& app, CommandBody& run) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* command = app.add_subcommand(
      "serve",
      "an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, "
      "/health, /metrics) in front of the batched speculative loop; rank 0 listens");
  options->engine.add_to(*command);
  add_server_options(*command, *options);
  options->spec.add_to(*command);
  command->callback([options, &run] { run = [options] { return run_serve(*options); }; });
}

}  // namespace selfspec::launch
