// `selfspec collect-exit-data` on a tiny checkpoint written by the test (tiny_checkpoint.hpp) with
// the GPT-2-style tokenizer fixture: the manifest and the shards follow issue 11's format (read
// back with the engine's safetensors reader), the rows agree with the double-precision reference
// model (the exit layer's input, the top-k log-probabilities under the full softmax), TP 1 and
// mpirun -np 2 and -np 4 collect the same bytes (the tp-invariant reduction; close values under
// --reduction rank-order), the model files hold layer N and the frozen head, --resume continues
// exactly where a run stopped and refuses other settings, and bad options are refused naming the
// option.
#include "core/dtype.hpp"
#include "model_io/safetensors.hpp"
#include "tests/integration/cli_fixture.hpp"
#include "tests/support/reference_llama.hpp"
#include "tests/support/tiny_checkpoint.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);
constexpr int kExitLayer = 2;
constexpr int kTopK = 8;
const std::string kSettings =
    fmt::format("--exit-layer {} --top-k {} --temperature 0.8 --seed 5", kExitLayer, kTopK);

// A shard's or model file's tensors, by name: dtype, shape and the values as doubles.
struct StoredTensor {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<double> values;
  std::vector<std::byte> bytes;
};

std::map<std::string, StoredTensor> read_tensors(const std::filesystem::path& path) {
  const SafetensorsFile file(path);
  std::map<std::string, StoredTensor> tensors;
  for (const TensorInfo& info : file.tensors()) {
    StoredTensor& t = tensors[info.name];
    t.dtype = info.dtype;
    t.shape = info.shape;
    const std::byte* data = file.bytes().data() + info.data_offset;
    t.bytes.assign(data, data + info.nbytes);
    for (std::int64_t i = 0; i < info.numel(); ++i) {
      t.values.push_back(load_as_f32(info.dtype, data, static_cast<std::size_t>(i)));
    }
  }
  return tensors;
}

// All shards of a data directory concatenated (columns by name), in manifest order.
std::map<std::string, StoredTensor> read_all_shards(const std::filesystem::path& dir,
                                                    const nlohmann::json& manifest) {
  std::map<std::string, StoredTensor> all;
  for (const nlohmann::json& shard : manifest["shards"]) {
    for (auto& [name, t] : read_tensors(dir / shard["file"].get<std::string>())) {
      StoredTensor& into = all[name];
      into.dtype = t.dtype;
      into.values.insert(into.values.end(), t.values.begin(), t.values.end());
      into.bytes.insert(into.bytes.end(), t.bytes.begin(), t.bytes.end());
    }
  }
  return all;
}

class ExitDataCli : public Cli {
 protected:
  void SetUp() override {
    model_ = dir_ / "m";
    TinyModelSpec spec;
    spec.layers = 3;
    spec.hidden = 64;
    spec.heads = 8;
    spec.kv_heads = 2;
    spec.intermediate = 100;
    spec.vocab = 1210;
    spec.seed = 11;
    spec.scale = 2.0;
    weights_ = write_tiny_checkpoint(spec, model_);
    tokenizer_ = kSource / "tests/data/tokenizer/gpt2_style.tokenizer.json";
    std::string text;
    const auto add = [&](const std::string& id, const std::string& split,
                         const std::string& prompt) {
      text += nlohmann::json{{"id", id}, {"task", "chat"}, {"split", split}, {"prompt", prompt}}
                  .dump() +
              "\n";
    };
    add("a", "calibration", "Hello! How are you today?");
    add("b", "calibration", "Tell me about the sea and the sky.");
    add("c", "evaluation", "Can you suggest a name for my cat?");
    add("d", "calibration", "What colour is the sky?");
    suite_ = dir_ / "suite.jsonl";
    std::ofstream(suite_) << text;
  }

  // `settings`: the options a test may replace.
  std::string collect_args(const std::filesystem::path& out, const std::string& extra,
                           const std::string& settings = kSettings) const {
    return fmt::format(
        "collect-exit-data --model {} --tokenizer {} --prompts-file {} --generate 10 --out {} "
        "--json {} {}",
        model_.string(), tokenizer_.string(), suite_.string(), out.string(), settings, extra);
  }
  std::filesystem::path collect(const std::string& name, const std::string& extra = "",
                                int ranks = 0) {
    const auto out = dir_ / name;
    const CommandResult r = run(collect_args(out, extra), ranks, 240);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
  }
  static nlohmann::json manifest_of(const std::filesystem::path& dir) {
    return nlohmann::json::parse(read_file(dir / "manifest.json"));
  }

