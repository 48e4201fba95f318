#include "nimbus/train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "batch_source.h"
#include "device_batches.h"
#include "nimbus/base/error.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/graph/function.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/shape_ops.h"
#include "nimbus/train/step_memory.h"
#include "replicated_step.h"
#include "rows.h"
#include "throughput_meter.h"
#include "train_step.h"

namespace nimbus::train {

using Clock = std::chrono::steady_clock;

namespace {

std::vector<InputSignature> dynamic_batch_signature(const std::vector<Tensor>& tensors) {
  std::vector<InputSignature> signature;
  for (const Tensor& tensor : tensors) {
    std::vector<int64_t> shape = tensor.shape().to_vector();
    if (!shape.empty()) shape[0] = -1;
    signature.push_back({shape, tensor.dtype()});
  }
  return signature;
}

void check_data(const Tensor& x, const Tensor& y, const char* what) {
  if (!x.defined() || x.rank() < 1) throw InvalidArgument(fmt::format("{}: x needs a batch dimension", what));
  if (y.defined() && (y.rank() < 1 || y.dim(0) != x.dim(0))) {
    throw InvalidArgument(fmt::format("{}: x has {} samples ({}), y has shape {}", what, x.dim(0),
                                      x.shape().to_string(), y.shape().to_string()),
                          "x and y need one row per sample");
  }
}

// Keras's number format in the progress bar and logs.
std::string format_value(double value) {
  return std::abs(value) > 1e-3 || value == 0 ? fmt::format("{:.4f}", value) : fmt::format("{:.4e}", value);
}

std::string format_time_per_step(double seconds) {
  if (seconds >= 1) return fmt::format("{:.0f}s/step", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.0f}ms/step", seconds * 1e3);
  return fmt::format("{:.0f}us/step", seconds * 1e6);
}

class ProgressBarCallback : public Callback {
 public:
  ProgressBarCallback(std::ostream& out, int verbose, bool terminal)
      : out_(out), verbose_(verbose), terminal_(terminal) {}

  void on_epoch_begin(Trainer& trainer, int epoch) override {
    if (verbose_ == 0) return;
    out_ << fmt::format("Epoch {}/{}\n", epoch, trainer.params.epochs) << std::flush;
    start_ = Clock::now();
    last_draw_ = start_;
    steps_ = 0;
    tokens_ = 0;
  }
  void on_train_batch_end(Trainer& trainer, int64_t step, const Logs& logs) override {
    steps_ = step + 1;
    tokens_ += trainer.last_step.tokens;
    if (verbose_ != 1 || !terminal_) return;
    const auto now = Clock::now();
    if (steps_ < trainer.params.steps && now - last_draw_ < std::chrono::milliseconds(50)) return;
    last_draw_ = now;
    out_ << "\r" << line(trainer, logs, steps_ == trainer.params.steps) << std::flush;
  }
  void on_epoch_end(Trainer& trainer, int, const Logs& logs) override {
    if (verbose_ == 0) return;
    out_ << (terminal_ && verbose_ == 1 ? "\r" : "") << line(trainer, logs, true) << "\n" << std::flush;
  }

 private:
  std::string line(const Trainer& trainer, const Logs& logs, bool done) const {
    const int64_t target = std::max<int64_t>(1, trainer.params.steps);
    const int64_t current = done ? target : steps_;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const int digits = static_cast<int>(std::to_string(target).size());
    std::string text = fmt::format("{:>{}}/{} [", current, digits, target);
    const auto width = static_cast<int64_t>(30.0 * double(current) / double(target));
    if (width > 0) text += std::string(static_cast<size_t>(width - 1), '=') + (current < target ? ">" : "=");
    text += std::string(static_cast<size_t>(30 - width), '.') + "]";
    const double per_step = current > 0 ? elapsed / double(current) : 0;
    if (done) {
      text += fmt::format(" - {:.0f}s {}", elapsed, format_time_per_step(per_step));
    } else {
      text += fmt::format(" - ETA: {:.0f}s", per_step * double(target - current));
    }
    // Language models: label tokens per second over the epoch so far (History::tokens_per_sec's count).
    if (tokens_ > 0 && elapsed > 0) text += fmt::format(" - {:.0f} tokens/s", double(tokens_) / elapsed);
    for (const std::string& name : trainer.metric_names()) {
      if (auto it = logs.find(name); it != logs.end()) text += fmt::format(" - {}: {}", name, format_value(it->second));
    }
    for (const std::string& name : trainer.metric_names()) {
      if (auto it = logs.find("val_" + name); it != logs.end()) {
        text += fmt::format(" - val_{}: {}", name, format_value(it->second));
      }
    }
    return text;
  }

