// The prompt-suite format of `bench --prompts-file`: valid files parse in order with their
// FILE:LINE; every malformed line is refused with FILE:LINE and the key at fault; the selection
// (--split, --tasks, --max-prompts-per-task) picks exactly what it says; and the shipped sets in
// bench/prompts/ are well-formed, 16 prompts each with a quarter of them calibration prompts.
#include "launch/prompt_suite.hpp"

#include "core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace selfspec::launch {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string line(const std::string& id, const std::string& task, const std::string& split,
                 const std::string& prompt = "Some text.") {
  return R"({"id": ")" + id + R"(", "task": ")" + task + R"(", "split": ")" + split +
         R"(", "prompt": ")" + prompt + "\"}\n";
}

// The error message parse_prompt_suite throws for `text` ("" when it parses).
std::string parse_error(const std::string& text) {
  try {
    parse_prompt_suite(text, "set.jsonl");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(PromptSuite, ParsesEveryLineInOrderAndSkipsBlankLines) {
  const std::string text = line("a", "chat", "evaluation", "Hi \\\"there\\\"\\nsecond line") +
                           "\n   \n" + line("b", "maths", "calibration") +
                           line("c", "code", "evaluation");
  const std::vector<SuitePrompt> suite = parse_prompt_suite(text, "set.jsonl");
  ASSERT_EQ(suite.size(), 3u);
  EXPECT_EQ(suite[0].id, "a");
  EXPECT_EQ(suite[0].task, "chat");
  EXPECT_EQ(suite[0].split, PromptSplit::kEvaluation);
  EXPECT_EQ(suite[0].text, "Hi \"there\"\nsecond line");
  EXPECT_EQ(suite[0].source, "set.jsonl:1");
  EXPECT_EQ(suite[1].split, PromptSplit::kCalibration);
  EXPECT_EQ(suite[1].source, "set.jsonl:4") << "blank lines still count";
  EXPECT_EQ(suite[2].task, "code");
}

TEST(PromptSuite, MalformedLinesNameFileLineAndKey) {
  const std::string good = line("a", "chat", "evaluation");
  EXPECT_THAT(parse_error(good + "{\"id\": \"b\",\n"),
              AllOf(HasSubstr("set.jsonl:2"), HasSubstr("not valid JSON")));
  EXPECT_THAT(parse_error(good + "[1, 2]\n"),
              AllOf(HasSubstr("set.jsonl:2"), HasSubstr("must be a JSON object")));
  EXPECT_THAT(parse_error(R"({"id": "a", "task": "chat", "prompt": "x"})"),
              AllOf(HasSubstr("set.jsonl:1"), HasSubstr("missing key 'split'")));
  EXPECT_THAT(parse_error(R"({"id": 7, "task": "chat", "split": "evaluation", "prompt": "x"})"),
              AllOf(HasSubstr("set.jsonl:1"), HasSubstr("key 'id' must be a string")));
  EXPECT_THAT(parse_error(good + line("b", "chat", "evaluation", "")),
              AllOf(HasSubstr("set.jsonl:2"), HasSubstr("key 'prompt' is empty")));
  EXPECT_THAT(
      parse_error(R"({"id": "a", "task": "chat", "split": "evaluation", "prompt": "x", "n": 1})"),
      AllOf(HasSubstr("set.jsonl:1"), HasSubstr("unknown key 'n'")));
  EXPECT_THAT(parse_error(line("a", "poetry", "evaluation")),
              AllOf(HasSubstr("set.jsonl:1"), HasSubstr("key 'task' is 'poetry'"),
                    HasSubstr("summarisation")));
  EXPECT_THAT(parse_error(line("a", "chat", "test")),
              AllOf(HasSubstr("set.jsonl:1"), HasSubstr("key 'split' is 'test'")));
  EXPECT_THAT(parse_error(good + line("b", "qa", "evaluation") + line("a", "qa", "evaluation")),
              AllOf(HasSubstr("set.jsonl:3"), HasSubstr("'a' is already used at set.jsonl:1")));
  EXPECT_THAT(parse_error("\n\n"), HasSubstr("set.jsonl: holds no prompts"));
  EXPECT_EQ(parse_error(good), "");
}

TEST(PromptSuite, IdsMustBeUniqueAcrossFiles) {
  const auto dir = std::filesystem::temp_directory_path() / "selfspec-prompt-suite-test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string one = write("one.jsonl", line("x", "chat", "evaluation"));
  const std::string two = write("two.jsonl", line("y", "qa", "evaluation"));
  const std::string again = write("again.jsonl", line("x", "qa", "evaluation"));
  EXPECT_EQ(read_prompt_suite({one, two}).size(), 2u);
  try {
    read_prompt_suite({one, again});
    ADD_FAILURE() << "a duplicate id across files was accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), AllOf(HasSubstr(again + ":1"), HasSubstr(one + ":1")));
  }
  EXPECT_THROW(read_prompt_suite({(dir / "missing.jsonl").string()}), Error);
  std::filesystem::remove_all(dir);
}

std::vector<SuitePrompt> mixed_suite() {
  return parse_prompt_suite(line("c1", "chat", "calibration") + line("c2", "chat", "evaluation") +
                                line("c3", "chat", "evaluation") +
                                line("m1", "maths", "evaluation") +
                                line("m2", "maths", "calibration") + line("q1", "qa", "evaluation"),
                            "mixed.jsonl");
}

std::vector<std::string> ids(const std::vector<SuitePrompt>& prompts) {
  std::vector<std::string> out;
  for (const SuitePrompt& p : prompts) out.push_back(p.id);
  return out;
}

TEST(PromptSuite, SelectionFollowsSplitTasksAndLimitInFileOrder) {
  const std::vector<SuitePrompt> suite = mixed_suite();
  using V = std::vector<std::string>;
  EXPECT_EQ(ids(select_prompts(suite, {})), (V{"c2", "c3", "m1", "q1"})) << "evaluation by default";
  EXPECT_EQ(ids(select_prompts(suite, {"calibration", {}, 0})), (V{"c1", "m2"}));
  EXPECT_EQ(ids(select_prompts(suite, {"all", {}, 0})), (V{"c1", "c2", "c3", "m1", "m2", "q1"}));
  EXPECT_EQ(ids(select_prompts(suite, {"evaluation", {"qa", "chat"}, 0})), (V{"c2", "c3", "q1"}));
  EXPECT_EQ(ids(select_prompts(suite, {"all", {}, 1})), (V{"c1", "m1", "q1"}));
  EXPECT_EQ(tasks_of(select_prompts(suite, {"all", {}, 0})), (V{"chat", "qa", "maths"}))
      << "known_prompt_tasks() order";
}

TEST(PromptSuite, SelectionRefusesWhatItCannotDeliver) {
  const std::vector<SuitePrompt> suite = mixed_suite();
  const auto message = [&](const PromptSelection& selection) -> std::string {
    try {
      select_prompts(suite, selection);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_THAT(message({"evaluation", {"code"}, 0}),
              AllOf(HasSubstr("--tasks"), HasSubstr("'code'"), HasSubstr("evaluation")));
  EXPECT_THAT(message({"calibration", {"qa"}, 0}), HasSubstr("task 'qa' in split 'calibration'"));
  EXPECT_THAT(message({"evaluation", {"essays"}, 0}), HasSubstr("--tasks: 'essays'"));
  EXPECT_THAT(message({"test", {}, 0}), HasSubstr("--split: 'test'"));
  const std::vector<SuitePrompt> calibration_only =
      parse_prompt_suite(line("a", "chat", "calibration"), "c.jsonl");
  EXPECT_THROW(select_prompts(calibration_only, {}), Error);
}

// The sets the repository ships: one task per file, 16 prompts, every 4th (ids -01, -05, -09,
// -13) a calibration prompt, ids unique across the sets; summarisation passages of 150-300 words.
TEST(PromptSuite, ShippedSetsAreWellFormed) {
  const std::filesystem::path dir = std::filesystem::path(SELFSPEC_SOURCE_DIR) / "bench/prompts";
  std::vector<std::string> files;
  for (const std::string& task : std::vector<std::string>{"chat", "summarisation", "qa", "maths"}) {
    files.push_back((dir / (task + ".jsonl")).string());
    const std::vector<SuitePrompt> set = read_prompt_suite({files.back()});
    ASSERT_EQ(set.size(), 16u) << task;
    for (std::size_t i = 0; i < set.size(); ++i) {
      EXPECT_EQ(set[i].task, task) << set[i].source;
      EXPECT_EQ(set[i].id, fmt::format("{}-{:02}", task, i + 1)) << set[i].source;
      EXPECT_EQ(set[i].split, i % 4 == 0 ? PromptSplit::kCalibration : PromptSplit::kEvaluation)
          << set[i].source;
      if (task == "summarisation") {
        std::istringstream words(set[i].text.substr(set[i].text.find("\n\n")));
        const auto n = std::distance(std::istream_iterator<std::string>(words),
                                     std::istream_iterator<std::string>());
        EXPECT_GE(n, 150) << set[i].source;
        EXPECT_LE(n, 300) << set[i].source;
      }
    }
  }
  EXPECT_EQ(read_prompt_suite(files).size(), 64u);
}

}  // namespace
}  // namespace selfspec::launch
