// The `nimbus train` command line that runs a plan: the config, --device, and --set overrides for what
// the plan chose (the global batch, gradient accumulation, precision and strategy), so that
// `nimbus train <command> --dry-run --assume-devices <the plan's GPUs>` checks it before a GPU is rented.
//
//   plan::train_command(plan, "examples/fashion_mnist_cnn.yaml");
//   // {"nimbus", "train", "examples/fashion_mnist_cnn.yaml", "--device", "cuda", "--set",
//   //  "fit.batch_size=128", "--set", "fit.gradient_accumulation=1", "--set",
//   //  "runtime.precision=mixed_bfloat16"}
//
// A plan of several GPUs on one node adds runtime.strategy mirrored over cuda:0..N-1; one of several
// nodes, multi_worker_mirrored (its launcher, mpirun, and --run-dir are the manifest's, k8s.h).
#pragma once

#include <string>
#include <vector>

#include "nimbus/plan/planner.h"

namespace nimbus::plan {

// The command's words (argv), starting with "nimbus". `overrides`: the --set KEY=VALUE the plan was made
// with (nimbus plan CONFIG --set ...), given before the plan's own.
std::vector<std::string> train_command(const Plan& plan, const std::string& config_path,
                                       const std::vector<std::string>& overrides = {});

// `word` as POSIX sh reads it back: as it is when plain, else in single quotes.
std::string shell_word(const std::string& word);
// The words as one shell line, each quoted where the shell would split or expand it.
std::string shell_line(const std::vector<std::string>& words);

}  // namespace nimbus::plan
