// The run directory: metrics.jsonl's schema line by line, summary.json's fields, checkpoints/ and
// tensorboard/ filled, and metrics.jsonl cut back to the checkpoint when a run resumes; the claim
// (one nimbus per folder, a run moved aside by --overwrite), the run's own files, the log reader.
#include "nimbus/train/run_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "nimbus/base/error.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/monitor/json_lines.h"
#include "nimbus/nn/layers.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/checkpoint.h"
#include "nimbus/train/config.h"
#include "nimbus/train/run_claim.h"
#include "tiny_run.h"

namespace nimbus::testing {
namespace {

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  std::string text;
  while (std::getline(in, text)) lines.push_back(nlohmann::json::parse(text));
  return lines;
}

TEST(RunDirectory, DefaultNameIsTheDateAndTime) {
  EXPECT_TRUE(std::regex_match(train::default_run_dir(), std::regex(R"(runs/\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)")))
      << train::default_run_dir();
}

TEST(RunDirectory, HoldsMetricsSummaryCheckpointsAndEventFiles) {
  TemporaryFolder folder("nimbus_run_directory");
  const std::string run_dir = folder / "run";
  std::ostringstream out;
  // 64 samples, batch 16, 3 epochs: 12 steps; checkpoints every 5 steps, 2 kept.
  const nlohmann::json summary =
      train::run_config(train::parse_config(write_tiny_run(folder), "tiny.yaml",
                                            {"fit.epochs=3", "checkpoint.save_freq=5", "checkpoint.max_to_keep=2"}),
                        out, {.run_dir = run_dir});

  const std::vector<nlohmann::json> lines = read_lines(run_dir + "/metrics.jsonl");
  int64_t expected_step = 1;
  int epochs_seen = 0;
  double previous_elapsed = 0;
  for (const nlohmann::json& line : lines) {
    ASSERT_TRUE(line["time"].is_number_float()) << line;
    if (line["type"] == "step") {
      EXPECT_EQ(line["step"], expected_step) << line;
      EXPECT_EQ(line["epoch"], (expected_step - 1) / 4 + 1) << line;
      EXPECT_EQ(line["samples"], 16) << line;
      EXPECT_GT(line["step_seconds"].get<double>(), 0) << line;
      EXPECT_TRUE(line.contains("loss") && line.contains("accuracy")) << line;
      // The batch's own loss; at an epoch's first step the running mean is that one batch's.
      ASSERT_TRUE(line["batch_loss"].is_number()) << line;
      if ((expected_step - 1) % 4 == 0) {
        EXPECT_NEAR(line["batch_loss"].get<double>(), line["loss"].get<double>(), 1e-5 * line["loss"].get<double>())
            << line;
      }
      // The step profiler's spans and the memory by tag (monitor/run_monitor.h).
      EXPECT_GE(line["spans"]["compute"].get<double>(), 0) << line;
      EXPECT_TRUE(line["memory"].is_object()) << line;
      ++expected_step;
    } else if (line["type"] == "sample") {
      EXPECT_TRUE(line["host"]["resident_bytes"].is_number()) << line;  // the monitor's sampler readings
    } else {
      ASSERT_EQ(line["type"], "epoch") << line;
      EXPECT_EQ(line["epoch"], ++epochs_seen);
      EXPECT_EQ(expected_step - 1, epochs_seen * 4) << "the epoch line follows its last step";
      for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"}) EXPECT_TRUE(line.contains(key)) << line;
      EXPECT_GT(line["elapsed_seconds"].get<double>(), previous_elapsed);
      previous_elapsed = line["elapsed_seconds"].get<double>();
    }
  }
  EXPECT_EQ(expected_step, 13);
  EXPECT_EQ(epochs_seen, 3);

  EXPECT_EQ(nlohmann::json::parse(std::ifstream(run_dir + "/summary.json")), summary);
  EXPECT_EQ(summary["steps"], 12);
  EXPECT_EQ(summary["samples_total"], 3 * 64);
  EXPECT_TRUE(summary["peak_memory_bytes"].is_number_unsigned());
  // Device memory: at least the model's f32 parameters. The data set is host memory, reported apart:
  // at least the images as f32.
  EXPECT_GE(summary["peak_memory_bytes"].get<uint64_t>(), summary["parameters"].get<uint64_t>() * 4);
  EXPECT_GE(summary["peak_host_memory_bytes"].get<uint64_t>(), 64u * 16 * 4);
  EXPECT_GT(summary["host_peak_rss_bytes"].get<int64_t>(), 0);
  EXPECT_NEAR(summary["wall_seconds"].get<double>(), previous_elapsed, 1.0);
  EXPECT_EQ(summary["interrupted"], false);
  EXPECT_EQ(summary["device"], choose_device("auto", "runtime.device", probe_gpus()).device.to_string());
  EXPECT_GT(summary["parameters"].get<int64_t>(), 0);
  ASSERT_EQ(summary["epochs"].size(), 3u);
  EXPECT_EQ(summary["epochs"][2]["elapsed_seconds"], previous_elapsed);
  EXPECT_EQ(summary["final"]["val_accuracy"], summary["epochs"][2]["val_accuracy"]);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(run_dir + "/config.json"))["checkpoint"]["save_freq"], 5);

  // Every 5 steps (5, 10), the newest 2 kept, plus the best epoch's.
  std::ostringstream warnings;
  std::vector<int64_t> steps;
  for (const train::CheckpointInfo& checkpoint : train::list_checkpoints(run_dir + "/checkpoints", warnings)) {
    if (checkpoint.path.ends_with("best.safetensors")) continue;
    steps.push_back(checkpoint.position.global_step);
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 5}));
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/checkpoints/ckpt-00000010.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(run_dir + "/checkpoints/best.safetensors"));
  EXPECT_EQ(warnings.str(), "");
  for (const char* split : {"train", "validation"}) {
    int event_files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(run_dir + "/tensorboard/" + split)) {
      event_files += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
    }
    EXPECT_EQ(event_files, 1) << split;
  }
}

