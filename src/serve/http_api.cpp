#include "serve/http_api.hpp"

#include "core/error.hpp"
#include "core/logging.hpp"
#include "serve/completion_request.hpp"
#include "serve/completion_text.hpp"
#include "serve/openai_json.hpp"
#include "serve/serve_feed.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <thread>

namespace selfspec::serve {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ApiError server_error(int status, std::string message, std::string type, std::string code = "") {
  ApiError error;
  error.status = status;
  error.message = std::move(message);
  error.type = std::move(type);
  error.code = std::move(code);
  return error;
}

void reply_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status;
  res.set_content(dump_json(error_json(error)), "application/json");
}

// A request that passed every check: its prompt ids and what every rank needs of it.
struct Admission {
  std::vector<std::int32_t> prompt;
  RequestSettings settings;
};

// One completion followed from its tokens to its response: the text (cut at stop strings), the
// token times for the latency metrics, and how it ended.
class Completion {
 public:
  Completion(const CompletionRequest& request, const Tokenizer& tokenizer, RequestHandle handle,
             std::string model, Clock::time_point received, ServerMetrics& metrics)
      : endpoint_(request.endpoint),
        handle_(std::move(handle)),
        text_(tokenizer, handle_->prompt(), request.stop),
        model_(std::move(model)),
        id_(fmt::format("{}-{}",
                        request.endpoint == Endpoint::kChatCompletions ? "chatcmpl" : "cmpl",
                        handle_->id())),
        created_(unix_seconds()),
        received_(received),
        include_usage_(request.include_usage),
        speculative_(handle_->settings().speculate),
        metrics_(metrics) {}

  Endpoint endpoint() const { return endpoint_; }
  bool ended() const { return ended_; }
  const RequestHandle& handle() const { return handle_; }

  // Waits up to `timeout` for tokens; returns the text they add (and, once the request ended,
  // the rest). A stop string cancels the request: its slot frees at the next step.
  std::string advance(std::chrono::milliseconds timeout) {
    if (ended_) return {};
    const ServedRequest::Update update = handle_->wait(seen_, timeout);
    seen_ += update.tokens.size();
    std::string delta;
    for (std::size_t i = 0; i < update.tokens.size() && !text_.stopped(); ++i) {
      note_token_time(update.times[i]);
      delta += text_.push(update.tokens[i]);
      if (text_.stopped()) handle_->cancel();
    }
    const bool over =
        update.state == RequestState::kFinished || update.state == RequestState::kFailed;
    if (over && handle_->token_count() == static_cast<std::int64_t>(seen_)) {
      ended_ = true;
      delta += text_.finish();
    }
    return delta;
  }

  bool failed() const { return handle_->state() == RequestState::kFailed; }
  const std::string& text() const { return text_.text(); }

  FinishReason finish_reason() const {
    const GenerationResult& result = handle_->result();
    if (text_.stopped() || result.stopped_on_eos) return FinishReason::kStop;
    if (result.interrupt_signal == kCancelledSignal) return FinishReason::kCancelled;
    return FinishReason::kLength;
  }
  Usage usage() const {
    return {static_cast<std::int64_t>(handle_->prompt().size()), text_.tokens()};
  }
  SpeculationCounts speculation() const {
    const DecodingStats& stats = handle_->result().stats;
    return {stats.drafted, stats.accepted, stats.verify_forwards};
  }

  nlohmann::json whole_response() const {
    return completion_json(endpoint_, id_, model_, created_, text_.text(), finish_reason(), usage(),
                           speculation(), speculative_);
  }
  // A stream's events for `delta` (none when empty, except the first chat chunk's role), and
  // after the end the final chunk, the usage chunk when asked and [DONE].
  std::string stream_events(const std::string& delta) {
    std::string events;
    if (!delta.empty() || (first_chunk_ && endpoint_ == Endpoint::kChatCompletions)) {
      events += sse_event(
          chunk_json(endpoint_, id_, model_, created_, delta, std::nullopt, first_chunk_));
      first_chunk_ = false;
    }
    if (!ended_) return events;
    events += sse_event(chunk_json(endpoint_, id_, model_, created_, "", finish_reason(), false));
    if (include_usage_) {
      events += sse_event(
          usage_chunk_json(endpoint_, id_, model_, created_, usage(), speculation(), speculative_));
    }
    events += kSseDone;
    return events;
  }

