// parse_setting(): each type converts command-line text and checks JSON values, bounds open and
// closed, lists where asked, and every refusal names the field (as its source spells it), what it
// allows and what was given.
#include "core/setting_spec.hpp"
#include "core/error.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace selfspec {
namespace {

std::string error_of(const SettingSpec& spec, const nlohmann::json& value, SettingSource source,
                     bool lists = false) {
  try {
    parse_setting(spec, value, source, lists);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SettingSpec, IntegersFromTextAndJson) {
  const SettingSpec spec{.key = "k", .type = SettingType::kInt, .min = 1, .max = 63};
  EXPECT_EQ(parse_setting(spec, "7", SettingSource::kCommandLine), 7);
  EXPECT_EQ(parse_setting(spec, 63, SettingSource::kJson), 63);
  EXPECT_EQ(error_of(spec, "7x", SettingSource::kCommandLine),
            "--k must be an integer in [1, 63] (got '7x')");
  EXPECT_EQ(error_of(spec, 0, SettingSource::kJson), "\"k\" must be an integer in [1, 63] (got 0)");
  EXPECT_EQ(error_of(spec, 2.5, SettingSource::kJson),
            "\"k\" must be an integer in [1, 63] (got 2.5)");
  EXPECT_EQ(error_of(spec, "7", SettingSource::kJson),
            "\"k\" must be an integer in [1, 63] (got '7')");
}

TEST(SettingSpec, NumbersWithOpenBoundsAndNoNaN) {
  const SettingSpec spec{
      .key = "a", .type = SettingType::kNumber, .min = 0, .max = 1, .min_open = true};
  EXPECT_EQ(parse_setting(spec, "1", SettingSource::kCommandLine), 1.0);
  EXPECT_EQ(error_of(spec, 0.0, SettingSource::kJson), "\"a\" must be a number in (0, 1] (got 0)");
  EXPECT_EQ(error_of(spec, "nan", SettingSource::kCommandLine),
            "--a must be a number in (0, 1] (got 'nan')");
  const SettingSpec positive{.key = "p", .type = SettingType::kNumber, .min = 0, .min_open = true};
  EXPECT_EQ(error_of(positive, std::numeric_limits<double>::infinity(), SettingSource::kJson),
            "\"p\" must be a number > 0 (got inf)");
}

TEST(SettingSpec, ChoicesFlagsFilesAndLists) {
  const SettingSpec choice{
      .key = "c", .type = SettingType::kChoice, .choices = {"x", "y"}, .list = true};
  EXPECT_EQ(parse_setting(choice, "y", SettingSource::kCommandLine), "y");
  EXPECT_EQ(parse_setting(choice, "x,y", SettingSource::kCommandLine, true),
            nlohmann::json({"x", "y"}));
  EXPECT_EQ(error_of(choice, "x,z", SettingSource::kCommandLine, true),
            "--c must be one of x, y (or a comma-separated list of them) (got 'z')");
  EXPECT_EQ(error_of(choice, "x,y", SettingSource::kCommandLine),
            "--c must be one of x, y (got 'x,y')");
  const SettingSpec flag{.key = "f", .type = SettingType::kFlag};
  EXPECT_EQ(parse_setting(flag, "true", SettingSource::kCommandLine), true);
  EXPECT_EQ(error_of(flag, "yes", SettingSource::kJson), "\"f\" must be true or false (got 'yes')");
  const SettingSpec file{.key = "file", .type = SettingType::kFile};
  EXPECT_EQ(error_of(file, "/nonexistent/x", SettingSource::kJson),
            "\"file\" must be an existing file (got '/nonexistent/x')");
  const SettingSpec layers{.key = "l", .type = SettingType::kIntList, .min = 0};
  EXPECT_EQ(parse_setting(layers, "1,3", SettingSource::kCommandLine), nlohmann::json({1, 3}));
  EXPECT_EQ(parse_setting(layers, "", SettingSource::kCommandLine), nlohmann::json::array());
  EXPECT_EQ(error_of(layers, nlohmann::json({1, -2}), SettingSource::kJson),
            "\"l\" must be a list of integers >= 0 (got [1,-2])");
}

}  // namespace
}  // namespace selfspec
