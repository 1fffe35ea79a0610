#include "tests/support/tiny_models.hpp"

#include "tests/support/model_fixture.hpp"

#include <array>
#include <cstring>

namespace selfspec::testing {

TinyModelSpec gqa_tiny_spec(std::int64_t layers) {
  TinyModelSpec spec;
  spec.hidden = 64;
  spec.heads = 8;
  spec.kv_heads = 2;
  spec.layers = layers;
  return spec;
}

TinyModelSpec speculative_tiny_spec(std::int64_t layers) {
  TinyModelSpec spec = gqa_tiny_spec(layers);
  spec.intermediate = 96;
  spec.vocab = 61;
  spec.scale = 2.0;
  return spec;
}

TinyModelSpec tensor_parallel_tiny_spec(std::int64_t layers) {
  TinyModelSpec spec = gqa_tiny_spec(layers);
  spec.intermediate = 102;
  spec.vocab = 97;
  spec.scale = 1.5;
  return spec;
}

std::unique_ptr<LlamaModel> write_and_load_model(const TinyModelSpec& spec,
                                                 const std::filesystem::path& dir,
                                                 Communicator& comm) {
  write_tiny_checkpoint(spec, dir);
  return load_model(dir, comm);
}

std::filesystem::path write_tiny_checkpoint_on_root(const TinyModelSpec& spec, Communicator& comm,
                                                    std::unique_ptr<TempDir>& dir,
                                                    const std::string& prefix) {
  if (comm.is_root()) {
    dir = std::make_unique<TempDir>(prefix);
    write_tiny_checkpoint(spec, dir->path());
  }
  std::array<char, 512> path{};
  if (comm.is_root()) std::strncpy(path.data(), dir->path().c_str(), path.size() - 1);
  comm.broadcast_object(path, 0);
  return std::filesystem::path(path.data());
}

}  // namespace selfspec::testing