  std::filesystem::path model_, tokenizer_, suite_;
  ReferenceWeights weights_;
};

TEST_F(ExitDataCli, ManifestAndShardsFollowTheFormat) {
  const auto out = collect("data", "--open-text --shard-positions 30");
  const nlohmann::json m = manifest_of(out);
  EXPECT_EQ(m["format"], "selfspec-exit-data");
  EXPECT_EQ(m["version"], 1);
  EXPECT_EQ(m["complete"], true);
  EXPECT_EQ(m["exit_layer"], kExitLayer);
  EXPECT_EQ(m["top_k"], kTopK);
  EXPECT_EQ(m["split"], "calibration");
  EXPECT_EQ(m["tp"], 1);
  EXPECT_EQ(m["model"]["path"], model_.string());
  EXPECT_EQ(m["model"]["identity"].get<std::string>().size(), 16u);
  EXPECT_EQ(m["model"]["hidden_size"], 64);
  EXPECT_EQ(m["model"]["num_layers"], 3);
  EXPECT_EQ(m["model"]["vocab_size"], 1210);
  EXPECT_EQ(m["prompts_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(m["init_layer"], "init_layer.safetensors");
  EXPECT_EQ(m["frozen"], "frozen.safetensors");
  // 3 calibration prompts: each continued (1 sampled of 3 at fraction 0.5 rounds to 1), and as
  // open text.
  EXPECT_EQ(m["mix"]["prompts"], 3);
  EXPECT_EQ(m["mix"]["greedy"].get<int>() + m["mix"]["sampled"].get<int>(), 3);
  EXPECT_EQ(m["mix"]["sampled"], 1);
  EXPECT_EQ(m["mix"]["open_text_sequences"], 3);
  EXPECT_EQ(m["sequences"], 6);
  ASSERT_GE(m["shards"].size(), 2u);

  std::int64_t sequences = 0, positions = 0;
  for (std::size_t s = 0; s < m["shards"].size(); ++s) {
    const nlohmann::json& entry = m["shards"][s];
    EXPECT_EQ(entry["file"], fmt::format("shard-{:05}.safetensors", s));
    const auto tensors = read_tensors(out / entry["file"].get<std::string>());
    const std::int64_t p = entry["positions"];
    ASSERT_EQ(tensors.size(), 7u);
    EXPECT_EQ(tensors.at("hidden").dtype, DType::kBF16);
    EXPECT_EQ(tensors.at("hidden").shape, (std::vector<std::int64_t>{p, 64}));
    for (const char* name : {"sequence", "position", "token", "next_token"}) {
      EXPECT_EQ(tensors.at(name).dtype, DType::kF32) << name;
      EXPECT_EQ(tensors.at(name).shape, (std::vector<std::int64_t>{p})) << name;
    }
    for (const char* name : {"topk_ids", "topk_logprobs"}) {
      EXPECT_EQ(tensors.at(name).dtype, DType::kF32) << name;
      EXPECT_EQ(tensors.at(name).shape, (std::vector<std::int64_t>{p, kTopK})) << name;
    }
    const std::vector<double>& seq = tensors.at("sequence").values;
    EXPECT_EQ(static_cast<std::int64_t>(std::set<double>(seq.begin(), seq.end()).size()),
              entry["sequences"].get<std::int64_t>());
    sequences += entry["sequences"].get<std::int64_t>();
    positions += p;
  }
  EXPECT_EQ(sequences, 6);
  EXPECT_EQ(positions, m["positions"].get<std::int64_t>());

  const auto all = read_all_shards(out, m);
  const auto& seq = all.at("sequence").values;
  const auto& pos = all.at("position").values;
  const auto& tok = all.at("token").values;
  const auto& next = all.at("next_token").values;
  ASSERT_EQ(static_cast<std::int64_t>(seq.size()), positions);
  EXPECT_EQ(seq.front(), 0.0);
  EXPECT_EQ(pos.front(), 0.0);
  for (std::size_t i = 1; i < seq.size(); ++i) {
    if (seq[i] == seq[i - 1]) {
      EXPECT_EQ(pos[i], pos[i - 1] + 1) << "row " << i;
      EXPECT_EQ(next[i - 1], tok[i]) << "row " << i;
    } else {
      EXPECT_EQ(seq[i], seq[i - 1] + 1) << "row " << i;
      EXPECT_EQ(pos[i], 0.0) << "row " << i;
    }
  }
  const auto& ids = all.at("topk_ids").values;
  const auto& logprobs = all.at("topk_logprobs").values;
  for (std::size_t r = 0; r < seq.size(); ++r) {
    double mass = 0.0;
    std::set<double> distinct;
    for (int j = 0; j < kTopK; ++j) {
      const double lp = logprobs[r * kTopK + j];
      EXPECT_LE(lp, 0.0);
      if (j > 0) {
        EXPECT_LE(lp, logprobs[r * kTopK + j - 1]) << "row " << r;
      }
      mass += std::exp(lp);
      distinct.insert(ids[r * kTopK + j]);
      EXPECT_GE(ids[r * kTopK + j], 0.0);
      EXPECT_LT(ids[r * kTopK + j], 1210.0);
    }
    EXPECT_LE(mass, 1.0 + 1e-6) << "row " << r;
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kTopK));
  }
}

