// A comm table: what the collectives of one transport cost, measured (bench/comm/comm_bench.cpp
// writes it) or written by hand from published figures (configs/comm/), and read by
// `selfspec plan --comm-table` to price a decode step (launch/plan/comm_cost_model.hpp).
//
// Format (JSON, or YAML with the same keys; configs/comm/README.md):
//
//   format: selfspec-comm-table     optional; when given, exactly this
//   version: 1                      optional; when given, 1
//   transport: "openmpi-shm"        free text naming the transport (default "unknown")
//   ranks: 2                        ranks it was measured with (0 or absent: not stated)
//   nodes: 1                        distinct hosts among them (0 or absent: not stated)
//   measured_at: "2026-11-27T10:00:00Z"   UTC time of the measurement (free text)
//   source: "..."                   provenance (free text)
//   tool, iterations, warmup, notes      optional, informative (comm_bench writes them)
//   memory:                         optional: each rank's streaming memory bandwidth
//     read_bytes_per_s: 3.35e12     required when `memory` is given, > 0
//     copy_bytes_per_s, aggregate_read_bytes_per_s, source   optional
//   ops:                            required; at least all_reduce
//     all_reduce | broadcast | gather | all_gather:
//       points:                     optional: measured sizes, strictly increasing bytes
//         - {bytes: 2304, median_s: 1.1e-5, p90_s: 1.4e-5}   bytes > 0, 0 <= median_s <= p90_s
//       fit:                        optional: the Hockney model t = latency_s + bytes / bandwidth
//         latency_s: 1.0e-5         >= 0
//         bandwidth_bytes_per_s: 2.0e11   > 0; null or absent: no size dependence
//     An op needs a fit or at least two points (its fit is then the least-squares one).
//
// Bytes are the message as the caller passes it: an all-reduce's or a broadcast's buffer, a
// gather's or an all-gather's per-rank contribution. Times are the slowest rank's, in seconds.
//
// time_s(op, n): with points, linear interpolation between the measured sizes; below the
// smallest, the smallest's time (latency does not shrink below what was measured); above the
// largest, the largest's time plus (n - its bytes) / bandwidth of the fit. Without points, the
// fit alone. Hockney's α + n/β: comm/latency_fit.hpp.
#pragma once

#include "comm/latency_fit.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfspec {

struct CollectivePoint {
  double bytes = 0.0;
  double median_s = 0.0;
  std::optional<double> p90_s;
};

// One collective's cost over message sizes.
struct CollectiveCost {
  std::vector<CollectivePoint> points;  // strictly increasing bytes
  LatencyFit fit;                       // given, or fitted to the points

  double time_s(double bytes) const;
  // The cost of measured points, with their least-squares fit (fit_latency over the medians).
  static CollectiveCost fitted(std::vector<CollectivePoint> points);
};

struct CommTable {
  static constexpr std::string_view kFormat = "selfspec-comm-table";
  static constexpr int kVersion = 1;

  std::string transport = "unknown";
  int ranks = 0;  // 0: not stated
  int nodes = 0;  // 0: not stated
  std::string measured_at;
  std::string source;
  std::string tool;
  int iterations = 0;
  int warmup = 0;
  std::string notes;
  std::optional<double> memory_read_bytes_per_s;
  std::optional<double> memory_copy_bytes_per_s;
  std::optional<double> memory_aggregate_read_bytes_per_s;
  std::string memory_source;
  std::map<std::string, CollectiveCost, std::less<>> ops;
  std::string origin;  // the file it was read from (for messages); empty when built in memory

  bool has(std::string_view op) const { return ops.find(op) != ops.end(); }
  // The op's cost; throws selfspec::Error naming the table when it has no such op.
  const CollectiveCost& op(std::string_view name) const;
  double time_s(std::string_view op, double bytes) const { return this->op(op).time_s(bytes); }
};

// The collectives a table may describe: all_reduce, broadcast, gather, all_gather.
bool is_known_collective(std::string_view op);

// Reads a table: .json as JSON, .yaml / .yml as YAML. Errors (selfspec::Error) name the file and
// the field, e.g. "comm table t.yaml: ops.all_reduce.points[2].bytes: 4096 is not above the
// previous 8192 (sizes must increase)".
CommTable load_comm_table(const std::filesystem::path& file);
// The same from text already read; `name` stands for the file in messages.
CommTable parse_comm_table_json(std::string_view text, std::string_view name);
CommTable parse_comm_table_yaml(std::string_view text, std::string_view name);

// The table as JSON text (the format above; an infinite bandwidth is written as null), which
// parse_comm_table_json reads back equal.
std::string comm_table_json(const CommTable& table);

}  // namespace selfspec
