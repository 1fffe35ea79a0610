// The server's Prometheus metrics (GET /metrics), in the text exposition format 0.0.4.
//
// Hand-written rather than prometheus-cpp because Debian has no prometheus-cpp package, and the
// server needs little: counters, gauges and fixed-bucket histograms with labels, rendered as text.
// MetricsRegistry is the generic part; ServerMetrics describes the server's families (names start
// with `selfspec_`; a colon is reserved for recording rules) and offers one method per thing the
// server reports. Both are thread-safe: HTTP threads and the engine thread update them while
// /metrics renders them (one mutex per registry).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace selfspec::serve {

// Label name/value pairs of one series. Their order does not matter: series are keyed and
// rendered with the labels sorted by name.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// A classic Prometheus histogram: counts of observations <= each upper bound, plus +Inf, their sum
// and count. Not synchronised by itself (MetricsRegistry guards it).
class Histogram {
 public:
  // Finite, strictly increasing upper bounds (the +Inf bucket is implicit). Throws
  // selfspec::Error otherwise.
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Cumulative counts: entry i counts observations <= upper_bounds()[i]; one more entry at the end
  // for +Inf (== count()).
  std::vector<std::uint64_t> cumulative_counts() const;
  double sum() const { return sum_; }
  std::uint64_t count() const { return count_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0.0;
  std::uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  // Declares a family. Must come before the family's first use; the name must match
  // [a-zA-Z_][a-zA-Z0-9_]* and not be described twice; `buckets` are for histograms only (and
  // required for them). A family has no series until their first update or touch(): until then
  // only its # HELP and # TYPE lines are rendered. Throws selfspec::Error otherwise.
  void describe(std::string_view name, MetricType type, std::string_view help,
                std::vector<double> buckets = {});

  // Updates one series, creating it at zero first. Throw selfspec::Error for an undescribed name,
  // a family of another type, an invalid label name (or `le` on a histogram), or a counter
  // increment that is negative or NaN.
  void counter_add(std::string_view name, const Labels& labels, double value);
  void gauge_set(std::string_view name, const Labels& labels, double value);
  void histogram_observe(std::string_view name, const Labels& labels, double value);
  // Creates the series at zero if it does not exist yet, so that it is exported before its first
  // update (any type).
  void touch(std::string_view name, const Labels& labels = {});

  // The text exposition: families in describe() order, each with # HELP and # TYPE lines, series
  // in label order; label values escaped (\\, \", \n); integral numbers without exponent, +Inf,
  // -Inf, NaN.
  std::string render() const;

 private:
  struct Family {
    std::string name;
    MetricType type;
    std::string help;
    std::vector<double> buckets;
    std::map<Labels, double> values;         // counters and gauges
    std::map<Labels, Histogram> histograms;  // histograms
  };

  // The family `name` of `type` (throws otherwise). Caller holds mutex_.
  Family& family(std::string_view name, MetricType type);
  Family& family(std::string_view name);

  mutable std::mutex mutex_;
  std::vector<Family> families_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// The values of selfspec_requests_total's outcome label.
inline constexpr std::string_view kOutcomeOk = "ok";
inline constexpr std::string_view kOutcomeClientError = "client_error";
inline constexpr std::string_view kOutcomeRejectedOverload = "rejected_overload";
inline constexpr std::string_view kOutcomeCancelled = "cancelled";
inline constexpr std::string_view kOutcomeServerError = "server_error";
inline constexpr std::string_view kOutcomes[] = {kOutcomeOk, kOutcomeClientError,
                                                 kOutcomeRejectedOverload, kOutcomeCancelled,
                                                 kOutcomeServerError};
// Endpoints whose request series exist (at zero) from the start; others appear when first used.
inline constexpr std::string_view kCompletionEndpoints[] = {"/v1/completions",
                                                            "/v1/chat/completions"};

class ServerMetrics {
 public:
  // Describes every family; selfspec_up is 1, selfspec_ready 0, everything else 0.
  ServerMetrics();

  // One request answered. `endpoint` is its route (e.g. "/v1/chat/completions"); `outcome` one of
  // kOutcomes (throws selfspec::Error otherwise).
  void request_finished(std::string_view endpoint, std::string_view outcome);
  // Prompt tokens processed and tokens generated (added to the totals; non-negative).
  void tokens(std::int64_t prompt, std::int64_t generated);
  // Current load: requests running in the batch, waiting in the queue, KV-cache slots in use and
  // in all.
  void load(std::int64_t running, std::int64_t queued, std::int64_t kv_used, std::int64_t kv_total);
  // Latencies in seconds: request arrival to first token, between consecutive tokens, arrival to
  // last token.
  void time_to_first_token(double seconds);
  void inter_token_latency(double seconds);
  void e2e_latency(double seconds);
  // One finished request's speculation: tokens drafted, drafted tokens accepted, verification
  // forwards, and tokens those forwards produced. Adds to the totals; observes the acceptance
  // rate (accepted / drafted) when drafted > 0 and the mean accepted length (round_tokens /
  // verify_rounds) when verify_rounds > 0. Non-negative, accepted <= drafted.
  void speculation(std::int64_t drafted, std::int64_t accepted, std::int64_t verify_rounds,
                   std::int64_t round_tokens);
  // 0 while the model loads, 1 once the server takes requests.
  void set_ready(bool ready);

  std::string render() const { return registry_.render(); }

 private:
  MetricsRegistry registry_;
};

}  // namespace selfspec::serve