TEST_F(ExitDataCli, GreedyContinuationsAreTheTopTokens) {
  // --open-text without --chat makes sequence 2i+1 the prompt of sequence 2i: its length tells
  // where the generated part of sequence 2i starts.
  const auto out = collect("data", "--open-text --sampled-fraction 0");
  const nlohmann::json m = manifest_of(out);
  EXPECT_EQ(m["mix"]["sampled"], 0);
  const auto all = read_all_shards(out, m);
  const auto& seq = all.at("sequence").values;
  std::map<int, int> lengths;
  for (const double s : seq) ++lengths[static_cast<int>(s)];
  ASSERT_EQ(lengths.size(), 6u);
  std::size_t row = 0;
  int checked = 0;
  for (int s = 0; s < 6; ++s) {
    const int prompt = s % 2 == 0 ? lengths[s + 1] : lengths[s];
    for (int p = 0; p < lengths[s]; ++p, ++row) {
      if (p < prompt - 1) continue;
      EXPECT_EQ(all.at("topk_ids").values[row * kTopK], all.at("next_token").values[row])
          << "sequence " << s << " position " << p;
      ++checked;
    }
  }
  EXPECT_GE(checked, 3 * 10);
}

TEST_F(ExitDataCli, RowsAgreeWithTheReferenceModel) {
  const auto out = collect("data", "--sampled-fraction 0.5");
  const nlohmann::json m = manifest_of(out);
  const auto all = read_all_shards(out, m);
  for (const int sequence : {0, 1}) {  // greedy, then sampled
    std::vector<std::int32_t> tokens;
    std::size_t first = 0;
    for (std::size_t r = 0; r < all.at("sequence").values.size(); ++r) {
      if (all.at("sequence").values[r] != sequence) continue;
      if (tokens.empty()) first = r;
      tokens.push_back(static_cast<std::int32_t>(all.at("token").values[r]));
    }
    ASSERT_FALSE(tokens.empty());
    std::vector<std::vector<double>> hidden;
    const auto logits = reference_forward(
        weights_, tokens, {},
        [&](int layer, bool after_attention, const std::vector<std::vector<double>>& residual) {
          if (layer == kExitLayer && !after_attention) hidden = residual;
        });
    ASSERT_EQ(hidden.size(), tokens.size());
    for (std::size_t p = 0; p < tokens.size(); ++p) {
      const std::size_t row = first + p;
      for (std::size_t i = 0; i < 64; ++i) {
        const double stored = all.at("hidden").values[row * 64 + i];
        EXPECT_NEAR(stored, hidden[p][i], 1e-2 * std::abs(hidden[p][i]) + 1e-3)
            << "sequence " << sequence << " position " << p << " feature " << i;
      }
      const std::vector<double>& l = logits[p];
      const double max = *std::max_element(l.begin(), l.end());
      double sum = 0.0;
      for (const double x : l) sum += std::exp(x - max);
      std::vector<double> sorted = l;
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      for (int j = 0; j < kTopK; ++j) {
        const auto id = static_cast<std::size_t>(all.at("topk_ids").values[row * kTopK + j]);
        const double expected = l[id] - max - std::log(sum);
        EXPECT_NEAR(all.at("topk_logprobs").values[row * kTopK + j], expected, 1e-4)
            << "sequence " << sequence << " position " << p << " rank " << j;
        EXPECT_NEAR(l[id], sorted[static_cast<std::size_t>(j)], 1e-4);  // the j-th largest
      }
    }
  }
}

