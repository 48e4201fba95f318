// Kill -9 at random moments during `nimbus train` with frequent checkpoints, 10 times: after each
// kill every checkpoint file is intact (written atomically, never torn), and each resume continues
// from the newest one; a corrupted checkpoint is refused by its checksum and the previous one
// used; the run that was killed 10 times ends with the weights, bit for bit, of one never killed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "nimbus/tensor/safetensors.h"
#include "nimbus/train/checkpoint.h"
#include "support/child_process.h"
#include "support/run_command.h"
#include "train/tiny_run.h"

namespace nimbus::testing {
namespace {

const std::string kNimbus = NIMBUS_CLI;

std::map<std::string, Tensor> model_tensors(const std::string& path) {
  std::map<std::string, Tensor> weights;
  for (const auto& [name, tensor] : read_safetensors(path).tensors) {
    if (name.rfind("model/", 0) == 0) weights.emplace(name, tensor);
  }
  return weights;
}

bool has_checkpoint(const std::string& folder) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    if (entry.path().filename().string().rfind("ckpt-", 0) == 0 && entry.path().extension() == ".safetensors") {
      return true;
    }
  }
  return false;
}

// Every checkpoint file of the folder passes its checksum; returns the newest, or "" for none.
std::string check_all_intact(const std::string& folder) {
  std::ostringstream warnings;
  const std::vector<train::CheckpointInfo> checkpoints = train::list_checkpoints(folder, warnings);
  EXPECT_EQ(warnings.str(), "") << "a checkpoint header is unreadable";
  for (const train::CheckpointInfo& checkpoint : checkpoints) {
    EXPECT_NO_THROW(train::verify_checkpoint(checkpoint.path)) << checkpoint.path << " is torn or corrupted";
  }
  return checkpoints.empty() ? "" : checkpoints[0].path;
}

TEST(KillNine, EveryResumeContinuesFromTheNewestIntactCheckpoint) {
  TemporaryFolder folder("nimbus_kill9");
  const std::string config = folder / "run.yaml";
  // 2048 samples, batch 8, 12 epochs: 3072 steps; a checkpoint every 16 steps, 3 kept.
  std::ofstream(config) << write_tiny_run(folder, 2048, 16, 32, "{epochs: 12, batch_size: 8, verbose: 2}")
                        << "checkpoint: {save_freq: 16, max_to_keep: 3}\n";
  const std::string reference = folder / "reference", killed = folder / "killed";
  const auto start = std::chrono::steady_clock::now();
  const std::string straight = run_command(kNimbus + " train " + config + " --run-dir " + reference + " 2>&1");
  ASSERT_NE(straight.find("samples/s"), std::string::npos) << straight;
  // Kills come within a tenth of the whole run's time after each start, so 10 of them leave work to do.
  const auto run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);

  const auto seed = static_cast<unsigned>(std::chrono::system_clock::now().time_since_epoch().count());
  std::mt19937 random(seed);
  std::uniform_int_distribution<int64_t> delay_ms(0, std::max<int64_t>(100, run_ms.count() / 10));
  SCOPED_TRACE("kill delays drawn with seed " + std::to_string(seed));
  int kills = 0, resumes_seen = 0;
  for (int attempt = 0; kills < 10 && attempt < 40; ++attempt) {
    const std::string newest = check_all_intact(killed + "/checkpoints");
    // As nimbus k8s's container command does: --resume once the run began (config.json), which starts
    // again from step 0 when the killed process left no checkpoint.
    std::vector<std::string> argv = {kNimbus, "train", config, "--run-dir", killed};
    if (std::filesystem::exists(killed + "/config.json")) argv = {kNimbus, "train", config, "--resume", killed};
    ChildProcess child(argv, folder / "out.txt", folder / "err.txt");
    // Every other kill comes while training (after an epoch began and a checkpoint exists, so the
    // next start resumes), the others at any moment from the start.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const auto training = [&] {
      return child.stdout_text().find("Epoch ") != std::string::npos && has_checkpoint(killed + "/checkpoints");
    };
    while (kills % 2 == 1 && !training() && child.running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(random)));
    if (!child.running()) {
      // It finished (or failed) before the kill: only a run with work left counts.
      ASSERT_EQ(child.wait(), 0) << child.stderr_text();
      FAIL() << "the run finished after " << kills << " kills; the test needs a longer run";
    }
    child.signal(SIGKILL);
    child.wait();
    ++kills;
    if (!newest.empty() && child.stdout_text().find("Resuming from") != std::string::npos) {
      ++resumes_seen;
      EXPECT_NE(child.stdout_text().find("Resuming from " + newest + ":"), std::string::npos)
          << "kill " << kills << ": resumed from another checkpoint than the newest intact " << newest << "\n"
          << child.stdout_text();
    }
  }
  EXPECT_EQ(kills, 10);
  // Kills before a process printed where it resumed from check only the files; the ones during
  // training (kills 4, 6, 8 and 10 at least: a checkpoint existed when each process started) check
  // where they resumed from.
  EXPECT_GE(resumes_seen, 4) << "too few kills came after a resume started";
  std::cout << kills << " kills, " << resumes_seen << " after the resume had begun\n";
  const std::string newest = check_all_intact(killed + "/checkpoints");
  ASSERT_FALSE(newest.empty()) << "no checkpoint after 10 kills";

  // Corrupt the newest checkpoint: the resume names it, refuses it and takes the one before.
  std::ostringstream ignored;
  const auto before = train::list_checkpoints(killed + "/checkpoints", ignored);
  ASSERT_GE(before.size(), 2u);
  {
    std::fstream file(newest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-9, std::ios::end);
    file.put('\x7f');
  }
  ChildProcess last({kNimbus, "train", "--resume", killed}, folder / "out.txt", folder / "err.txt");
  const int status = last.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << last.stderr_text();
  EXPECT_NE(last.stderr_text().find("refusing checkpoint " + newest + ": checksum mismatch"), std::string::npos)
      << last.stderr_text();
  EXPECT_NE(last.stdout_text().find("Resuming from " + before[1].path + ":"), std::string::npos) << last.stdout_text();

  const std::map<std::string, Tensor> a = model_tensors(check_all_intact(killed + "/checkpoints"));
  const std::map<std::string, Tensor> b = model_tensors(check_all_intact(reference + "/checkpoints"));
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    EXPECT_EQ(std::memcmp(tensor.raw_data(), b.at(name).raw_data(), tensor.nbytes()), 0) << name << " differs";
  }
  std::ifstream metrics(killed + "/metrics.jsonl");
  std::string line;
  int64_t expected_step = 1;
  while (std::getline(metrics, line)) {
    if (line.find("\"type\":\"step\"") == std::string::npos) continue;
    EXPECT_NE(line.find("\"step\":" + std::to_string(expected_step) + ","), std::string::npos) << line;
    ++expected_step;
  }
  EXPECT_EQ(expected_step, 3073) << "metrics.jsonl should hold every step once";
}

}  // namespace
}  // namespace nimbus::testing