  std::ostream& out_;
  int verbose_;
  bool terminal_;
  Clock::time_point start_, last_draw_;
  int64_t steps_ = 0;
  int64_t tokens_ = 0;  // label tokens this epoch
};

}  // namespace

std::shared_ptr<Callback> ProgressBar(std::ostream& out, int verbose, bool is_terminal) {
  return std::make_shared<ProgressBarCallback>(out, verbose, is_terminal);
}

// The traced step functions, made for one setting of (graph, jit, accumulation).
struct Trainer::Steps {
  struct Key {
    std::optional<bool> graph, jit;
    int64_t accumulation = 1;
    bool replicated = false;  // traced inside a strategy's replica (takes its share, all-reduces)
    bool operator==(const Key&) const = default;
  };
  std::optional<Function> train, test, predict;
  Key train_key, test_key, predict_key;
  int train_traces_before = 0;
  // How many statistics each metric returns (recorded when a step body runs).
  std::vector<size_t> statistic_counts;
};

Trainer::Trainer(nn::Model model, CompileOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      steps_(std::make_unique<Steps>()),
      profiler_(std::make_unique<monitor::StepProfiler>()) {
  if (!options_.optimizer) throw InvalidArgument("compile: no optimizer", "pass .optimizer = train::Adam() or another");
  if (!options_.loss.defined()) {
    throw InvalidArgument("compile: no loss", "pass .loss = train::SparseCategoricalCrossentropy() or another");
  }
  for (const std::string& name : options_.metrics) metrics_.push_back(get_metric(name, options_.loss));
  for (const auto& metric : options_.metric_objects) metrics_.push_back(metric);
  loss_mean_ = Mean("loss");
  const std::vector<nn::Layer> layers = model_.layers();
  const bool f16 = std::any_of(layers.begin(), layers.end(),
                               [](const nn::Layer& layer) { return layer->dtype_policy.needs_loss_scaling(); });
  if (options_.loss_scale || f16) {
    loss_scale_ = std::make_unique<DynamicLossScale>(options_.loss_scale.value_or(LossScaleOptions{}));
  }
}

Trainer::~Trainer() = default;
// The traced steps capture `this`: a moved-to trainer makes its own (they trace again on first use).
Trainer::Trainer(Trainer&& other) noexcept
    : stop_training(other.stop_training),
      params(other.params),
      model_(std::move(other.model_)),
      options_(std::move(other.options_)),
      metrics_(std::move(other.metrics_)),
      loss_mean_(std::move(other.loss_mean_)),
      steps_(std::make_unique<Steps>()),
      loss_scale_(std::move(other.loss_scale_)),
      position_(other.position_),
      profiler_(std::move(other.profiler_)) {
  steps_->train_traces_before = other.train_step_traces();
}

std::vector<std::string> Trainer::metric_names() const {
  std::vector<std::string> names = {"loss"};
  for (const auto& metric : metrics_) names.push_back(metric->name());
  return names;
}

int Trainer::train_step_traces() const {
  return steps_->train ? steps_->train->trace_count() + steps_->train_traces_before : steps_->train_traces_before;
}

namespace {
// Model needs its weights before any tracing: a lazily built Sequential builds on one sample, eagerly.
void ensure_model_built(const nn::Model& model, const Tensor& x) {
  if (!model.built()) (void)model(rows(x, 0, 1).to(Device::cpu()), false);
}

Tensor on(const Tensor& tensor, Device device) { return tensor.device() == device ? tensor : tensor.to(device); }

std::vector<Tensor> on_host(std::vector<Tensor> tensors) {
  for (Tensor& tensor : tensors) tensor = on(tensor, Device::cpu());
  return tensors;
}

}  // namespace

Function Trainer::make_train_function(const nn::Model& model, const std::shared_ptr<Optimizer>& optimizer,
                                      int64_t accumulation, bool primary, std::optional<bool> graph,
                                      std::optional<bool> jit, const Tensor& x, const Tensor& y) {
  // `primary`: this process's first replica (the trainer's own model), which records spans and statistic counts.
  const TrainStep step({.model = model,
                        .optimizer = optimizer,
                        .loss = &options_.loss,
                        .metrics = &metrics_,
                        .loss_scale = loss_scale_.get(),
                        .accumulation = accumulation,
                        .profiler = primary ? profiler_.get() : nullptr,
                        .statistic_counts = primary ? &steps_->statistic_counts : nullptr});
  return function(
      step, {.name = "train_step", .graph = graph, .jit = jit, .input_signature = dynamic_batch_signature({x, y})});
}

Device Trainer::device() const {
  const distribute::Strategy* strategy = options_.strategy.get();
  // Several replicas on CPU devices share host memory; on GPUs the trainer's own model is replica 0's.
  if (strategy == nullptr) return Device::cpu();
  const Device first = strategy->devices()[0];
  return strategy->num_replicas_in_sync() == 1 || !first.is_cpu() ? first : Device::cpu();
}

void Trainer::place_on_device(const Tensor& x) {
  ensure_model_built(model_, x);
  // Before the first trace: placing gives each variable a new tensor, which traced graphs would not see.
  const Device target = device();
  for (Variable& variable : model_.weights()) variable.place_on(target);
  if (loss_scale_) loss_scale_->place_on(target);
  if (options_.optimizer->built()) {
    for (Variable& variable : options_.optimizer->variables()) variable.place_on(target);
  }
}

Function& Trainer::train_step(const Tensor& x, const Tensor& y, int64_t accumulation, std::optional<bool> graph,
                              std::optional<bool> jit) {
  if (accumulation < 1) throw InvalidArgument(fmt::format("gradient_accumulation must be >= 1, got {}", accumulation));
  place_on_device(x);
  options_.optimizer->build(model_.trainable_weights());
  const Steps::Key key{graph, jit, accumulation, distribute::current_replica() != nullptr};
  if (!steps_->train || !(steps_->train_key == key)) {
    if (steps_->train) steps_->train_traces_before += steps_->train->trace_count();
    steps_->train_key = key;
    steps_->train.emplace(make_train_function(model_, options_.optimizer, accumulation, true, graph, jit, x, y));
  }
  return *steps_->train;
}

std::vector<Tensor> Trainer::launch_train_step(const Tensor& x, const Tensor& y, int64_t accumulation,
                                               std::optional<bool> graph, std::optional<bool> jit) {
  const Device target = device();
  return options_.strategy && options_.strategy->num_replicas_in_sync() > 1
             ? run_replicated_train_step(x, y, accumulation, graph, jit)
             : train_step(x, y, accumulation, graph, jit)({on(x, target), on(y, target)});
}

std::vector<Tensor> Trainer::read_train_step(std::vector<Tensor> outputs) {
  outputs = on_host(std::move(outputs));  // the logs' totals live on the host
  if (loss_scale_) loss_scale_->update(outputs.back().item<bool>());
  return outputs;
}

const TracedGraph& Trainer::trace_train_step(const Tensor& x, const Tensor& y, int64_t gradient_accumulation,
                                             std::optional<bool> jit) {
  check_data(x, y, "trace_train_step");
  return train_step(x, y, gradient_accumulation, std::nullopt, jit).traced_for({on(x, device()), on(y, device())});
}

void Trainer::release_step_memory() {
  for (const std::optional<Function>* step : {&steps_->train, &steps_->test, &steps_->predict}) {
    if (*step) (*step)->release_memory();
  }
}

Function& Trainer::test_step(const Tensor& x, const Tensor& y, std::optional<bool> graph, std::optional<bool> jit) {
  place_on_device(x);
  const Steps::Key key{graph, jit, 1};
  if (!steps_->test || !(steps_->test_key == key)) {
    steps_->test_key = key;
    auto body = [this](const std::vector<Tensor>& in) {
      const Tensor pred = model_(in[0], false);
      Tensor loss = options_.loss(in[1], pred);
      const Tensor regularization = model_.regularization_loss();
      if (regularization.defined()) loss = loss + cast(regularization, loss.dtype());
      std::vector<Tensor> outputs = {loss};
      for (Tensor& s : metric_statistics(metrics_, in[1], pred, steps_->statistic_counts)) outputs.push_back(s);
      return outputs;
    };
    steps_->test.emplace(function(
        body, {.name = "test_step", .graph = graph, .jit = jit, .input_signature = dynamic_batch_signature({x, y})}));
  }
  return *steps_->test;
}

const TracedGraph& Trainer::trace_test_step(const Tensor& x, const Tensor& y, std::optional<bool> jit) {
  check_data(x, y, "trace_test_step");
  return test_step(x, y, std::nullopt, jit).traced_for({on(x, device()), on(y, device())});
}

void Trainer::accumulate_step(const std::vector<Tensor>& outputs, int64_t samples) {
  loss_mean_->update_state(Tensor::scalar<float>(static_cast<float>(samples)), outputs[0]);
  size_t next = 1;
  for (size_t m = 0; m < metrics_.size(); ++m) {
    const size_t count = steps_->statistic_counts.at(m);
    metrics_[m]->accumulate(std::vector<Tensor>(outputs.begin() + long(next), outputs.begin() + long(next + count)));
    next += count;
  }
}

void Trainer::reset_metrics() {
  loss_mean_->reset_state();
  for (const auto& metric : metrics_) metric->reset_state();
}

Logs Trainer::current_logs(const std::string& prefix) const {
  Logs logs;
  logs[prefix + "loss"] = loss_mean_->result();
  for (const auto& metric : metrics_) logs[prefix + metric->name()] = metric->result();
  return logs;
}

Logs Trainer::train_on_batch(const Tensor& x, const Tensor& y, int64_t gradient_accumulation) {
  check_data(x, y, "train_on_batch");
  reset_metrics();
  accumulate_step(read_train_step(launch_train_step(x, y, gradient_accumulation, std::nullopt, std::nullopt)),
                  x.dim(0));
  return current_logs("");
}

History Trainer::fit(const Tensor& x, const Tensor& y, const FitOptions& options) {
  check_data(x, y, "fit");
  if (options.batch_size < 1) {
    throw InvalidArgument(fmt::format("fit: batch_size must be >= 1, got {}", options.batch_size));
  }
  TensorBatches batches(x, y, options.batch_size, options.shuffle);
  return fit_batches(batches, options);
}

History Trainer::fit(const data::Dataset& dataset, const FitOptions& options) {
  DatasetBatches batches(dataset, options.initial_input_iterator);
  return fit_batches(batches, options);
}

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A language model's labels are token ids, more than one per sample ((N, T) for (N, T, V) logits):
// how many per sample; 0 for other labels (class ids (N) or (N, 1), floats).
int64_t label_tokens_per_sample(const Tensor& labels) {
  if (labels.rank() < 2 || labels.dim(0) == 0 || !is_integral(labels.dtype())) return 0;
  const int64_t per_sample = labels.numel() / labels.dim(0);
  return per_sample > 1 ? per_sample : 0;
}

// The progress bar (verbose > 0; in place on a terminal), then the options' callbacks.
std::vector<std::shared_ptr<Callback>> fit_callbacks(const FitOptions& options) {
  std::ostream& out = options.output ? *options.output : std::cout;
  const bool terminal = &out == &std::cout && isatty(STDOUT_FILENO);
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (options.verbose > 0) callbacks.push_back(ProgressBar(out, options.verbose, terminal));
  callbacks.insert(callbacks.end(), options.callbacks.begin(), options.callbacks.end());
  return callbacks;
}

// The validation data's loss and metrics as "val_<name>", evaluated in the training micro-batch, which
// fits (its step keeps no gradients or slots); training's arena and evaluation's take turns rather
// than adding up.
Logs validation_logs(Trainer& trainer, const FitOptions& options) {
  trainer.release_step_memory();
  EvaluateOptions evaluate_options;
  evaluate_options.batch_size = options.batch_size / options.gradient_accumulation;
  evaluate_options.split_to_fit = false;
  evaluate_options.graph = options.graph;
  evaluate_options.jit = options.jit;
  Logs logs;
  for (const auto& [name, value] :
       trainer.evaluate(options.validation_data->first, options.validation_data->second, evaluate_options)) {
    logs["val_" + name] = value;
  }
  trainer.release_step_memory();
  return logs;
}

}  // namespace

void TrainingPosition::advance(int64_t steps_done_in_epoch, int64_t step_samples, std::string iterator,
                               double elapsed) {
  steps_in_epoch = steps_done_in_epoch;
  input_iterator = std::move(iterator);
  ++global_step;
  samples += step_samples;
  elapsed_seconds = elapsed;
}

void TrainingPosition::finish_epoch(int epoch, double elapsed) {
  epochs_done = epoch;
  steps_in_epoch = 0;
  input_iterator.clear();
  elapsed_seconds = elapsed;
}

History Trainer::fit_batches(BatchSource& batches, const FitOptions& options) {
  const FlushDenormalsScope flush_denormals;
  const int64_t accumulation = options.gradient_accumulation;
  check_batch_split(options.batch_size, options.gradient_accumulation,
                    options_.strategy ? options_.strategy->num_replicas_in_sync() : 1);
  // Replicas take replica 0's variables (a restored checkpoint's, say) before this fit's first step.
  if (replicas_) replicas_->synced = false;
  if (options.validation_data) check_data(options.validation_data->first, options.validation_data->second, "fit");
  // -1: a pipeline whose length only its end tells (params.steps is then learnt in the first epoch).
  int64_t steps = batches.batches_per_epoch();
  if (options.steps_per_epoch) steps = steps < 0 ? *options.steps_per_epoch : std::min(steps, *options.steps_per_epoch);
  params = {.epochs = options.epochs, .steps = std::max<int64_t>(steps, 0), .verbose = options.verbose};
  stop_training = false;
  const std::vector<std::shared_ptr<Callback>> callbacks = fit_callbacks(options);

  const uint64_t seed = options.seed.value_or(runtime_options().seed.value_or(0));
  if (options.initial_step < 0 || (steps >= 0 && options.initial_step > steps)) {
    throw InvalidArgument(
        fmt::format("fit: initial_step {} is outside the epoch's {} steps", options.initial_step, steps));
  }
  // A fit that continues a run (after restore_checkpoint, or an earlier fit) keeps its totals.
  const bool continues = options.initial_epoch > 0 || options.initial_step > 0;
  const Variable& iterations = options_.optimizer->iterations();
  position_ = {.epochs_done = options.initial_epoch,
               .steps_in_epoch = options.initial_step,
               .global_step = iterations.defined() ? iterations.value().item<int64_t>() : 0,
               .shuffle_seed = seed,
               .samples = continues ? position_.samples : 0,
               .elapsed_seconds = continues ? position_.elapsed_seconds : 0};
  const double elapsed_before = position_.elapsed_seconds;
  interrupt_training = false;
  History history;
  const auto start = Clock::now();
  const auto elapsed = [&] { return elapsed_before + seconds_since(start); };
  ThroughputMeter throughput;
  int64_t tokens_per_sample = 0;  // History::tokens_per_sec's; 0 unless the labels are token sequences
  // Batches for another device go through its uploader (CUDA: pinned, double-buffered copies on the
  // copy stream), batch N+1 while the device runs step N (device_batches.h).
  DeviceBatches device_batches(batches, device(), options.prefetch_to_device, *profiler_);
  for (auto& callback : callbacks) callback->on_train_begin(*this);
  for (int epoch = options.initial_epoch + 1; epoch <= options.epochs && !stop_training; ++epoch) {
    for (auto& callback : callbacks) callback->on_epoch_begin(*this, epoch);
    // A resumed epoch keeps the metric totals its checkpoint restored.
    const int64_t first_step = epoch == options.initial_epoch + 1 ? options.initial_step : 0;
    throughput.begin_epoch();
    device_batches.begin_epoch(epoch, seed, first_step);
    if (first_step == 0) reset_metrics();
    int64_t step = first_step;
    for (; (steps < 0 || step < steps) && !stop_training && !interrupt_training; ++step) {
      const auto step_start = Clock::now();
      profiler_->begin_step(epoch, step);
      const std::optional<DeviceBatches::Batch> batch = device_batches.next();
      if (!batch) break;  // the pipeline ended the epoch (the next begin_step drops the open record)
      const int64_t batch_size = batch->x.dim(0);
      const int64_t step_tokens = batch_size * label_tokens_per_sample(batch->y);
      double step_loss = 0;
      {
        auto span = profiler_->span(monitor::Span::kCompute);
        std::vector<Tensor> outputs = launch_train_step(batch->x, batch->y, accumulation, options.graph, options.jit);
        // Batch N+1 is produced and uploaded while the device runs step N; the callbacks still see
        // step N's logs before step N+1 is launched.
        if ((steps < 0 || step + 1 < steps) && !interrupt_training) device_batches.fetch_ahead();
        outputs = read_train_step(std::move(outputs));
        accumulate_step(outputs, batch_size);
        step_loss = outputs[0].item<double>();
      }
      if (loss_scale_) profiler_->set_loss_scale(loss_scale_->scale(), loss_scale_->skipped_steps());
      last_step = {
          .samples = batch_size, .tokens = step_tokens, .seconds = seconds_since(step_start), .loss = step_loss};
      if (step_tokens > 0) tokens_per_sample = label_tokens_per_sample(batch->y);
      position_.advance(step + 1, batch_size, batch->position, elapsed());
      history.samples += batch_size;
      // Throughput leaves out the first 20 steps (the first one in short runs): tracing and warm-up.
      throughput.step_done(batch_size, params.steps * (options.epochs - options.initial_epoch) > 20 ? 20 : 1);
      if (!callbacks.empty()) {
        auto span = profiler_->span(monitor::Span::kCallbacks);
        const Logs logs = current_logs("");
        for (auto& callback : callbacks) callback->on_train_batch_end(*this, step, logs);
      }
      profiler_->end_step(batch_size, step_loss);
    }
    throughput.end_epoch();
    history.input_pipeline_stats = batches.stats_json();
    if (interrupt_training) {
      history.interrupted = true;
      break;
    }
    if (params.steps == 0) params.steps = step;  // learnt from the pipeline's end
    Logs logs = current_logs("");
    if (options.validation_data) {
      for (const auto& [name, value] : validation_logs(*this, options)) logs[name] = value;
    }
    for (const auto& [name, value] : logs) history.history[name].push_back(value);
    history.epochs.push_back(epoch);
    position_.finish_epoch(epoch, elapsed());
    for (auto& callback : callbacks) callback->on_epoch_end(*this, epoch, logs);
  }
  for (auto& callback : callbacks) callback->on_train_end(*this);
  history.steps = throughput.steps();
  history.wall_seconds = seconds_since(start);
  history.samples_per_sec = throughput.samples_per_sec();
  history.tokens_per_sec = history.samples_per_sec * static_cast<double>(tokens_per_sample);
  return history;
}

int64_t Trainer::micro_batch_for(const Tensor& x, const Tensor& y, const EvaluateOptions& options) {
  // The estimate is of the traced step: eager steps run whole batches.
  if (!options.split_to_fit || !options.graph.value_or(runtime_options().graph)) return options.batch_size;
  const int64_t batch = std::min(options.batch_size, x.dim(0));
  if (batch < 1) return options.batch_size;  // evaluate and predict report it
  ensure_model_built(model_, x);             // the placeholders cannot build it
  const auto analyze = [&](int64_t micro_batch) {
    return analyze_traced_step(y.defined()
                                   ? trace_test_step(placeholder_rows(x, micro_batch), placeholder_rows(y, micro_batch))
                                   : trace_predict_step(placeholder_rows(x, micro_batch)),
                               micro_batch);
  };
  return inference_micro_batch(
      batch, x.device(), analyze, [this] { release_step_memory(); }, y.defined() ? "evaluate" : "predict",
      options.output ? *options.output : std::cout);
}

Logs Trainer::evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& options) {
  check_data(x, y, "evaluate");
  if (options.batch_size < 1) throw InvalidArgument("evaluate: batch_size must be >= 1");
  const int64_t samples = x.dim(0);
  int64_t steps = (samples + options.batch_size - 1) / options.batch_size;
  if (options.steps) steps = std::min(steps, *options.steps);
  const int64_t end = std::min(samples, steps * options.batch_size);
  const int64_t micro_batch = micro_batch_for(x, y, options);
  // As in Keras, evaluation resets the metrics (fit has taken the epoch's training logs already).
  reset_metrics();
  // The loss is weighted by each micro-batch's samples and the metrics add statistics: the scores do not
  // depend on how the samples are split.
  for (int64_t begin = 0; begin < end; begin += micro_batch) {
    const int64_t piece_end = std::min(end, begin + micro_batch);
    const Tensor x_piece = rows(x, begin, piece_end), y_piece = rows(y, begin, piece_end);
    // The logs' totals live on the host.
    accumulate_step(on_host(test_step(x_piece, y_piece, options.graph,
                                      options.jit)({on(x_piece, device()), on(y_piece, device())})),
                    piece_end - begin);
  }
  return current_logs("");
}

