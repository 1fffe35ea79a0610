#include "launch/prompt_suite.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace selfspec::launch {

namespace {

const std::vector<std::string> kKeys = {"id", "task", "split", "prompt"};

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// The value of `key` in one line's object: present, a string, and (unless allowed) not empty.
std::string string_field(const nlohmann::json& object, const std::string& key,
                         const std::string& where) {
  const auto it = object.find(key);
  SELFSPEC_CHECK(it != object.end(), "{}: missing key '{}' (each line needs {})", where, key,
                 fmt::join(kKeys, ", "));
  SELFSPEC_CHECK(it->is_string(), "{}: key '{}' must be a string, not {}", where, key,
                 it->type_name());
  std::string value = it->get<std::string>();
  SELFSPEC_CHECK(!value.empty(), "{}: key '{}' is empty", where, key);
  return value;
}

PromptSplit parse_split(const std::string& text, const std::string& where) {
  if (text == "calibration") return PromptSplit::kCalibration;
  if (text == "evaluation") return PromptSplit::kEvaluation;
  fail("{}: key 'split' is '{}'; it must be 'calibration' or 'evaluation'", where, text);
}

// One line: a JSON object with exactly the four keys, each valid.
SuitePrompt parse_line(std::string_view line, const std::string& where) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& error) {
    fail("{}: not valid JSON ({})", where, error.what());
  }
  SELFSPEC_CHECK(object.is_object(), "{}: each line must be a JSON object, not {}", where,
                 object.type_name());
  for (const auto& [key, value] : object.items()) {
    SELFSPEC_CHECK(contains(kKeys, key), "{}: unknown key '{}' (the keys are {})", where, key,
                   fmt::join(kKeys, ", "));
  }
  SuitePrompt prompt;
  prompt.source = where;
  prompt.id = string_field(object, "id", where);
  prompt.task = string_field(object, "task", where);
  SELFSPEC_CHECK(contains(known_prompt_tasks(), prompt.task),
                 "{}: key 'task' is '{}'; it must be one of {}", where, prompt.task,
                 fmt::join(known_prompt_tasks(), ", "));
  prompt.split = parse_split(string_field(object, "split", where), where);
  prompt.text = string_field(object, "prompt", where);
  return prompt;
}

// Ids must be unique across every file of a run: a report keys its records by id.
void check_unique_ids(const std::vector<SuitePrompt>& prompts) {
  std::map<std::string, const SuitePrompt*> seen;
  for (const SuitePrompt& prompt : prompts) {
    const auto [it, inserted] = seen.emplace(prompt.id, &prompt);
    SELFSPEC_CHECK(inserted, "{}: key 'id': '{}' is already used at {}", prompt.source, prompt.id,
                   it->second->source);
  }
}

}  // namespace

const std::vector<std::string>& known_prompt_tasks() {
  static const std::vector<std::string> kTasks = {"chat", "summarisation", "qa", "maths", "code"};
  return kTasks;
}

std::string_view prompt_split_name(PromptSplit split) {
  return split == PromptSplit::kCalibration ? "calibration" : "evaluation";
}

std::vector<SuitePrompt> parse_prompt_suite(std::string_view text, const std::string& path) {
  std::vector<SuitePrompt> prompts;
  std::size_t begin = 0;
  for (int line_number = 1; begin < text.size(); ++line_number) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    if (!is_blank(line)) {
      prompts.push_back(parse_line(line, fmt::format("{}:{}", path, line_number)));
    }
    begin = end + 1;
  }
  SELFSPEC_CHECK(!prompts.empty(), "{}: holds no prompts", path);
  check_unique_ids(prompts);
  return prompts;
}

std::vector<SuitePrompt> read_prompt_suite(const std::vector<std::string>& paths) {
  SELFSPEC_CHECK(!paths.empty(), "--prompts-file: no file given");
  std::vector<SuitePrompt> suite;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    SELFSPEC_CHECK(in.good(), "--prompts-file {}: cannot open for reading", path);
    std::ostringstream text;
    text << in.rdbuf();
    std::vector<SuitePrompt> prompts = parse_prompt_suite(text.str(), path);
    suite.insert(suite.end(), std::make_move_iterator(prompts.begin()),
                 std::make_move_iterator(prompts.end()));
  }
  check_unique_ids(suite);
  return suite;
}

std::vector<SuitePrompt> select_prompts(const std::vector<SuitePrompt>& suite,
                                        const PromptSelection& selection) {
  SELFSPEC_CHECK(contains(kPromptSplitChoices, selection.split), "--split: '{}' is not one of {}",
                 selection.split, fmt::join(kPromptSplitChoices, ", "));
  for (const std::string& task : selection.tasks) {
    SELFSPEC_CHECK(contains(known_prompt_tasks(), task), "--tasks: '{}' is not one of {}", task,
                   fmt::join(known_prompt_tasks(), ", "));
  }
  const auto in_split = [&](const SuitePrompt& p) {
    return selection.split == "all" || prompt_split_name(p.split) == selection.split;
  };
  const auto wanted = [&](const SuitePrompt& p) {
    return selection.tasks.empty() || contains(selection.tasks, p.task);
  };
  std::vector<SuitePrompt> selected;
  std::map<std::string, int> per_task;
  for (const SuitePrompt& prompt : suite) {
    if (!in_split(prompt) || !wanted(prompt)) continue;
    int& count = per_task[prompt.task];
    if (selection.max_per_task > 0 && count >= selection.max_per_task) continue;
    ++count;
    selected.push_back(prompt);
  }
  for (const std::string& task : selection.tasks) {
    SELFSPEC_CHECK(per_task.count(task) > 0,
                   "--tasks: the suite has no prompt of task '{}' in split '{}'", task,
                   selection.split);
  }
  SELFSPEC_CHECK(!selected.empty(), "--prompts-file: no prompt of split '{}' in the suite",
                 selection.split);
  return selected;
}

std::vector<std::string> tasks_of(const std::vector<SuitePrompt>& prompts) {
  std::vector<std::string> tasks;
  for (const std::string& task : known_prompt_tasks()) {
    const bool present = std::any_of(prompts.begin(), prompts.end(),
                                     [&](const SuitePrompt& p) { return p.task == task; });
    if (present) tasks.push_back(task);
  }
  return tasks;
}

}  // namespace selfspec::launch
