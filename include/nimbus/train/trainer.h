// compile / fit / evaluate / predict: Keras's training loop for nn::Model.
//
//   nn::Sequential model({nn::InputLayer({28, 28, 1}), nn::Flatten(),
//                         nn::Dense(256, {.activation = "relu"}), nn::Dense(10)});
//   train::Trainer trainer = train::compile(model, {
//       .optimizer = train::Adam({.learning_rate = 1e-3}),
//       .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
//       .metrics = {"accuracy"}});
//   train::History history = trainer.fit(x_train, y_train, {
//       .epochs = 5, .batch_size = 128, .validation_data = {{x_test, y_test}}});
//   auto scores = trainer.evaluate(x_test, y_test);   // {"loss": ..., "accuracy": ...}
//   Tensor logits = trainer.predict(x_test);
//
// Keras puts compile and fit on the model; here they live on a Trainer the
// model is compiled into, because the nn layer comes before train (models
// know nothing of optimizers and losses).
//
// fit traces its train step with nimbus::function (graph mode, with fusion
// when runtime.jit is on) unless runtime.graph or FitOptions::graph is false,
// in which case every step runs eagerly. The batch dimension is dynamic, so a
// smaller last batch runs eagerly instead of tracing again.
//
// A step: the batch of batch_size samples is split into gradient_accumulation
// micro-batches; each micro-batch's loss (plus the layers' regularization) is
// weighted by its share of the batch, their gradients are summed, and the
// optimizer updates once: the update equals one step on the whole batch.
// The reported "loss" is the mean over the epoch's samples of that loss.
// Validation runs in batches of the micro-batch (batch_size / gradient_accumulation), which the
// train step showed to fit; its metrics are the same whatever the batch.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/monitor/step_profiler.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/loss_scale.h"
#include "nimbus/train/losses.h"
#include "nimbus/train/metrics.h"
#include "nimbus/train/optimizers.h"

namespace nimbus {
class Function;
struct TracedGraph;
}  // namespace nimbus

namespace nimbus::data {
class Dataset;
}  // namespace nimbus::data
namespace nimbus::distribute {
class Strategy;
}  // namespace nimbus::distribute

namespace nimbus::train {

// Keras metric names -> values ("loss", "accuracy", "val_loss", ...).
using Logs = std::map<std::string, double>;

class Trainer;
// Where fit's batches come from (batch_source.h, internal).
class BatchSource;

// Where a fit is in its data: what checkpoints record so that a run resumes exactly, mid-epoch too.
struct TrainingPosition {
  int epochs_done = 0;         // complete epochs
  int64_t steps_in_epoch = 0;  // steps done in epoch epochs_done + 1
  int64_t global_step = 0;     // optimizer steps since the run began
  uint64_t shuffle_seed = 0;   // epoch e's order comes from (shuffle_seed, e)
  // Since the run began, over every fit that continued it (time between processes left out).
  int64_t samples = 0;
  double elapsed_seconds = 0;
  // Fitting from a data::Dataset: its iterator's position (Iterator::save), so a resume continues
  // with exactly the batches an uninterrupted run would have seen. Empty for fit(x, y).
  std::string input_iterator{};

  // After a step of `step_samples` samples that took the epoch to `steps_done_in_epoch` steps; `iterator`
  // is the input's position after it, `elapsed` the run's seconds so far.
  void advance(int64_t steps_done_in_epoch, int64_t step_samples, std::string iterator, double elapsed);
  // After epoch `epoch` ended: done, and the next one starts at its first step.
  void finish_epoch(int epoch, double elapsed);
};

// Hooks into fit (Keras's Callback; built-in ones in callbacks.h). `trainer.stop_training = true`
// ends fit: after the current step when set during an epoch, its logs still reported.
class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Trainer&) {}
  virtual void on_epoch_begin(Trainer&, int /*epoch*/) {}
  virtual void on_train_batch_end(Trainer&, int64_t /*step*/, const Logs&) {}
  virtual void on_epoch_end(Trainer&, int /*epoch*/, const Logs&) {}
  virtual void on_train_end(Trainer&) {}
};

