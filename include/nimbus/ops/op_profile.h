// Per-op kernel timing: while an OpProfile is alive, every kernel that
// dispatch or the graph executor runs (on any thread) is timed and summed by
// (op, kernel). Comparing the kernels' total with a step's wall time shows
// where an eager step's time goes beyond the kernels (dispatch, tape,
// allocation).
//
//   OpProfile profile;
//   train_step(batch);
//   std::cout << profile.to_string();   // the ops by total time
//   profile.kernel_seconds();
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/ops/op_schema.h"

namespace nimbus {

class OpProfile {
 public:
  struct Entry {
    std::string op;
    std::string kernel;
    int64_t calls = 0;
    double seconds = 0;
  };

  // One profile at a time; it starts recording here and stops when destroyed.
  OpProfile();
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // By total time, largest first.
  std::vector<Entry> entries() const;
  double kernel_seconds() const;
  int64_t kernel_calls() const;
  // A table: op, kernel, calls, total ms, share of kernel time.
  std::string to_string() const;

  void record(const OpSchema& op, const KernelDef& kernel, double seconds);

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<const OpSchema*, const KernelDef*>, std::pair<int64_t, double>> totals_;
};

// Runs a kernel, timing it when a profile is active.
void run_kernel_profiled(const OpSchema& op, const KernelDef& kernel, KernelContext& context);

}  // namespace nimbus
