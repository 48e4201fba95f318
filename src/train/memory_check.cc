#include "nimbus/train/memory_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <utility>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/base/size_units.h"
#include "nimbus/device/memory.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/creation.h"
#include "nimbus/train/from_config.h"
#include "rows.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;

// Traces the step over placeholders of micro_batch × gradient_accumulation rows shaped like x's and y's.
StepAnalysis analyze_train_step_at(Trainer& trainer, const Tensor& x, const Tensor& y, int64_t micro_batch,
                                   int64_t gradient_accumulation, std::optional<bool> jit) {
  if (micro_batch < 1 || gradient_accumulation < 1) {
    throw InvalidArgument(fmt::format("analyze_train_step: micro-batch {} and gradient_accumulation {} must be >= 1",
                                      micro_batch, gradient_accumulation));
  }
  if (x.rank() < 1 || y.rank() < 1) throw InvalidArgument("analyze_train_step: x and y need a batch dimension");
  const int64_t samples = micro_batch * gradient_accumulation;
  try {
    // Tracing allocates no arena and no batch: only the model's and optimizer's variables, the first time.
    if (!trainer.model().built()) (void)trainer.model()(rows(x, 0, 1), false);
    const TracedGraph& traced = trainer.trace_train_step(placeholder_rows(x, samples), placeholder_rows(y, samples),
                                                         gradient_accumulation, jit);
    return analyze_traced_step(traced, micro_batch, gradient_accumulation);
  } catch (const OutOfMemory& error) {
    throw variables_do_not_fit(error, trainer.device(), "the model's variables and optimizer state");
  }
}

// What the check measures against: the memory left for a step on the trainer's device, or one assumed
// GPU's capacity under runtime.memory (a dry run's, assumed_devices.h); `text` names it in messages.
struct Capacity {
  std::function<uint64_t(const StepAnalysis&)> available;
  std::string text;
};

Capacity capacity_for(Trainer& trainer, const Json& config, const AssumedDevices* assumed) {
  if (!trains_on_assumed_device(config, assumed)) {
    const Device device = trainer.device();
    return {[device](const StepAnalysis& step) { return memory_available_for(step, device); },
            memory_capacity_text(device)};
  }
  const MemoryOptions options = memory_options_from_config(config);
  const uint64_t bytes = assumed->capacity(options);
  return {[bytes](const StepAnalysis&) { return bytes; },
          fmt::format("one {} of --assume-devices ({}{})", assumed->name, format_bytes(bytes),
                      options.limit ? " under runtime.memory.limit" : "")};
}

// Past this many micro-batches a step's fixed part (the whole batch's input, the gradients twice) dominates,
// and each try traces a graph of that many passes.
constexpr int64_t kMaxAccumulation = 64;

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) result.push_back(d);
  }
  return result;
}

// The fewest accumulation steps above `from` whose micro-batch of `batch` fits.
std::optional<StepAnalysis> fewest_accumulation_that_fits(Trainer& trainer, const Tensor& x, const Tensor& y,
                                                          int64_t batch, int64_t from, uint64_t available) {
  for (int64_t steps : divisors(batch)) {
    if (steps <= from) continue;
    if (steps > kMaxAccumulation) break;
    StepAnalysis step = analyze_train_step(trainer, x, y, batch / steps, steps);
    if (fits(step, available, kSafetyMargin)) return step;
  }
  return std::nullopt;
}

// "the batch of 256", or with GPU replicas a replica's share of it.
std::string batch_words(int64_t share, int64_t replicas) {
  return replicas == 1 ? fmt::format("the batch of {}", share)
                       : fmt::format("a replica's share of {} (the batch of {} over {} replicas)", share,
                                     share * replicas, replicas);
}

