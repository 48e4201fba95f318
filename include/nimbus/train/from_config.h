// The objects a validated training config (config_schema.h) describes: the runtime's settings,
// the model, the compiled trainer, the data. run_config (config.h) is built from these, and
// `nimbus evaluate` and `nimbus predict` use them too.
//
//   nlohmann::json config = train::load_config("examples/fashion_mnist_cnn.yaml");
//   train::configure_runtime_from_config(config);
//   train::Trainer trainer = train::compile_from_config(train::model_from_train_config(config), config);
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "nimbus/data/dataset.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/device/memory.h"
#include "nimbus/nn/model.h"
#include "nimbus/train/assumed_devices.h"
#include "nimbus/train/trainer.h"

namespace nimbus::train {

// runtime.threads, seed, graph, jit, ... as the process's runtime options; checks the training device
// and brings it up; and runtime.memory as configure_memory_from_config. Returns the training device.
// `assumed`: a dry run's hardware (assumed_devices.h), which runtime.device (auto takes it) and
// runtime.precision are checked against instead of this machine's; nothing is brought up then.
DeviceChoice configure_runtime_from_config(const nlohmann::json& config, const AssumedDevices* assumed = nullptr);
// runtime.device as the device the model trains on, chosen as choose_device (device_choice.h) says:
// auto takes a GPU when `probe` has one, else the CPU; but with a runtime.strategy that replicates over
// several devices (mirrored, multi_worker_mirrored) auto keeps the CPU, where those run for now.
DeviceChoice training_device_from_config(const nlohmann::json& config, const GpuProbe& probe = probe_gpus());
// runtime.memory (mode, fraction, limit), NIMBUS_MEMORY_MODE / NIMBUS_MEMORY_LIMIT applied over it.
MemoryOptions memory_options_from_config(const nlohmann::json& config);
// Applies those options to the training device, where the model trains.
void configure_memory_from_config(const nlohmann::json& config);
// Whether a dry run traces in place of an assumed GPU: assumed devices given, runtime.device not the CPU.
bool trains_on_assumed_device(const nlohmann::json& config, const AssumedDevices* assumed);
// The model section's model, built (an Input first).
nn::Model model_from_train_config(const nlohmann::json& config);
// With `assumed` (and runtime.device a GPU) the strategy is checked as for that GPU and the trainer
// made on the CPU, which traces the step the GPU would run.
Trainer compile_from_config(nn::Model model, const nlohmann::json& config, const AssumedDevices* assumed = nullptr);
// runtime.strategy.type, one_device where none is given.
std::string strategy_type_from_config(const nlohmann::json& config);
// The replicas in sync that split fit's global batch: the trainer's strategy's, or on a dry run's
// assumed GPUs those runtime.strategy makes there (assumed_devices.h).
int replicas_in_sync(const nlohmann::json& config, const Trainer& trainer, const AssumedDevices* assumed);
// (images scaled and shaped for the model's input, labels) of a data.train / data.validation
// section ({images, labels, scale}: IDX files; scale defaults to 1/255), in host pipeline memory
// (device/host_memory.h): the data set does not count against runtime.memory.limit.
std::pair<Tensor, Tensor> load_idx_split(const nlohmann::json& split, const nn::Model& model,
                                         const std::string& section);
Tensor load_idx_images(const nlohmann::json& split, const nn::Model& model);
// compile.optimizer's value: a name, or {name, arguments...}; the name in Keras's snake case (adam) or
// as its class (Adam), with every argument the optimizer takes. InvalidArgument for an unknown name,
// an argument the optimizer does not take, or a value out of its range.
std::shared_ptr<Optimizer> optimizer_from_config(const nlohmann::json& spec);
// compile.loss's value: a name, or {name, from_logits, label_smoothing}, named as optimizers are.
Loss loss_from_config(const nlohmann::json& spec);

// data.train as fit takes it: the IDX shorthand's tensors, or the pipeline with its first batch (the
// shapes that the memory check and the model's build need).
struct TrainingData {
  Tensor x, y;
  std::optional<data::Dataset> pipeline;
};
TrainingData training_data_from_config(const nlohmann::json& config, const nn::Model& model);

}  // namespace nimbus::train
