// The pre-run check of `nimbus train` (train/memory_check.h): runtime.memory
// in configs, a fixed batch that does not fit refused with a remedy,
// fit.gradient_accumulation: auto and fit.batch_size: auto under a small
// runtime.memory.limit, out of memory during a run (a checkpoint is written),
// and trimming between epochs; replicas on (assumed) GPUs each checked at their
// share of the batch. The limits are set from the estimates so the tests run on
// any machine's CPU.
#include "nimbus/train/memory_check.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/data/idx.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/memory.h"
#include "nimbus/graph/function.h"
#include "nimbus/graph/memory_estimate.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/train/assumed_devices.h"
#include "nimbus/train/config.h"
#include "nimbus/train/run_checks.h"

namespace nimbus::testing {
namespace {

constexpr int64_t kSamples = 2048;

// kSamples random 28x28 images and labels in IDX files, and the examples' MLP config over them.
class MemoryCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    configure_memory(Device::cpu(), {});
    dir_ = std::filesystem::temp_directory_path() / fmt::format("nimbus_memory_check_{}", ::getpid());
    std::filesystem::create_directories(dir_);
    Generator generator(3);
    const Tensor pixels = random_uniform({kSamples, 28, 28}, 0, 256, DType::kF32, Device::cpu(), &generator);
    data::write_idx((dir_ / "images.idx").string(), pixels.to(DType::kU8));
    std::vector<uint8_t> labels(kSamples);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i * 7 % 10);
    data::write_idx((dir_ / "labels.idx").string(), Tensor::from_vector<uint8_t>(labels, {kSamples}));
  }
  void TearDown() override {
    configure_memory(Device::cpu(), {});
    std::filesystem::remove_all(dir_);
  }

  // The example's MLP, trained on the files above without validation data, on the CPU (whose allocator
  // these tests read; runtime.device's default, auto, would take a GPU where there is one).
  nlohmann::json config(std::vector<std::string> overrides) const {
    overrides.insert(overrides.begin(), {"fit.verbose=0", "fit.epochs=1", "runtime.device=cpu"});
    nlohmann::json result = train::load_config("examples/fashion_mnist_mlp.yaml", overrides);
    result["data"].erase("validation");
    result["data"]["train"]["images"] = (dir_ / "images.idx").string();
    result["data"]["train"]["labels"] = (dir_ / "labels.idx").string();
    return result;
  }

  // A limit that leaves `budget` bytes for the step besides what the process holds on the device now
  // (the data set that run_config loads is host memory: it does not count).
  static std::string limit_leaving(double budget) {
    return std::to_string(memory_stats(Device::cpu()).bytes_in_use + static_cast<uint64_t>(budget));
  }

  std::filesystem::path dir_;
};

// The memory left between what 4 micro-batches of 512 need and what the whole batch needs.
struct Budget {
  uint64_t whole, four_parts;
  double between() const { return (double(four_parts) / (1 - train::kSafetyMargin) + double(whole)) / 2; }
};

Budget budget_for(const nlohmann::json& config) {
  const Budget budget{train::analyze_train_step(config, kSamples).memory.total(),
                      train::analyze_train_step(config, kSamples / 4, 4).memory.total()};
  // The test needs room between them (accumulation keeps the gradients twice but the activations of a quarter).
  EXPECT_LT(double(budget.four_parts) / (1 - train::kSafetyMargin), double(budget.whole))
      << "the batch of " << kSamples << " split in 4 needs " << budget.four_parts << " bytes, whole " << budget.whole;
  return budget;
}

