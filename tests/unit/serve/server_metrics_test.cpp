// The Prometheus text of the server: the exact exposition of a small registry (HELP/TYPE lines,
// label escaping, cumulative buckets, +Inf, _sum/_count, number forms), misuse that throws,
// exact totals under concurrent updates, and ServerMetrics' families all present at zero before
// the first request.
#include "serve/server_metrics.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace selfspec::serve {
namespace {

// The value of the sample line that starts with `series` (name and labels), or NaN when absent.
double sample(const std::string& text, std::string_view series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with(series) && line.size() > series.size() && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

TEST(PrometheusText, SmallRegistryRendersExactly) {
  MetricsRegistry registry;
  registry.describe("demo_requests_total", MetricType::kCounter, "Requests.\nWith \\ \"quotes\"");
  registry.describe("demo_temperature", MetricType::kGauge, "A gauge.");
  registry.describe("demo_latency_seconds", MetricType::kHistogram, "Latency.", {0.1, 0.5, 1});
  registry.describe("demo_unused", MetricType::kGauge, "Never set.");

  registry.counter_add("demo_requests_total", {{"path", "/a\"b\\c\nd"}, {"code", "200"}}, 2);
  registry.counter_add("demo_requests_total", {{"code", "200"}, {"path", "/a\"b\\c\nd"}}, 1);
  registry.counter_add("demo_requests_total", {{"code", "404"}, {"path", "/x"}}, 0.5);
  registry.gauge_set("demo_temperature", {}, 21.5);
  registry.gauge_set("demo_temperature", {}, -3);
  for (const double v : {0.05, 0.1, 0.3, 2.0}) {
    registry.histogram_observe("demo_latency_seconds", {{"model", "m"}}, v);
  }
  registry.touch("demo_latency_seconds", {{"model", "n"}});

  EXPECT_EQ(registry.render(),
            "# HELP demo_requests_total Requests.\\nWith \\\\ \"quotes\"\n"
            "# TYPE demo_requests_total counter\n"
            "demo_requests_total{code=\"200\",path=\"/a\\\"b\\\\c\\nd\"} 3\n"
            "demo_requests_total{code=\"404\",path=\"/x\"} 0.5\n"
            "# HELP demo_temperature A gauge.\n"
            "# TYPE demo_temperature gauge\n"
            "demo_temperature -3\n"
            "# HELP demo_latency_seconds Latency.\n"
            "# TYPE demo_latency_seconds histogram\n"
            "demo_latency_seconds_bucket{model=\"m\",le=\"0.1\"} 2\n"
            "demo_latency_seconds_bucket{model=\"m\",le=\"0.5\"} 3\n"
            "demo_latency_seconds_bucket{model=\"m\",le=\"1\"} 3\n"
            "demo_latency_seconds_bucket{model=\"m\",le=\"+Inf\"} 4\n"
            "demo_latency_seconds_sum{model=\"m\"} 2.45\n"
            "demo_latency_seconds_count{model=\"m\"} 4\n"
            "demo_latency_seconds_bucket{model=\"n\",le=\"0.1\"} 0\n"
            "demo_latency_seconds_bucket{model=\"n\",le=\"0.5\"} 0\n"
            "demo_latency_seconds_bucket{model=\"n\",le=\"1\"} 0\n"
            "demo_latency_seconds_bucket{model=\"n\",le=\"+Inf\"} 0\n"
            "demo_latency_seconds_sum{model=\"n\"} 0\n"
            "demo_latency_seconds_count{model=\"n\"} 0\n"
            "# HELP demo_unused Never set.\n"
            "# TYPE demo_unused gauge\n");
}

TEST(PrometheusText, NumberForms) {
  MetricsRegistry registry;
  registry.describe("g", MetricType::kGauge, "Numbers.");
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, "0"},
      {-0.0, "0"},
      {3.0, "3"},
      {-2.0, "-2"},
      {123456789012.0, "123456789012"},
      {0.5, "0.5"},
      {0.1, "0.1"},
      {1e20, "1e+20"},
      {1.5e-7, "1.5e-07"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"}};
  for (const auto& [value, text] : cases) {
    registry.gauge_set("g", {}, value);
    EXPECT_EQ(registry.render(), "# HELP g Numbers.\n# TYPE g gauge\ng " + text + "\n");
  }
}

TEST(PrometheusText, HistogramCountsAreCumulative) {
  Histogram histogram({1, 2, 4});
  for (const double v : {0.5, 1.0, 1.5, 4.0, 4.5, 100.0}) histogram.observe(v);
  EXPECT_EQ(histogram.cumulative_counts(), (std::vector<std::uint64_t>{2, 3, 4, 6}));
  EXPECT_EQ(histogram.count(), 6u);
  EXPECT_DOUBLE_EQ(histogram.sum(), 111.5);
  EXPECT_THROW(Histogram({1, 1}), Error);
  EXPECT_THROW(Histogram({2, 1}), Error);
  EXPECT_THROW(Histogram({1, std::numeric_limits<double>::infinity()}), Error);
}

TEST(PrometheusText, MisuseThrows) {
  MetricsRegistry registry;
  registry.describe("c_total", MetricType::kCounter, "c");
  registry.describe("h", MetricType::kHistogram, "h", {1});
  EXPECT_THROW(registry.counter_add("undescribed", {}, 1), Error);
  EXPECT_THROW(registry.touch("undescribed"), Error);
  EXPECT_THROW(registry.gauge_set("c_total", {}, 1), Error);
  EXPECT_THROW(registry.histogram_observe("c_total", {}, 1), Error);
  EXPECT_THROW(registry.counter_add("h", {}, 1), Error);
  EXPECT_THROW(registry.counter_add("c_total", {}, -1), Error);
  EXPECT_THROW(registry.counter_add("c_total", {}, std::nan("")), Error);
  EXPECT_THROW(registry.counter_add("c_total", {{"bad-name", "v"}}, 1), Error);
  EXPECT_THROW(registry.counter_add("c_total", {{"__reserved", "v"}}, 1), Error);
  EXPECT_THROW(registry.counter_add("c_total", {{"a", "1"}, {"a", "2"}}, 1), Error);
  EXPECT_THROW(registry.histogram_observe("h", {{"le", "1"}}, 1), Error);
  EXPECT_THROW(registry.describe("c_total", MetricType::kCounter, "again"), Error);
  EXPECT_THROW(registry.describe("selfspec:rule", MetricType::kGauge, "colon"), Error);
  EXPECT_THROW(registry.describe("1abc", MetricType::kGauge, "digit"), Error);
  EXPECT_THROW(registry.describe("nobuckets", MetricType::kHistogram, "h"), Error);
  EXPECT_THROW(registry.describe("gauge_buckets", MetricType::kGauge, "g", {1}), Error);
  // Nothing of the failed calls shows.
  EXPECT_EQ(registry.render(),
            "# HELP c_total c\n# TYPE c_total counter\n# HELP h h\n# TYPE h histogram\n");
}

TEST(ServerMetrics, EveryFamilyIsRenderedAtZeroBeforeAnyRequest) {
  const ServerMetrics metrics;
  const std::string text = metrics.render();
  for (const std::string_view name :
       {"selfspec_prompt_tokens_total", "selfspec_generation_tokens_total",
        "selfspec_requests_running", "selfspec_requests_queued", "selfspec_kv_slots_used",
        "selfspec_kv_slots_total", "selfspec_spec_draft_tokens_total",
        "selfspec_spec_accepted_tokens_total", "selfspec_spec_verify_rounds_total",
        "selfspec_ready", "selfspec_time_to_first_token_seconds_count",
        "selfspec_inter_token_latency_seconds_count", "selfspec_e2e_request_latency_seconds_count",
        "selfspec_spec_acceptance_rate_count", "selfspec_spec_accepted_length_count",
        "selfspec_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
        "selfspec_spec_accepted_length_bucket{le=\"64\"}"}) {
    EXPECT_EQ(sample(text, name), 0.0) << name;
  }
  EXPECT_EQ(sample(text, "selfspec_up"), 1.0);
  for (const std::string_view endpoint : kCompletionEndpoints) {
    for (const std::string_view outcome : kOutcomes) {
      const std::string series = "selfspec_requests_total{endpoint=\"" + std::string(endpoint) +
                                 "\",outcome=\"" + std::string(outcome) + "\"}";
      EXPECT_EQ(sample(text, series), 0.0) << series;
    }
  }
  for (const std::string_view family :
       {"selfspec_requests_total counter", "selfspec_prompt_tokens_total counter",
        "selfspec_generation_tokens_total counter", "selfspec_requests_running gauge",
        "selfspec_requests_queued gauge", "selfspec_kv_slots_used gauge",
        "selfspec_kv_slots_total gauge", "selfspec_time_to_first_token_seconds histogram",
        "selfspec_inter_token_latency_seconds histogram",
        "selfspec_e2e_request_latency_seconds histogram",
        "selfspec_spec_draft_tokens_total counter", "selfspec_spec_accepted_tokens_total counter",
        "selfspec_spec_verify_rounds_total counter", "selfspec_spec_acceptance_rate histogram",
        "selfspec_spec_accepted_length histogram", "selfspec_up gauge", "selfspec_ready gauge"}) {
    EXPECT_NE(text.find("\n# TYPE " + std::string(family) + "\n"), std::string::npos) << family;
  }
  EXPECT_EQ(text.find(':'), std::string::npos);  // no colon anywhere, not even in help texts
}

TEST(ServerMetrics, ReportsWhatTheServerDoes) {
  ServerMetrics metrics;
  metrics.set_ready(true);
  metrics.request_finished("/v1/completions", kOutcomeOk);
  metrics.request_finished("/v1/completions", kOutcomeOk);
  metrics.request_finished("/v1/chat/completions", kOutcomeRejectedOverload);
  metrics.tokens(12, 30);
  metrics.load(3, 2, 5, 8);
  metrics.time_to_first_token(0.02);
  metrics.inter_token_latency(0.004);
  metrics.e2e_latency(200);
  metrics.speculation(10, 7, 4, 11);  // rate 0.7, accepted length 2.75
  metrics.speculation(0, 0, 5, 5);    // no drafting: accepted length 1 only
  metrics.speculation(0, 0, 0, 0);    // nothing observed
  const std::string text = metrics.render();
  EXPECT_EQ(sample(text, "selfspec_ready"), 1.0);
  EXPECT_EQ(sample(text, R"(selfspec_requests_total{endpoint="/v1/completions",outcome="ok"})"),
            2.0);
  EXPECT_EQ(sample(text, R"(selfspec_requests_total{endpoint="/v1/chat/completions",)"
                         R"(outcome="rejected_overload"})"),
            1.0);
  EXPECT_EQ(sample(text, "selfspec_prompt_tokens_total"), 12.0);
  EXPECT_EQ(sample(text, "selfspec_generation_tokens_total"), 30.0);
  EXPECT_EQ(sample(text, "selfspec_requests_running"), 3.0);
  EXPECT_EQ(sample(text, "selfspec_requests_queued"), 2.0);
  EXPECT_EQ(sample(text, "selfspec_kv_slots_used"), 5.0);
  EXPECT_EQ(sample(text, "selfspec_kv_slots_total"), 8.0);
  EXPECT_EQ(sample(text, R"(selfspec_time_to_first_token_seconds_bucket{le="0.01"})"), 0.0);
  EXPECT_EQ(sample(text, R"(selfspec_time_to_first_token_seconds_bucket{le="0.025"})"), 1.0);
  EXPECT_EQ(sample(text, R"(selfspec_inter_token_latency_seconds_bucket{le="0.005"})"), 1.0);
  EXPECT_EQ(sample(text, R"(selfspec_e2e_request_latency_seconds_bucket{le="120"})"), 0.0);
  EXPECT_EQ(sample(text, R"(selfspec_e2e_request_latency_seconds_bucket{le="300"})"), 1.0);
  EXPECT_EQ(sample(text, "selfspec_spec_draft_tokens_total"), 10.0);
  EXPECT_EQ(sample(text, "selfspec_spec_accepted_tokens_total"), 7.0);
  EXPECT_EQ(sample(text, "selfspec_spec_verify_rounds_total"), 9.0);
  EXPECT_EQ(sample(text, R"(selfspec_spec_acceptance_rate_bucket{le="0.65"})"), 0.0);
  EXPECT_EQ(sample(text, R"(selfspec_spec_acceptance_rate_bucket{le="0.7"})"), 1.0);
  EXPECT_EQ(sample(text, "selfspec_spec_acceptance_rate_count"), 1.0);
  EXPECT_EQ(sample(text, R"(selfspec_spec_accepted_length_bucket{le="1"})"), 1.0);
  EXPECT_EQ(sample(text, R"(selfspec_spec_accepted_length_bucket{le="2.5"})"), 1.0);
  EXPECT_EQ(sample(text, R"(selfspec_spec_accepted_length_bucket{le="3"})"), 2.0);
  EXPECT_EQ(sample(text, "selfspec_spec_accepted_length_sum"), 3.75);
  EXPECT_EQ(sample(text, "selfspec_spec_accepted_length_count"), 2.0);

  EXPECT_THROW(metrics.request_finished("/v1/completions", "fine"), Error);
  EXPECT_THROW(metrics.tokens(-1, 0), Error);
  EXPECT_THROW(metrics.speculation(3, 4, 1, 1), Error);
}

TEST(ServerMetrics, ConcurrentUpdatesAreExact) {
  ServerMetrics metrics;
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kIterations; ++i) {
        metrics.request_finished(t % 2 == 0 ? "/v1/completions" : "/v1/chat/completions",
                                 kOutcomeOk);
        metrics.tokens(3, 1);
        metrics.inter_token_latency(0.003);
        metrics.speculation(4, 2, 1, 3);
        metrics.load(t, i, 0, 1);
        if (i % 100 == 0) static_cast<void>(metrics.render());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = metrics.render();
  constexpr double kTotal = kThreads * kIterations;
  EXPECT_EQ(sample(text, R"(selfspec_requests_total{endpoint="/v1/completions",outcome="ok"})"),
            kTotal / 2);
  EXPECT_EQ(
      sample(text, R"(selfspec_requests_total{endpoint="/v1/chat/completions",outcome="ok"})"),
      kTotal / 2);
  EXPECT_EQ(sample(text, "selfspec_prompt_tokens_total"), 3 * kTotal);
  EXPECT_EQ(sample(text, "selfspec_generation_tokens_total"), kTotal);
  EXPECT_EQ(sample(text, "selfspec_inter_token_latency_seconds_count"), kTotal);
  EXPECT_EQ(sample(text, R"(selfspec_inter_token_latency_seconds_bucket{le="0.0025"})"), 0.0);
  EXPECT_EQ(sample(text, R"(selfspec_inter_token_latency_seconds_bucket{le="0.005"})"), kTotal);
  EXPECT_EQ(sample(text, "selfspec_spec_draft_tokens_total"), 4 * kTotal);
  EXPECT_EQ(sample(text, "selfspec_spec_accepted_length_count"), kTotal);
  EXPECT_EQ(sample(text, R"(selfspec_spec_acceptance_rate_bucket{le="0.5"})"), kTotal);
  EXPECT_EQ(sample(text, "selfspec_kv_slots_total"), 1.0);
}

}  // namespace
}  // namespace selfspec::serve