[[noreturn]] void refuse(Trainer& trainer, const Tensor& x, const Tensor& y, const StepAnalysis& step,
                         uint64_t available, const Capacity& capacity, int64_t replicas) {
  const int64_t batch = step.micro_batch * step.gradient_accumulation;
  const std::string message =
      fmt::format("{} ({}); the memory left is what {} leaves besides what the process holds there",
                  needs(step, available), step.memory.to_string(), capacity.text);
  const std::optional<StepAnalysis> remedy =
      fewest_accumulation_that_fits(trainer, x, y, batch, step.gradient_accumulation, available);
  if (remedy) {
    throw OutOfMemory(message, fmt::format("gradient_accumulation: {} keeps {} in {} (or "
                                           "gradient_accumulation: auto; a larger runtime.memory.limit)",
                                           remedy->gradient_accumulation, batch_words(batch, replicas),
                                           format_bytes(remedy->memory.total())));
  }
  // Accumulation splits the batch's activations, not the model's variables nor the batch itself.
  const graph::MemoryEstimate& m = step.memory;
  const uint64_t model_bytes = m.parameter_bytes + m.gradient_bytes + m.optimizer_state_bytes + m.master_weight_bytes;
  if (static_cast<double>(model_bytes) > (1 - kSafetyMargin) * static_cast<double>(available)) {
    throw OutOfMemory(message, fmt::format("the model's parameters, gradients and optimizer state alone need {}: {}",
                                           format_bytes(model_bytes), kModelTooLargeRemedy));
  }
  throw OutOfMemory(message, fmt::format("no gradient_accumulation up to {} keeps {} within a {:.0f}% "
                                         "margin: the step holds the whole batch on the device ({}); a smaller "
                                         "fit.batch_size (with gradient_accumulation: auto), or a larger "
                                         "runtime.memory.limit",
                                         kMaxAccumulation, batch_words(batch, replicas), 100 * kSafetyMargin,
                                         format_bytes(m.input_bytes)));
}

// fit.batch_size: auto: the largest power of two up to the training set's size that fits without
// accumulation. A straight line through two traced sizes (the estimate grows linearly with the
// batch) predicts it; tracing the prediction confirms it, halving while it does not fit.
MemoryDecision largest_batch_that_fits(Trainer& trainer, const Tensor& x, const Tensor& y, const Capacity& capacity) {
  const int64_t samples = x.dim(0);
  const int64_t small = std::min<int64_t>(16, samples), large = std::min<int64_t>(32, samples);
  const StepAnalysis at_small = analyze_train_step(trainer, x, y, small);
  // The variables exist once a step is traced (the first trace builds the optimizer's slots).
  const uint64_t available = capacity.available(at_small);
  const StepAnalysis at_large = analyze_train_step(trainer, x, y, large);
  const double per_sample =
      large > small ? double(at_large.memory.total() - at_small.memory.total()) / double(large - small) : 0;
  const double budget = (1 - kSafetyMargin) * static_cast<double>(available);
  const double fixed = static_cast<double>(at_small.memory.total()) - per_sample * double(small);
  int64_t predicted = per_sample > 0 ? static_cast<int64_t>((budget - fixed) / per_sample) : samples;
  predicted = std::clamp<int64_t>(predicted, 1, samples);
  int64_t batch = 1;
  while (batch * 2 <= predicted) batch *= 2;
  StepAnalysis step = analyze_train_step(trainer, x, y, batch);
  if (fits(step, available, kSafetyMargin)) {
    // The line may be pessimistic: try doubling while the next power of two fits.
    while (batch * 2 <= samples) {
      StepAnalysis doubled = analyze_train_step(trainer, x, y, batch * 2);
      if (!fits(doubled, available, kSafetyMargin)) break;
      step = std::move(doubled);
      batch *= 2;
    }
  } else {
    while (!fits(step, available, kSafetyMargin)) {
      if (batch == 1) refuse(trainer, x, y, step, available, capacity, 1);
      batch /= 2;
      step = analyze_train_step(trainer, x, y, batch);
    }
  }
  return {.batch_size = batch,
          .step = step,
          .available_bytes = available,
          .reason = fmt::format("fit.batch_size: auto chose {}: the largest power of two (up to the {} samples) whose "
                                "step fits in the {} left less a {:.0f}% margin ({}; {} per sample)",
                                batch, samples, format_bytes(available), 100 * kSafetyMargin,
                                format_bytes(step.memory.total()), format_bytes(static_cast<uint64_t>(per_sample)))};
}