TEST(RunDirectory, MetricsLoggerTakesExtraFieldsAndCutsBackOnResume) {
  TemporaryFolder folder("nimbus_metrics_logger");
  const std::string path = folder / "metrics.jsonl";
  std::ofstream(path) << R"({"type":"step","epoch":1,"step":1,"time":1.5,"loss":1})"
                         "\n"
                      << R"({"type":"step","epoch":1,"step":2,"time":1.5,"loss":1})"
                         "\n"
                      << R"({"type":"epoch","epoch":1,"time":1.5,"elapsed_seconds":2.5,"loss":1})"
                         "\n"
                      << R"({"type":"step","epoch":2,"step":3,"time":1.5,"loss":1})"
                         "\n"
                      << R"({"type":"epoch","epoch":2,"time":1.5,"elapsed_seconds":3.5,"loss":1})"
                         "\n"
                      << R"({"type":"step","epoch":3,"step":4,"ti)";  // torn by a kill
  train::MetricsLogger resumed(path, train::TrainingPosition{.epochs_done = 1, .steps_in_epoch = 1, .global_step = 3});
  const std::vector<nlohmann::json> kept = read_lines(path);
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept.back()["step"], 3);
  ASSERT_EQ(resumed.epochs().size(), 1u);
  EXPECT_EQ(resumed.epochs()[0], nlohmann::ordered_json::parse(R"({"epoch":1,"elapsed_seconds":2.5,"loss":1})"));

  nn::Sequential model({nn::InputLayer({2}), nn::Dense(2)});
  train::Trainer trainer = train::compile(model, {.optimizer = train::SGD(), .loss = train::MeanSquaredError()});
  auto fresh = std::make_shared<train::MetricsLogger>(folder / "fresh.jsonl");
  fresh->add_step_fields(
      [](train::Trainer& t, nlohmann::ordered_json& line) { line["lr"] = t.optimizer().current_learning_rate(); });
  trainer.fit(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), Tensor::from_vector<float>({0, 1, 1, 0}, {2, 2}),
              {.epochs = 1, .batch_size = 1, .verbose = 0, .callbacks = {fresh}});
  const std::vector<nlohmann::json> lines = read_lines(folder / "fresh.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_DOUBLE_EQ(lines[1]["lr"].get<double>(), 0.01);
  EXPECT_EQ(lines[1]["step"], 2);
}

// The text of the exception `run` throws, or "" when it throws none.
template <typename Run>
std::string refusal(Run&& run) {
  try {
    run();
  } catch (const Error& error) {
    return error.message() + " | " + error.hint();
  }
  return "";
}

TEST(RunClaim, ASecondClaimIsRefusedNamingTheHolderUntilTheFirstEnds) {
  TemporaryFolder folder("nimbus_run_claim");
  const std::string run_dir = folder / "run";
  std::ostringstream log;
  {
    const train::RunClaim first(run_dir, train::RunStart::kNew, log);
    // flock locks belong to the open file, so a second claim conflicts even within one process.
    const std::string refused = refusal([&] { train::RunClaim second(run_dir, train::RunStart::kResume, log); });
    EXPECT_NE(refused.find(run_dir + ": in use by another nimbus (PID " + std::to_string(::getpid()) + ")"),
              std::string::npos)
        << refused;
  }
  EXPECT_EQ(refusal([&] { train::RunClaim again(run_dir, train::RunStart::kResume, log); }), "");
}

