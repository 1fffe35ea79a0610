#include "training_data/exit_data_rows.hpp"

#include "core/error.hpp"
#include "model_io/safetensors_file_output.hpp"
#include "model_io/safetensors_writer.hpp"

#include <span>

namespace selfspec {
namespace {

template <typename T>
void append_all(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

void ExitDataRows::append(const ExitDataRows& other) {
  SELFSPEC_CHECK(hidden_size == other.hidden_size && top_k == other.top_k,
                 "exit-data rows of different shapes ([{}], k {} and [{}], k {})", hidden_size,
                 top_k, other.hidden_size, other.top_k);
  append_all(hidden, other.hidden);
  append_all(sequence, other.sequence);
  append_all(position, other.position);
  append_all(token, other.token);
  append_all(next_token, other.next_token);
  append_all(topk_ids, other.topk_ids);
  append_all(topk_logprobs, other.topk_logprobs);
}

void ExitDataRows::clear() {
  hidden.clear();
  sequence.clear();
  position.clear();
  token.clear();
  next_token.clear();
  topk_ids.clear();
  topk_logprobs.clear();
}

void write_exit_data_shard(const ExitDataRows& rows, const std::filesystem::path& path) {
  const std::int64_t p = rows.positions();
  SELFSPEC_CHECK(p > 0, "{}: a shard needs at least one position", path.string());
  SafetensorsWriter writer;
  writer.set_metadata("format", "selfspec-exit-data-shard");
  writer.add("hidden", DType::kBF16, {p, rows.hidden_size},
             SafetensorsWriter::copy_of(rows.hidden));
  writer.add("sequence", DType::kF32, {p}, SafetensorsWriter::copy_of(rows.sequence));
  writer.add("position", DType::kF32, {p}, SafetensorsWriter::copy_of(rows.position));
  writer.add("token", DType::kF32, {p}, SafetensorsWriter::copy_of(rows.token));
  writer.add("next_token", DType::kF32, {p}, SafetensorsWriter::copy_of(rows.next_token));
  writer.add("topk_ids", DType::kF32, {p, rows.top_k}, SafetensorsWriter::copy_of(rows.topk_ids));
  writer.add("topk_logprobs", DType::kF32, {p, rows.top_k},
             SafetensorsWriter::copy_of(rows.topk_logprobs));
  write_safetensors_file(writer, path);
}

}  // namespace selfspec
