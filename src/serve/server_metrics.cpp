// MetricsRegistry, Histogram and ServerMetrics (see server_metrics.hpp): Prometheus text
// exposition format 0.0.4, hand-written because Debian has no prometheus-cpp package.
#include "serve/server_metrics.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace selfspec::serve {
namespace {

// Latency buckets in seconds, roughly log-spaced like vLLM's.
const std::vector<double> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                             0.075, 0.1,    0.25,  0.5,  0.75,  1.0,
                                             2.5,   5.0,    10.0,  20.0, 30.0,  60.0};
// A whole request can take minutes.
const std::vector<double> kRequestLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
                                                    0.1,   0.25,   0.5,   0.75, 1.0,   2.5,  5.0,
                                                    10.0,  20.0,   30.0,  60.0, 120.0, 300.0};
const std::vector<double> kAcceptanceRateBuckets = {0.05, 0.1,  0.15, 0.2,  0.25, 0.3,  0.35,
                                                    0.4,  0.45, 0.5,  0.55, 0.6,  0.65, 0.7,
                                                    0.75, 0.8,  0.85, 0.9,  0.95, 1.0};
const std::vector<double> kAcceptedLengthBuckets = {1.0, 1.5, 2.0,  2.5,  3.0,  4.0, 5.0,
                                                    6.0, 8.0, 12.0, 16.0, 32.0, 64.0};

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// [a-zA-Z_][a-zA-Z0-9_]*: Prometheus metric names without the colon (reserved for recording
// rules), and label names.
bool is_valid_name(std::string_view name) {
  if (name.empty() || !is_name_start(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_name_start(c) || (c >= '0' && c <= '9'); });
}

std::string_view type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// A sample value as Prometheus (Go's ParseFloat) reads it: integral values without exponent or
// decimal point, the shortest round-trip form otherwise, +Inf / -Inf / NaN.
std::string format_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0.0) return "0";  // also -0
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{:.0f}", value);
  return fmt::format("{}", value);
}

void append_escaped(std::string& out, std::string_view text, bool escape_quote) {
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      out.push_back(c);
    }
  }
}

// `{a="x",b="y"}` with an optional extra `le` label last; nothing when there are no labels.
void append_labels(std::string& out, const Labels& labels, std::string_view le = {}) {
  if (labels.empty() && le.empty()) return;
  out.push_back('{');
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out.push_back(',');
    first = false;
    out += name;
    out += "=\"";
    append_escaped(out, value, /*escape_quote=*/true);
    out.push_back('"');
  }
  if (!le.empty()) {
    if (!first) out.push_back(',');
    out += "le=\"";
    out += le;
    out.push_back('"');
  }
  out.push_back('}');
}

void append_sample(std::string& out, std::string_view name, std::string_view suffix,
                   const Labels& labels, double value, std::string_view le = {}) {
  out += name;
  out += suffix;
  append_labels(out, labels, le);
  out.push_back(' ');
  out += format_number(value);
  out.push_back('\n');
}

// The labels sorted by name, after checking the names.
Labels canonical_labels(std::string_view family, MetricType type, const Labels& labels) {
  Labels sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const std::string& name = sorted[i].first;
    SELFSPEC_CHECK(is_valid_name(name) && !name.starts_with("__"),
                   "metric {}: invalid label name '{}'", family, name);
    SELFSPEC_CHECK(type != MetricType::kHistogram || name != "le",
                   "metric {}: a histogram cannot have a label named le", family);
    SELFSPEC_CHECK(i == 0 || sorted[i - 1].first != name, "metric {}: label {} given twice", family,
                   name);
  }
  return sorted;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {
  for (std::size_t i = 0; i < upper_bounds_.size(); ++i) {
    SELFSPEC_CHECK(std::isfinite(upper_bounds_[i]), "histogram bucket bound {} is not finite",
                   upper_bounds_[i]);
    SELFSPEC_CHECK(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i],
                   "histogram bucket bounds must be strictly increasing");
  }
  counts_.assign(upper_bounds_.size() + 1, 0);
}

void Histogram::observe(double value) {
  // The first bucket whose bound is >= value (Prometheus buckets are "less than or equal"); NaN
  // lands in +Inf.
  const auto bucket = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(std::distance(upper_bounds_.begin(), bucket))];
  sum_ += value;
  ++count_;
}

std::vector<std::uint64_t> Histogram::cumulative_counts() const {
  std::vector<std::uint64_t> cumulative(counts_.size());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    total += counts_[i];
    cumulative[i] = total;
  }
  return cumulative;
}