TEST(RunClaim, ANewRunIsRefusedWhereARunIsAndOverwriteMovesItAsideIntact) {
  TemporaryFolder folder("nimbus_run_claim");
  const std::string run_dir = folder / "run";
  std::ostringstream log;
  std::filesystem::create_directories(run_dir + "/checkpoints");
  std::ofstream(run_dir + "/config.json") << "{\"old\": 1}\n";
  const std::string refused = refusal([&] { train::RunClaim claim(run_dir, train::RunStart::kNew, log); });
  EXPECT_NE(refused.find(run_dir + ": holds another run"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--overwrite"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--resume " + run_dir), std::string::npos) << refused;

  { const train::RunClaim claim(run_dir + "/", train::RunStart::kOverwrite, log); }
  std::vector<std::string> aside;
  for (const auto& entry : std::filesystem::directory_iterator(folder.path)) {
    if (entry.path().filename().string().starts_with("run.replaced-")) aside.push_back(entry.path().string());
  }
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(aside[0] + "/config.json")), nlohmann::json({{"old", 1}}));
  EXPECT_NE(log.str().find("moved the run in " + run_dir + " aside to " + aside[0]), std::string::npos) << log.str();
  EXPECT_FALSE(train::RunDirectory(run_dir).holds_a_run());
}

TEST(RunDirectory, HoldsARunOnceARunFileIsThereAndOwnsItsFilesHoweverSpelt) {
  TemporaryFolder folder("nimbus_run_files");
  const train::RunDirectory run(folder / "run");
  EXPECT_FALSE(run.holds_a_run());
  std::filesystem::create_directories(run.checkpoints());
  std::filesystem::create_directories(run.tensorboard());
  std::ofstream(run.lock_path()) << "123\n";
  EXPECT_FALSE(run.holds_a_run()) << "a claim and empty folders are no run";
  std::ofstream(run.checkpoints() + "/ckpt-00000001.safetensors") << "x";
  EXPECT_TRUE(run.holds_a_run());
  EXPECT_TRUE(run.has_checkpoint_files());

  EXPECT_TRUE(run.owns(run.path() + "/checkpoints/../config.json"));
  EXPECT_TRUE(run.owns(run.path() + "/tensorboard/train/new.bin"));
  EXPECT_TRUE(run.owns(run.path() + "/worker-1/metrics.jsonl"));
  EXPECT_FALSE(run.owns(run.path() + "/report.html"));
  EXPECT_FALSE(run.owns(folder / "elsewhere.npy"));

  EXPECT_NE(refusal([&] {
              train::refuse_output_onto_a_run_file(run.best_checkpoint(), "--output");
            }).find("--output " + run.best_checkpoint() + ": that is a file of the run in"),
            std::string::npos);
  EXPECT_EQ(refusal([&] { train::refuse_output_onto_a_run_file(run.path() + "/predictions.npy", "--output"); }), "");
  EXPECT_EQ(refusal([&] { train::refuse_output_onto_a_run_file(folder / "config.json", "--output"); }), "");
}

TEST(JsonLines, ATornLastLineIsSkippedWithAWarningAndADamagedLineIsRefused) {
  TemporaryFolder folder("nimbus_json_lines");
  const std::string path = folder / "metrics.jsonl";
  std::ofstream(path) << "{\"step\":1}\n\n{\"step\":2}\n{\"step\":3,\"ti";
  const monitor::JsonLines log = monitor::read_run_log(path);
  ASSERT_EQ(log.objects.size(), 2u);
  EXPECT_EQ(log.objects[1]["step"], 2);
  EXPECT_EQ(log.malformed, std::vector<int64_t>{4});
  ASSERT_TRUE(log.torn_last_line.has_value());
  EXPECT_NE(log.torn_last_line->find(path + ":4: skipping the torn last line"), std::string::npos);

  std::ofstream(path) << "{\"step\":1}\n{\"st\n{\"step\":3}\n";
  EXPECT_NE(refusal([&] { (void)monitor::read_run_log(path); }).find(path + ":2: not a JSON object"),
            std::string::npos);
  EXPECT_EQ(monitor::read_json_lines(path).objects.size(), 2u) << "the lenient reader (a resume) keeps the rest";
}

}  // namespace
}  // namespace nimbus::testing
