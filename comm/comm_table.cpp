// Reading, checking and writing comm tables, and pricing a message from one (format and
// interpolation rule: comm/comm_table.hpp). YAML is converted to the JSON value tree first, so one
// checker serves both.
#include "comm/comm_table.hpp"

#include "core/error.hpp"
#include "core/yaml_json.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

namespace selfspec {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::string_view, 4> kCollectives = {"all_reduce", "broadcast", "gather",
                                                          "all_gather"};
constexpr std::array<std::string_view, 13> kTopLevelKeys = {
    "format", "version",    "transport", "ranks", "nodes",  "measured_at", "source",
    "tool",   "iterations", "warmup",    "notes", "memory", "ops"};

// The checker's position: the table's name and the dotted path of the field being read.
struct Where {
  std::string_view table;
  std::string path;

  Where operator/(std::string_view key) const {
    return {table, path.empty() ? std::string(key) : path + "." + std::string(key)};
  }
  Where operator[](std::size_t index) const { return {table, fmt::format("{}[{}]", path, index)}; }
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    selfspec::fail("comm table {}: {}: {}", table, path.empty() ? "(top level)" : path,
                   fmt::format(format, std::forward<Args>(args)...));
  }
};

const Json* member(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

double number(const Json& value, const Where& where) {
  if (!value.is_number()) where.fail("expected a number, got {}", value.dump());
  const double x = value.get<double>();
  if (!std::isfinite(x)) where.fail("{} is not finite", x);
  return x;
}

// A number > 0 (or >= 0 with allow_zero).
double positive(const Json& value, const Where& where, bool allow_zero = false) {
  const double x = number(value, where);
  if (x < 0.0 || (!allow_zero && x == 0.0))
    where.fail("{} must be {}", x, allow_zero ? ">= 0" : "> 0");
  return x;
}

const Json& required(const Json& object, std::string_view key, const Where& where) {
  const Json* value = member(object, key);
  if (value == nullptr) (where / key).fail("missing (required)");
  return *value;
}

std::string text_field(const Json& object, std::string_view key, const Where& where,
                       std::string fallback = {}) {
  const Json* value = member(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_number() || value->is_boolean()) return value->dump();
  (where / key).fail("expected text, got {}", value->dump());
}

int count_field(const Json& object, std::string_view key, const Where& where) {
  const Json* value = member(object, key);
  if (value == nullptr || value->is_null()) return 0;
  const double x = positive(*value, where / key, true);
  if (x != std::floor(x) || x > 1e9) (where / key).fail("{} is not a whole count", x);
  return static_cast<int>(x);
}

std::optional<double> optional_positive(const Json& object, std::string_view key,
                                        const Where& where) {
  const Json* value = member(object, key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  return positive(*value, where / key);
}

CollectivePoint read_point(const Json& value, const Where& where) {
  if (!value.is_object()) where.fail("expected {{bytes, median_s[, p90_s]}}, got {}", value.dump());
  CollectivePoint point;
  point.bytes = positive(required(value, "bytes", where), where / "bytes");
  point.median_s = positive(required(value, "median_s", where), where / "median_s", true);
  if (const Json* p90 = member(value, "p90_s"); p90 != nullptr && !p90->is_null()) {
    point.p90_s = positive(*p90, where / "p90_s", true);
    if (*point.p90_s < point.median_s)
      (where / "p90_s").fail("{} is below median_s {}", *point.p90_s, point.median_s);
  }
  return point;
}

std::vector<CollectivePoint> read_points(const Json& value, const Where& where) {
  if (!value.is_array()) where.fail("expected a list of points, got {}", value.dump());
  std::vector<CollectivePoint> points;
  for (std::size_t i = 0; i < value.size(); ++i) {
    points.push_back(read_point(value[i], where[i]));
    if (i > 0 && !(points[i].bytes > points[i - 1].bytes)) {
      (where[i] / "bytes")
          .fail("{} is not above the previous {} (sizes must increase)", points[i].bytes,
                points[i - 1].bytes);
    }
  }
  return points;
}

LatencyFit read_fit(const Json& value, const Where& where) {
  if (!value.is_object())
    where.fail("expected {{latency_s, bandwidth_bytes_per_s}}, got {}", value.dump());
  LatencyFit fit;
  fit.latency_s = positive(required(value, "latency_s", where), where / "latency_s", true);
  if (const auto bandwidth = optional_positive(value, "bandwidth_bytes_per_s", where))
    fit.bandwidth_bytes_per_s = *bandwidth;
  return fit;
}

CollectiveCost read_cost(const Json& value, const Where& where) {
  if (!value.is_object()) where.fail("expected {{points, fit}}, got {}", value.dump());
  for (const auto& [key, item] : value.items()) {
    if (key != "points" && key != "fit") (where / key).fail("unknown key (expected points, fit)");
  }
  CollectiveCost cost;
  if (const Json* points = member(value, "points"))
    cost.points = read_points(*points, where / "points");
  if (const Json* fit = member(value, "fit"); fit != nullptr && !fit->is_null()) {
    cost.fit = read_fit(*fit, where / "fit");
  } else if (cost.points.size() >= 2) {
    cost = CollectiveCost::fitted(std::move(cost.points));
  } else {
    where.fail("needs a fit {{latency_s, bandwidth_bytes_per_s}} or at least two points (has {})",
               cost.points.size());
  }
  return cost;
}

void read_memory(const Json& value, const Where& where, CommTable& table) {
  if (!value.is_object()) where.fail("expected {{read_bytes_per_s, ...}}, got {}", value.dump());
  table.memory_read_bytes_per_s =
      positive(required(value, "read_bytes_per_s", where), where / "read_bytes_per_s");
  table.memory_copy_bytes_per_s = optional_positive(value, "copy_bytes_per_s", where);
  table.memory_aggregate_read_bytes_per_s =
      optional_positive(value, "aggregate_read_bytes_per_s", where);
  table.memory_source = text_field(value, "source", where);
}

void read_ops(const Json& value, const Where& where, CommTable& table) {
  if (!value.is_object()) where.fail("expected a mapping of collectives, got {}", value.dump());
  for (const auto& [key, item] : value.items()) {
    if (!is_known_collective(key))
      (where / key).fail("unknown collective (expected all_reduce, broadcast, gather, all_gather)");
    table.ops[key] = read_cost(item, where / key);
  }
  if (!table.has("all_reduce")) (where / "all_reduce").fail("missing (required)");
}

void read_header(const Json& root, const Where& where, CommTable& table) {
  for (const auto& [key, item] : root.items()) {
    if (std::find(kTopLevelKeys.begin(), kTopLevelKeys.end(), key) == kTopLevelKeys.end())
      (where / key).fail("unknown key");
  }
  if (const Json* format = member(root, "format");
      format != nullptr && *format != std::string(CommTable::kFormat))
    (where / "format").fail("{} is not \"{}\"", format->dump(), CommTable::kFormat);
  if (const Json* version = member(root, "version");
      version != nullptr && !(version->is_number() && *version == CommTable::kVersion))
    (where / "version")
        .fail("{} is not {} (this selfspec reads version {})", version->dump(), CommTable::kVersion,
              CommTable::kVersion);
  table.transport = text_field(root, "transport", where, "unknown");
  table.ranks = count_field(root, "ranks", where);
  table.nodes = count_field(root, "nodes", where);
  table.measured_at = text_field(root, "measured_at", where);
  table.source = text_field(root, "source", where);
  table.tool = text_field(root, "tool", where);
  table.iterations = count_field(root, "iterations", where);
  table.warmup = count_field(root, "warmup", where);
  table.notes = text_field(root, "notes", where);
}

CommTable read_table(const Json& root, std::string_view name) {
  const Where where{name, {}};
  if (!root.is_object()) where.fail("expected a mapping, got {}", root.dump());
  CommTable table;
  table.origin = std::string(name);
  read_header(root, where, table);
  if (const Json* memory = member(root, "memory"); memory != nullptr && !memory->is_null())
    read_memory(*memory, where / "memory", table);
  read_ops(required(root, "ops", where), where / "ops", table);
  return table;
}

Json optional_number(const std::optional<double>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json cost_json(const CollectiveCost& cost) {
  Json points = Json::array();
  for (const CollectivePoint& p : cost.points) {
    points.push_back(
        {{"bytes", p.bytes}, {"median_s", p.median_s}, {"p90_s", optional_number(p.p90_s)}});
  }
  const double bandwidth = cost.fit.bandwidth_bytes_per_s;
  return {{"points", points},
          {"fit",
           {{"latency_s", cost.fit.latency_s},
            {"bandwidth_bytes_per_s", std::isinf(bandwidth) ? Json(nullptr) : Json(bandwidth)}}}};
}

}  // namespace

double CollectiveCost::time_s(double bytes) const {
  if (points.empty()) return fit.time_s(bytes);
  if (bytes <= points.front().bytes) return points.front().median_s;
  const CollectivePoint& last = points.back();
  if (bytes >= last.bytes) {
    const double beyond = bytes - last.bytes;
    return last.median_s +
           (std::isinf(fit.bandwidth_bytes_per_s) ? 0.0 : beyond / fit.bandwidth_bytes_per_s);
  }
  const auto upper =
      std::upper_bound(points.begin(), points.end(), bytes,
                       [](double b, const CollectivePoint& p) { return b < p.bytes; });
  const CollectivePoint& hi = *upper;
  const CollectivePoint& lo = *(upper - 1);
  const double f = (bytes - lo.bytes) / (hi.bytes - lo.bytes);
  return lo.median_s + f * (hi.median_s - lo.median_s);
}

CollectiveCost CollectiveCost::fitted(std::vector<CollectivePoint> points) {
  std::vector<double> bytes, seconds;
  for (const CollectivePoint& p : points) {
    bytes.push_back(p.bytes);
    seconds.push_back(p.median_s);
  }
  return {std::move(points), fit_latency(bytes, seconds)};
}

const CollectiveCost& CommTable::op(std::string_view name) const {
  const auto it = ops.find(name);
  SELFSPEC_CHECK(it != ops.end(), "comm table {}: no {} costs (ops.{})",
                 origin.empty() ? transport : origin, name, name);
  return it->second;
}

bool is_known_collective(std::string_view op) {
  return std::find(kCollectives.begin(), kCollectives.end(), op) != kCollectives.end();
}

CommTable parse_comm_table_json(std::string_view text, std::string_view name) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& error) {
    fail("comm table {}: not valid JSON: {}", name, error.what());
  }
  return read_table(root, name);
}