// The default tp-invariant reduction: every column, hidden states and log-probabilities included,
// is the same bytes at TP 1, 2 and 4 (the sampled continuations too: rank 0 sees whole rows).
TEST_F(ExitDataCli, OneTwoAndFourRanksCollectTheSameBytes) {
  const auto one = collect("tp1", "--open-text --shard-positions 40");
  const nlohmann::json m1 = manifest_of(one);
  EXPECT_EQ(m1["reduction"], (nlohmann::json{{"order", "tp-invariant"}, {"chunks", 8}}));
  const auto a = read_all_shards(one, m1);
  SELFSPEC_SKIP_WITHOUT_MPI();
  for (const int ranks : {2, 4}) {
    const auto other =
        collect(fmt::format("tp{}", ranks), "--open-text --shard-positions 40", ranks);
    const nlohmann::json m = manifest_of(other);
    EXPECT_EQ(m["tp"], ranks);
    EXPECT_EQ(m1["shards"], m["shards"]);
    EXPECT_EQ(m1["model"], m["model"]);
    EXPECT_EQ(m1["mix"], m["mix"]);
    EXPECT_EQ(m1["reduction"], m["reduction"]);
    const auto b = read_all_shards(other, m);
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, column] : a) {
      EXPECT_FALSE(column.bytes.empty()) << name;
      EXPECT_EQ(column.bytes, b.at(name).bytes) << name << " at TP " << ranks;
    }
    for (const char* file : {"init_layer.safetensors", "frozen.safetensors"}) {
      EXPECT_EQ(read_file(one / file), read_file(other / file)) << file;
    }
  }
}

// --reduction rank-order: the usual all-reduce. The tokens and top-k ids still agree; the
// hidden states and log-probabilities are close but round differently at TP 2.
TEST_F(ExitDataCli, RankOrderReductionIsCloseAcrossTp) {
  const auto one = collect("tp1", "--open-text --shard-positions 40 --reduction rank-order");
  SELFSPEC_SKIP_WITHOUT_MPI();
  const auto two = collect("tp2", "--open-text --shard-positions 40 --reduction rank-order", 2);
  const nlohmann::json m1 = manifest_of(one);
  const nlohmann::json m2 = manifest_of(two);
  EXPECT_EQ(m1["reduction"], (nlohmann::json{{"order", "rank-order"}}));
  EXPECT_EQ(m1["shards"], m2["shards"]);
  const auto a = read_all_shards(one, m1);
  const auto b = read_all_shards(two, m2);
  for (const char* name : {"sequence", "position", "token", "next_token", "topk_ids"}) {
    EXPECT_EQ(a.at(name).bytes, b.at(name).bytes) << name;
  }
  for (const char* name : {"hidden", "topk_logprobs"}) {
    const auto& x = a.at(name).values;
    const auto& y = b.at(name).values;
    ASSERT_EQ(x.size(), y.size()) << name;
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_NEAR(x[i], y[i], 1e-2 * std::abs(x[i]) + 1e-4) << name << " " << i;
    }
  }
}

TEST_F(ExitDataCli, ModelFilesHoldLayerNAndTheFrozenHead) {
  const auto out = collect("data");
  const SafetensorsFile init(out / "init_layer.safetensors");
  EXPECT_EQ(init.metadata().at("format"), "selfspec-exit-head");
  EXPECT_EQ(init.metadata().at("model_identity"), manifest_of(out)["model"]["identity"]);
  EXPECT_EQ(init.metadata().at("exit_layer"), std::to_string(kExitLayer));
  EXPECT_EQ(init.metadata().at("hidden_size"), "64");
  EXPECT_EQ(init.metadata().at("num_layers"), "3");
  EXPECT_THAT(init.metadata().at("trained_on"), HasSubstr("none"));
  const auto layer = read_tensors(out / "init_layer.safetensors");
  const ReferenceLayer& ref = weights_.layers[kExitLayer];
  const std::map<std::string, const std::vector<double>*> expected = {
      {"exit_layer.input_layernorm.weight", &ref.attention_norm},
      {"exit_layer.self_attn.q_proj.weight", &ref.wq},
      {"exit_layer.self_attn.k_proj.weight", &ref.wk},
      {"exit_layer.self_attn.v_proj.weight", &ref.wv},
      {"exit_layer.self_attn.o_proj.weight", &ref.wo},
      {"exit_layer.post_attention_layernorm.weight", &ref.mlp_norm},
      {"exit_layer.mlp.gate_proj.weight", &ref.w_gate},
      {"exit_layer.mlp.up_proj.weight", &ref.w_up},
      {"exit_layer.mlp.down_proj.weight", &ref.w_down}};
  ASSERT_EQ(layer.size(), expected.size());
  for (const auto& [name, values] : expected) {
    ASSERT_TRUE(layer.contains(name)) << name;
    EXPECT_EQ(layer.at(name).dtype, DType::kF32) << name;
    EXPECT_EQ(layer.at(name).values, *values) << name;
  }
  EXPECT_EQ(layer.at("exit_layer.self_attn.k_proj.weight").shape,
            (std::vector<std::int64_t>{16, 64}));
  const auto frozen = read_tensors(out / "frozen.safetensors");
  ASSERT_EQ(frozen.size(), 2u);
  EXPECT_EQ(frozen.at("model.norm.weight").dtype, DType::kF32);
  EXPECT_EQ(frozen.at("model.norm.weight").values, weights_.final_norm);
  EXPECT_EQ(frozen.at("lm_head.weight").dtype, DType::kBF16);
  EXPECT_EQ(frozen.at("lm_head.weight").shape, (std::vector<std::int64_t>{1210, 64}));
  const std::vector<double>& head = frozen.at("lm_head.weight").values;
  for (std::size_t i = 0; i < head.size(); ++i) {
    ASSERT_EQ(head[i], bf16_to_f32(f32_to_bf16(static_cast<float>(weights_.lm_head[i])))) << i;
  }
}

