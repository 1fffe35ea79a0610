#include "launch/training_data/cali_data.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model_io/safetensors_file_output.hpp"
#include "model_io/safetensors_writer.hpp"

#include <algorithm>

namespace selfspec::launch {
namespace {

void append_bf16(std::vector<std::uint16_t>& to, std::span<const float> values) {
  for (const float v : values) to.push_back(f32_to_bf16(v));
}

}  // namespace

std::int64_t CaliRows::accepted_rows() const {
  return std::count(accepted.begin(), accepted.end(), 1.0F);
}

void CaliRows::clear() {
  target_hidden.clear();
  draft_hidden.clear();
  step.clear();
  accepted.clear();
  sequence.clear();
}

void write_cali_shard(const CaliRows& rows, const std::filesystem::path& path) {
  const std::int64_t r = rows.rows();
  SELFSPEC_CHECK(r > 0, "{}: a shard needs at least one row", path.string());
  SafetensorsWriter writer;
  writer.set_metadata("format", "selfspec-cali-data-shard");
  writer.add("target_hidden", DType::kBF16, {r, rows.hidden_size},
             SafetensorsWriter::copy_of(rows.target_hidden));
  writer.add("draft_hidden", DType::kBF16, {r, rows.hidden_size},
             SafetensorsWriter::copy_of(rows.draft_hidden));
  writer.add("step", DType::kF32, {r}, SafetensorsWriter::copy_of(rows.step));
  writer.add("accepted", DType::kF32, {r}, SafetensorsWriter::copy_of(rows.accepted));
  writer.add("sequence", DType::kF32, {r}, SafetensorsWriter::copy_of(rows.sequence));
  write_safetensors_file(writer, path);
}

CaliDataRecorder::CaliDataRecorder(std::unique_ptr<DraftLengthController> decider, CaliRows& rows)
    : decider_(std::move(decider)), rows_(rows) {
  SELFSPEC_CHECK(decider_ != nullptr, "the cali-data recorder needs a controller to decide");
}

void CaliDataRecorder::begin_round() {
  draft_hidden_.clear();
  decider_->begin_round();
}

void CaliDataRecorder::observe_hidden(int drafted, std::span<const float> target_root,
                                      std::span<const float> draft_token) {
  SELFSPEC_CHECK(drafted == static_cast<int>(draft_hidden_.size()) + 1,
                 "cali-data recorder: draft step {} after {} steps", drafted, draft_hidden_.size());
  SELFSPEC_CHECK(target_root.size() == static_cast<std::size_t>(rows_.hidden_size) &&
                     draft_token.size() == static_cast<std::size_t>(rows_.hidden_size),
                 "cali-data recorder: hidden states of {} and {} values, expected {}",
                 target_root.size(), draft_token.size(), rows_.hidden_size);
  if (drafted == 1) target_root_.assign(target_root.begin(), target_root.end());
  draft_hidden_.emplace_back(draft_token.begin(), draft_token.end());
  if (decider_->uses_hidden_states()) decider_->observe_hidden(drafted, target_root, draft_token);
}

bool CaliDataRecorder::continue_drafting(int drafted, double confidence) {
  return decider_->continue_drafting(drafted, confidence);
}

void CaliDataRecorder::update(int drafted, int accepted) {
  SELFSPEC_CHECK(drafted == static_cast<int>(draft_hidden_.size()),
                 "cali-data recorder: {} tokens verified, {} drafted", drafted,
                 draft_hidden_.size());
  // Steps 1..accepted were accepted; step accepted + 1 (if drafted) is the first rejection.
  const int recorded = std::min(accepted + 1, drafted);
  for (int i = 1; i <= recorded; ++i) {
    append_bf16(rows_.target_hidden, target_root_);
    append_bf16(rows_.draft_hidden, draft_hidden_[static_cast<std::size_t>(i - 1)]);
    rows_.step.push_back(static_cast<float>(i));
    rows_.accepted.push_back(i <= accepted ? 1.0F : 0.0F);
    rows_.sequence.push_back(static_cast<float>(sequence_));
  }
  ++rounds_;
  decider_->update(drafted, accepted);
}

}  // namespace selfspec::launch
