// `nimbus train`, `nimbus evaluate` and `nimbus predict` as a user runs them: SIGTERM in the middle
// of an epoch writes a checkpoint and exits 0, --resume finishes the run with the same weights as
// a run never stopped; evaluate and predict read a run directory or a saved model.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "nimbus/tensor/safetensors.h"
#include "nimbus/train/checkpoint.h"
#include "nimbus/train/config.h"
#include "nimbus/train/trained_model.h"
#include "support/child_process.h"
#include "support/run_command.h"
#include "tiny_run.h"

namespace nimbus::testing {
namespace {

const std::string kNimbus = NIMBUS_CLI;

int64_t step_lines(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::string line;
  int64_t count = 0;
  while (std::getline(in, line)) count += line.find("\"type\":\"step\"") != std::string::npos;
  return count;
}

// The model tensors of the newest checkpoint in run_dir.
std::map<std::string, Tensor> final_weights(const std::string& run_dir) {
  std::ostringstream warnings;
  const auto checkpoints = train::list_checkpoints(run_dir + "/checkpoints", warnings);
  EXPECT_FALSE(checkpoints.empty()) << run_dir;
  std::map<std::string, Tensor> weights;
  if (checkpoints.empty()) return weights;
  for (const auto& [name, tensor] : read_safetensors(checkpoints[0].path).tensors) {
    if (name.rfind("model/", 0) == 0) weights.emplace(name, tensor);
  }
  return weights;
}

void expect_same_bits(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    const Tensor& other = b.at(name);
    ASSERT_EQ(tensor.nbytes(), other.nbytes()) << name;
    EXPECT_EQ(std::memcmp(tensor.raw_data(), other.raw_data(), tensor.nbytes()), 0) << name << " differs";
  }
}

// `samples` images of 16x16, batch 8, 2 epochs.
struct CliRun {
  TemporaryFolder folder{"nimbus_cli"};
  std::string config = folder / "tiny.yaml";
  explicit CliRun(int samples = 2048) {
    std::ofstream(config) << write_tiny_run(folder, samples, 16, 32, "{epochs: 2, batch_size: 8, verbose: 2}");
  }
};

TEST(Cli, SigtermMidEpochCheckpointsAndResumeFinishesTheSameRun) {
  // 1024 steps per epoch: the signal, sent after the first step is logged, must land within the first
  // epoch even when a loaded machine keeps this test process off the CPU for half a second.
  constexpr int kSamples = 8192, kSteps = 2 * kSamples / 8;
  CliRun run(kSamples);
  const std::string straight = run.folder / "straight", stopped = run.folder / "stopped";
  const std::string output = run_command(kNimbus + " train " + run.config + " --run-dir " + straight + " 2>&1");
  ASSERT_NE(output.find("samples/s"), std::string::npos) << output;

  {
    ChildProcess child({kNimbus, "train", run.config, "--run-dir", stopped}, run.folder / "out.txt",
                       run.folder / "err.txt");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (step_lines(stopped + "/metrics.jsonl") < 1 && child.running() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    child.signal(SIGTERM);
    const int status = child.wait();
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << child.stderr_text();
    EXPECT_EQ(WEXITSTATUS(status), 0) << child.stderr_text();
    EXPECT_NE(child.stderr_text().find("SIGTERM received: checkpoint"), std::string::npos) << child.stderr_text();
    EXPECT_NE(child.stdout_text().find("continue with: nimbus train --resume " + stopped), std::string::npos)
        << child.stdout_text();
  }
  std::ostringstream warnings;
  const auto checkpoints = train::list_checkpoints(stopped + "/checkpoints", warnings);
  ASSERT_FALSE(checkpoints.empty());
  const train::TrainingPosition at_signal = checkpoints[0].position;
  EXPECT_EQ(at_signal.epochs_done, 0) << "SIGTERM came after the first epoch: the machine is too fast for this test";
  EXPECT_GT(at_signal.steps_in_epoch, 0);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(stopped + "/summary.json"))["interrupted"], true);

  const std::string resumed = run_command(kNimbus + " train --resume " + stopped + " 2>&1");
  EXPECT_NE(resumed.find("Resuming from " + checkpoints[0].path), std::string::npos) << resumed;
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(stopped + "/summary.json"));
  EXPECT_EQ(summary["steps"], kSteps);
  EXPECT_EQ(summary["samples_total"], 2 * kSamples);
  EXPECT_EQ(summary["interrupted"], false);
  EXPECT_EQ(summary["epochs"].size(), 2u);
  EXPECT_EQ(step_lines(stopped + "/metrics.jsonl"), kSteps);  // every step once, none lost or repeated
  expect_same_bits(final_weights(stopped), final_weights(straight));
  const nlohmann::json reference = nlohmann::json::parse(std::ifstream(straight + "/summary.json"));
  EXPECT_EQ(summary["final"], reference["final"]);
}

