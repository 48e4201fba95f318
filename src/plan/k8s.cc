#include "nimbus/plan/k8s.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "nimbus/base/error.h"

namespace nimbus::plan {
namespace {

using Json = nlohmann::json;

constexpr const char* kConfigMount = "/etc/nimbus";
constexpr const char* kRunsMount = "/runs";

void check_name(const std::string& name) {
  static const std::regex dns1123("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  if (name.size() > 52 || !std::regex_match(name, dns1123)) {
    throw InvalidArgument(fmt::format("'{}' is not a valid job name", name),
                          "use at most 52 lower-case letters, digits and '-', starting and ending with a letter or "
                          "digit (Kubernetes adds suffixes to reach its 63-character limit)");
  }
}

// nimbus train's command line in the container: continues the run when a previous pod of this job
// began it (its config.json is written first). --resume takes the newest intact checkpoint, or starts
// again from step 0 when that pod was stopped before its first one; a run of another config there is
// refused, never mixed in. A pod stopped before config.json left only its claim: this one starts afresh.
Json train_command(const Plan& plan, const ManifestOptions& options) {
  std::string command = fmt::format(
      "run={}/{}; resume=; [ -e \"$run\"/config.json ] && resume=\"--resume $run\"; "
      "exec nimbus train {}/config.yaml --run-dir \"$run\" $resume --metrics-port {} --metrics-address 0.0.0.0 "
      "--set fit.gradient_accumulation={}",
      kRunsMount, options.name, kConfigMount, options.metrics_port, plan.gradient_accumulation);
  // float32 is runtime.precision's default; the others name their policy (docs/mixed_precision.md).
  if (plan.precision != Precision::kFloat32) command += " --set runtime.precision=" + precision_name(plan.precision);
  for (const std::string& set : options.set_overrides) command += " --set " + set;
  return Json::array({"/bin/sh", "-c", command});
}

// Growth mode with a limit 25% above the predicted need (rounded up to a GiB): room for the
// allocator's fragmentation, and a bound that keeps co-located jobs apart.
Json memory_environment(const Plan& plan) {
  const double gib = std::ceil(plan.memory_bytes * 1.25 / (1024.0 * 1024 * 1024));
  return Json::array({{{"name", "NIMBUS_MEMORY_MODE"}, {"value", "growth"}},
                      {{"name", "NIMBUS_MEMORY_LIMIT"}, {"value", fmt::format("{:.0f}GiB", std::max(1.0, gib))}}});
}

Json node_selector(const Plan& plan, const Catalog& catalog, const InstanceSpec* instance, bool spot) {
  Json selector = Json::object();
  if (plan.device != "cpu") selector["nvidia.com/gpu.product"] = catalog.gpu(plan.device).product_label;
  if (instance != nullptr) selector["node.kubernetes.io/instance-type"] = instance->name;
  if (spot) {
    if (plan.cloud == "gcp") selector["cloud.google.com/gke-spot"] = "true";
    if (plan.cloud == "azure") selector["kubernetes.azure.com/scalesetpriority"] = "spot";
    if (plan.cloud == "aws") selector["eks.amazonaws.com/capacityType"] = "SPOT";
  }
  return selector;
}

Json tolerations(const Plan& plan, bool spot) {
  Json list = Json::array();
  if (plan.device != "cpu") {
    list.push_back({{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
  }
  if (spot && plan.cloud == "gcp") {
    list.push_back(
        {{"key", "cloud.google.com/gke-spot"}, {"operator", "Equal"}, {"value", "true"}, {"effect", "NoSchedule"}});
  }
  if (spot && plan.cloud == "azure") {
    list.push_back({{"key", "kubernetes.azure.com/scalesetpriority"},
                    {"operator", "Equal"},
                    {"value", "spot"},
                    {"effect", "NoSchedule"}});
  }
  return list;
}

// The trainer's container: its command, GPUs, memory mode, metrics port and mounts.
Json trainer_container(const Plan& plan, const InstanceSpec* instance, const ManifestOptions& options,
                       const std::string& container_name) {
  const int gpus_per_node = plan.device == "cpu" ? 0 : plan.device_count / plan.nodes;
  Json resources = Json::object();
  if (instance != nullptr) {
    // Leave a quarter of the node to the system and the device plugins.
    resources["requests"] = {{"cpu", std::to_string(std::max(1, instance->vcpus * 3 / 4))},
                             {"memory", fmt::format("{:.0f}Gi", std::max(1.0, instance->ram_gb * 0.75))}};
  }
  if (gpus_per_node > 0) resources["limits"] = {{"nvidia.com/gpu", gpus_per_node}};
  return {{"name", container_name},
          {"image", options.image},
          {"command", train_command(plan, options)},
          {"env", memory_environment(plan)},
          {"ports", Json::array({{{"name", "metrics"}, {"containerPort", options.metrics_port}}})},
          {"resources", resources},
          {"volumeMounts", Json::array({{{"name", "config"}, {"mountPath", kConfigMount}, {"readOnly", true}},
                                        {{"name", "runs"}, {"mountPath", kRunsMount}}})}};
}

Json pod_template(const Plan& plan, const Catalog& catalog, const InstanceSpec* instance,
                  const ManifestOptions& options, Json containers, const std::string& restart_policy) {
  // Finish the step and write the checkpoint before the cloud takes the node: a few seconds under its
  // notice (kubelet sends SIGTERM first, SIGKILL when this runs out).
  const auto grace = static_cast<int>(std::max(10.0, plan.preemption_notice_seconds - 5));
  Json spec = {{"restartPolicy", restart_policy},
               {"terminationGracePeriodSeconds", grace},
               {"nodeSelector", node_selector(plan, catalog, instance, options.spot)},
               {"tolerations", tolerations(plan, options.spot)},
               {"containers", std::move(containers)},
               {"volumes",
                Json::array({{{"name", "config"}, {"configMap", {{"name", options.name + "-config"}}}},
                             {{"name", "runs"}, {"persistentVolumeClaim", {{"claimName", options.name + "-runs"}}}}})}};
  return {{"metadata",
           {{"labels", {{"app.kubernetes.io/name", "nimbus"}, {"app.kubernetes.io/instance", options.name}}},
            {"annotations",
             {{"prometheus.io/scrape", "true"},
              {"prometheus.io/port", std::to_string(options.metrics_port)},
              {"prometheus.io/path", "/metrics"}}}}},
          {"spec", std::move(spec)}};
}

Json metadata(const ManifestOptions& options, const std::string& name) {
  return {{"name", name},
          {"labels", {{"app.kubernetes.io/name", "nimbus"}, {"app.kubernetes.io/instance", options.name}}}};
}

Json single_node_job(const Plan& plan, const Catalog& catalog, const InstanceSpec* instance,
                     const ManifestOptions& options) {
  Json containers = Json::array({trainer_container(plan, instance, options, "trainer")});
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", metadata(options, options.name)},
          {"spec",
           {// A preempted or failed pod is replaced and resumes from the last checkpoint.
            {"backoffLimit", 10},
            {"template", pod_template(plan, catalog, instance, options, std::move(containers), "OnFailure")}}}};
}

Json mpi_job(const Plan& plan, const Catalog& catalog, const InstanceSpec* instance, const ManifestOptions& options) {
  const int gpus_per_node = plan.device_count / plan.nodes;
  Json worker = trainer_container(plan, instance, options, "worker");
  worker.erase("command");
  // The launcher starts one nimbus process per GPU on the workers with mpirun.
  Json launcher = {
      {"name", "launcher"},
      {"image", options.image},
      {"command", Json::array({"mpirun", "--allow-run-as-root", "-np", std::to_string(plan.device_count), "-bind-to",
                               "none", "-x", "NIMBUS_MEMORY_MODE", "-x", "NIMBUS_MEMORY_LIMIT"})},
      {"env", memory_environment(plan)}};
  for (const Json& part : train_command(plan, options)) launcher["command"].push_back(part);
  Json launcher_template = {{"metadata", {{"labels", {{"app.kubernetes.io/instance", options.name}}}}},
                            {"spec", {{"containers", Json::array({launcher})}}}};
  return {{"apiVersion", "kubeflow.org/v2beta1"},
          {"kind", "MPIJob"},
          {"metadata", metadata(options, options.name)},
          {"spec",
           {{"slotsPerWorker", gpus_per_node},
            {"runPolicy", {{"cleanPodPolicy", "Running"}, {"backoffLimit", 10}}},
            {"mpiImplementation", "OpenMPI"},
            {"mpiReplicaSpecs",
             {{"Launcher", {{"replicas", 1}, {"restartPolicy", "OnFailure"}, {"template", launcher_template}}},
              {"Worker",
               {{"replicas", plan.nodes},
                {"restartPolicy", "OnFailure"},
                {"template", pod_template(plan, catalog, instance, options, Json::array({worker}), "OnFailure")}}}}}}}};
}

const InstanceSpec* find_instance(const Catalog& catalog, const Plan& plan) {
  auto it = std::ranges::find_if(catalog.instances, [&](const InstanceSpec& instance) {
    return instance.cloud == plan.cloud && instance.name == plan.instance;
  });
  return it == catalog.instances.end() ? nullptr : &*it;
}

void emit(YAML::Emitter& out, const Json& value) {
  if (value.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, item] : value.items()) {
      out << YAML::Key << key << YAML::Value;
      emit(out, item);
    }
    out << YAML::EndMap;
  } else if (value.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& item : value) emit(out, item);
    out << YAML::EndSeq;
  } else if (value.is_string()) {
    // Multi-line text (the config) as a literal block; strings a YAML reader would take for another
    // type ("true", "9400", "null") quoted; yaml-cpp quotes those that need it for their syntax.
    static const std::regex other_type("(true|false|yes|no|on|off|y|n|null|~|[-+]?[.0-9][-+.0-9eE_:]*)",
                                       std::regex::icase);
    const std::string& text = value.get_ref<const std::string&>();
    if (text.find('\n') != std::string::npos) {
      out << YAML::Literal << text;
    } else if (text.empty() || std::regex_match(text, other_type)) {
      out << YAML::DoubleQuoted << text;
    } else {
      out << text;
    }
  } else if (value.is_boolean()) {
    out << YAML::TrueFalseBool << value.get<bool>();
  } else if (value.is_number_integer()) {
    out << value.get<int64_t>();
  } else if (value.is_number()) {
    out << value.get<double>();
  } else {
    out << YAML::Null;
  }
}

}  // namespace