// --exit-layer L (3 here): a feature-level head's data. Every row's hidden is the final residual
// (the final norm's input), the untrained layer is the last layer's weights, and an untied
// model's token embedding is written beside the LM head.
TEST_F(ExitDataCli, ExitLayerLRecordsTheFinalResidual) {
  const auto out = dir_ / "final";
  const CommandResult r =
      run(collect_args(out, "", "--exit-layer 3 --top-k 8 --temperature 0.8 --seed 5"), 0, 240);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto all = read_all_shards(out, manifest_of(out));
  std::vector<std::int32_t> tokens;
  for (std::size_t row = 0; row < all.at("sequence").values.size(); ++row) {
    if (all.at("sequence").values[row] == 0) {
      tokens.push_back(static_cast<std::int32_t>(all.at("token").values[row]));
    }
  }
  ASSERT_GT(tokens.size(), 1u);
  std::vector<std::vector<double>> final_residual;
  (void)reference_forward(
      weights_, tokens, {},
      [&](int layer, bool after_attention, const std::vector<std::vector<double>>& residual) {
        if (layer == 3 && !after_attention) final_residual = residual;
      });
  ASSERT_EQ(final_residual.size(), tokens.size());
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    for (std::size_t i = 0; i < 64; ++i) {
      EXPECT_NEAR(all.at("hidden").values[p * 64 + i], final_residual[p][i],
                  1e-2 * std::abs(final_residual[p][i]) + 1e-3)
          << "position " << p << " feature " << i;
    }
  }
  const SafetensorsFile init(out / "init_layer.safetensors");
  EXPECT_EQ(init.metadata().at("exit_layer"), "3");
  EXPECT_THAT(init.metadata().at("trained_on"), HasSubstr("layer 2"));
  const auto layer = read_tensors(out / "init_layer.safetensors");
  EXPECT_EQ(layer.at("exit_layer.mlp.down_proj.weight").values, weights_.layers[2].w_down);
  const auto frozen = read_tensors(out / "frozen.safetensors");
  ASSERT_EQ(frozen.size(), 3u);
  const StoredTensor& embedding = frozen.at("model.embed_tokens.weight");
  EXPECT_EQ(embedding.dtype, DType::kBF16);
  EXPECT_EQ(embedding.shape, (std::vector<std::int64_t>{1210, 64}));
  for (std::size_t i = 0; i < embedding.values.size(); ++i) {
    ASSERT_EQ(embedding.values[i],
              bf16_to_f32(f32_to_bf16(static_cast<float>(weights_.embedding[i]))))
        << i;
  }
}