// A .npy file's array as floats, after checking its header.
std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t> shape) {
  std::ifstream in(path, std::ios::binary);
  std::string magic(8, '\0');
  in.read(magic.data(), 8);
  EXPECT_EQ(magic, std::string("\x93NUMPY\x01\x00", 8));
  uint16_t length = 0;
  in.read(reinterpret_cast<char*>(&length), 2);
  std::string header(length, '\0');
  in.read(header.data(), length);
  EXPECT_EQ((10 + length) % 64, 0);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
  EXPECT_NE(header.find(fmt::format("'shape': ({}, {})", shape[0], shape[1])), std::string::npos) << header;
  std::vector<float> values(static_cast<size_t>(shape[0] * shape[1]));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  EXPECT_TRUE(in) << "the data is shorter than the shape says";
  return values;
}

TEST(Cli, EvaluateAndPredictReadARunDirectoryOrASavedModel) {
  CliRun run;
  const std::string run_dir = run.folder / "run";
  run_command(kNimbus + " train " + run.config + " --run-dir " + run_dir +
              " --set fit.epochs=1 --set compile.optimizer.learning_rate=0.0003 2>&1");
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(run_dir + "/summary.json"));

  // The last checkpoint holds the final weights: evaluating on the validation split gives the final val_* logs.
  const std::string evaluated = run_command(kNimbus + " evaluate " + run_dir + " --json 2>&1");
  const nlohmann::json scores = nlohmann::json::parse(evaluated);
  EXPECT_EQ(scores["accuracy"], summary["final"]["val_accuracy"]) << evaluated;
  EXPECT_EQ(scores["loss"], summary["final"]["val_loss"]) << evaluated;
  const std::string best = run_command(kNimbus + " evaluate " + run_dir + " --checkpoint best 2>&1");
  EXPECT_NE(best.find("accuracy: "), std::string::npos) << best;
  EXPECT_NE(best.find("weights from " + run_dir + "/checkpoints/best.safetensors"), std::string::npos) << best;

  const std::string npy = run.folder / "predictions.npy";
  const std::string predicted = run_command(kNimbus + " predict " + run_dir + " -o " + npy + " 2>&1");
  EXPECT_NE(predicted.find("predictions [2048, 4]"), std::string::npos) << predicted;
  const std::vector<float> logits = read_npy_f32(npy, {2048, 4});
  train::TrainedModel trained = train::load_trained_model(run_dir, {}, std::cerr);
  const Tensor x = train::load_idx_images(trained.config["data"]["validation"], trained.trainer.model());
  EXPECT_EQ(logits, trained.trainer.predict(x, {.batch_size = 8}).to_vector<float>());
  // Where NumPy is installed (python3-numpy, which python3-torch pulls in), numpy.load reads it back too.
  if (run_command("/usr/bin/python3 -c 'import numpy' 2>&1 && echo ok").find("ok") != std::string::npos) {
    const std::string shape = run_command("/usr/bin/python3 -c \"import numpy; a = numpy.load('" + npy +
                                          "'); print(a.shape, a.dtype, float(a[5, 2]) == float(numpy.float32(" +
                                          fmt::format("{:.9g}", logits[5 * 4 + 2]) + ")))\"");
    EXPECT_EQ(shape, "(2048, 4) float32 True\n");
  }

  // The same weights as a saved model, with the data and loss given on the command line.
  const std::string saved = run.folder / "model.safetensors";
  trained.trainer.model().save(saved);
  const std::string from_model =
      run_command(kNimbus + " evaluate " + saved + " --images " + (run.folder / "images.idx") + " --labels " +
                  (run.folder / "labels.idx") + " --from-logits --batch-size 8 --json 2>&1");
  const nlohmann::json model_scores = nlohmann::json::parse(from_model);
  EXPECT_EQ(model_scores["accuracy"], scores["accuracy"]) << from_model;
  EXPECT_NEAR(model_scores["loss"].get<double>(), scores["loss"].get<double>(), 1e-6) << from_model;

  const std::string missing = run_command(kNimbus + " evaluate " + (run.folder / "nothing") + " 2>&1; echo exit=$?");
  EXPECT_NE(missing.find((run.folder / "nothing") + ": no such run directory or saved model"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("exit=1"), std::string::npos) << missing;
  const std::string no_data = run_command(kNimbus + " predict " + saved + " -o " + npy + " 2>&1");
  EXPECT_NE(no_data.find("pass --images FILE"), std::string::npos) << no_data;
}

}  // namespace
}  // namespace nimbus::testing
