// MultiWorkerMirrored as users launch it: `mpirun -np 2 nimbus train` trains to
// the weights of one process at the same global batch, a stalled worker
// (SIGSTOP) ends the job within the collective timeout with a message naming it,
// and after a killed worker (SIGKILL) ended the job, both workers resume from
// rank 0's last checkpoint to the weights of an uninterrupted run (worker 1's own
// files outside the run directory, as nimbus k8s lays them out).
#include "nimbus/distribute/multi_worker.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "nimbus/data/idx.h"
#include "nimbus/tensor/safetensors.h"
#include "nimbus/train/checkpoint.h"
#include "support/child_process.h"
#include "support/run_command.h"
#include "train/tiny_run.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

const std::string kNimbus = NIMBUS_CLI;
const std::string kMpirun = "/usr/bin/mpirun";

// A config training `layers` on Fashion-MNIST for `epochs` epochs of `steps` steps of a global batch of 64.
std::string write_config(const TemporaryFolder& folder, const std::string& layers, int steps, int epochs = 1) {
  const std::string dir = data::kFashionMnistDir;
  const std::string path = folder / "config.yaml";
  std::ofstream(path) << "model:\n  input_shape: [28, 28, 1]\n  layers:\n"
                      << layers
                      << "compile:\n  optimizer: {name: sgd, learning_rate: 0.05}\n"
                         "  loss: {name: sparse_categorical_crossentropy, from_logits: true}\n"
                         "  metrics: [accuracy]\n"
                         "data:\n  train: {images: "
                      << dir << "/train-images-idx3-ubyte.gz, labels: " << dir
                      << "/train-labels-idx1-ubyte.gz}\n"
                         "fit: {epochs: "
                      << epochs << ", batch_size: 64, steps_per_epoch: " << steps
                      << ", verbose: 1}\nruntime: {threads: 1, seed: 3}\n";
  return path;
}

const char* kMlp = "    - Flatten: {}\n    - Dense: {units: 64, activation: relu}\n    - Dense: {units: 10}\n";
const char* kCnn =
    "    - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n    - MaxPooling2D: {pool_size: 2}\n"
    "    - Flatten: {}\n    - Dense: {units: 10}\n";

