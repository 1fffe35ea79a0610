// Fuzz target: config.json (ModelConfig::from_json after nlohmann's parser). The input is the
// file's text. Text that is not JSON is skipped (nlohmann's own parser is not under test); JSON
// must give a config or throw selfspec::Error. A config that loaded must report its parameter
// count and expected tensors (what `selfspec info` does with it) and survive its own
// serialisation unchanged.
#include "core/error.hpp"
#include "model_io/checkpoint_layout.hpp"
#include "model_io/model_config.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json json = nlohmann::json::parse(data, data + size, /*cb=*/nullptr,
                                                    /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  std::optional<selfspec::ModelConfig> config;
  try {
    config = selfspec::ModelConfig::from_json(json, "fuzz/config.json");
  } catch (const selfspec::Error&) {
    return 0;  // a clear error is the right answer to a bad config
  }
  // What `selfspec info` and the loaders do next: the parameter count, the expected tensors.
  static_cast<void>(config->parameter_count());
  static_cast<void>(selfspec::expected_tensors(*config));
  const nlohmann::json written = config->to_json();
  const selfspec::ModelConfig again =
      selfspec::ModelConfig::from_json(written, "fuzz/config.json (written back)");
  selfspec::fuzz::require(again.to_json() == written,
                          "a config read back from its own to_json() differs");
  return 0;
}