CommTable parse_comm_table_yaml(std::string_view text, std::string_view name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& error) {
    fail("comm table {}: not valid YAML: {}", name, error.what());
  }
  return read_table(yaml_to_json(root), name);
}

CommTable load_comm_table(const std::filesystem::path& file) {
  std::ifstream in(file);
  SELFSPEC_CHECK(in.good(), "comm table {}: cannot open for reading", file.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string extension = file.extension().string();
  if (extension == ".json") return parse_comm_table_json(buffer.str(), file.string());
  if (extension == ".yaml" || extension == ".yml")
    return parse_comm_table_yaml(buffer.str(), file.string());
  fail("comm table {}: unknown extension '{}' (expected .json, .yaml or .yml)", file.string(),
       extension);
}

std::string comm_table_json(const CommTable& table) {
  Json ops = Json::object();
  for (const auto& [name, cost] : table.ops) ops[name] = cost_json(cost);
  Json root = {{"format", CommTable::kFormat},
               {"version", CommTable::kVersion},
               {"transport", table.transport},
               {"ranks", table.ranks},
               {"nodes", table.nodes},
               {"measured_at", table.measured_at},
               {"source", table.source},
               {"tool", table.tool},
               {"iterations", table.iterations},
               {"warmup", table.warmup},
               {"notes", table.notes}};
  if (table.memory_read_bytes_per_s) {
    root["memory"] = {
        {"read_bytes_per_s", *table.memory_read_bytes_per_s},
        {"copy_bytes_per_s", optional_number(table.memory_copy_bytes_per_s)},
        {"aggregate_read_bytes_per_s", optional_number(table.memory_aggregate_read_bytes_per_s)},
        {"source", table.memory_source}};
  }
  root["ops"] = ops;
  return root.dump(2) + "\n";
}

}  // namespace selfspec