// The model tensors of the newest checkpoint in run_dir, in name order, flattened.
std::vector<double> final_weights(const std::string& run_dir) {
  std::ostringstream warnings;
  const auto checkpoints = train::list_checkpoints(run_dir + "/checkpoints", warnings);
  EXPECT_FALSE(checkpoints.empty()) << run_dir;
  std::vector<double> all;
  if (checkpoints.empty()) return all;
  std::map<std::string, Tensor> model;
  for (const auto& [name, tensor] : read_safetensors(checkpoints[0].path).tensors) {
    if (name.rfind("model/", 0) == 0) model.emplace(name, tensor);
  }
  for (const auto& [name, tensor] : model) {
    const std::vector<double> values = values_of(tensor);
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

class MultiWorker : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    // install-deps installs OpenMPI; a build without it has no MultiWorkerMirrored to test.
    if (!distribute::built_with_mpi() || !std::filesystem::exists(kMpirun)) {
      // scripts/install-deps installs OpenMPI; a build without it has no multi-worker strategy to test.
      GTEST_SKIP() << "this build has no MPI (install libopenmpi-dev openmpi-bin and rebuild)";
    }
    // mpirun refuses root unless told; the tests run as root in containers.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
};

std::string mpirun(int workers, const std::string& arguments) {
  return fmt::format("{} --oversubscribe -np {} {} train {} 2>&1", kMpirun, workers, kNimbus, arguments);
}

TEST_P(MultiWorker, TwoProcessesTrainToTheWeightsOfOne) {
  TemporaryFolder folder("nimbus_multi_worker");
  const std::string config = write_config(folder, GetParam(), 20);
  const std::string one = run_command(fmt::format("{} train {} --run-dir {} 2>&1", kNimbus, config, folder / "one"));
  const std::string two = run_command(mpirun(2, fmt::format("{} --run-dir {} --summary {} --set "
                                                            "runtime.strategy.type=multi_worker_mirrored",
                                                            config, folder / "two", folder / "summary.json")));
  const std::vector<double> reference = final_weights(folder / "one"), mirrored = final_weights(folder / "two");
  ASSERT_FALSE(reference.empty()) << one;
  ASSERT_EQ(mirrored.size(), reference.size()) << two;
  // Not bit-exact in f32: each worker sums its 32 samples' gradients in the kernels' order for that
  // batch, one process its 64, and 20 SGD steps carry the difference (1.1e-5 for the CNN on an AVX2
  // EPYC). A gradient left unreduced, or summed instead of averaged, changes each update by a factor
  // of order one.
  EXPECT_LE(relative_norm_error(mirrored, reference), 5e-5) << two;
  // Rank 0 alone prints the progress and writes the summary; the other worker writes its own folder.
  EXPECT_EQ(std::count(two.begin(), two.end(), '\n') > 0 && two.find("Epoch 1/1") == two.rfind("Epoch 1/1"), true)
      << two;
  EXPECT_TRUE(std::filesystem::exists(folder / "summary.json")) << two;
  EXPECT_TRUE(std::filesystem::exists(folder / "two/worker-1")) << two;
}

INSTANTIATE_TEST_SUITE_P(Models, MultiWorker, ::testing::Values(kMlp, kCnn),
                         [](const auto& info) { return std::string(info.index == 0 ? "Mlp" : "Cnn"); });

// The pid of the nimbus process that mpirun started as `rank`, found by its environment.
pid_t worker_pid(int rank, const std::string& run_dir) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline"), environ(entry.path() / "environ");
    const std::string command((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    const std::string environment((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    if (command.rfind(kNimbus, 0) == 0 && command.find(run_dir) != std::string::npos &&
        environment.find(fmt::format("OMPI_COMM_WORLD_RANK={}", rank) + '\0') != std::string::npos) {
      return static_cast<pid_t>(std::stoi(name));
    }
  }
  return -1;
}

TEST_F(MultiWorker, AStalledWorkerEndsTheJobWithinTheCollectiveTimeoutNamingIt) {
  TemporaryFolder folder("nimbus_multi_worker_stall");
  const std::string config = write_config(folder, kMlp, 900, 100);
  const std::string run_dir = folder / "run";
  ChildProcess job({kMpirun, "--oversubscribe", "-np", "2", kNimbus, "train", config, "--run-dir", run_dir, "--set",
                    "runtime.strategy={type: multi_worker_mirrored, collective_timeout: 3}"},
                   folder / "out.txt", folder / "err.txt");
  // Mid-training: once rank 0 has logged a few steps (one metrics.jsonl line each).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  pid_t stalled = -1;
  while (std::chrono::steady_clock::now() < give_up && job.running()) {
    std::ifstream metrics(run_dir + "/metrics.jsonl");
    const std::string text((std::istreambuf_iterator<char>(metrics)), std::istreambuf_iterator<char>());
    int steps = 0;
    for (size_t at = text.find("\"type\":\"step\""); at != std::string::npos;
         at = text.find("\"type\":\"step\"", at + 1)) {
      ++steps;
    }
    if (steps >= 3 && (stalled = worker_pid(1, run_dir)) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(stalled, 0) << "worker 1 not found mid-training\n" << job.stdout_text() << job.stderr_text();
  ASSERT_EQ(kill(stalled, SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  while (job.running() && std::chrono::steady_clock::now() - stopped_at < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  if (job.running()) kill(stalled, SIGKILL);  // never leave a stopped process behind
  const int status = job.wait();
  const std::string output = job.stdout_text() + job.stderr_text();
  EXPECT_LT(seconds, 30.0) << "the job must end soon after the 3 s timeout\n" << output;
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("timed out after 3s (runtime.strategy.collective_timeout) on rank 0 of 2 at step"),
            std::string::npos)
      << output;
  // SIGSTOP lands before rank 1 calls the collective, or inside it after it announced its arrival.
  EXPECT_TRUE(output.find(": rank 1 did not arrive") != std::string::npos ||
              output.find(": rank 1 arrived but stopped before the collective completed") != std::string::npos)
      << output;
}

TEST_F(MultiWorker, AfterAKilledWorkerEndedTheJobBothResumeFromTheLastCheckpointToTheSameWeights) {
  TemporaryFolder folder("nimbus_multi_worker_kill");
  const std::string config = write_config(folder, kMlp, 900);
  const std::vector<std::string> settings = {"--set", "runtime.strategy.type=multi_worker_mirrored", "--set",
                                             "checkpoint.save_freq=100"};
  const std::string whole = run_command(mpirun(2, fmt::format("{} --run-dir {} {} {} {} {}", config, folder / "whole",
                                                              settings[0], settings[1], settings[2], settings[3])));
  // As on Kubernetes (nimbus k8s): worker 1 writes its own files outside the run directory.
  const std::string run_dir = folder / "run", scratch = folder / "scratch";
  std::vector<std::string> argv = {kMpirun,     "--oversubscribe", "-np",          "2",    kNimbus, "train", config,
                                   "--run-dir", run_dir,           "--worker-dir", scratch};
  argv.insert(argv.end(), settings.begin(), settings.end());
  ChildProcess job(argv, folder / "out.txt", folder / "err.txt");
  // Mid-training: once rank 0 has written two checkpoints (steps 100 and 200).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  pid_t killed = -1;
  while (std::chrono::steady_clock::now() < give_up && job.running()) {
    std::ostringstream warnings;
    if (train::list_checkpoints(run_dir + "/checkpoints", warnings).size() >= 2 &&
        (killed = worker_pid(1, run_dir)) > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(killed, 0) << "worker 1 not found mid-training\n" << job.stdout_text() << job.stderr_text();
  ASSERT_EQ(kill(killed, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  while (job.running() && std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(job.running()) << "mpirun must end the job when a worker dies";
  const int status = job.wait();
  const std::string output = job.stdout_text() + job.stderr_text();
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  std::ostringstream warnings;
  const auto left = train::list_checkpoints(run_dir + "/checkpoints", warnings);
  ASSERT_FALSE(left.empty()) << output;
  ASSERT_LT(left[0].position.global_step, 900) << "the kill came after the run's end\n" << output;
  // Rank 0 alone wrote the run directory and its checkpoints; worker 1 resumes from them too.
  EXPECT_FALSE(std::filesystem::exists(run_dir + "/worker-1"));
  EXPECT_TRUE(std::filesystem::exists(scratch + "/worker-1/config.json"));
  EXPECT_FALSE(std::filesystem::exists(scratch + "/worker-1/checkpoints/ckpt-00000100.safetensors"));

  const std::string resumed = run_command(mpirun(2, fmt::format("--resume {} --worker-dir {}", run_dir, scratch)));
  EXPECT_NE(resumed.find(fmt::format("global step {})", left[0].position.global_step)), std::string::npos) << resumed;
  const std::vector<double> reference = final_weights(folder / "whole"), continued = final_weights(run_dir);
  ASSERT_FALSE(reference.empty()) << whole;
  ASSERT_EQ(continued.size(), reference.size()) << resumed;
  EXPECT_LE(relative_norm_error(continued, reference), 1e-6) << resumed;
}

}  // namespace
}  // namespace nimbus::testing