Function& Trainer::predict_step(const Tensor& x, std::optional<bool> graph, std::optional<bool> jit) {
  place_on_device(x);
  const Steps::Key key{graph, jit, 1};
  if (!steps_->predict || !(steps_->predict_key == key)) {
    steps_->predict_key = key;
    steps_->predict.emplace(function(
        [this](const std::vector<Tensor>& in) { return std::vector<Tensor>{model_(in[0], false)}; },
        {.name = "predict_step", .graph = graph, .jit = jit, .input_signature = dynamic_batch_signature({x})}));
  }
  return *steps_->predict;
}

const TracedGraph& Trainer::trace_predict_step(const Tensor& x, std::optional<bool> jit) {
  check_data(x, Tensor(), "trace_predict_step");
  return predict_step(x, std::nullopt, jit).traced_for({on(x, device())});
}

Tensor Trainer::predict(const Tensor& x, const EvaluateOptions& options) {
  check_data(x, Tensor(), "predict");
  if (options.batch_size < 1) throw InvalidArgument("predict: batch_size must be >= 1");
  const int64_t samples = x.dim(0);
  int64_t steps = (samples + options.batch_size - 1) / options.batch_size;
  if (options.steps) steps = std::min(steps, *options.steps);
  const int64_t end = std::min(samples, steps * options.batch_size);
  const int64_t micro_batch = micro_batch_for(x, Tensor(), options);
  Function& step_function = predict_step(x, options.graph, options.jit);
  std::vector<Tensor> pieces;
  for (int64_t begin = 0; begin < end; begin += micro_batch) {
    pieces.push_back(
        on(step_function({on(rows(x, begin, std::min(end, begin + micro_batch)), device())})[0], Device::cpu()));
  }
  return pieces.size() == 1 ? pieces[0] : concat(pieces, 0);
}

void check_batch_split(int64_t batch_size, int64_t gradient_accumulation, int64_t replicas) {
  if (batch_size < 1) throw InvalidArgument(fmt::format("fit: batch_size must be >= 1, got {}", batch_size));
  const int64_t accumulation = gradient_accumulation;
  if (accumulation < 1) {
    throw InvalidArgument(fmt::format("fit: gradient_accumulation must be >= 1, got {}", accumulation));
  }
  const int64_t parts = accumulation * replicas;
  if (batch_size % parts != 0) {
    const int64_t lower = batch_size / parts * parts;
    const std::string divisor = replicas == 1
                                    ? fmt::format("gradient_accumulation {}", accumulation)
                                    : fmt::format("gradient_accumulation {} x {} replicas", accumulation, replicas);
    throw InvalidArgument(fmt::format("fit: batch_size {} is not divisible by {}", batch_size, divisor),
                          lower > 0 ? fmt::format("use batch_size {} or {}", lower, lower + parts)
                                    : fmt::format("use batch_size {}", parts));
  }
}

}  // namespace nimbus::train
