// A forward with a pruned draft vocabulary: the kept ids' logits are the full head's (bit for
// bit: the same rows, the same per-output reduction), every other id is -inf, for decode and
// multi-row forwards in every weight dtype; building one checks its ids and its model.
#include "model/draft_vocabulary.hpp"
#include "comm/local_comm.hpp"
#include "core/error.hpp"
#include "tests/support/model_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_checkpoint.hpp"
#include "tests/support/tiny_models.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace selfspec::testing {
namespace {

class DraftVocabularyForward : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    TinyModelSpec spec = gqa_tiny_spec(2);
    spec.intermediate = 96;
    spec.vocab = 97;
    spec.dtype = GetParam();
    spec.tie = GetParam() == DType::kBF16;  // a tied head (SmolLM2's) in one of the dtypes
    model_ = write_and_load_model(spec, dir_.path(), comm_);
  }
  // Logits of every token row, with or without a draft vocabulary.
  std::vector<float> logits(const DraftVocabulary* vocabulary) {
    KvCache kv = model_->make_kv_cache(32);
    std::vector<std::int32_t> positions(tokens_.size());
    std::iota(positions.begin(), positions.end(), 0);
    std::vector<std::int32_t> rows(tokens_.size());
    std::iota(rows.begin(), rows.end(), 0);
    ForwardArgs args;
    args.tokens = tokens_;
    args.positions = positions;
    args.logit_rows = rows;
    args.draft.vocabulary = vocabulary;
    std::vector<float> out;
    model_->forward(args, kv, out);
    return out;
  }

  TempDir dir_;
  LocalComm comm_;
  std::unique_ptr<LlamaModel> model_;
  const std::vector<std::int32_t> tokens_ = {1, 17, 4, 88, 23};
};

TEST_P(DraftVocabularyForward, KeptIdsMatchTheFullHeadOthersAreMinusInf) {
  const std::vector<float> full = logits(nullptr);
  for (const std::vector<std::int32_t>& ids :
       {std::vector<std::int32_t>{96}, std::vector<std::int32_t>{40, 0, 96, 7, 13, 55}, [] {
          std::vector<std::int32_t> all(97);
          std::iota(all.begin(), all.end(), 0);
          return all;
        }()}) {
    const DraftVocabulary vocabulary(*model_, ids);
    ASSERT_EQ(vocabulary.size(), static_cast<std::int64_t>(ids.size()));
    ASSERT_EQ(vocabulary.local_size(), static_cast<std::int64_t>(ids.size()));
    const std::vector<float> pruned = logits(&vocabulary);
    ASSERT_EQ(pruned.size(), full.size());
    const std::set<std::int32_t> kept(ids.begin(), ids.end());
    for (std::size_t i = 0; i < full.size(); ++i) {
      const auto id = static_cast<std::int32_t>(i % 97);
      if (kept.contains(id)) {
        EXPECT_EQ(pruned[i], full[i]) << "row " << i / 97 << " id " << id;
      } else {
        EXPECT_EQ(pruned[i], -std::numeric_limits<float>::infinity()) << "id " << id;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DraftVocabularyForward,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

TEST_P(DraftVocabularyForward, RejectsBadIdsAndAnotherModelsVocabulary) {
  EXPECT_THROW(DraftVocabulary(*model_, std::vector<std::int32_t>{}), Error);
  try {
    DraftVocabulary(*model_, std::vector<std::int32_t>{3, 97});
    ADD_FAILURE() << "id 97 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("97"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DraftVocabulary(*model_, std::vector<std::int32_t>{3, -1}), Error);
  EXPECT_THROW(DraftVocabulary(*model_, std::vector<std::int32_t>{3, 5, 3}), Error);

  TempDir other_dir;
  TinyModelSpec spec;
  spec.vocab = 97;
  const std::unique_ptr<LlamaModel> other = write_and_load_model(spec, other_dir.path(), comm_);
  const DraftVocabulary foreign(*other, std::vector<std::int32_t>{1, 2});
  KvCache kv = model_->make_kv_cache(4);
  const std::int32_t token = 1, position = 0, row = 0;
  ForwardArgs args;
  args.tokens = {&token, 1};
  args.positions = {&position, 1};
  args.logit_rows = {&row, 1};
  args.draft.vocabulary = &foreign;
  std::vector<float> out;
  EXPECT_THROW(model_->forward(args, kv, out), Error);
}

}  // namespace
}  // namespace selfspec::testing
