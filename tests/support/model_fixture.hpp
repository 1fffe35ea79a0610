// Loading a test checkpoint into a LlamaModel for one rank, and comparing logit vectors.
#pragma once

#include "comm/communicator.hpp"
#include "model/llama_model.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace selfspec::testing {

// The process-wide CPU backend the test models run on.
Backend& cpu_backend();

std::unique_ptr<LlamaModel> load_model(const std::filesystem::path& dir, Communicator& comm,
                                       std::optional<DType> convert_to = std::nullopt);
// The same on a given backend (e.g. CUDA).
std::unique_ptr<LlamaModel> load_model_on(Backend& backend, const std::filesystem::path& dir,
                                          Communicator& comm,
                                          std::optional<DType> convert_to = std::nullopt);

// Runs `tokens` at `positions` (default: kv.length()...) through the model and returns the
// logits of `rows` ([rows × vocab_local]).
std::vector<float> forward_rows(LlamaModel& model, KvCache& kv,
                                std::span<const std::int32_t> tokens,
                                std::span<const std::int32_t> rows, const LayerPlan* plan = nullptr,
                                const AttentionMask* mask = nullptr,
                                std::span<const std::int32_t> positions = {},
                                const ForwardObserver* observer = nullptr);

// The same into `logits` (resized; its storage is reused when large enough).
void forward_rows_into(std::vector<float>& logits, LlamaModel& model, KvCache& kv,
                       std::span<const std::int32_t> tokens, std::span<const std::int32_t> rows,
                       const LayerPlan* plan = nullptr, const AttentionMask* mask = nullptr,
                       std::span<const std::int32_t> positions = {},
                       const ForwardObserver* observer = nullptr);

// The same for every row ([T × vocab_local]).
std::vector<float> forward_all_rows(LlamaModel& model, KvCache& kv,
                                    std::span<const std::int32_t> tokens,
                                    const LayerPlan* plan = nullptr,
                                    const AttentionMask* mask = nullptr,
                                    std::span<const std::int32_t> positions = {});

// Attaches an untrained early-exit head (layer `n`'s own weights, as collect-exit-data's
// init_layer.safetensors, written into `dir`) to a model loaded from the tiny checkpoint in `dir`.
void attach_layer_as_exit_head(LlamaModel& model, const std::filesystem::path& dir, int n);

// max |a - b| / max(1, max |b|).
double relative_max_error(std::span<const float> a, std::span<const double> b);

bool bit_identical(std::span<const float> a, std::span<const float> b);

// Expects (gtest) the logits of `rest` forwarded at once after `prefix` (a verification) to equal,
// row for row and bit for bit, those of `rest` forwarded one token at a time after `prefix`
// (decode steps), each run in a fresh cache of `capacity` slots.
void expect_batch_rows_equal_decode_steps(LlamaModel& model, std::span<const std::int32_t> prefix,
                                          std::span<const std::int32_t> rest,
                                          std::int64_t capacity);

// Expects (gtest) every layer's K and V rows [0, kv.length()) to equal, bit for bit, those of a
// fresh cache filled by one forward of the first kv.length() tokens of `sequence`: what rollbacks,
// restored scoring windows and the like must leave behind.
void expect_kv_equals_fresh_run(LlamaModel& model, const KvCache& kv,
                                std::span<const std::int32_t> sequence);

}  // namespace selfspec::testing
