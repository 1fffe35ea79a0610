// Option values that may be comma-separated lists ("adaptive,thompson", "local,gather"): bench
// compares every item, generate and plan take one (a run config written for bench still serves
// them: plan prices the first).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace selfspec {

// "a,b" -> {"a", "b"}; "" -> {""}.
std::vector<std::string> split_list(const std::string& text);

// Accepts one of `allowed`, or (with lists) a comma-separated list of them.
CLI::Validator member_or_list(std::vector<std::string> allowed, bool lists);

}  // namespace selfspec
