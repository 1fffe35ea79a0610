// GGUF files through the real `selfspec` binary: a model written as both a checkpoint and a GGUF
// (make-model --gguf) generates the same tokens from either, at every TP degree and with
// self-speculation; `info` reads the GGUF's geometry; `--model` takes a directory holding one GGUF;
// bad GGUF files end the job with an error naming the file, never a crash or a hang.
#include "tests/integration/cli_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace selfspec::testing {
namespace {

using ::testing::HasSubstr;

class GgufCli : public Cli {
 protected:
  // A bf16 random model in --out, plus the same model as model.gguf inside it.
  std::filesystem::path make_gguf_model() {
    const auto dir = make_model("m", "--gguf");
    EXPECT_TRUE(std::filesystem::exists(dir / "model.gguf"));
    return dir;
  }
};

TEST_F(GgufCli, GgufGivesTheCheckpointsTokensAtEveryTpDegree) {
  const auto dir = make_gguf_model();
  const auto args = [](const std::filesystem::path& model, const std::string& extra = "") {
    return fmt::format(
        "generate --model {} --prompt-ids 1,17,4,200,33 --max-new-tokens 20 --ignore-eos --json "
        "{}",
        model.string(), extra);
  };
  const CommandResult reference = run(args(dir));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const auto tokens = reference.json()["tokens"];
  for (int ranks : {0, 2, 4}) {
    if (ranks > 0) SELFSPEC_SKIP_WITHOUT_MPI();
    const CommandResult r = run(args(dir / "model.gguf"), ranks);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json()["tokens"], tokens) << "np " << ranks;
  }
  const CommandResult spec = run(
      args(dir / "model.gguf", "--spec layer-skip --skip-attn 1 --skip-mlp 0 --max-draft 4"), 2);
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(spec.json()["tokens"], tokens);
}

TEST_F(GgufCli, ModelDirectoryHoldingOneGgufIsEnough) {
  const auto dir = make_gguf_model();
  const auto only = dir_ / "only";
  std::filesystem::create_directories(only);
  std::filesystem::copy_file(dir / "model.gguf", only / "weights.gguf");
  const std::string args = "--prompt-ids 3,4 --max-new-tokens 6 --ignore-eos --json";
  const CommandResult a = run(fmt::format("generate --model {} {}", dir.string(), args));
  const CommandResult b = run(fmt::format("generate --model {} {}", only.string(), args));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.json()["tokens"], b.json()["tokens"]);
  std::filesystem::copy_file(dir / "model.gguf", only / "second.gguf");
  expect_error(run(fmt::format("generate --model {} {}", only.string(), args)), "2 GGUF files");
}

TEST_F(GgufCli, InfoAndPlanReadTheGgufMetadata) {
  const auto dir = make_gguf_model();
  CommandResult r =
      run(fmt::format("info --model {} --tp 2 --json", (dir / "model.gguf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["architecture"]["layers"], 3);
  EXPECT_EQ(j["architecture"]["hidden_size"], 64);
  EXPECT_EQ(j["architecture"]["kv_heads"], 2);
  EXPECT_EQ(j["architecture"]["vocab_size"], 300);
  EXPECT_EQ(j["checkpoint"]["format"], "gguf");
  EXPECT_EQ(j["checkpoint"]["dtypes"]["BF16"], 3 * 7 + 2);
  EXPECT_EQ(j["weight_dtype"], "bf16");
  EXPECT_TRUE(j["tp_valid"]);
  r = run(fmt::format("plan --model {} --tp 2", (dir / "model.gguf").string()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(GgufCli, BadGgufFilesNameTheFile) {
  const auto dir = make_gguf_model();
  const std::string gguf = read_file(dir / "model.gguf");
  const auto write = [&](const std::string& name, const std::string& bytes) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  const auto generate = [&](const std::filesystem::path& model) {
    return run(fmt::format("generate --model {} --prompt-ids 1,2 --max-new-tokens 2 --json",
                           model.string()));
  };
  expect_error(generate(write("truncated.gguf", gguf.substr(0, gguf.size() / 2))),
               "truncated.gguf: tensor");
  expect_error(generate(write("header.gguf", gguf.substr(0, 100))),
               "header.gguf: the metadata count claims");
  expect_error(generate(write("magic.gguf", "GGML" + gguf.substr(4))), "not a GGUF file");
  std::string version = gguf;
  version[4] = 9;
  expect_error(generate(write("version.gguf", version)), "GGUF version 9 is not supported");
  std::string count = gguf;
  count[15] = '\x7f';  // the tensor count's top byte
  expect_error(generate(write("count.gguf", count)), "tensors, more than the limit");
  // Truncated under mpirun: every rank ends, nothing hangs.
  SELFSPEC_SKIP_WITHOUT_MPI();
  const CommandResult r =
      run(fmt::format("generate --model {} --prompt-ids 1,2 --max-new-tokens 2",
                      write("t2.gguf", gguf.substr(0, gguf.size() - 64)).string()),
          2);
  expect_error(r, "t2.gguf");
}

}  // namespace
}  // namespace selfspec::testing