std::vector<Json> manifests(const Plan& plan, const Catalog& catalog, const ManifestOptions& options) {
  check_name(options.name);
  if (plan.cloud == "local") {
    throw InvalidArgument("the local machine's plan has no Kubernetes manifests",
                          "pick a cloud plan (--plan N counts the plans `nimbus plan` prints)");
  }
  const InstanceSpec* instance = find_instance(catalog, plan);
  Json claim_spec = {{"accessModes", Json::array({"ReadWriteOnce"})},
                     {"resources", {{"requests", {{"storage", options.storage}}}}}};
  if (!options.storage_class.empty()) claim_spec["storageClassName"] = options.storage_class;
  std::vector<Json> documents = {
      {{"apiVersion", "v1"},
       {"kind", "ConfigMap"},
       {"metadata", metadata(options, options.name + "-config")},
       {"data", {{"config.yaml", options.config_text}}}},
      {{"apiVersion", "v1"},
       {"kind", "PersistentVolumeClaim"},
       {"metadata", metadata(options, options.name + "-runs")},
       {"spec", claim_spec}},
  };
  documents.push_back(plan.nodes > 1 ? mpi_job(plan, catalog, instance, options)
                                     : single_node_job(plan, catalog, instance, options));
  return documents;
}

std::string to_yaml(const std::vector<Json>& documents) {
  std::string text;
  for (const Json& document : documents) {
    YAML::Emitter out;
    emit(out, document);
    text += "---\n";
    text += out.c_str();
    text += "\n";
  }
  return text;
}

}  // namespace nimbus::plan
