// Skip sets that do not come from files: SkipSet::plan() against LayerPlan, the CLI lists of
// parse_layer_list(), and the uniform generator's rule (count, interior preference, whole-layer
// spread, determinism, the edge order once the interior is used up).
#include "core/error.hpp"
#include "draft/skip_set.hpp"
#include "model/layer_plan.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace selfspec {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// ---------------------------------------------------------------------------------------------
// SkipSet::plan
// ---------------------------------------------------------------------------------------------

TEST(SkipSetPlan, EqualsLayerPlanSkipping) {
  const SkipSet set{"s", "", std::nullopt, {1, 4}, {0, 4, 5}};
  const std::vector<int> attention = {1, 4};
  const std::vector<int> mlp = {0, 4, 5};
  EXPECT_EQ(set.plan(6), LayerPlan::skipping(6, attention, mlp));
  EXPECT_EQ(set.plan(6).describe(), "attn[1,4] mlp[0,4,5]");
  EXPECT_EQ(set.plan(9), LayerPlan::skipping(9, attention, mlp));  // no declared count: any fits
  EXPECT_TRUE(SkipSet{}.plan(3).is_full());
  EXPECT_EQ(SkipSet{}.plan(3), LayerPlan::full(3));
}

TEST(SkipSetPlan, RefusesAnotherLayerCountThanDeclared) {
  const SkipSet set{"llama-2-13b", "", 40, {3}, {}};
  EXPECT_EQ(set.plan(40).skipped_attention(), std::vector<int>{3});
  EXPECT_THAT([&] { set.plan(32); },
              ThrowsMessage<Error>(AllOf(HasSubstr("skip set 'llama-2-13b'"),
                                         HasSubstr("made for a model with 40 layers"),
                                         HasSubstr("this model has 32"))));
}

TEST(SkipSetPlan, OutOfRangeIndexNamesTheSetAndTheIndex) {
  const SkipSet set{"mine", "", std::nullopt, {0, 2}, {1, 7}};
  EXPECT_THAT([&] { set.plan(7); },
              ThrowsMessage<Error>(
                  AllOf(HasSubstr("skip set 'mine'"), HasSubstr("mlp[1] = 7 is outside [0, 7)"))));
  EXPECT_THAT([&] { set.plan(2); }, ThrowsMessage<Error>(AllOf(HasSubstr("skip set 'mine'"),
                                                               HasSubstr("attention[1] = 2"))));
  const SkipSet negative{"neg", "", std::nullopt, {-1}, {}};
  EXPECT_THAT([&] { negative.plan(4); },
              ThrowsMessage<Error>(HasSubstr("skip set 'neg': attention[0] = -1 is outside")));
}

// ---------------------------------------------------------------------------------------------
// parse_layer_list
// ---------------------------------------------------------------------------------------------

TEST(ParseLayerList, ParsesSortsAndToleratesWhitespace) {
  EXPECT_EQ(parse_layer_list("3,5,9", "--skip-attn"), (std::vector<int>{3, 5, 9}));
  EXPECT_EQ(parse_layer_list(" 9 ,\t3, 5 ", "--skip-attn"), (std::vector<int>{3, 5, 9}));
  EXPECT_EQ(parse_layer_list("0", "--skip-mlp"), std::vector<int>{0});
  EXPECT_EQ(parse_layer_list("+4", "--skip-mlp"), std::vector<int>{4});
  EXPECT_EQ(parse_layer_list("255", "--skip-mlp"), std::vector<int>{255});
  EXPECT_TRUE(parse_layer_list("", "--skip-mlp").empty());
  EXPECT_TRUE(parse_layer_list("  ", "--skip-mlp").empty());
}

TEST(ParseLayerList, ErrorsNameTheOptionAndTheItem) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"3,x,9", "--skip-attn: item 2 ('x') is not an integer layer index"},
      {"3,5.5", "--skip-attn: item 2 ('5.5') is not an integer layer index"},
      {"3 5", "--skip-attn: item 1 ('3 5') is not an integer layer index"},
      {"1-3", "--skip-attn: item 1 ('1-3') is not an integer layer index"},
      {"4,-1", "--skip-attn: item 2 ('-1') is negative"},
      {"3,,5", "--skip-attn: item 2 of '3,,5' is empty"},
      {"3,", "--skip-attn: item 2 of '3,' is empty"},
      {",3", "--skip-attn: item 1 of ',3' is empty"},
      {"5,9,5", "--skip-attn: item 3 ('5') repeats item 1"},
      {"256", "--skip-attn: item 1 ('256') exceeds the supported maximum layer index 255"},
      {"99999999999999999999", "--skip-attn: item 1 ('99999999999999999999') is not an integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_THAT([&] { parse_layer_list(c.text, "--skip-attn"); },
                ThrowsMessage<Error>(HasSubstr(c.message)));
  }
}