// Keras's progress bar. verbose 1: "Epoch 3/10" and a bar rewritten in place on
// a terminal (one plain line per epoch elsewhere); verbose 2: one line per epoch.
//   469/469 [==============================] - 4s 8ms/step - loss: 0.3120 - accuracy: 0.8874
std::shared_ptr<Callback> ProgressBar(std::ostream& out, int verbose, bool is_terminal);

struct CompileOptions {
  std::shared_ptr<Optimizer> optimizer{};
  Loss loss{};
  // By Keras name ("accuracy", "top_k", "precision", "recall", "auc", ...); see get_metric.
  std::vector<std::string> metrics{};
  // Metric objects besides the named ones.
  std::vector<std::shared_ptr<Metric>> metric_objects{};
  // Dynamic loss scaling (loss_scale.h): on with these options when given, else on with the
  // defaults when a layer computes in f16 (mixed_float16), else off.
  std::optional<LossScaleOptions> loss_scale{};
  // Where the train step's replicas run (distribute/strategy.h); null: one device, as OneDevice().
  // fit's batch_size is the global batch, split evenly over the replicas in sync.
  std::shared_ptr<distribute::Strategy> strategy{};
};

struct FitOptions {
  int epochs = 1;
  int64_t batch_size = 32;
  bool shuffle = true;
  // The shuffle seed (default: runtime.seed, else 0); epoch e shuffles with (seed, e).
  std::optional<uint64_t> seed{};
  std::optional<std::pair<Tensor, Tensor>> validation_data{};
  // Micro-batches per batch; must divide batch_size.
  int64_t gradient_accumulation = 1;
  // Caps the steps of each epoch.
  std::optional<int64_t> steps_per_epoch{};
  // Epochs before this count as done (resuming): fit runs epochs initial_epoch + 1 .. epochs.
  int initial_epoch = 0;
  // Steps of epoch initial_epoch + 1 already done (resuming mid-epoch): fit skips that many batches
  // of the epoch's order and keeps the epoch's metrics as restore_checkpoint left them.
  int64_t initial_step = 0;
  // fit(dataset) resuming mid-epoch: the iterator position the checkpoint recorded
  // (TrainingPosition::input_iterator); empty: replay the epoch's first initial_step batches.
  std::string initial_input_iterator{};
  // 0 silent, 1 progress bar, 2 one line per epoch.
  int verbose = 1;
  // Override runtime.graph / runtime.jit for this fit.
  std::optional<bool> graph{};
  std::optional<bool> jit{};
  std::vector<std::shared_ptr<Callback>> callbacks{};
  // On a device batches are uploaded to (CUDA): fetch and upload batch N+1 while the device runs step N,
  // before step N's loss is read (TensorFlow's prefetch_to_device). The results are the same either way;
  // off, each batch is fetched after the previous step's outputs came back. Nothing to overlap on the CPU.
  bool prefetch_to_device = true;
  // Where the progress goes (default std::cout; a terminal gets the in-place bar).
  std::ostream* output = nullptr;
};

struct EvaluateOptions {
  int64_t batch_size = 32;
  // Caps the batches run.
  std::optional<int64_t> steps{};
  // In graph mode, a batch whose step does not fit the device's memory runs in the largest micro-batches
  // that do (train::inference_micro_batch: the accounting of fit.gradient_accumulation: auto); the
  // outputs and metrics are those of whole batches. Off: whole batches, whatever they need.
  bool split_to_fit = true;
  // Where a split is said (default std::cout).
  std::ostream* output = nullptr;
  std::optional<bool> graph{};
  std::optional<bool> jit{};
};

struct History {
  // Per epoch, by Keras name: history["loss"][i], history["val_accuracy"][i], ...
  std::map<std::string, std::vector<double>> history{};
  std::vector<int> epochs{};  // 1-based epoch numbers run
  int64_t steps = 0;
  int64_t samples = 0;
  double wall_seconds = 0;
  // True when interrupt_training ended fit in the middle of an epoch.
  bool interrupted = false;
  // Training samples per second after the first 20 steps (after the first step in runs of
  // 20 steps or fewer), so tracing and warm-up are left out; over the steps' time only, not
  // validation or epoch-end callbacks (checkpoints).
  double samples_per_sec = 0;
  // For labels that are token sequences (integer ids of more than one element per sample, a
  // language model's (N, T)): samples_per_sec x tokens per sample (T); 0 for other labels.
  double tokens_per_sec = 0;
  // fit(dataset): the last epoch's input pipeline statistics (data::Iterator::stats_json: what
  // AUTOTUNE chose per node, buffer fill, waits); empty for fit(x, y).
  std::string input_pipeline_stats{};
};