TEST_F(MemoryCheck, RuntimeMemoryKeysConfigureTheAllocator) {
  train::configure_memory_from_config(config({"runtime.memory={mode: growth, limit: 48MiB, fraction: 0.5}"}));
  EXPECT_EQ(memory_options(Device::cpu()).limit, uint64_t{48} << 20);
  EXPECT_EQ(memory_options(Device::cpu()).mode, MemoryMode::kGrowth);
  train::configure_memory_from_config(config({"runtime.memory.limit=50331648"}));
  EXPECT_EQ(memory_options(Device::cpu()).limit, uint64_t{48} << 20);
  ::setenv("NIMBUS_MEMORY_LIMIT", "1GiB", 1);
  train::configure_memory_from_config(config({"runtime.memory.limit=48MiB"}));
  ::unsetenv("NIMBUS_MEMORY_LIMIT");
  EXPECT_EQ(memory_options(Device::cpu()).limit, uint64_t{1} << 30);
  try {
    train::configure_memory_from_config(config({"runtime.memory.mode=grow"}));
    FAIL() << "a bad mode was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.memory.mode"), std::string::npos) << e.what();
  }
  EXPECT_THROW(config({"runtime.memory.limt=1GiB"}), InvalidArgument);
  EXPECT_THROW(config({"fit.batch_size=huge"}), InvalidArgument);
}

TEST_F(MemoryCheck, AFixedBatchThatDoesNotFitIsRefusedWithTheNumbersAndTheAccumulationThatFits) {
  const Budget budget = budget_for(config({}));
  const nlohmann::json limited =
      config({fmt::format("fit.batch_size={}", kSamples), "runtime.memory.limit=" + limit_leaving(budget.between())});
  std::ostringstream out;
  try {
    train::run_config(limited, out, {.run_dir = (dir_ / "refused").string()});
    FAIL() << "the oversize batch was not refused";
  } catch (const OutOfMemory& e) {
    const std::string message = e.message(), hint = e.hint();
    EXPECT_NE(message.find(fmt::format("a micro-batch of {} needs", kSamples)), std::string::npos) << message;
    EXPECT_NE(hint.find(fmt::format("keeps the batch of {} in", kSamples)), std::string::npos) << hint;
    EXPECT_NE(hint.find("gradient_accumulation: "), std::string::npos) << hint;
  }
}

TEST_F(MemoryCheck, AutoAccumulationKeepsTheBatchAndTakesTheFewestStepsThatFit) {
  const Budget budget = budget_for(config({}));
  const nlohmann::json limited = config({fmt::format("fit.batch_size={}", kSamples), "fit.gradient_accumulation=auto",
                                         "fit.verbose=2", "runtime.memory.limit=" + limit_leaving(budget.between())});
  std::ostringstream out;
  const nlohmann::json summary = train::run_config(limited, out, {.run_dir = (dir_ / "auto").string()});
  const int64_t steps = summary.at("gradient_accumulation").get<int64_t>();
  const int64_t micro_batch = summary.at("micro_batch").get<int64_t>();
  EXPECT_GT(steps, 1) << out.str();
  EXPECT_EQ(micro_batch * steps, kSamples);
  EXPECT_EQ(summary.at("steps"), 1);
  EXPECT_NE(out.str().find(fmt::format("fit.gradient_accumulation: auto chose {}", steps)), std::string::npos)
      << out.str();
  const double usable = (1 - train::kSafetyMargin) * summary.at("memory").at("available_bytes").get<double>();
  EXPECT_LE(summary.at("memory").at("total_bytes").get<double>(), usable);
  // The fewest: the next smaller divisor of the batch does not fit.
  int64_t fewer = steps - 1;
  while (kSamples % fewer != 0) --fewer;
  EXPECT_GT(double(train::analyze_train_step(limited, kSamples / fewer, fewer).memory.total()), usable);
}

