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
#include <tuple>
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
    std::string key{};  // op_cost_key: fused kernels apart by their program's length
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

  void record(const OpSchema& op, const KernelDef& kernel, const std::string& key, double seconds);

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<const OpSchema*, const KernelDef*, std::string>, std::pair<int64_t, double>> totals_;
};

// How the planner's calibration tells an op's kernels apart: fused elementwise kernels by the length of
// their program ("fused_elementwise[15]": an optimizer's update and an activation's gradient cost
// differently per element), every other op by its name. graph::NodeCost carries the same key.
std::string op_cost_key(const OpSchema& op, const Attrs& attrs);

// Runs a kernel, timing it when a profile is active.
void run_kernel_profiled(const OpSchema& op, const KernelDef& kernel, KernelContext& context);

}  // namespace nimbus
