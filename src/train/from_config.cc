#include "nimbus/train/from_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <span>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/idx.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/device_choice.h"
#include "nimbus/device/host_memory.h"
#include "nimbus/device/memory.h"
#include "nimbus/device/runtime.h"
#include "nimbus/distribute/multi_worker.h"
#include "nimbus/distribute/strategy.h"
#include "nimbus/nn/layers.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/shape_ops.h"
#include "nimbus/train/data_config.h"
#include "nimbus/train/step_memory.h"

namespace nimbus::train {

namespace {

using Json = nlohmann::json;

// IDX images as f32, times `scale`, shaped (samples, input_shape...).
Tensor load_images(const Json& split, const nn::Dims& input_shape) {
  const std::string file = split.at("images").get<std::string>();
  Tensor images = data::read_idx(file);
  std::vector<int64_t> shape = {images.dim(0)};
  shape.insert(shape.end(), input_shape.begin(), input_shape.end());
  // Images that do not fill the model's input are the config's mistake: name the file and the key.
  const std::span<const int64_t> image_shape = images.shape().dims().subspan(1);
  const int64_t image_values = std::accumulate(image_shape.begin(), image_shape.end(), int64_t{1}, std::multiplies<>());
  const int64_t input_values = std::accumulate(input_shape.begin(), input_shape.end(), int64_t{1}, std::multiplies<>());
  if (image_values != input_values) {
    throw InvalidArgument(
        fmt::format("images {}: each image is [{}] ({} values), but model.input_shape [{}] takes {}", file,
                    fmt::join(image_shape, ", "), image_values, fmt::join(input_shape, ", "), input_values),
        "give model.input_shape the images' shape with its channels, e.g. [28, 28, 1] for 28x28 "
        "grey images");
  }
  const double scale = split.value("scale", 1.0 / 255);
  images = images.to(DType::kF32);
  if (scale != 1) images = images * scale;
  return reshape(images, shape);
}

nn::Dims input_shape_of(const nn::Model& model) {
  const auto& shape = model.inputs()[0].shape();
  return nn::Dims(shape.begin() + 1, shape.end());
}

// A pipeline split's (x, y), every batch joined: validation data as fit(x, y) and evaluate take it.
std::pair<Tensor, Tensor> collect_pipeline(const Json& split, const std::string& section) {
  const uint64_t seed = runtime_options().seed.value_or(0);
  std::vector<Tensor> xs, ys;
  data::Iterator batches = dataset_from_config(split, section, 256, seed).iterator(seed, 0);
  while (auto batch = batches.next()) {
    xs.push_back((*batch)[0]);
    ys.push_back((*batch)[1]);
  }
  if (xs.empty()) throw DataError(fmt::format("{}: the pipeline yields no data", section));
  return {concat(xs, 0), concat(ys, 0)};
}

}  // namespace

namespace {

// What a config can name in compile.optimizer or compile.loss: Keras's snake-case name or class
// name, and the arguments it takes (any other is refused, not dropped).
struct ConfigurableKind {
  const char* name;
  const char* keras_class;
  std::vector<std::string> arguments;
};

const std::vector<ConfigurableKind>& optimizer_kinds() {
  static const std::vector<std::string> adam = {"learning_rate", "beta_1",   "beta_2",          "epsilon",
                                                "weight_decay",  "clipnorm", "global_clipnorm", "fused"};
  static const std::vector<std::string> adamw = [] {
    std::vector<std::string> arguments = adam;
    arguments.push_back("exclude_from_weight_decay");
    return arguments;
  }();
  static const std::vector<ConfigurableKind> kinds = {
      {"adam", "Adam", adam},
      {"sgd", "SGD", {"learning_rate", "momentum", "nesterov", "clipnorm", "global_clipnorm"}},
      {"adamw", "AdamW", adamw},
      {"rmsprop",
       "RMSprop",
       {"learning_rate", "rho", "momentum", "epsilon", "centered", "clipnorm", "global_clipnorm"}}};
  return kinds;
}

// Learning-rate schedules, as compile.optimizer.learning_rate: {name: cosine_decay, ...}.
const std::vector<ConfigurableKind>& schedule_kinds() {
  static const std::vector<ConfigurableKind> kinds = {
      {"cosine_decay",
       "CosineDecay",
       {"initial_learning_rate", "decay_steps", "alpha", "warmup_target", "warmup_steps"}},
      {"exponential_decay", "ExponentialDecay", {"initial_learning_rate", "decay_steps", "decay_rate", "staircase"}},
      {"piecewise_constant_decay", "PiecewiseConstantDecay", {"boundaries", "values"}}};
  return kinds;
}

const std::vector<ConfigurableKind>& loss_kinds() {
  static const std::vector<std::string> crossentropy = {"from_logits", "label_smoothing"};
  static const std::vector<ConfigurableKind> kinds = {
      {"sparse_categorical_crossentropy", "SparseCategoricalCrossentropy", crossentropy},
      {"categorical_crossentropy", "CategoricalCrossentropy", crossentropy},
      {"binary_crossentropy", "BinaryCrossentropy", crossentropy},
      {"mse", "MeanSquaredError", {}},
      {"mean_squared_error", "MeanSquaredError", {}},
      {"mae", "MeanAbsoluteError", {}},
      {"mean_absolute_error", "MeanAbsoluteError", {}}};
  return kinds;
}

// `spec` (a name, or {name, arguments...}) as {name, arguments...}, its kind found by either
// spelling (the first kind when unnamed) and every argument checked against the kind's: `what` is
// "optimizer" or "loss".
std::pair<Json, const ConfigurableKind*> find_kind(const Json& spec, const std::vector<ConfigurableKind>& kinds,
                                                   const char* what) {
  const Json options = spec.is_string() ? Json{{"name", spec}} : spec;
  const std::string name = options.value("name", std::string(kinds.front().name));
  const auto kind = std::find_if(kinds.begin(), kinds.end(),
                                 [&](const ConfigurableKind& k) { return name == k.name || name == k.keras_class; });
  if (kind == kinds.end()) {
    std::vector<std::string> names;
    for (const ConfigurableKind& k : kinds) names.push_back(fmt::format("{} ({})", k.name, k.keras_class));
    throw InvalidArgument(fmt::format("unknown {} '{}'", what, name),
                          fmt::format("use one of {}", fmt::join(names, ", ")));
  }
  for (const auto& [key, value] : options.items()) {
    if (key == "name" || std::find(kind->arguments.begin(), kind->arguments.end(), key) != kind->arguments.end()) {
      continue;
    }
    throw InvalidArgument(fmt::format("{} takes no argument '{}'", kind->keras_class, key),
                          kind->arguments.empty() ? fmt::format("remove it: {} takes none", kind->keras_class)
                                                  : fmt::format("remove it; {}'s arguments: {}", kind->keras_class,
                                                                fmt::join(kind->arguments, ", ")));
  }
  return {options, &*kind};
}

std::optional<double> optional_number(const Json& options, const char* key) {
  if (!options.contains(key) || options[key].is_null()) return std::nullopt;
  return options[key].get<double>();
}

// A number, or a schedule's mapping (schedule_kinds); `fallback` when absent.
LearningRate learning_rate_from_config(const Json& options, double fallback) {
  if (!options.contains("learning_rate")) return fallback;
  const Json& spec = options["learning_rate"];
  if (spec.is_number()) return spec.get<double>();
  if (!spec.is_object() || !spec.contains("name")) {
    throw InvalidArgument(fmt::format("learning_rate must be a number or a schedule, got {}", spec.dump()),
                          "e.g. learning_rate: {name: cosine_decay, initial_learning_rate: 0, decay_steps: 5000, "
                          "warmup_target: 0.001, warmup_steps: 200}");
  }
  const auto [schedule, kind] = find_kind(spec, schedule_kinds(), "learning-rate schedule");
  const std::string name = kind->name;
  if (name == "cosine_decay") {
    return CosineDecay({.initial_learning_rate = schedule.value("initial_learning_rate", 1e-3),
                        .decay_steps = schedule.value("decay_steps", int64_t{1000}),
                        .alpha = schedule.value("alpha", 0.0),
                        .warmup_target = optional_number(schedule, "warmup_target"),
                        .warmup_steps = schedule.value("warmup_steps", int64_t{0})});
  }
  if (name == "exponential_decay") {
    return ExponentialDecay({.initial_learning_rate = schedule.value("initial_learning_rate", 1e-3),
                             .decay_steps = schedule.value("decay_steps", int64_t{1000}),
                             .decay_rate = schedule.value("decay_rate", 0.96),
                             .staircase = schedule.value("staircase", false)});
  }
  return PiecewiseConstantDecay({.boundaries = schedule.at("boundaries").get<std::vector<int64_t>>(),
                                 .values = schedule.at("values").get<std::vector<double>>()});
}

}  // namespace

std::shared_ptr<Optimizer> optimizer_from_config(const nlohmann::json& spec) {
  const auto [options, kind] = find_kind(spec, optimizer_kinds(), "optimizer");
  const std::string name = kind->name;
  const std::optional<double> clipnorm = optional_number(options, "clipnorm");
  const std::optional<double> global_clipnorm = optional_number(options, "global_clipnorm");
  if (name == "sgd") {
    return SGD({.learning_rate = learning_rate_from_config(options, 0.01),
                .momentum = options.value("momentum", 0.0),
                .nesterov = options.value("nesterov", false),
                .clipnorm = clipnorm,
                .global_clipnorm = global_clipnorm});
  }
  if (name == "rmsprop") {
    return RMSprop({.learning_rate = learning_rate_from_config(options, 1e-3),
                    .rho = options.value("rho", 0.9),
                    .momentum = options.value("momentum", 0.0),
                    .epsilon = options.value("epsilon", 1e-7),
                    .centered = options.value("centered", false),
                    .clipnorm = clipnorm,
                    .global_clipnorm = global_clipnorm});
  }
  AdamWOptions adam{.learning_rate = learning_rate_from_config(options, 1e-3),
                    .weight_decay = options.value("weight_decay", name == "adamw" ? 0.004 : 0.0),
                    .exclude_from_weight_decay = options.value("exclude_from_weight_decay", std::vector<std::string>{}),
                    .beta_1 = options.value("beta_1", 0.9),
                    .beta_2 = options.value("beta_2", 0.999),
                    .epsilon = options.value("epsilon", 1e-7),
                    .clipnorm = clipnorm,
                    .global_clipnorm = global_clipnorm};
  if (options.contains("fused")) adam.fused = options["fused"].get<bool>();
  return AdamW(adam);
}

Loss loss_from_config(const nlohmann::json& spec) {
  const auto [options, kind] = find_kind(spec, loss_kinds(), "loss");
  const std::string name = kind->name;
  const CrossentropyOptions cross{.from_logits = options.value("from_logits", false),
                                  .label_smoothing = options.value("label_smoothing", 0.0)};
  if (name == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy(cross);
  if (name == "categorical_crossentropy") return CategoricalCrossentropy(cross);
  if (name == "binary_crossentropy") return BinaryCrossentropy(cross);
  return get_loss(name);
}

namespace {

// runtime.precision on the assumed GPUs of a dry run (assumed_devices.h).
void check_assumed_precision(const Json& runtime, const AssumedDevices& assumed) {
  if (runtime.value("precision", std::string("float32")) == "mixed_bfloat16" && !assumed.bfloat16) {
    throw Unavailable(fmt::format("runtime.precision: mixed_bfloat16 needs bfloat16 tensor cores (compute capability "
                                  "8.0 and newer), and --assume-devices is {}",
                                  assumed.to_string()),
                      "use mixed_float16 or float32 on this GPU");
  }
}

// The device the model trains on: this machine's, or a dry run's assumed GPUs (auto takes them).
DeviceChoice training_device_of(const Json& config, const AssumedDevices* assumed) {
  return assumed != nullptr ? training_device_from_config(config, assumed->probe())
                            : training_device_from_config(config);
}

}  // namespace

DeviceChoice training_device_from_config(const nlohmann::json& config, const GpuProbe& probe) {
  const Json& runtime = config.at("runtime");
  const std::string text = runtime.at("device").get<std::string>();
  const Json strategy = runtime.value("strategy", Json());
  const std::string strategy_type = strategy.is_object() ? strategy.value("type", "one_device") : "one_device";
  if (text == "auto" && strategy_type != "one_device") {
    return {Device::cpu(), fmt::format("auto: runtime.strategy.type {} replicates over CPU devices (runtime.device: "
                                       "cuda replicates over GPUs, through NCCL)",
                                       strategy_type)};
  }
  return choose_device(text, "runtime.device", probe);
}

bool trains_on_assumed_device(const nlohmann::json& config, const AssumedDevices* assumed) {
  return assumed != nullptr && !training_device_of(config, assumed).device.is_cpu();
}

DeviceChoice configure_runtime_from_config(const nlohmann::json& config, const AssumedDevices* assumed) {
  const Json& runtime = config.at("runtime");
  RuntimeOptions runtime_options;
  runtime_options.threads = runtime.at("threads").get<int>();
  runtime_options.deterministic = runtime.at("deterministic").get<bool>();
  if (runtime.contains("seed") && !runtime["seed"].is_null()) runtime_options.seed = runtime["seed"].get<uint64_t>();
  runtime_options.graph = runtime.at("graph").get<bool>();
  runtime_options.jit = runtime.at("jit").get<bool>();
  runtime_options.allow_tf32 = runtime.at("allow_tf32").get<bool>();
  configure_runtime(runtime_options);
  const DeviceChoice choice = training_device_of(config, assumed);
  if (assumed != nullptr && !choice.device.is_cpu()) {
    check_assumed_precision(runtime, *assumed);
    // An assumed GPU has no allocator here: its memory options are checked, and the memory check applies them.
    (void)memory_options_from_config(config);
    return choice;
  }
  if (!choice.device.is_cpu()) {
    try {
      default_stream_for(choice.device);  // brings the device up: its driver's errors before anything is loaded
    } catch (const Unavailable& e) {
      throw Unavailable(fmt::format("{}: {}", choice.reason, e.message()), e.hint());
    } catch (const NotFound& e) {
      throw NotFound(fmt::format("{}: {}", choice.reason, e.message()), e.hint());
    }
  }
  configure_memory_from_config(config);
  return choice;
}

namespace {
// The config's runtime.precision as the global dtype policy while its model's layers are made
// (each layer keeps the policy it was made under); the previous policy comes back after.
class ConfigPolicyScope {
 public:
  explicit ConfigPolicyScope(const nlohmann::json& config) : previous_(nn::global_policy()) {
    const std::string name = config.at("runtime").value("precision", std::string("float32"));
    try {
      nn::set_global_policy(name);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument("runtime.precision: " + error.message(), error.hint());
    }
  }
  ~ConfigPolicyScope() { nn::set_global_policy(previous_); }
  ConfigPolicyScope(const ConfigPolicyScope&) = delete;
  ConfigPolicyScope& operator=(const ConfigPolicyScope&) = delete;

 private:
  nn::DTypePolicy previous_;
};
}  // namespace

nn::Model model_from_train_config(const nlohmann::json& config) {
  const ConfigPolicyScope policy(config);
  const Json& model_section = config.at("model");
  nn::Model model = [&]() -> nn::Model {
    try {
      if (model_section.contains("class_name")) return nn::model_from_config(model_section);
      return nn::model_from_layer_list(model_section.at("input_shape").get<nn::Dims>(),
                                       nn::dtype_from_keras_name(model_section.at("input_dtype").get<std::string>()),
                                       model_section.at("layers"), model_section.value("name", std::string()));
    } catch (const OutOfMemory& error) {
      throw variables_do_not_fit(error, Device::cpu(), "the model's weights");  // made on the CPU, then placed
    }
  }();
  if (model.inputs().size() != 1) throw Unimplemented("nimbus train: models with one input only, for now");
  if (model.inputs()[0].shape().size() < 1) throw InvalidArgument("nimbus train: the model has no input shape");
  return model;
}

std::string strategy_type_from_config(const nlohmann::json& config) {
  const Json& section = config.at("runtime").value("strategy", Json());
  return section.is_object() ? section.value("type", "one_device") : "one_device";
}

namespace {
// The replicas runtime.strategy makes on assumed GPUs: mirrored one on each listed GPU (checked as
// runtime.device is) or on every GPU of the node; multi_worker_mirrored one per process of the job
// mpirun started (each process sees one GPU, as in nimbus k8s's MPIJob), or outside one a process per
// GPU of every assumed node.
int assumed_replicas(const Json& config, const AssumedDevices& assumed) {
  const std::string type = strategy_type_from_config(config);
  if (type == "multi_worker_mirrored") {
    const int processes = distribute::launcher_world_size();
    return processes > 0 ? processes : assumed.nodes * assumed.count;
  }
  if (assumed.nodes > 1) {
    throw InvalidArgument(fmt::format("--assume-devices {}: {} nodes, and runtime.strategy.type is {}",
                                      assumed.to_string(), assumed.nodes, type),
                          "runtime.strategy.type: multi_worker_mirrored spans nodes; assume one node for " + type);
  }
  if (type != "mirrored") return 1;
  const Json& devices = config.at("runtime").at("strategy").value("devices", Json());
  if (!devices.is_array()) return assumed.count;
  for (const Json& device : devices) {
    (void)choose_device(device.get<std::string>(), "runtime.strategy.devices", assumed.probe());
  }
  return static_cast<int>(devices.size());
}

// runtime.strategy, or for a training device other than cpu:0 (a GPU, a logical CPU), one replica
// there (OneDevice): the trainer places the model, the optimizer's state and the batches on it. A dry
// run on assumed GPUs checks the same, then traces on the CPU (assumed_devices.h).
std::shared_ptr<distribute::Strategy> strategy_of(const Json& config, const AssumedDevices* assumed) {
  const Json& runtime = config.at("runtime");
  const DeviceChoice choice = training_device_of(config, assumed);
  const Json& section = runtime.value("strategy", Json());
  if (assumed != nullptr && !choice.device.is_cpu()) {
    // The replicas' step is one GPU's, traced on the CPU at a replica's share of the batch.
    (void)assumed_replicas(config, *assumed);
    return distribute::OneDevice();
  }
  // Replicas on GPUs all-reduce through NCCL.
  auto strategy = distribute::strategy_from_config(section, runtime.at("threads").get<int>(), "config", choice.device);
  if (choice.device == Device::cpu() || strategy->name() != "one_device") return strategy;
  return distribute::OneDevice(choice.device);
}
}  // namespace

Trainer compile_from_config(nn::Model model, const nlohmann::json& config, const AssumedDevices* assumed) {
  const Json& compile_section = config.at("compile");
  return compile(std::move(model), {.optimizer = optimizer_from_config(compile_section.at("optimizer")),
                                    .loss = loss_from_config(compile_section.at("loss")),
                                    .metrics = compile_section.at("metrics").get<std::vector<std::string>>(),
                                    .strategy = strategy_of(config, assumed)});
}

int replicas_in_sync(const nlohmann::json& config, const Trainer& trainer, const AssumedDevices* assumed) {
  if (trains_on_assumed_device(config, assumed)) return assumed_replicas(config, *assumed);
  return trainer.strategy() != nullptr ? trainer.strategy()->num_replicas_in_sync() : 1;
}

std::pair<Tensor, Tensor> load_idx_split(const nlohmann::json& split, const nn::Model& model,
                                         const std::string& section) {
  // The data set is host pipeline memory, not the device's that runtime.memory.limit caps; the
  // loading's temporaries (the u8 images, an unscaled copy, the pipeline's batches) go back at once.
  const HostMemoryScope host;
  std::pair<Tensor, Tensor> loaded;
  if (is_pipeline_split(split)) {
    loaded = collect_pipeline(split, section);
  } else {
    loaded = {load_images(split, input_shape_of(model)), data::read_idx(split.at("labels").get<std::string>())};
    const auto& [images, labels] = loaded;
    if (images.dim(0) != labels.dim(0)) {
      throw DataError(fmt::format("{}: {} images ({}) but {} labels ({})", section, images.dim(0),
                                  split.at("images").get<std::string>(), labels.dim(0),
                                  split.at("labels").get<std::string>()));
    }
  }
  trim_host_memory();
  return loaded;
}

Tensor load_idx_images(const nlohmann::json& split, const nn::Model& model) {
  const HostMemoryScope host;
  Tensor images =
      is_pipeline_split(split) ? collect_pipeline(split, "data").first : load_images(split, input_shape_of(model));
  trim_host_memory();
  return images;
}

MemoryOptions memory_options_from_config(const nlohmann::json& config) {
  MemoryOptions options;
  const Json& runtime = config.at("runtime");
  if (runtime.contains("memory") && runtime["memory"].is_object()) {
    const Json& memory = runtime["memory"];
    const Json limit = memory.value("limit", Json());
    const std::string limit_text = limit.is_null()     ? std::string("none")
                                   : limit.is_string() ? limit.get<std::string>()
                                                       : std::to_string(limit.get<int64_t>());
    options =
        parse_memory_options(memory.value("mode", std::string("growth")), memory.value("fraction", 0.9), limit_text);
  }
  return apply_memory_environment(options);
}

void configure_memory_from_config(const nlohmann::json& config) {
  // The limit is the training device's: the model's memory (the data set is the host's).
  configure_memory(training_device_from_config(config).device, memory_options_from_config(config));
}

TrainingData training_data_from_config(const nlohmann::json& config, const nn::Model& model) {
  const Json& split = config.at("data").at("train");
  if (!is_pipeline_split(split)) {
    auto [x, y] = load_idx_split(split, model, "data.train");
    return {x, y, std::nullopt};
  }
  const Json& batch_size = config.at("fit").at("batch_size");
  if (!batch_size.is_number_integer()) {
    throw InvalidArgument("fit.batch_size: auto needs the IDX form of data.train (a pipeline batches as it is built)",
                          "give fit.batch_size a number");
  }
  const uint64_t seed = runtime_options().seed.value_or(0);
  data::Dataset pipeline = dataset_from_config(split, "data.train", batch_size.get<int64_t>(), seed);
  std::optional<data::Element> first = pipeline.iterator(seed, 0).next();
  if (!first) throw DataError("data.train: the pipeline yields no batch");
  return {(*first)[0], (*first)[1], pipeline};
}

}  // namespace nimbus::train