// runtime.memory.limit is the model's: the data set run_config loads is host memory, reported apart.
TEST_F(MemoryCheck, TheDataSetIsHostMemoryOutsideTheLimit) {
  const uint64_t step = train::analyze_train_step(config({}), 64).memory.total();
  const uint64_t data_set = kSamples * 28 * 28 * 4 + kSamples;  // f32 images and u8 labels
  // Room for the step with its margin, not for the step and the data set together.
  const double budget = 1.15 * double(step) / (1 - train::kSafetyMargin);
  ASSERT_LT(budget, double(step + data_set));
  const std::string limit = limit_leaving(budget);
  const nlohmann::json limited =
      config({"fit.batch_size=64", "fit.steps_per_epoch=2", "runtime.memory.limit=" + limit});
  allocator_for(Device::cpu()).reset_peak();
  std::ostringstream out;
  nlohmann::json summary;
  try {
    summary = train::run_config(limited, out, {.run_dir = (dir_ / "host").string()});
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << out.str();
  }
  EXPECT_EQ(summary.at("gradient_accumulation"), 1);
  EXPECT_EQ(summary.at("steps"), 2);
  EXPECT_LE(summary.at("peak_memory_bytes").get<uint64_t>(), std::stoull(limit));
  EXPECT_GE(summary.at("peak_host_memory_bytes").get<uint64_t>(), data_set);
}

TEST_F(MemoryCheck, AutoBatchSizeTakesTheLargestPowerOfTwoThatFits) {
  const Budget budget = budget_for(config({}));
  const nlohmann::json limited =
      config({"fit.batch_size=auto", "fit.verbose=2", "runtime.memory.limit=" + limit_leaving(budget.between())});
  std::ostringstream out;
  nlohmann::json summary;
  try {
    summary = train::run_config(limited, out, {.run_dir = (dir_ / "batch").string()});
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << out.str();
  }
  const int64_t batch = summary.at("micro_batch").get<int64_t>();
  EXPECT_EQ(summary.at("gradient_accumulation"), 1);
  EXPECT_EQ(batch & (batch - 1), 0) << batch << " is not a power of two";
  EXPECT_LT(batch, kSamples);
  EXPECT_NE(out.str().find(fmt::format("fit.batch_size: auto chose {}", batch)), std::string::npos) << out.str();
  const double usable = (1 - train::kSafetyMargin) * summary.at("memory").at("available_bytes").get<double>();
  EXPECT_LE(double(train::analyze_train_step(limited, batch).memory.total()), usable);
  EXPECT_GT(double(train::analyze_train_step(limited, 2 * batch).memory.total()), usable);
  EXPECT_EQ(summary.at("steps"), (kSamples + batch - 1) / batch);
}

TEST_F(MemoryCheck, OutOfMemoryDuringTheRunWritesACheckpointAndSaysSo) {
  const nlohmann::json unlimited = config({"fit.batch_size=512"});
  const train::StepAnalysis step = train::analyze_train_step(unlimited, 512);
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(unlimited), unlimited);
  Generator generator(5);
  const Tensor x = random_uniform({kSamples, 28, 28, 1}, 0, 1, DType::kF32, Device::cpu(), &generator);
  const Tensor y = zeros({kSamples}, DType::kU8);
  // Room for the data, the model and the optimizer's slots, not for the step's arena.
  const uint64_t limit = memory_stats(Device::cpu()).bytes_in_use + step.memory.parameter_bytes +
                         step.memory.optimizer_state_bytes + step.memory.activation_bytes / 4;
  const nlohmann::json limited = config({"fit.batch_size=512", fmt::format("runtime.memory.limit={}", limit)});
  train::configure_memory_from_config(limited);
  const std::string checkpoint = (dir_ / "oom.safetensors").string();
  train::FitOptions options{.epochs = 1, .batch_size = 512, .verbose = 0};
  try {
    train::fit_saving_on_out_of_memory(trainer, x, y, options, limited, step.memory.step_bytes(), checkpoint);
    FAIL() << "the step fitted under " << limit << " bytes";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(e.message().find("cannot allocate"), std::string::npos) << e.message();
    EXPECT_NE(e.hint().find("was written to " + checkpoint), std::string::npos) << e.hint();
  }
  configure_memory(Device::cpu(), {});
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  train::Trainer restored = train::compile_from_config(train::model_from_train_config(unlimited), unlimited);
  EXPECT_EQ(restored.restore_checkpoint(checkpoint).epochs_done, 0);
}