// ---------------------------------------------------------------------------------------------
// uniform_skip_set
// ---------------------------------------------------------------------------------------------

// The skipped sublayers as positions in [attn0, mlp0, attn1, mlp1, ...]: 2l or 2l+1, sorted.
std::vector<int> sublayers(const SkipSet& set) {
  std::vector<int> s;
  for (int l : set.attention) s.push_back(2 * l);
  for (int l : set.mlp) s.push_back(2 * l + 1);
  std::sort(s.begin(), s.end());
  return s;
}

int count(const SkipSet& set) {
  return static_cast<int>(set.attention.size() + set.mlp.size());
}

const std::vector<int> kLayerCounts = {1, 2, 3, 4, 5, 7, 12, 22, 32, 40, 48, 60, 80, 256};
const std::vector<double> kRatios = {0.0,  0.01, 0.05, 0.1, 0.2,  0.25, 0.3,  0.33, 0.4,  0.45,
                                     0.49, 0.5,  0.55, 0.6, 0.66, 0.75, 0.85, 0.9,  0.95, 0.99};

TEST(UniformSkipSet, SkipsRoundOfRatioTimesTwoLSublayers) {
  EXPECT_EQ(count(uniform_skip_set(40, 0.45)), 36);  // SWIFT's 13B setting
  EXPECT_EQ(count(uniform_skip_set(80, 0.5)), 80);   // SWIFT's 70B setting
  EXPECT_EQ(count(uniform_skip_set(32, 0.5)), 32);
  EXPECT_EQ(count(uniform_skip_set(40, 0.3)), 24);
  EXPECT_EQ(count(uniform_skip_set(10, 0.25)), 5);
  EXPECT_EQ(count(uniform_skip_set(10, 0.225)), 5);  // 4.5 rounds away from zero
  EXPECT_EQ(count(uniform_skip_set(10, 0.22)), 4);   // 4.4
  EXPECT_EQ(count(uniform_skip_set(1, 0.3)), 1);     // 0.6
  for (int layers : kLayerCounts) {
    for (double ratio : kRatios) {
      SCOPED_TRACE(::testing::Message() << "L=" << layers << " r=" << ratio);
      const SkipSet set = uniform_skip_set(layers, ratio);
      EXPECT_EQ(count(set), std::lround(ratio * 2 * layers));
      EXPECT_TRUE(std::is_sorted(set.attention.begin(), set.attention.end()));
      EXPECT_TRUE(std::is_sorted(set.mlp.begin(), set.mlp.end()));
      EXPECT_EQ(std::adjacent_find(set.attention.begin(), set.attention.end()),
                set.attention.end());
      EXPECT_EQ(std::adjacent_find(set.mlp.begin(), set.mlp.end()), set.mlp.end());
      EXPECT_EQ(set.num_layers, layers);
      EXPECT_EQ(set.plan(layers).skipped_count(), count(set));
    }
  }
}

TEST(UniformSkipSet, ZeroRatioSkipsNothing) {
  for (int layers : kLayerCounts) {
    const SkipSet set = uniform_skip_set(layers, 0.0);
    EXPECT_TRUE(set.attention.empty());
    EXPECT_TRUE(set.mlp.empty());
    EXPECT_TRUE(set.plan(layers).is_full());
  }
}

TEST(UniformSkipSet, SparesTheFirstAndLastLayersWhileTheInteriorSuffices) {
  for (int layers : kLayerCounts) {
    for (double ratio : kRatios) {
      SCOPED_TRACE(::testing::Message() << "L=" << layers << " r=" << ratio);
      const SkipSet set = uniform_skip_set(layers, ratio);
      const int n = count(set);
      const int interior = 2 * std::max(0, layers - 2);  // sublayers of layers 1 .. L-2
      const LayerPlan plan = set.plan(layers);
      const int edge_skips =
          !plan.runs_attention(0) + !plan.runs_mlp(0) +
          (layers > 1 ? !plan.runs_attention(layers - 1) + !plan.runs_mlp(layers - 1) : 0);
      // Edge sublayers are skipped only for what the interior cannot take.
      EXPECT_EQ(edge_skips, std::max(0, n - interior));
    }
  }
}

