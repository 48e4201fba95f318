#include "nimbus/ops/op_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "nimbus/base/error.h"
#include "nimbus/ops/fused_elementwise.h"

namespace nimbus {

namespace {
std::atomic<OpProfile*> active_profile{nullptr};
}  // namespace

OpProfile::OpProfile() {
  OpProfile* expected = nullptr;
  if (!active_profile.compare_exchange_strong(expected, this)) {
    throw InvalidArgument("an OpProfile is already recording", "destroy it before starting another");
  }
}

OpProfile::~OpProfile() { active_profile.store(nullptr); }

void OpProfile::record(const OpSchema& op, const KernelDef& kernel, const std::string& key, double seconds) {
  std::lock_guard lock(mutex_);
  auto& [calls, total] = totals_[{&op, &kernel, key}];
  ++calls;
  total += seconds;
}

std::vector<OpProfile::Entry> OpProfile::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<Entry> entries;
  for (const auto& [key, value] : totals_) {
    const auto& [op, kernel, cost_key] = key;
    entries.push_back({op->name, kernel->name, value.first, value.second, cost_key});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.seconds > b.seconds; });
  return entries;
}

double OpProfile::kernel_seconds() const {
  double total = 0;
  for (const Entry& entry : entries()) total += entry.seconds;
  return total;
}

int64_t OpProfile::kernel_calls() const {
  int64_t total = 0;
  for (const Entry& entry : entries()) total += entry.calls;
  return total;
}

std::string OpProfile::to_string() const {
  const double total = kernel_seconds();
  std::string text = fmt::format("{:<28} {:<12} {:>8} {:>10} {:>6}\n", "op", "kernel", "calls", "total ms", "share");
  for (const Entry& entry : entries()) {
    text += fmt::format("{:<28} {:<12} {:>8} {:>10.3f} {:>5.1f}%\n", entry.op, entry.kernel, entry.calls,
                        entry.seconds * 1e3, total > 0 ? 100 * entry.seconds / total : 0.0);
  }
  return text;
}

void run_kernel_profiled(const OpSchema& op, const KernelDef& kernel, KernelContext& context) {
  OpProfile* profile = active_profile.load(std::memory_order_relaxed);
  if (profile == nullptr) {
    kernel.fn(context);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  kernel.fn(context);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  profile->record(op, kernel, op_cost_key(op, context.attrs), seconds);
}

std::string op_cost_key(const OpSchema& op, const Attrs& attrs) {
  if (&op != &fused_elementwise_op()) return op.name;
  const auto& program = static_cast<const ExpressionProgram&>(*attrs.get_object("program"));
  return fmt::format("{}[{}]", op.name, program.instructions.size());
}

}  // namespace nimbus