class Trainer {
 public:
  Trainer(nn::Model model, CompileOptions options);
  ~Trainer();
  Trainer(Trainer&&) noexcept;
  Trainer& operator=(Trainer&&) = delete;

  History fit(const Tensor& x, const Tensor& y, const FitOptions& options = {});
  // Fits from an input pipeline whose elements are (x, y) batches (batch_size is the pipeline's;
  // shuffle is the pipeline's too). An epoch is one pass over the dataset, or steps_per_epoch
  // batches; epoch e iterates it as Dataset::iterator(seed, e - 1), so runs with one seed see the
  // same batches, and checkpoints record the iterator's position. The wait for each batch is the
  // step profiler's input_wait span.
  History fit(const data::Dataset& dataset, const FitOptions& options = {});
  // Loss and metrics over (x, y), by Keras name. Each batch runs in micro-batches that fit (split_to_fit).
  Logs evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& options = {});
  // The model's outputs for x, batch by batch (in micro-batches that fit: split_to_fit), joined (inference mode).
  Tensor predict(const Tensor& x, const EvaluateOptions& options = {});
  // One optimizer step on this batch (Keras's train_on_batch); returns the logs of this batch.
  Logs train_on_batch(const Tensor& x, const Tensor& y, int64_t gradient_accumulation = 1);

  const nn::Model& model() const { return model_; }
  // The compile options' strategy; null: one device.
  distribute::Strategy* strategy() const { return options_.strategy.get(); }
  // Where the model, the optimizer's state and each batch live: a one-replica strategy's device
  // (OneDevice(Device::cuda()), runtime.device: cuda), else the CPU. Steps' logs come back to the host.
  Device device() const;
  Optimizer& optimizer() { return *options_.optimizer; }
  // The dynamic loss scale, or null when the trainer does not scale the loss.
  DynamicLossScale* loss_scale() const { return loss_scale_.get(); }
  // The metric names in log order: "loss" first.
  std::vector<std::string> metric_names() const;
  // Training checkpoints (checkpoint.cc; format in docs/training.md): safetensors files, written
  // atomically, with the model's weights ("model/<variable>"), the optimizer's step and slots
  // ("optimizer/<variable>") and the running epoch's metric totals ("metrics/<i>/<j>"), restored by
  // position (automatic layer names differ between processes) after checking every shape; in the
  // metadata position(), the default generator's (seed, offset) and a CRC-32C of everything
  // else, so a corrupted file is refused (DataError naming it) rather than loaded.
  // Fitting after a restore with initial_epoch = epochs_done, initial_step = steps_in_epoch and
  // seed = shuffle_seed continues the run exactly (bit for bit with runtime.deterministic; layers
  // with their own seeded generators restart them).
  void save_checkpoint(const std::string& path) const;
  TrainingPosition restore_checkpoint(const std::string& path);
  // Fit options that continue from a restored position.
  static FitOptions resumed(FitOptions options, const TrainingPosition& position);

  // Where the running (or last) fit is; save_checkpoint records it.
  const TrainingPosition& position() const { return position_; }
  // The step that just ran, for on_train_batch_end: its samples and seconds (batch gathering included: on a
  // device, the next step's batch, fetched ahead), and its batch's own loss (the logs' "loss" is the epoch's
  // running mean).
  struct StepTiming {
    int64_t samples = 0;
    int64_t tokens = 0;  // label tokens (History::tokens_per_sec's), 0 unless labels are token sequences
    double seconds = 0;
    double loss = 0;
  } last_step;

  // How many times the train step has been traced (a test counts them).
  int train_step_traces() const;
  // The train step's graph for batches shaped like (x, y), traced without running it (no arena is
  // allocated): what the memory accounting (train/memory_check.h) reads.
  // x and y may be symbolic placeholders (Tensor::symbolic) once the model is built.
  const TracedGraph& trace_train_step(const Tensor& x, const Tensor& y, int64_t gradient_accumulation = 1,
                                      std::optional<bool> jit = std::nullopt);
  // The predict step's graph for inputs shaped like x (placeholders allowed), traced without running it:
  // what evaluation's and prediction's memory check reads.
  const TracedGraph& trace_predict_step(const Tensor& x, std::optional<bool> jit = std::nullopt);
  // The same for evaluation's test step (the loss and the metrics' statistics) over batches shaped like (x, y).
  const TracedGraph& trace_test_step(const Tensor& x, const Tensor& y, std::optional<bool> jit = std::nullopt);
  // Hands the traced steps' arenas back to the allocator; fit does so between training and evaluation.
  void release_step_memory();

  // Where fit's steps go: every step records its spans here (monitor/step_profiler.h).
  monitor::StepProfiler& profiler() { return *profiler_; }

  bool stop_training = false;
  // Set during an epoch (SIGTERM): fit returns after the current step and leaves the epoch
  // unfinished (no validation, no on_epoch_end), so a checkpoint of position() resumes it.
  bool interrupt_training = false;
  // What the running fit does, for callbacks.
  struct Params {
    int epochs = 0;
    int64_t steps = 0;  // per epoch
    int verbose = 1;
  } params;

 private:
  struct Steps;
  History fit_batches(BatchSource& batches, const FitOptions& options);
  // The other local replicas of a Mirrored strategy (replicated_step.cc); replica 0 is this trainer.
  struct Replicas;
  Function make_train_function(const nn::Model& model, const std::shared_ptr<Optimizer>& optimizer,
                               int64_t accumulation, bool primary, std::optional<bool> graph, std::optional<bool> jit,
                               const Tensor& x, const Tensor& y);
  std::vector<Tensor> run_replicated_train_step(const Tensor& x, const Tensor& y, int64_t accumulation,
                                                std::optional<bool> graph, std::optional<bool> jit);
  Function& train_step(const Tensor& x, const Tensor& y, int64_t accumulation, std::optional<bool> graph,
                       std::optional<bool> jit);
  // Builds the model if needed (on one sample of x) and moves its weights, the loss scale and a built
  // optimizer's state to device().
  void place_on_device(const Tensor& x);
  // Enqueues one train step on device() (a GPU runs it while the host goes on); its outputs stay there.
  std::vector<Tensor> launch_train_step(const Tensor& x, const Tensor& y, int64_t accumulation,
                                        std::optional<bool> graph, std::optional<bool> jit);
  // A launched step's outputs (loss, metric statistics) on the host, which waits for the step; updates the loss scale.
  std::vector<Tensor> read_train_step(std::vector<Tensor> outputs);
  Function& test_step(const Tensor& x, const Tensor& y, std::optional<bool> graph, std::optional<bool> jit);
  // The micro-batch evaluate (y defined) or predict runs its batches in (EvaluateOptions::split_to_fit).
  int64_t micro_batch_for(const Tensor& x, const Tensor& y, const EvaluateOptions& options);
  Function& predict_step(const Tensor& x, std::optional<bool> graph, std::optional<bool> jit);
  // Adds a step's outputs (loss, then the metrics' statistics) to the running metrics.
  void accumulate_step(const std::vector<Tensor>& outputs, int64_t samples);
  void reset_metrics();
  Logs current_logs(const std::string& prefix) const;

  nn::Model model_;
  CompileOptions options_;
  std::vector<std::shared_ptr<Metric>> metrics_;
  std::shared_ptr<Metric> loss_mean_;
  std::unique_ptr<Steps> steps_;
  std::unique_ptr<DynamicLossScale> loss_scale_;
  TrainingPosition position_;
  std::unique_ptr<monitor::StepProfiler> profiler_;
  std::unique_ptr<Replicas> replicas_;
};

// fit's split of the global batch: batch_size / (gradient_accumulation x replicas) samples per
// replica's micro-batch. Throws InvalidArgument, with the nearest batch sizes that split evenly, when
// it does not divide (fit checks it; so does the memory check before a run, dry or not).
void check_batch_split(int64_t batch_size, int64_t gradient_accumulation, int64_t replicas);

inline Trainer compile(nn::Model model, CompileOptions options) {
  return Trainer(std::move(model), std::move(options));
}

}  // namespace nimbus::train
