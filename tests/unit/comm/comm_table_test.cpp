// Comm tables (comm/comm_table.hpp): JSON and YAML read the same, the writer's JSON reads back
// equal, errors name the file and the field, interpolation between measured sizes and the fit
// beyond them, and every shipped table in configs/comm/ loads.
#include "comm/comm_table.hpp"
#include "core/error.hpp"
#include "tests/support/temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

namespace selfspec {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::filesystem::path kSource(SELFSPEC_SOURCE_DIR);

constexpr const char* kJson = R"({
  "format": "selfspec-comm-table", "version": 1, "transport": "tcp-netem", "ranks": 2,
  "nodes": 2, "measured_at": "2026-11-27T10:00:00Z",
  "memory": {"read_bytes_per_s": 1.0e10},
  "ops": {
    "all_reduce": {"points": [{"bytes": 1000, "median_s": 1.0e-4, "p90_s": 2.0e-4},
                              {"bytes": 3000, "median_s": 3.0e-4}],
                   "fit": {"latency_s": 5.0e-5, "bandwidth_bytes_per_s": 1.0e7}},
    "broadcast": {"fit": {"latency_s": 2.0e-5}}
  }
})";

constexpr const char* kYaml = R"(# the same table as YAML
format: selfspec-comm-table
version: 1
transport: tcp-netem
ranks: 2
nodes: 2
measured_at: "2026-11-27T10:00:00Z"
memory:
  read_bytes_per_s: 1.0e10
ops:
  all_reduce:
    points:
      - {bytes: 1000, median_s: 1.0e-4, p90_s: 2.0e-4}
      - {bytes: 3000, median_s: 3.0e-4}
    fit: {latency_s: 5.0e-5, bandwidth_bytes_per_s: 1.0e+7}
  broadcast:
    fit: {latency_s: 2.0e-5}
)";

void expect_example(const CommTable& t) {
  EXPECT_EQ(t.transport, "tcp-netem");
  EXPECT_EQ(t.ranks, 2);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.measured_at, "2026-11-27T10:00:00Z");
  ASSERT_TRUE(t.memory_read_bytes_per_s.has_value());
  EXPECT_EQ(*t.memory_read_bytes_per_s, 1.0e10);
  ASSERT_TRUE(t.has("all_reduce"));
  ASSERT_TRUE(t.has("broadcast"));
  EXPECT_FALSE(t.has("gather"));
  const CollectiveCost& ar = t.op("all_reduce");
  ASSERT_EQ(ar.points.size(), 2u);
  EXPECT_EQ(ar.points[0].bytes, 1000);
  EXPECT_EQ(ar.points[0].p90_s, 2.0e-4);
  EXPECT_FALSE(ar.points[1].p90_s.has_value());
  EXPECT_EQ(ar.fit.latency_s, 5.0e-5);
  EXPECT_EQ(ar.fit.bandwidth_bytes_per_s, 1.0e7);
  EXPECT_TRUE(std::isinf(t.op("broadcast").fit.bandwidth_bytes_per_s));
}

TEST(CommTable, JsonAndYamlReadTheSame) {
  expect_example(parse_comm_table_json(kJson, "t.json"));
  expect_example(parse_comm_table_yaml(kYaml, "t.yaml"));
}

TEST(CommTable, LoadsByExtensionAndRefusesOthers) {
  testing::TempDir dir;
  for (const auto& [name, text] : {std::pair{"t.json", kJson}, std::pair{"t.yml", kYaml}}) {
    std::ofstream(dir / name) << text;
    const CommTable table = load_comm_table(dir / name);
    expect_example(table);
    EXPECT_EQ(table.origin, (dir / name).string());
  }
  std::ofstream(dir / "t.txt") << kJson;
  EXPECT_THROW(
      {
        try {
          load_comm_table(dir / "t.txt");
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), AllOf(HasSubstr("t.txt"), HasSubstr("extension")));
          throw;
        }
      },
      Error);
  EXPECT_THROW(load_comm_table(dir / "missing.json"), Error);
}

TEST(CommTable, WrittenJsonReadsBackEqual) {
  const CommTable table = parse_comm_table_json(kJson, "t.json");
  const CommTable again = parse_comm_table_json(comm_table_json(table), "again.json");
  expect_example(again);
  EXPECT_EQ(again.op("all_reduce").points[1].median_s, 3.0e-4);
}

TEST(CommTable, FitsTheMeasuredPointsWhenNoFitIsGiven) {
  const CommTable t = parse_comm_table_yaml(R"(
ops:
  all_reduce:
    points: [{bytes: 100, median_s: 2.0e-6}, {bytes: 200, median_s: 3.0e-6},
             {bytes: 400, median_s: 5.0e-6}]
)",
                                            "fit.yaml");
  EXPECT_EQ(t.transport, "unknown");
  EXPECT_EQ(t.ranks, 0);
  EXPECT_FALSE(t.memory_read_bytes_per_s.has_value());
  EXPECT_NEAR(t.op("all_reduce").fit.latency_s, 1.0e-6, 1e-15);
  EXPECT_NEAR(t.op("all_reduce").fit.bandwidth_bytes_per_s, 1.0e8, 1e-3);
}