// Before each epoch, one block for the step's allocations (the check counted them as one); after each, with
// runtime.memory.trim_between_epochs, the step arenas released and the device trimmed.
class MemoryEpochCallback : public Callback {
 public:
  MemoryEpochCallback(bool trim, Device device, uint64_t step_bytes)
      : trim_(trim), device_(device), step_bytes_(step_bytes) {}
  void on_epoch_begin(Trainer&, int) override {
    if (step_bytes_ > 0) reserve_memory(device_, step_bytes_);
  }
  void on_epoch_end(Trainer& trainer, int epoch, const Logs&) override {
    epochs_done_ = epoch;
    if (!trim_) return;
    trainer.release_step_memory();
    trim_memory(device_);
  }
  int epochs_done() const { return epochs_done_; }

 private:
  bool trim_;
  Device device_;
  uint64_t step_bytes_;
  int epochs_done_ = 0;
};

}  // namespace

StepAnalysis analyze_train_step(Trainer& trainer, const Tensor& x, const Tensor& y, int64_t micro_batch,
                                int64_t gradient_accumulation) {
  return analyze_train_step_at(trainer, x, y, micro_batch, gradient_accumulation, std::nullopt);
}

StepAnalysis analyze_train_step(const nlohmann::json& config, int64_t micro_batch, int64_t gradient_accumulation) {
  const nn::Model model = model_from_train_config(config);
  if (model.inputs().size() != 1) throw Unimplemented("analyze_train_step: models with one input only, for now");
  Trainer trainer = compile_from_config(model, config);
  // One sample of each: IDX labels are u8, one per sample.
  nn::Dims sample = model.inputs()[0].shape();
  sample[0] = 1;
  const Tensor x = zeros(Shape(std::span<const int64_t>(sample)), model.inputs()[0].dtype());
  const Tensor y = zeros(Shape({1}), DType::kU8);
  return analyze_train_step_at(trainer, x, y, micro_batch, gradient_accumulation,
                               config.at("runtime").at("jit").get<bool>());
}

nlohmann::json MemoryDecision::to_json() const {
  const graph::MemoryEstimate& m = step.memory;
  return {{"parameter_bytes", m.parameter_bytes},
          {"gradient_bytes", m.gradient_bytes},
          {"optimizer_state_bytes", m.optimizer_state_bytes},
          {"master_weight_bytes", m.master_weight_bytes},
          {"activation_bytes", m.activation_bytes},
          {"workspace_bytes", m.workspace_bytes},
          {"input_bytes", m.input_bytes},
          {"output_bytes", m.output_bytes},
          {"framework_reserve_bytes", m.framework_reserve_bytes},
          {"total_bytes", m.total()},
          {"available_bytes", available_bytes}};
}