  // The request's figures, once (at its end, or when its client went away).
  void record(std::string_view outcome) {
    if (recorded_) return;
    recorded_ = true;
    metrics_.request_finished(endpoint_path(endpoint_), outcome);
    metrics_.tokens(static_cast<std::int64_t>(handle_->prompt().size()), text_.tokens());
    const Clock::time_point now = Clock::now();
    metrics_.e2e_latency(seconds_between(received_, now));
    if (handle_->state() == RequestState::kFinished) {
      const DecodingStats& stats = handle_->result().stats;
      metrics_.speculation(stats.drafted, stats.accepted, stats.verify_forwards,
                           stats.round_tokens);
    }
  }

 private:
  void note_token_time(Clock::time_point t) {
    if (!first_token_) {
      first_token_ = true;
      metrics_.time_to_first_token(seconds_between(received_, t));
    } else {
      metrics_.inter_token_latency(seconds_between(last_token_, t));
    }
    last_token_ = t;
  }

  Endpoint endpoint_;
  RequestHandle handle_;
  CompletionText text_;
  std::string model_;
  std::string id_;
  std::int64_t created_;
  Clock::time_point received_;
  bool include_usage_;
  bool speculative_;
  ServerMetrics& metrics_;
  std::size_t seen_ = 0;
  bool ended_ = false;
  bool first_chunk_ = true;
  bool first_token_ = false;
  bool recorded_ = false;
  Clock::time_point last_token_;
};

}  // namespace

class HttpApi::Impl {
 public:
  Impl(HttpSettings settings, RequestBoard& board, ServerMetrics& metrics)
      : settings_(std::move(settings)), board_(board), metrics_(metrics) {
    SELFSPEC_CHECK(settings_.context > 0, "serve: the context must hold at least one token");
    routes();
  }

  void start() {
    server_.new_task_queue = [threads = settings_.threads] {
      // httplib's interface: it takes the pool and deletes it when it stops.
      return std::make_unique<httplib::ThreadPool>(static_cast<std::size_t>(threads)).release();
    };
    server_.set_payload_max_length(kMaxRequestBodyBytes + 1);
    server_.set_read_timeout(std::chrono::seconds(30));
    server_.set_write_timeout(std::chrono::seconds(30));
    if (settings_.port == 0) {
      port_ = server_.bind_to_any_port(settings_.host);
      SELFSPEC_CHECK(port_ > 0, "serve: cannot listen on {} (any port)", settings_.host);
    } else {
      SELFSPEC_CHECK(server_.bind_to_port(settings_.host, settings_.port),
                     "serve: cannot listen on {}:{} (in use, or not an address of this host)",
                     settings_.host, settings_.port);
      port_ = settings_.port;
    }
    listener_ = std::thread([this] { server_.listen_after_bind(); });
  }

  int port() const { return port_; }

  void ready(const Tokenizer& tokenizer) {
    tokenizer_.store(&tokenizer);
    metrics_.set_ready(true);
  }

  void stop() {
    if (!listener_.joinable()) return;
    server_.stop();
    listener_.join();
  }

  ~Impl() { stop(); }