void MetricsRegistry::describe(std::string_view name, MetricType type, std::string_view help,
                               std::vector<double> buckets) {
  SELFSPEC_CHECK(is_valid_name(name), "invalid metric name '{}'", name);
  SELFSPEC_CHECK((type == MetricType::kHistogram) == !buckets.empty(),
                 "metric {}: buckets are required for a histogram and only for one", name);
  if (type == MetricType::kHistogram) static_cast<void>(Histogram(buckets));  // checks the bounds
  const std::lock_guard lock(mutex_);
  SELFSPEC_CHECK(!index_.contains(name), "metric {} described twice", name);
  index_.emplace(std::string(name), families_.size());
  families_.push_back(Family{.name = std::string(name),
                             .type = type,
                             .help = std::string(help),
                             .buckets = std::move(buckets),
                             .values = {},
                             .histograms = {}});
}

MetricsRegistry::Family& MetricsRegistry::family(std::string_view name) {
  const auto found = index_.find(name);
  if (found == index_.end()) fail("metric {} was not described", name);
  return families_[found->second];
}

MetricsRegistry::Family& MetricsRegistry::family(std::string_view name, MetricType type) {
  Family& found = family(name);
  SELFSPEC_CHECK(found.type == type, "metric {} is a {}, not a {}", name, type_name(found.type),
                 type_name(type));
  return found;
}

void MetricsRegistry::counter_add(std::string_view name, const Labels& labels, double value) {
  SELFSPEC_CHECK(value >= 0.0, "metric {}: a counter cannot add {}", name, value);
  const std::lock_guard lock(mutex_);
  Family& counter = family(name, MetricType::kCounter);
  counter.values[canonical_labels(name, counter.type, labels)] += value;
}

void MetricsRegistry::gauge_set(std::string_view name, const Labels& labels, double value) {
  const std::lock_guard lock(mutex_);
  Family& gauge = family(name, MetricType::kGauge);
  gauge.values[canonical_labels(name, gauge.type, labels)] = value;
}

void MetricsRegistry::histogram_observe(std::string_view name, const Labels& labels, double value) {
  const std::lock_guard lock(mutex_);
  Family& histogram = family(name, MetricType::kHistogram);
  auto series = histogram.histograms.try_emplace(canonical_labels(name, histogram.type, labels),
                                                 histogram.buckets);
  series.first->second.observe(value);
}

void MetricsRegistry::touch(std::string_view name, const Labels& labels) {
  const std::lock_guard lock(mutex_);
  Family& found = family(name);
  Labels key = canonical_labels(name, found.type, labels);
  if (found.type == MetricType::kHistogram) {
    found.histograms.try_emplace(std::move(key), found.buckets);
  } else {
    found.values.try_emplace(std::move(key), 0.0);
  }
}

std::string MetricsRegistry::render() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  for (const Family& family : families_) {
    out += "# HELP ";
    out += family.name;
    out.push_back(' ');
    append_escaped(out, family.help, /*escape_quote=*/false);
    out += "\n# TYPE ";
    out += family.name;
    out.push_back(' ');
    out += type_name(family.type);
    out.push_back('\n');
    for (const auto& [labels, value] : family.values) {
      append_sample(out, family.name, "", labels, value);
    }
    for (const auto& [labels, histogram] : family.histograms) {
      const std::vector<std::uint64_t> cumulative = histogram.cumulative_counts();
      for (std::size_t i = 0; i < cumulative.size(); ++i) {
        const std::string le =
            i < family.buckets.size() ? format_number(family.buckets[i]) : "+Inf";
        append_sample(out, family.name, "_bucket", labels, static_cast<double>(cumulative[i]), le);
      }
      append_sample(out, family.name, "_sum", labels, histogram.sum());
      append_sample(out, family.name, "_count", labels, static_cast<double>(histogram.count()));
    }
  }
  return out;
}