MemoryDecision check_memory_before_fit(Trainer& trainer, const Tensor& x, const Tensor& y, const nlohmann::json& config,
                                       std::ostream& out, const AssumedDevices* assumed) {
  const Capacity capacity = capacity_for(trainer, config, assumed);
  const Json& fit = config.at("fit");
  const int64_t replicas = replicas_in_sync(config, trainer, assumed);
  // GPU replicas each hold their share of the batch in their own memory: one's step is measured.
  const int64_t shares = trains_on_assumed_device(config, assumed) || !trainer.device().is_cpu() ? replicas : 1;
  const bool auto_batch = fit.at("batch_size") == "auto";
  const bool auto_accumulation = fit.at("gradient_accumulation") == "auto";
  MemoryDecision decision;
  if (auto_batch) {
    if (!auto_accumulation && fit.at("gradient_accumulation").get<int64_t>() != 1) {
      throw InvalidArgument("fit.batch_size: auto picks the largest batch that fits without accumulation",
                            "set fit.gradient_accumulation: 1 (or auto), or give fit.batch_size");
    }
    decision = largest_batch_that_fits(trainer, x, y, capacity);
    if (shares > 1) decision.reason += fmt::format(", for each of {} replicas", shares);
    decision.batch_size *= shares;
    decision.replicas = shares;
  } else {
    const int64_t batch = std::min(fit.at("batch_size").get<int64_t>(), x.dim(0));
    const int64_t accumulation = auto_accumulation ? 1 : fit.at("gradient_accumulation").get<int64_t>();
    decision.batch_size = fit.at("batch_size").get<int64_t>();
    decision.gradient_accumulation = accumulation;
    decision.replicas = shares;
    check_batch_split(decision.batch_size, accumulation, replicas);  // as fit will
    // A training set smaller than the batch makes one smaller batch: fit's to split or refuse.
    if (batch % (accumulation * shares) != 0) return decision;
    const int64_t share = batch / shares;
    StepAnalysis step = analyze_train_step(trainer, x, y, share / accumulation, accumulation);
    const uint64_t available = capacity.available(step);
    decision.available_bytes = available;
    if (auto_accumulation && !fits(step, available, kSafetyMargin)) {
      const std::optional<StepAnalysis> fitting = fewest_accumulation_that_fits(trainer, x, y, share, 1, available);
      if (!fitting) refuse(trainer, x, y, step, available, capacity, shares);
      decision.reason = fmt::format(
          "fit.gradient_accumulation: auto chose {}: {} needs {} in one step, more than the {} left "
          "less a {:.0f}% margin; {} micro-batches of {} need {}",
          fitting->gradient_accumulation, batch_words(share, shares), format_bytes(step.memory.total()),
          format_bytes(available), 100 * kSafetyMargin, fitting->gradient_accumulation, fitting->micro_batch,
          format_bytes(fitting->memory.total()));
      step = *fitting;
    } else if (auto_accumulation) {
      decision.reason =
          fmt::format("fit.gradient_accumulation: auto chose 1: {} needs {} of the {} left", batch_words(share, shares),
                      format_bytes(step.memory.total()), format_bytes(available));
    } else if (step.memory.total() > available) {
      refuse(trainer, x, y, step, available, capacity, shares);
    }
    decision.gradient_accumulation = step.gradient_accumulation;
    decision.step = step;
  }
  if (fit.at("verbose").get<int>() > 0) {
    if (!decision.reason.empty()) out << decision.reason << "\n";
    out << fmt::format("memory: a micro-batch of {} needs {}\n", decision.micro_batch(),
                       decision.step.memory.to_string());
  }
  return decision;
}

namespace {

// `fit` with runtime.memory.trim_between_epochs applied, and a checkpoint written on OutOfMemory.
History fit_saving(Trainer& trainer, FitOptions options, const nlohmann::json& config, uint64_t step_bytes,
                   const std::string& checkpoint_path, const std::function<History(const FitOptions&)>& fit) {
  const Json& runtime = config.at("runtime");
  const bool trim = runtime.contains("memory") && runtime["memory"].value("trim_between_epochs", false);
  auto epochs = std::make_shared<MemoryEpochCallback>(trim, trainer.device(), step_bytes);
  options.callbacks.push_back(epochs);
  try {
    return fit(options);
  } catch (const OutOfMemory& error) {
    std::string saved;
    try {
      trainer.release_step_memory();
      trainer.save_checkpoint(checkpoint_path);
      saved = fmt::format("a checkpoint of the run as it was (global step {}) was written to {}",
                          trainer.position().global_step, checkpoint_path);
    } catch (const Error& failed) {
      saved = fmt::format("no checkpoint could be written ({})", failed.message());
    }
    throw OutOfMemory(error.message(), error.hint() + "; " + saved);
  }
}

}  // namespace

History fit_saving_on_out_of_memory(Trainer& trainer, const Tensor& x, const Tensor& y, FitOptions options,
                                    const nlohmann::json& config, uint64_t step_bytes,
                                    const std::string& checkpoint_path) {
  return fit_saving(trainer, std::move(options), config, step_bytes, checkpoint_path,
                    [&](const FitOptions& o) { return trainer.fit(x, y, o); });
}

History fit_saving_on_out_of_memory(Trainer& trainer, const data::Dataset& dataset, FitOptions options,
                                    const nlohmann::json& config, uint64_t step_bytes,
                                    const std::string& checkpoint_path) {
  return fit_saving(trainer, std::move(options), config, step_bytes, checkpoint_path,
                    [&](const FitOptions& o) { return trainer.fit(dataset, o); });
}

}  // namespace nimbus::train