TEST_F(MemoryCheck, PredictionAndEvaluationSplitABatchThatDoesNotFitIntoMicroBatchesThatDo) {
  const nlohmann::json unlimited = config({});
  train::Trainer trainer = train::compile_from_config(train::model_from_train_config(unlimited), unlimited);
  Generator generator(6);
  const Tensor x = random_uniform({kSamples, 28, 28, 1}, 0, 1, DType::kF32, Device::cpu(), &generator);
  std::vector<uint8_t> labels(kSamples);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i * i % 10);
  const Tensor y = Tensor::from_vector<uint8_t>(labels, {kSamples});
  std::ostringstream quiet;
  const Tensor whole = trainer.predict(x, {.batch_size = kSamples, .output = &quiet});
  const train::Logs whole_scores = trainer.evaluate(x, y, {.batch_size = kSamples, .output = &quiet});
  EXPECT_EQ(quiet.str(), "") << "without a limit the whole batch fits";
  trainer.release_step_memory();

  // Room for a quarter of the batch's predict step, not for the whole.
  const auto predict_step_bytes = [&](int64_t batch) {
    const TracedGraph& traced =
        trainer.trace_predict_step(Tensor::symbolic({batch, 28, 28, 1}, DType::kF32, Device::cpu(), nullptr));
    return graph::estimate_memory(traced.optimized, traced.plan).total();
  };
  const uint64_t limit = memory_stats(Device::cpu()).bytes_in_use +
                         static_cast<uint64_t>(double(predict_step_bytes(kSamples / 4)) / (1 - train::kSafetyMargin));
  ASSERT_LT(limit - memory_stats(Device::cpu()).bytes_in_use, predict_step_bytes(kSamples / 2));
  configure_memory(Device::cpu(), {.limit = limit});

  // "predict: a batch of 2048 needs ... running 3 micro-batches of 683 (...)": pieces as even as can be;
  // the predict step's at least as large as the quarter the limit was made for (evaluation's test step
  // needs more: the loss and the metrics' statistics).
  const auto chosen = [](const std::string& said, const std::string& what, int64_t at_least) {
    const std::string prefix = what + ": a batch of " + std::to_string(kSamples) + " needs ";
    EXPECT_EQ(said.rfind(prefix, 0), 0u) << said;
    int64_t pieces = 0, micro_batch = 0;
    const size_t at = said.find("running ");
    EXPECT_EQ(std::sscanf(said.c_str() + at, "running %ld micro-batches of %ld", &pieces, &micro_batch), 2) << said;
    EXPECT_GE(pieces, 2) << said;
    EXPECT_EQ(micro_batch, (kSamples + pieces - 1) / pieces) << said;
    EXPECT_GE(micro_batch, at_least) << said;
    return micro_batch;
  };
  std::ostringstream said;
  const Tensor split = trainer.predict(x, {.batch_size = kSamples, .output = &said});
  std::cout << said.str();
  const int64_t micro_batch = chosen(said.str(), "predict", kSamples / 4);
  ASSERT_EQ(split.shape(), whole.shape());
  EXPECT_EQ(reduce_max(abs(split - whole)).item<float>(), 0.0f) << "micro-batches of " << micro_batch;

  said.str("");
  const train::Logs split_scores = trainer.evaluate(x, y, {.batch_size = kSamples, .output = &said});
  std::cout << said.str();
  chosen(said.str(), "evaluate", 1);
  EXPECT_NEAR(split_scores.at("loss"), whole_scores.at("loss"), 1e-6 * std::abs(whole_scores.at("loss")));
  EXPECT_DOUBLE_EQ(split_scores.at("accuracy"), whole_scores.at("accuracy"));

  // Whole batches, as asked, do not fit: the split is what made the runs above possible.
  trainer.release_step_memory();
  EXPECT_THROW(trainer.predict(x, {.batch_size = kSamples, .split_to_fit = false}), OutOfMemory);
}