ServerMetrics::ServerMetrics() {
  using enum MetricType;
  MetricsRegistry& r = registry_;
  r.describe("selfspec_requests_total", kCounter,
             "Requests answered, by endpoint and outcome (ok, client_error, rejected_overload, "
             "cancelled, server_error).");
  r.describe("selfspec_prompt_tokens_total", kCounter, "Prompt tokens processed.");
  r.describe("selfspec_generation_tokens_total", kCounter, "Tokens generated.");
  r.describe("selfspec_requests_running", kGauge, "Requests being generated in the batch.");
  r.describe("selfspec_requests_queued", kGauge, "Requests waiting for a batch slot.");
  r.describe("selfspec_kv_slots_used", kGauge, "KV-cache slots in use.");
  r.describe("selfspec_kv_slots_total", kGauge, "KV-cache slots in all.");
  r.describe("selfspec_time_to_first_token_seconds", kHistogram,
             "Time from a request's arrival to its first generated token.", kLatencyBuckets);
  r.describe("selfspec_inter_token_latency_seconds", kHistogram,
             "Time between consecutive tokens of a request.", kLatencyBuckets);
  r.describe("selfspec_e2e_request_latency_seconds", kHistogram,
             "Time from a request's arrival to its last token.", kRequestLatencyBuckets);
  r.describe("selfspec_spec_draft_tokens_total", kCounter, "Tokens drafted by self-speculation.");
  r.describe("selfspec_spec_accepted_tokens_total", kCounter,
             "Drafted tokens accepted by verification.");
  r.describe("selfspec_spec_verify_rounds_total", kCounter, "Verification forward passes.");
  r.describe("selfspec_spec_acceptance_rate", kHistogram,
             "Accepted / drafted tokens, per finished request that drafted.",
             kAcceptanceRateBuckets);
  r.describe("selfspec_spec_accepted_length", kHistogram,
             "Tokens produced per verification forward (mean accepted length), per finished "
             "request.",
             kAcceptedLengthBuckets);
  r.describe("selfspec_up", kGauge, "1 while the server process runs.");
  r.describe("selfspec_ready", kGauge, "0 while the model loads, 1 once requests are served.");

  for (const std::string_view endpoint : kCompletionEndpoints) {
    for (const std::string_view outcome : kOutcomes) {
      r.touch("selfspec_requests_total",
              {{"endpoint", std::string(endpoint)}, {"outcome", std::string(outcome)}});
    }
  }
  for (const std::string_view name :
       {"selfspec_prompt_tokens_total", "selfspec_generation_tokens_total",
        "selfspec_requests_running", "selfspec_requests_queued", "selfspec_kv_slots_used",
        "selfspec_kv_slots_total", "selfspec_time_to_first_token_seconds",
        "selfspec_inter_token_latency_seconds", "selfspec_e2e_request_latency_seconds",
        "selfspec_spec_draft_tokens_total", "selfspec_spec_accepted_tokens_total",
        "selfspec_spec_verify_rounds_total", "selfspec_spec_acceptance_rate",
        "selfspec_spec_accepted_length", "selfspec_ready"}) {
    r.touch(name);
  }
  r.gauge_set("selfspec_up", {}, 1.0);
}

void ServerMetrics::request_finished(std::string_view endpoint, std::string_view outcome) {
  SELFSPEC_CHECK(
      std::find(std::begin(kOutcomes), std::end(kOutcomes), outcome) != std::end(kOutcomes),
      "unknown request outcome '{}'", outcome);
  registry_.counter_add("selfspec_requests_total",
                        {{"endpoint", std::string(endpoint)}, {"outcome", std::string(outcome)}},
                        1.0);
}

void ServerMetrics::tokens(std::int64_t prompt, std::int64_t generated) {
  SELFSPEC_CHECK(prompt >= 0 && generated >= 0, "negative token counts {} / {}", prompt, generated);
  registry_.counter_add("selfspec_prompt_tokens_total", {}, static_cast<double>(prompt));
  registry_.counter_add("selfspec_generation_tokens_total", {}, static_cast<double>(generated));
}

void ServerMetrics::load(std::int64_t running, std::int64_t queued, std::int64_t kv_used,
                         std::int64_t kv_total) {
  registry_.gauge_set("selfspec_requests_running", {}, static_cast<double>(running));
  registry_.gauge_set("selfspec_requests_queued", {}, static_cast<double>(queued));
  registry_.gauge_set("selfspec_kv_slots_used", {}, static_cast<double>(kv_used));
  registry_.gauge_set("selfspec_kv_slots_total", {}, static_cast<double>(kv_total));
}

void ServerMetrics::time_to_first_token(double seconds) {
  registry_.histogram_observe("selfspec_time_to_first_token_seconds", {}, seconds);
}

void ServerMetrics::inter_token_latency(double seconds) {
  registry_.histogram_observe("selfspec_inter_token_latency_seconds", {}, seconds);
}

void ServerMetrics::e2e_latency(double seconds) {
  registry_.histogram_observe("selfspec_e2e_request_latency_seconds", {}, seconds);
}

void ServerMetrics::speculation(std::int64_t drafted, std::int64_t accepted,
                                std::int64_t verify_rounds, std::int64_t round_tokens) {
  SELFSPEC_CHECK(drafted >= 0 && accepted >= 0 && verify_rounds >= 0 && round_tokens >= 0,
                 "negative speculation counts");
  SELFSPEC_CHECK(accepted <= drafted, "{} tokens accepted of {} drafted", accepted, drafted);
  registry_.counter_add("selfspec_spec_draft_tokens_total", {}, static_cast<double>(drafted));
  registry_.counter_add("selfspec_spec_accepted_tokens_total", {}, static_cast<double>(accepted));
  registry_.counter_add("selfspec_spec_verify_rounds_total", {},
                        static_cast<double>(verify_rounds));
  if (drafted > 0) {
    registry_.histogram_observe("selfspec_spec_acceptance_rate", {},
                                static_cast<double>(accepted) / static_cast<double>(drafted));
  }
  if (verify_rounds > 0) {
    registry_.histogram_observe(
        "selfspec_spec_accepted_length", {},
        static_cast<double>(round_tokens) / static_cast<double>(verify_rounds));
  }
}

void ServerMetrics::set_ready(bool ready) {
  registry_.gauge_set("selfspec_ready", {}, ready ? 1.0 : 0.0);
}

}  // namespace selfspec::serve