TEST_F(ExitDataCli, ResumeContinuesExactlyAndRefusesOtherSettings) {
  const std::string extra = "--open-text --shard-positions 1";  // a shard per sequence
  const auto full = collect("full", extra);
  const auto part = collect("part", extra);
  // Drop the last two shards, as if the run had stopped there.
  nlohmann::json m = manifest_of(part);
  const auto shards = m["shards"].size();
  ASSERT_EQ(shards, 6u);
  for (int i = 0; i < 2; ++i) {
    std::filesystem::remove(part / m["shards"].back()["file"].get<std::string>());
    m["shards"].erase(m["shards"].size() - 1);
  }
  m["complete"] = false;
  std::ofstream(part / "manifest.json") << m.dump(2);

  expect_error(run(collect_args(part, extra)), "pass --resume");
  const CommandResult resumed = run(collect_args(part, extra + " --resume"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.json()["new_sequences"], 2);
  EXPECT_EQ(manifest_of(part)["shards"], manifest_of(full)["shards"]);
  EXPECT_EQ(manifest_of(part)["complete"], true);
  for (std::size_t s = 0; s < shards; ++s) {
    const std::string file = fmt::format("shard-{:05}.safetensors", s);
    EXPECT_EQ(read_file(part / file), read_file(full / file)) << file;
  }

  const std::string before = read_file(part / "manifest.json");
  const CommandResult again = run(collect_args(part, extra + " --resume"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, HasSubstr("complete, nothing to do"));
  EXPECT_EQ(again.json()["new_sequences"], 0);
  EXPECT_EQ(read_file(part / "manifest.json"), before);

  const CommandResult other =
      run(collect_args(part, extra + " --resume", "--exit-layer 1 --top-k 8 --temperature 0.8"));
  expect_error(other, "exit_layer");
  EXPECT_THAT(other.err, HasSubstr("--exit-layer"));
  expect_error(
      run(collect_args(part, extra + " --resume", "--exit-layer 2 --top-k 4 --temperature 0.8")),
      "top_k");
  const CommandResult rank_order =
      run(collect_args(part, extra + " --resume --reduction rank-order"));
  expect_error(rank_order, "reduction");
  EXPECT_THAT(rank_order.err, HasSubstr("--reduction"));
}

// --exit-layer 1,2 records both layers from the same forwards: each directory holds what a run
// of its layer alone writes, byte for byte; a run interrupted between the directories' shards
// resumes from the shards both hold.
TEST_F(ExitDataCli, SeveralExitLayersWriteADirectoryEachEqualToTheirOwnRuns) {
  const std::string extra = "--open-text --shard-positions 1";
  const std::string both = "--exit-layer 1,2 --top-k 8 --temperature 0.8 --seed 5";
  const auto out = dir_ / "both";
  const CommandResult r = run(collect_args(out, extra, both));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.json()["exit_layer"], nlohmann::json::array({1, 2}));
  EXPECT_FALSE(std::filesystem::exists(out / "manifest.json"));
  for (const int n : {1, 2}) {
    SCOPED_TRACE(n);
    const auto alone = dir_ / fmt::format("alone-{}", n);
    const CommandResult single = run(collect_args(
        alone, extra, fmt::format("--exit-layer {} --top-k 8 --temperature 0.8 --seed 5", n)));
    ASSERT_EQ(single.exit_code, 0) << single.err;
    const auto dir = out / fmt::format("exit-layer-{}", n);
    EXPECT_EQ(manifest_of(dir)["exit_layer"], n);
    EXPECT_EQ(manifest_of(dir)["shards"], manifest_of(alone)["shards"]);
    for (const nlohmann::json& shard : manifest_of(alone)["shards"]) {
      const std::string file = shard["file"].get<std::string>();
      EXPECT_EQ(read_file(dir / file), read_file(alone / file)) << file;
    }
    for (const char* file : {"init_layer.safetensors", "frozen.safetensors"}) {
      EXPECT_EQ(read_file(dir / file), read_file(alone / file)) << file;
    }
  }
  // Stopped after layer 1's fourth shard, before layer 2's: both go on from the third.
  const auto dir2 = out / "exit-layer-2";
  nlohmann::json m = manifest_of(dir2);
  const std::string last = read_file(dir2 / m["shards"][3]["file"].get<std::string>());
  while (m["shards"].size() > 3) m["shards"].erase(m["shards"].size() - 1);
  m["complete"] = false;
  std::ofstream(dir2 / "manifest.json") << m.dump(2);
  nlohmann::json m1 = manifest_of(out / "exit-layer-1");
  while (m1["shards"].size() > 4) m1["shards"].erase(m1["shards"].size() - 1);
  m1["complete"] = false;
  std::ofstream(out / "exit-layer-1" / "manifest.json") << m1.dump(2);
  const CommandResult resumed = run(collect_args(out, extra + " --resume", both));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.json()["new_sequences"], 3);
  EXPECT_EQ(read_file(dir2 / m["shards"][2]["file"].get<std::string>()),
            read_file(dir_ / "alone-2" / m["shards"][2]["file"].get<std::string>()));
  EXPECT_EQ(read_file(dir2 / "shard-00003.safetensors"), last);
  EXPECT_EQ(manifest_of(dir2)["shards"], manifest_of(dir_ / "alone-2")["shards"]);
  EXPECT_EQ(manifest_of(out / "exit-layer-1")["shards"], manifest_of(dir_ / "alone-1")["shards"]);
  expect_error(run(collect_args(dir_ / "twice", "", "--exit-layer 1,1")), "listed twice");
}