TEST(CommTable, InterpolatesBetweenSizesAndExtrapolatesWithTheFit) {
  const CommTable t = parse_comm_table_json(kJson, "t.json");
  const CollectiveCost& ar = t.op("all_reduce");
  EXPECT_DOUBLE_EQ(ar.time_s(10), 1.0e-4);                     // below the smallest: its time
  EXPECT_DOUBLE_EQ(ar.time_s(1000), 1.0e-4);                   // a measured size
  EXPECT_DOUBLE_EQ(ar.time_s(1500), 1.5e-4);                   // a quarter of the way
  EXPECT_DOUBLE_EQ(ar.time_s(2000), 2.0e-4);                   // half way
  EXPECT_DOUBLE_EQ(ar.time_s(3000), 3.0e-4);                   // the largest
  EXPECT_DOUBLE_EQ(ar.time_s(13000), 3.0e-4 + 10000 / 1.0e7);  // beyond: + Δbytes / β
  EXPECT_DOUBLE_EQ(t.time_s("broadcast", 1e6), 2.0e-5);        // fit only, no size dependence
  EXPECT_THROW(t.time_s("gather", 100), Error);
}

// The error of parsing `yaml`, which must name the file and `field` and say `what`.
void expect_error(const std::string& yaml, const std::string& field, const std::string& what) {
  try {
    parse_comm_table_yaml(yaml, "bad.yaml");
    ADD_FAILURE() << "no error for:\n" << yaml;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("comm table bad.yaml"), HasSubstr(field), HasSubstr(what)))
        << yaml;
  }
}

TEST(CommTable, ErrorsNameTheFileAndTheField) {
  const std::string fit = "    fit: {latency_s: 1.0e-5}\n";
  expect_error("transport: x\n", "ops", "missing");
  expect_error("ops:\n  broadcast:\n" + fit, "ops.all_reduce", "missing");
  expect_error("ops:\n  allreduce:\n" + fit, "ops.allreduce", "unknown collective");
  expect_error("opps: {}\nops:\n  all_reduce:\n" + fit, "opps", "unknown key");
  expect_error("ops:\n  all_reduce:\n    points: [{bytes: -8, median_s: 1.0e-5}]\n" + fit,
               "ops.all_reduce.points[0].bytes", "-8 must be > 0");
  expect_error(
      "ops:\n  all_reduce:\n    points: [{bytes: 8, median_s: 1.0e-5}, {bytes: 8, median_s: "
      "2.0e-5}]\n",
      "ops.all_reduce.points[1].bytes", "sizes must increase");
  expect_error(
      "ops:\n  all_reduce:\n    points: [{bytes: 16, median_s: 1.0e-5}, {bytes: 8, median_s: "
      "2.0e-5}]\n",
      "ops.all_reduce.points[1].bytes", "not above the previous 16");
  expect_error("ops:\n  all_reduce:\n    points: [{bytes: 8, median_s: -1.0e-5}]\n" + fit,
               "ops.all_reduce.points[0].median_s", "must be >= 0");
  expect_error(
      "ops:\n  all_reduce:\n    points: [{bytes: 8, median_s: 2.0e-5, p90_s: 1.0e-5}]\n" + fit,
      "ops.all_reduce.points[0].p90_s", "below median_s");
  expect_error("ops:\n  all_reduce:\n    points: [{median_s: 1.0e-5}]\n" + fit,
               "ops.all_reduce.points[0].bytes", "missing");
  expect_error("ops:\n  all_reduce:\n    points: [{bytes: 8, median_s: 1.0e-5}]\n",
               "ops.all_reduce", "needs a fit");
  expect_error("ops:\n  all_reduce:\n    fit: {latency_s: -1.0e-5}\n",
               "ops.all_reduce.fit.latency_s", "must be >= 0");
  expect_error("ops:\n  all_reduce:\n    fit: {latency_s: 1.0e-5, bandwidth_bytes_per_s: 0}\n",
               "ops.all_reduce.fit.bandwidth_bytes_per_s", "must be > 0");
  expect_error("ops:\n  all_reduce:\n    fit: {latency_s: fast}\n", "ops.all_reduce.fit.latency_s",
               "expected a number");
  expect_error("memory: {copy_bytes_per_s: 1.0e9}\nops:\n  all_reduce:\n" + fit,
               "memory.read_bytes_per_s", "missing");
  expect_error("version: 2\nops:\n  all_reduce:\n" + fit, "version", "reads version 1");
  expect_error("ranks: 1.5\nops:\n  all_reduce:\n" + fit, "ranks", "whole count");
  expect_error("ops: [1, 2]\n", "ops", "expected a mapping");
  expect_error("ops: {all_reduce: [\n", "", "not valid YAML");
  try {
    parse_comm_table_json("{\"ops\": ", "bad.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("bad.json"), HasSubstr("not valid JSON")));
  }
}

TEST(CommTable, ShippedTablesLoad) {
  int tables = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSource / "configs/comm")) {
    if (entry.path().extension() != ".yaml") continue;
    const CommTable table = load_comm_table(entry.path());
    EXPECT_GT(table.ranks, 0) << entry.path();
    EXPECT_TRUE(table.memory_read_bytes_per_s.has_value()) << entry.path();
    EXPECT_GT(table.time_s("all_reduce", 32768), 0.0) << entry.path();
    ++tables;
  }
  EXPECT_GE(tables, 2);
}

}  // namespace
}  // namespace selfspec