TEST(UniformSkipSet, EdgeSublayersGoInnermostFirstAlternatingEnds) {
  // L = 4: interior = layers 1, 2 (sublayers 2..5); then MLP 0, attention 3, attention 0, MLP 3.
  EXPECT_EQ(sublayers(uniform_skip_set(4, 0.5)), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(sublayers(uniform_skip_set(4, 0.6)), (std::vector<int>{1, 2, 3, 4, 5}));  // 4.8 -> 5
  EXPECT_EQ(sublayers(uniform_skip_set(4, 0.75)), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sublayers(uniform_skip_set(4, 0.85)), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(sublayers(uniform_skip_set(4, 0.95)), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // L = 1: no interior; MLP 0 goes before attention 0.
  EXPECT_EQ(sublayers(uniform_skip_set(1, 0.3)), std::vector<int>{1});
  EXPECT_EQ(sublayers(uniform_skip_set(1, 0.8)), (std::vector<int>{0, 1}));
}

TEST(UniformSkipSet, SkipsWholeLayersSpreadEvenlyOverTheInterior) {
  for (int layers : kLayerCounts) {
    for (double ratio : kRatios) {
      SCOPED_TRACE(::testing::Message() << "L=" << layers << " r=" << ratio);
      const SkipSet set = uniform_skip_set(layers, ratio);
      const int n = count(set);
      const int interior = std::max(0, layers - 2);
      if (n == 0 || n > 2 * interior) continue;
      // Chosen layers = layers with a skipped attention; all but at most one (the middle one when
      // n is odd) also skip their MLP.
      const std::vector<int>& chosen = set.attention;
      const int m = static_cast<int>(chosen.size());
      EXPECT_EQ(m, (n + 1) / 2);
      EXPECT_EQ(static_cast<int>(set.mlp.size()), n / 2);
      for (int l : set.mlp) {
        EXPECT_TRUE(std::binary_search(chosen.begin(), chosen.end(), l)) << "MLP " << l;
      }
      const int low = interior / m;
      const int high = (interior + m - 1) / m;
      for (int k = 1; k < m; ++k) {
        const int gap =
            chosen[static_cast<std::size_t>(k)] - chosen[static_cast<std::size_t>(k - 1)];
        EXPECT_TRUE(gap == low || gap == high) << "gap " << gap << " at k=" << k;
      }
      // Unchosen margins at both ends of the interior are at most I/(2m).
      EXPECT_LE(2 * m * (chosen.front() - 1), interior);
      EXPECT_LE(2 * m * (layers - 2 - chosen.back()), interior);
    }
  }
}

TEST(UniformSkipSet, MatchesTheDocumentedFormula) {
  // L = 8, r = 0.25: n = 4, I = 6, m = 2: l_k = 1 + floor((2k+1)·6/4) = 2, 5 (whole layers).
  const SkipSet small = uniform_skip_set(8, 0.25);
  EXPECT_EQ(small.attention, (std::vector<int>{2, 5}));
  EXPECT_EQ(small.mlp, (std::vector<int>{2, 5}));
  // L = 10, r = 0.25: n = 5 (odd), I = 8, m = 3: layers 2, 5, 7; the middle one keeps its MLP.
  const SkipSet odd = uniform_skip_set(10, 0.25);
  EXPECT_EQ(odd.attention, (std::vector<int>{2, 5, 7}));
  EXPECT_EQ(odd.mlp, (std::vector<int>{2, 7}));
  // L = 40, r = 0.2: n = 16, I = 38, m = 8: l_k = 1 + floor((2k+1)·38/16).
  const SkipSet large = uniform_skip_set(40, 0.2);
  EXPECT_EQ(large.attention, (std::vector<int>{3, 8, 12, 17, 22, 27, 31, 36}));
  EXPECT_EQ(large.mlp, large.attention);
  // SWIFT's 70B setting, r = 0.5 of 80 layers: 40 whole layers, every other interior layer.
  EXPECT_EQ(uniform_skip_set(80, 0.5).attention.size(), 40u);
}

TEST(UniformSkipSet, IsDeterministicAndNamed) {
  EXPECT_EQ(uniform_skip_set(40, 0.45), uniform_skip_set(40, 0.45));
  EXPECT_EQ(uniform_skip_set(80, 0.5), uniform_skip_set(80, 0.5));
  const SkipSet set = uniform_skip_set(40, 0.45);
  EXPECT_EQ(set.name, "uniform-r0.45");
  EXPECT_EQ(set.source,
            "SWIFT §4.1: uniform layer skipping as the starting point of the on-the-fly search");
  EXPECT_EQ(uniform_skip_set(12, 0.0).name, "uniform-r0");
  EXPECT_EQ(uniform_skip_set(12, 0.5).name, "uniform-r0.5");
}

TEST(UniformSkipSet, RejectsRatiosOutsideZeroToOneAndBadLayerCounts) {
  for (double ratio : {-0.1, 1.0, 1.5, std::nan("")}) {
    SCOPED_TRACE(ratio);
    EXPECT_THAT([&] { uniform_skip_set(40, ratio); },
                ThrowsMessage<Error>(HasSubstr("is outside [0, 1)")));
  }
  EXPECT_THAT([] { uniform_skip_set(0, 0.5); },
              ThrowsMessage<Error>(HasSubstr("num_layers 0 is outside [1, 256]")));
  EXPECT_THAT([] { uniform_skip_set(257, 0.5); },
              ThrowsMessage<Error>(HasSubstr("num_layers 257")));
}

}  // namespace
}  // namespace selfspec