TEST_F(ExitDataCli, BadOptionsAreRefusedNamingTheOption) {
  const auto out = dir_ / "bad";
  expect_error(run(collect_args(out, "--split evaluation")), "--split evaluation");
  expect_error(run(collect_args(out, "", "--exit-layer 0")), "--exit-layer 0");
  expect_error(run(collect_args(out, "--reduction fast")), "--reduction");
  expect_error(run(collect_args(out, "", "--exit-layer 4")), "--exit-layer 4");
  expect_error(run(collect_args(out, "", "--exit-layer 1 --top-k 5000")), "--top-k 5000");
  expect_error(run(collect_args(out, "", "--exit-layer 1 --temperature 0")), "--temperature 0");
  expect_error(run(collect_args(out, "--sampled-fraction 1.5")), "--sampled-fraction");
  expect_error(run(collect_args(out, "--batch 0")), "--batch");
  expect_error(run(collect_args(out, "--continuations 3 --sampled-fraction 0",
                                "--exit-layer 1 --temperature 0")),
               "--continuations 3");
  expect_error(run(collect_args(out, "--open-text-files " + (dir_ / "nowhere").string())),
               "--open-text-files");
  expect_error(
      run(collect_args(out, "--open-text-files " + suite_.string() + " --open-text-window 2")),
      "--open-text-window");
  EXPECT_FALSE(std::filesystem::exists(out / "manifest.json"));
}

