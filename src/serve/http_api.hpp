// The HTTP side of `selfspec serve` on rank 0: an OpenAI-compatible API over the request board.
//
//   POST /v1/completions, /v1/chat/completions   (stream: server-sent events ending with
//                                                 `data: [DONE]`)
//   GET  /v1/models, /health (503 while loading or draining), /metrics (Prometheus text)
//
// Each completion request is parsed and validated (serve/completion_request.hpp), tokenized (the
// model's chat template for chat), checked against the context, queued on the board and then
// followed token by token: its text (serve/completion_text.hpp, the same for a stream and a whole
// response) and the stop strings are worked out here, and a stop string, or a streaming client
// that went away, cancels the request, which frees its slot at the batch's next step. A full
// queue answers 503 with Retry-After, a missing or wrong API key 401, and every bad request an
// OpenAI error object with its status.
//
// cpp-httplib (Debian's libcpp-httplib-dev, as llama.cpp's server uses) serves the connections:
// a thread per connection from its pool, blocking handlers, and chunked content providers for
// streams; that suits a handler that waits on its request's tokens. Boost.Beast would need the
// whole server written around asio for no gain here. httplib itself stays out of this header.
#pragma once

#include "serve/request_board.hpp"
#include "serve/server_metrics.hpp"
#include "tokenizer/tokenizer.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace selfspec::serve {

struct HttpSettings {
  std::string host = "127.0.0.1";
  int port = 8080;           // 0: any free port (port() says which)
  std::string api_key;       // empty: no key needed
  std::string model_name;    // the id clients name in `model` and /v1/models lists
  std::int64_t context = 0;  // KV slots per request: prompt + max_tokens
  std::int64_t slots = 1;    // requests decoded at once (the batch's slots)
  int threads = 32;          // connection threads (streams hold one each)
  bool speculation = false;  // the server has a drafter (requests may speculate)
  std::string speculative_config = "default";  // its name in a request's `speculative.config`
  std::uint64_t seed = 0;  // seeds of requests that give none: seed, seed + 1, ...
};

class HttpApi {
 public:
  HttpApi(HttpSettings settings, RequestBoard& board, ServerMetrics& metrics);
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Binds the address (throws selfspec::Error when it cannot) and serves in a thread of its own;
  // /health answers 503 until ready().
  void start();
  int port() const;
  // The model is loaded: completions are served from now on (`tokenizer` must outlive this).
  void ready(const Tokenizer& tokenizer);
  // Stops listening, waits for the connection threads (their requests must have ended).
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace selfspec::serve