TEST_F(MemoryCheck, TrimBetweenEpochsHandsTheStepArenaBack) {
  const nlohmann::json base = config({"fit.batch_size=256"});
  Generator generator(5);
  const Tensor x = random_uniform({kSamples, 28, 28, 1}, 0, 1, DType::kF32, Device::cpu(), &generator);
  const Tensor y = zeros({kSamples}, DType::kU8);
  const train::FitOptions options{.epochs = 2, .batch_size = 256, .verbose = 0};
  const uint64_t step_bytes = train::analyze_train_step(base, 256).memory.step_bytes();
  auto in_use_after_fit = [&](const nlohmann::json& config) {
    train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
    train::fit_saving_on_out_of_memory(trainer, x, y, options, config, step_bytes,
                                       (dir_ / "unused.safetensors").string());
    return memory_stats(Device::cpu()).bytes_in_use;
  };
  const uint64_t kept = in_use_after_fit(config({"fit.batch_size=256"}));
  const uint64_t trimmed = in_use_after_fit(config({"fit.batch_size=256", "runtime.memory.trim_between_epochs=true"}));
  const uint64_t arena = train::analyze_train_step(base, 256).memory.activation_bytes;
  EXPECT_GE(kept, trimmed + arena) << "kept " << kept << ", trimmed " << trimmed;
}

// The check a run makes, on a dry run's assumed GPUs: replicas of mirrored (and multi_worker_mirrored)
// each take a quarter of the batch, measured as one GPU's step at that micro-batch, on a GPU too small
// for the whole batch.
TEST_F(MemoryCheck, ReplicasOnAssumedGpusAreEachCheckedAtTheirShareOfTheBatch) {
  auto on_gpus = [this](int64_t batch, const std::string& strategy) {
    return config(
        {fmt::format("fit.batch_size={}", batch), "runtime.device=cuda", "runtime.strategy.type=" + strategy});
  };
  // The estimates on the CPU choose the assumed GPU's memory: too small for the batch, room for a quarter.
  const uint64_t quarter = train::analyze_train_step(config({}), kSamples / 4).memory.total();
  const uint64_t whole = train::analyze_train_step(config({}), kSamples).memory.total();
  ASSERT_LT(double(quarter) / (1 - train::kSafetyMargin), double(whole));
  train::AssumedDevices gpus{
      .count = 4,
      .name = "Test-GPU",
      .memory_bytes = static_cast<uint64_t>((double(quarter) / (1 - train::kSafetyMargin) + double(whole)) / 2),
      .compute_capability = 8.0,
      .bfloat16 = true};
  const train::RunOptions options{.assume_devices = &gpus};
  EXPECT_THROW(train::dry_run(on_gpus(kSamples, "one_device"), options), OutOfMemory);  // one GPU: the whole batch
  // What one GPU's check measures at a quarter of the batch is what each of 4 replicas' is.
  const nlohmann::json share = train::dry_run(on_gpus(kSamples / 4, "one_device"), options).at("memory");

  for (const std::string strategy : {"mirrored", "multi_worker_mirrored"}) {
    if (strategy == "multi_worker_mirrored")
      gpus = {.nodes = 2, .count = 2, .name = gpus.name, .memory_bytes = gpus.memory_bytes};
    const nlohmann::json report = train::dry_run(on_gpus(kSamples, strategy), options);
    EXPECT_EQ(report.at("micro_batch"), kSamples / 4) << strategy;
    EXPECT_EQ(report.at("memory"), share) << strategy;
    EXPECT_NE(report.at("checked").dump().find(strategy + ", 4 replica(s) on GPUs of --assume-devices"),
              std::string::npos)
        << report.dump();
  }
  gpus = {.count = 3, .name = gpus.name, .memory_bytes = gpus.memory_bytes};
  try {
    (void)train::dry_run(
        config({fmt::format("fit.batch_size={}", kSamples), "runtime.device=cuda", "runtime.strategy.type=mirrored"}),
        options);
    FAIL() << "a batch that 3 replicas do not split evenly was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(e.message().find(
                  fmt::format("batch_size {} is not divisible by gradient_accumulation 1 x 3 replicas", kSamples)),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace nimbus::testing