 private:
  void routes() {
    server_.Get("/health",
                [this](const httplib::Request&, httplib::Response& res) { health(res); });
    server_.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      const std::vector<std::string> ids = {settings_.model_name};
      res.set_content(dump_json(models_json(ids, started_, "selfspec")), "application/json");
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      metrics_.load(board_.running_count(), board_.queued(), board_.kv_tokens(),
                    settings_.context * settings_.slots);
      res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completion(req, res, Endpoint::kCompletions);
    });
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   completion(req, res, Endpoint::kChatCompletions);
                 });
    server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string message =
          res.status == 404 ? fmt::format("no route {} {}", req.method, req.path)
          : res.status == 413
              ? fmt::format("the request body is over {} bytes", kMaxRequestBodyBytes)
              : fmt::format("HTTP status {}", res.status);
      res.set_content(
          dump_json(error_json(server_error(res.status, message, "invalid_request_error"))),
          "application/json");
    });
    server_.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
          std::string message = "internal error";
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            message = e.what();
          } catch (...) {
          }
          reply_error(res, server_error(500, message, "server_error"));
        });
  }

  void health(httplib::Response& res) {
    const bool loaded = tokenizer_.load() != nullptr;
    const bool draining = board_.draining();
    res.status = loaded && !draining ? 200 : 503;
    const char* status = !loaded ? "loading" : draining ? "draining" : "ok";
    res.set_content(dump_json({{"status", status}}), "application/json");
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (settings_.api_key.empty()) return true;
    if (req.get_header_value("Authorization") == "Bearer " + settings_.api_key) return true;
    reply_error(res, server_error(401,
                                  "Incorrect or missing API key: give 'Authorization: "
                                  "Bearer <key>'",
                                  "invalid_request_error", "invalid_api_key"));
    return false;
  }

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const Clock::time_point received = Clock::now();
    const auto refuse = [&](const ApiError& error, std::string_view outcome) {
      reply_error(res, error);
      metrics_.request_finished(endpoint_path(endpoint), outcome);
    };
    if (!authorized(req, res)) {
      metrics_.request_finished(endpoint_path(endpoint), kOutcomeClientError);
      return;
    }
    const Tokenizer* tokenizer = tokenizer_.load();
    if (tokenizer == nullptr) {
      return refuse(server_error(503, "the model is loading", "server_error", "loading"),
                    kOutcomeRejectedOverload);
    }
    ParsedRequest parsed = parse_completion_request(req.body, endpoint);
    if (const ApiError* error = std::get_if<ApiError>(&parsed))
      return refuse(*error, kOutcomeClientError);
    const CompletionRequest& request = std::get<CompletionRequest>(parsed);
    std::variant<Admission, ApiError> admitted = admit(request, *tokenizer);
    if (const ApiError* error = std::get_if<ApiError>(&admitted)) {
      return refuse(*error, kOutcomeClientError);
    }
    Admission& admission = std::get<Admission>(admitted);
    std::variant<RequestHandle, Refusal> submitted =
        board_.submit(std::move(admission.prompt), admission.settings);
    if (const Refusal* refusal = std::get_if<Refusal>(&submitted)) {
      if (*refusal != Refusal::kFailed) res.set_header("Retry-After", "1");
      return refuse(refusal_error(*refusal),
                    *refusal == Refusal::kFailed ? kOutcomeServerError : kOutcomeRejectedOverload);
    }
    auto followed =
        std::make_shared<Completion>(request, *tokenizer, std::get<RequestHandle>(submitted),
                                     settings_.model_name, received, metrics_);
    if (request.stream) return stream(res, std::move(followed));
    respond_whole(res, *followed);
  }

  // The prompt's ids and the request's settings, or why it cannot run here.
  std::variant<Admission, ApiError> admit(const CompletionRequest& request,
                                          const Tokenizer& tokenizer) {
    if (request.model != settings_.model_name) {
      return server_error(404,
                          fmt::format("The model '{}' does not exist: this server serves '{}'",
                                      request.model, settings_.model_name),
                          "invalid_request_error", "model_not_found");
    }
    Admission admission;
    try {
      admission.prompt = request.endpoint == Endpoint::kChatCompletions
                             ? encode_chat(tokenizer, request.messages, true)
                             : tokenizer.encode(request.prompt, true);
    } catch (const Error& e) {
      ApiError error = server_error(400, e.what(), "invalid_request_error");
      error.param = request.endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
      return error;
    }
    const auto prompt_tokens = static_cast<std::int64_t>(admission.prompt.size());
    if (std::optional<ApiError> error = check_context(request, prompt_tokens)) return *error;
    if (std::optional<ApiError> error = choose_speculation(request, admission.settings)) {
      return *error;
    }
    RequestSettings& s = admission.settings;
    s.max_tokens = request.max_tokens.value_or(settings_.context - prompt_tokens);
    s.temperature = request.temperature;
    s.top_p = request.top_p;
    s.top_k = request.top_k;
    s.seed = request.seed.value_or(settings_.seed + next_seed_.fetch_add(1));
    s.ignore_eos = request.ignore_eos;
    return admission;
  }

  std::optional<ApiError> check_context(const CompletionRequest& request,
                                        std::int64_t prompt_tokens) const {
    const std::string param =
        request.endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
    if (prompt_tokens == 0) {
      ApiError error = server_error(400, "the prompt has no tokens", "invalid_request_error");
      error.param = param;
      return error;
    }
    const std::int64_t room = settings_.context - prompt_tokens;
    if (room < 1) {
      ApiError error = server_error(
          400,
          fmt::format("This model's maximum context length is {} tokens, and the prompt has {}: "
                      "no room for a completion",
                      settings_.context, prompt_tokens),
          "invalid_request_error", "context_length_exceeded");
      error.param = param;
      return error;
    }
    if (request.max_tokens && *request.max_tokens > room) {
      ApiError error = server_error(
          400,
          fmt::format("This model's maximum context length is {} tokens. However, you requested "
                      "{} tokens ({} in the prompt, {} for the completion)",
                      settings_.context, prompt_tokens + *request.max_tokens, prompt_tokens,
                      *request.max_tokens),
          "invalid_request_error", "context_length_exceeded");
      error.param = "max_tokens";
      return error;
    }
    return std::nullopt;
  }

  std::optional<ApiError> choose_speculation(const CompletionRequest& request,
                                             RequestSettings& s) const {
    const SpeculationChoice& choice = request.speculative;
    if (!choice.config.empty() &&
        (!settings_.speculation || choice.config != settings_.speculative_config)) {
      ApiError error = server_error(
          400,
          settings_.speculation
              ? fmt::format("unknown speculative configuration '{}': this server has '{}'",
                            choice.config, settings_.speculative_config)
              : std::string("this server has no speculative configuration (start it with a "
                            "drafter)"),
          "invalid_request_error");
      error.param = "speculative.config";
      return error;
    }
    s.speculate = settings_.speculation && choice.enabled && choice.max_draft.value_or(1) > 0;
    s.max_draft = choice.max_draft.value_or(-1);
    return std::nullopt;
  }

  static ApiError refusal_error(Refusal refusal) {
    switch (refusal) {
      case Refusal::kQueueFull:
        return server_error(503, "the server is at capacity (queue full): retry later",
                            "server_error", "overloaded");
      case Refusal::kDraining:
        return server_error(503, "the server is shutting down", "server_error", "shutting_down");
      case Refusal::kFailed:
        break;
    }
    return server_error(500, "the engine failed", "server_error");
  }

  void respond_whole(httplib::Response& res, Completion& completion) {
    while (!completion.ended()) completion.advance(kPoll);
    if (completion.failed()) {
      completion.record(kOutcomeServerError);
      return reply_error(res, server_error(500, completion.handle()->error(), "server_error"));
    }
    completion.record(kOutcomeOk);
    res.set_content(dump_json(completion.whole_response()), "application/json");
  }

  void stream(httplib::Response& res, std::shared_ptr<Completion> completion) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [completion](std::size_t, httplib::DataSink& sink) {
          const std::string delta = completion->advance(kPoll);
          if (completion->ended() && completion->failed()) {
            ApiError error = server_error(500, completion->handle()->error(), "server_error");
            const std::string event = sse_event(error_json(error)) + std::string(kSseDone);
            sink.write(event.data(), event.size());
            completion->record(kOutcomeServerError);
            sink.done();
            return true;
          }
          const std::string events = completion->stream_events(delta);
          if (!events.empty() && !sink.write(events.data(), events.size())) return false;
          if (completion->ended()) {
            completion->record(kOutcomeOk);
            sink.done();
          }
          return true;
        },
        [completion](bool success) {
          // The client went away (or the write failed): stop the request at its next step.
          if (success && completion->ended()) return;
          completion->handle()->cancel();
          completion->record(kOutcomeCancelled);
        });
  }

  HttpSettings settings_;
  RequestBoard& board_;
  ServerMetrics& metrics_;
  httplib::Server server_;
  std::thread listener_;
  int port_ = 0;
  std::atomic<const Tokenizer*> tokenizer_{nullptr};
  std::atomic<std::uint64_t> next_seed_{0};
  std::int64_t started_ = unix_seconds();
};

HttpApi::HttpApi(HttpSettings settings, RequestBoard& board, ServerMetrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(settings), board, metrics)) {}

HttpApi::~HttpApi() = default;

void HttpApi::start() {
  impl_->start();
}
int HttpApi::port() const {
  return impl_->port();
}
void HttpApi::ready(const Tokenizer& tokenizer) {
  impl_->ready(tokenizer);
}
void HttpApi::stop() {
  impl_->stop();
}

}  // namespace selfspec::serve
