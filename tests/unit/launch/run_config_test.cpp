// Run configs: keys become options after the subcommand, the command line wins, lists join with
// commas, flags follow booleans, nested maps only group, keys of other subcommands are ignored,
// input paths resolve against the config file, and unknown keys are errors naming file and key.
#include "launch/run_config.hpp"
#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

namespace selfspec::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RunConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    generate_ = app_.add_subcommand("generate");
    generate_->add_option("--config");
    generate_->add_option("--model");
    generate_->add_option("--tp");
    generate_->add_option("--max-new-tokens");
    generate_->add_option("--skip-attn");
    generate_->add_flag("--ignore-eos");
    generate_->add_flag("--json");
    generate_->add_option("--controller");
    CLI::App* plan = app_.add_subcommand("plan");
    plan->add_option("--gpu-memory");
  }

  std::string write(const std::string& text) {
    const auto path = dir_ / "run.yaml";
    std::ofstream(path) << text;
    return path.string();
  }

  std::vector<std::string> expand(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    return expand_run_config(app_, static_cast<int>(argv.size()), argv.data());
  }

  CLI::App app_;
  CLI::App* generate_ = nullptr;
  testing::TempDir dir_{"run-config"};
};

TEST_F(RunConfigTest, KeysBecomeOptionsAndTheCommandLineWins) {
  const std::string file = write(
      "model: models/m\ntp: 8\nmax_new_tokens: 64\nignore-eos: true\njson: false\n"
      "decoding:\n  controller: adaptive\n  skip-attn: [3, 5, 9]\ngpu-memory: 80\n");
  const std::vector<std::string> args =
      expand({"selfspec", "generate", "--config", file, "--tp=2"});
  const std::string model = (dir_.path() / "models/m").lexically_normal().string();
  EXPECT_THAT(args, ElementsAre("selfspec", "generate", "--model=" + model, "--max-new-tokens=64",
                                "--ignore-eos", "--controller=adaptive", "--skip-attn=3,5,9",
                                "--config", file, "--tp=2"));
}

TEST_F(RunConfigTest, AnAlternativeOnTheCommandLineReplacesTheFilesChoice) {
  generate_->add_option("--architecture");
  const std::string file = write("architecture: ../models/x.yaml\nmax-new-tokens: 4\n");
  EXPECT_THAT(
      expand({"selfspec", "generate", "--config", file, "--model", "/m"}),
      ElementsAre("selfspec", "generate", "--max-new-tokens=4", "--config", file, "--model", "/m"));
}

TEST_F(RunConfigTest, SpecNoneOnTheCommandLineDropsTheFilesSkipSet) {
  generate_->add_option("--spec");
  generate_->add_option("--skip-uniform");
  const std::string file = write("spec: layer-skip\nskip-uniform: 0.5\ncontroller: adaptive\n");
  EXPECT_THAT(expand({"selfspec", "generate", "--config", file, "--spec", "none"}),
              ElementsAre("selfspec", "generate", "--controller=adaptive", "--config", file,
                          "--spec", "none"));
}

TEST_F(RunConfigTest, WithoutAConfigTheArgumentsAreUnchanged) {
  EXPECT_THAT(expand({"selfspec", "generate", "--tp", "2"}),
              ElementsAre("selfspec", "generate", "--tp", "2"));
}

TEST_F(RunConfigTest, TrainedDraftFilesAreInputPathsToo) {
  generate_->add_option("--exit-head");
  generate_->add_option("--draft-vocab");
  generate_->add_option("--cali-predictor");
  generate_->add_option("--feature-head");
  generate_->add_option("--skip-config");
  const std::string file = write(
      "decoding:\n  exit-head: ../out/h.safetensors\n  draft-vocab: v.json\n"
      "  cali-predictor: /abs/p.safetensors\n  feature-head: f.safetensors\n"
      "  skip-config: ../s.json\n");
  const auto in_dir = [&](const std::string& p) {
    return (dir_.path() / p).lexically_normal().string();
  };
  EXPECT_THAT(
      expand({"selfspec", "generate", "--config", file}),
      ElementsAre("selfspec", "generate", "--exit-head=" + in_dir("../out/h.safetensors"),
                  "--draft-vocab=" + in_dir("v.json"), "--cali-predictor=/abs/p.safetensors",
                  "--feature-head=" + in_dir("f.safetensors"),
                  "--skip-config=" + in_dir("../s.json"), "--config", file));
}

TEST_F(RunConfigTest, AbsolutePathsStayAsWritten) {
  const std::string file = write("model: /data/llama\n");
  EXPECT_THAT(expand({"selfspec", "generate", "--config=" + file}),
              ElementsAre("selfspec", "generate", "--model=/data/llama", "--config=" + file));
}

TEST_F(RunConfigTest, UnknownKeysAndBadFilesAreErrorsNamingThem) {
  const auto expect_error = [&](const std::string& file, const std::string& text) {
    try {
      expand({"selfspec", "generate", "--config", file});
      ADD_FAILURE() << "accepted " << file;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(file));
      EXPECT_THAT(error.what(), HasSubstr(text));
    }
  };
  expect_error(write("max-new-tokns: 3\n"), "unknown key 'max-new-tokns'");
  expect_error(write("tp: [1\n"), "not valid YAML");
  expect_error(write("- a\n- b\n"), "mapping");
  expect_error((dir_ / "absent.yaml").string(), "no such file");
}

}  // namespace
}  // namespace selfspec::launch