// Several sequences per forward change nothing: the shards of --batch 1, 3 and 8 are the same
// bytes (greedy and sampled continuations, prompts' own text), and the summary counts forwards.
TEST_F(ExitDataCli, EveryBatchSizeCollectsTheSameBytes) {
  std::map<std::string, StoredTensor> first;
  std::int64_t forwards_b1 = 0;
  for (int batch : {1, 3, 8}) {
    const auto out = dir_ / fmt::format("b{}", batch);
    const CommandResult r = run(collect_args(
        out, fmt::format("--open-text --continuations 3 --batch {} --shard-positions 30", batch)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json summary = nlohmann::json::parse(r.out);
    EXPECT_EQ(summary["batch"], batch);
    // 3 calibration prompts: 3 continuations and their own text each.
    EXPECT_EQ(summary["new_sequences"], 12);
    EXPECT_EQ(manifest_of(out)["mix"]["sampled"].get<int>() +
                  manifest_of(out)["mix"]["greedy"].get<int>(),
              9);
    if (batch == 1) forwards_b1 = summary["forwards"].get<std::int64_t>();
    if (batch == 8) {
      EXPECT_LT(summary["forwards"].get<std::int64_t>(), forwards_b1 / 3);
    }
    const std::map<std::string, StoredTensor> all = read_all_shards(out, manifest_of(out));
    if (first.empty()) {
      first = all;
      continue;
    }
    for (const auto& [name, tensor] : first) {
      EXPECT_EQ(all.at(name).bytes, tensor.bytes) << name << " at --batch " << batch;
    }
  }
}

// Existing text from files: cut into windows, fed without generation, recorded in the manifest
// (each file's path, size, hash and tokens) and counted apart from the generated positions.
TEST_F(ExitDataCli, OpenTextFilesAreFedInWindowsAndRecorded) {
  const auto corpus = dir_ / "corpus";
  std::filesystem::create_directories(corpus / "sub");
  std::string long_text;
  for (int i = 0; i < 30; ++i) long_text += fmt::format("The sea was calm on day {}. ", i);
  std::ofstream(corpus / "a.txt") << long_text;
  std::ofstream(corpus / "sub" / "b.txt") << "How are you today? Tell me about the sky.";
  std::ofstream(corpus / "blank.txt") << "  \n";
  // Left out of the walk: hidden files and directories, get-open-text.sh's SOURCES.json.
  std::filesystem::create_directories(corpus / ".git");
  std::ofstream(corpus / ".git" / "HEAD") << "ref: refs/heads/main";
  std::ofstream(corpus / ".stamp") << "done";
  std::ofstream(corpus / "SOURCES.json") << R"({"sources": []})";
  const auto out = dir_ / "open";
  const CommandResult r = run(collect_args(
      out, fmt::format("--open-text-files {} --open-text-window 16", corpus.string())));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json m = manifest_of(out);
  const nlohmann::json& files = m["mix"]["open_text_files"];
  ASSERT_EQ(files["files"], 3);
  EXPECT_EQ(files["window"], 16);
  std::int64_t windows = 0;
  for (const nlohmann::json& source : files["sources"]) {
    EXPECT_EQ(source["sha256"].get<std::string>().size(), 64u);
    EXPECT_GT(source["bytes"].get<std::int64_t>(), 0);
    windows += source["windows_kept"].get<std::int64_t>();
  }
  EXPECT_EQ(files["sources"][0]["path"], (corpus / "a.txt").string());
  EXPECT_EQ(files["sources"][1]["tokens"], 0) << "the blank file";
  EXPECT_GE(windows, 5);
  EXPECT_EQ(m["mix"]["open_text_file_sequences"], windows);
  const nlohmann::json summary = nlohmann::json::parse(r.out);
  const nlohmann::json& by_source = summary["new_positions_by_source"];
  EXPECT_EQ(by_source["open_text"], files["tokens"]);
  EXPECT_GT(by_source["generated"].get<std::int64_t>(), 0);
  EXPECT_EQ(by_source["prompts"].get<std::int64_t>() + by_source["generated"].get<std::int64_t>() +
                by_source["open_text"].get<std::int64_t>(),
            summary["new_positions"].get<std::int64_t>());
  // The open-text sequences come last, fed as they are: position 0 .. window-1 with their tokens.
  const std::map<std::string, StoredTensor> all = read_all_shards(out, m);
  const std::vector<double>& position = all.at("position").values;
  const std::vector<double>& sequence = all.at("sequence").values;
  const double last = sequence.back();
  std::int64_t last_rows = 0;
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    if (sequence[i] != last) continue;
    EXPECT_EQ(position[i], static_cast<double>(last_rows));
    ++last_rows;
  }
  EXPECT_LE(last_rows, 16);
  EXPECT_GE(last_rows, 4);
}

// --open-text-continue G: each window is followed by up to G tokens of the full model (the rows
// count them as generated), recorded in the mix; a resume must ask for the same G.
TEST_F(ExitDataCli, OpenTextWindowsContinuedByTheModel) {
  const auto corpus = dir_ / "corpus";
  std::filesystem::create_directories(corpus);
  std::string text;
  for (int i = 0; i < 30; ++i) text += fmt::format("The river ran past the mill on day {}. ", i);
  std::ofstream(corpus / "a.txt") << text;
  const std::string files =
      fmt::format("--open-text-files {} --open-text-window 16", corpus.string());
  const auto fed = dir_ / "fed";
  const CommandResult plain = run(collect_args(fed, files));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto continued = dir_ / "continued";
  const CommandResult r = run(collect_args(continued, files + " --open-text-continue 6"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json m = manifest_of(continued);
  EXPECT_EQ(m["mix"]["open_text_continue"], 6);
  const std::int64_t windows = m["mix"]["open_text_file_sequences"].get<std::int64_t>();
  ASSERT_GE(windows, 4);
  const nlohmann::json summary = r.json();
  const nlohmann::json plain_summary = plain.json();
  const nlohmann::json& by_source = summary["new_positions_by_source"];
  const nlohmann::json& plain_by_source = plain_summary["new_positions_by_source"];
  // The prompts' rows are the same; the windows add up to 6 generated tokens each.
  EXPECT_EQ(by_source["open_text"], plain_by_source["open_text"]);
  EXPECT_EQ(by_source["prompts"], plain_by_source["prompts"]);
  const std::int64_t added =
      by_source["generated"].get<std::int64_t>() - plain_by_source["generated"].get<std::int64_t>();
  EXPECT_GT(added, 0);
  EXPECT_LE(added, 6 * windows);
  EXPECT_EQ(summary["new_positions"].get<std::int64_t>(),
            plain_summary["new_positions"].get<std::int64_t>() + added);
  expect_error(run(collect_args(continued, files + " --open-text-continue 3 --resume")),
               "--open-text-continue");
  expect_error(run(collect_args(dir_ / "none", "--open-text-continue 3")),
               "--open-text-continue 3");
}

}  // namespace
}  // namespace selfspec::testing
