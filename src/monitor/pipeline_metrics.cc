#include "nimbus/monitor/pipeline_metrics.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "nimbus/base/error.h"

namespace nimbus::monitor {

void publish_pipeline_stats(MetricRegistry& registry, const std::string& stats_json) {
  nlohmann::json stats;
  try {
    stats = nlohmann::json::parse(stats_json);
    for (const auto& node : stats.value("nodes", nlohmann::json::array())) {
      const Labels labels = {{"stage", node.at("name").get<std::string>()},
                             {"depth", std::to_string(node.at("depth").get<int>())}};
      registry.counter("nimbus_pipeline_elements_total", "Elements an input pipeline stage produced.", labels)
          .advance_to(node.at("produced").get<double>());
      registry.counter("nimbus_pipeline_busy_seconds_total", "Seconds an input pipeline stage spent working.", labels)
          .advance_to(node.at("busy_ns").get<double>() * 1e-9);
      registry
          .counter("nimbus_pipeline_input_wait_seconds_total",
                   "Seconds an input pipeline stage waited for its own input.", labels)
          .advance_to(node.at("input_wait_ns").get<double>() * 1e-9);
      registry
          .counter("nimbus_pipeline_consumer_wait_seconds_total",
                   "Seconds the consumer of an input pipeline stage waited on its buffer.", labels)
          .advance_to(node.at("consumer_wait_ns").get<double>() * 1e-9);
      registry
          .counter("nimbus_pipeline_errors_skipped_total", "Elements an input pipeline stage skipped (ignore_errors).",
                   labels)
          .advance_to(node.at("errors_skipped").get<double>());
      registry.gauge("nimbus_pipeline_buffer_fill", "Elements in an input pipeline stage's buffer.", labels)
          .set(node.at("buffer_fill").get<double>());
      registry.gauge("nimbus_pipeline_buffer_capacity", "Capacity of an input pipeline stage's buffer.", labels)
          .set(node.at("buffer_capacity").get<double>());
      registry.gauge("nimbus_pipeline_buffer_bytes", "Host memory in an input pipeline stage's buffer.", labels)
          .set(node.at("buffer_bytes").get<double>());
      registry
          .gauge("nimbus_pipeline_parallelism", "Parallel calls of an input pipeline stage (AUTOTUNE's choice).",
                 labels)
          .set(node.at("parallelism").get<double>());
    }
  } catch (const nlohmann::json::exception& error) {
    throw DataError(fmt::format("input pipeline statistics: not the iterator's stats_json format ({})", error.what()));
  }
}

}  // namespace nimbus::monitor
