#include "nimbus/plan/k8s.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "nimbus/base/error.h"
#include "nimbus/plan/train_command.h"

namespace nimbus::plan {
namespace {

using Json = nlohmann::json;

constexpr const char* kConfigMount = "/etc/nimbus";
constexpr const char* kRunsMount = "/runs";
// MPIJob workers: ranks 1.. write their own files here (an emptyDir), never on the shared claim.
constexpr const char* kScratchMount = "/scratch";

void check_name(const std::string& name) {
  static const std::regex dns1123("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  if (name.size() > 52 || !std::regex_match(name, dns1123)) {
    throw InvalidArgument(fmt::format("'{}' is not a valid job name", name),
                          "use at most 52 lower-case letters, digits and '-', starting and ending with a letter or "
                          "digit (Kubernetes adds suffixes to reach its 63-character limit)");
  }
}

// Continues the run when a previous pod of this job began it (its config.json is written first):
// --resume takes the newest intact checkpoint, or starts again from step 0 when that pod was stopped
// before its first one; a run of another config there is refused, never mixed in. A pod stopped before
// config.json left only its claim: this one starts afresh. Sets $run and $resume for what follows.
std::string resume_prelude(const ManifestOptions& options) {
  return fmt::format("run={}/{}; resume=; [ -e \"$run\"/config.json ] && resume=\"--resume $run\"; ", kRunsMount,
                     options.name);
}

std::string metrics_flags(const ManifestOptions& options) {
  return fmt::format("--metrics-port {} --metrics-address 0.0.0.0", options.metrics_port);
}

// The Job's container: nimbus train itself, continuing the run of a replaced pod.
Json job_command(const Plan& plan, const ManifestOptions& options) {
  const std::string train =
      shell_line(train_command(plan, fmt::format("{}/config.yaml", kConfigMount), options.set_overrides));
  return Json::array(
      {"/bin/sh", "-c",
       resume_prelude(options) + fmt::format("exec {} --run-dir \"$run\" $resume {}", train, metrics_flags(options))});
}

// The MPIJob's launcher: mpirun starts one nimbus process per GPU on the workers (through their sshd,
// whose sessions do not see the image's environment: -x passes the launcher's on, PATH and
// LD_LIBRARY_PATH included). It alone decides whether the job resumes, so that every
// rank agrees. Each rank sees the GPU of its pod numbered by its local rank (Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, 0 to slotsPerWorker - 1) as its only one. Rank 0 writes the run directory
// on the shared claim; the others write their own files under the pod's scratch folder.
Json launcher_command(const Plan& plan, const ManifestOptions& options) {
  std::string rank = plan.device == "cpu" ? "" : "export CUDA_VISIBLE_DEVICES=\"$OMPI_COMM_WORLD_LOCAL_RANK\"; ";
  rank +=
      fmt::format("exec {} --run-dir {}/{} --worker-dir {} {} \"$@\"",
                  shell_line(train_command(plan, fmt::format("{}/config.yaml", kConfigMount), options.set_overrides)),
                  kRunsMount, options.name, kScratchMount, metrics_flags(options));
  return Json::array(
      {"/bin/sh", "-c",
       resume_prelude(options) + fmt::format("exec mpirun --allow-run-as-root -np {} -bind-to none -x PATH -x "
                                             "LD_LIBRARY_PATH -x NIMBUS_MEMORY_MODE -x "
                                             "NIMBUS_MEMORY_LIMIT -x NCCL_DEBUG /bin/sh -c {} rank $resume",
                                             plan.device_count, shell_word(rank))});
}

// Growth mode with a limit 25% above the predicted need (rounded up to a GiB): room for the
// allocator's fragmentation, and a bound that keeps co-located jobs apart. NCCL reports warnings
// and errors only.
Json trainer_environment(const Plan& plan) {
  const double gib = std::ceil(plan.memory_bytes * 1.25 / (1024.0 * 1024 * 1024));
  return Json::array({{{"name", "NIMBUS_MEMORY_MODE"}, {"value", "growth"}},
                      {{"name", "NIMBUS_MEMORY_LIMIT"}, {"value", fmt::format("{:.0f}GiB", std::max(1.0, gib))}},
                      {{"name", "NCCL_DEBUG"}, {"value", "WARN"}}});
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

Json mount(const std::string& volume, const std::string& path, bool read_only = false) {
  Json entry = {{"name", volume}, {"mountPath", path}};
  if (read_only) entry["readOnly"] = true;
  return entry;
}

// The container that trains: its command, GPUs, environment, metrics port and mounts.
Json trainer_container(const Plan& plan, const InstanceSpec* instance, const ManifestOptions& options,
                       const std::string& container_name, Json command, Json mounts) {
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
          {"command", std::move(command)},
          {"env", trainer_environment(plan)},
          {"ports", Json::array({{{"name", "metrics"}, {"containerPort", options.metrics_port}}})},
          {"resources", resources},
          {"volumeMounts", std::move(mounts)}};
}

Json config_volume(const ManifestOptions& options) {
  return {{"name", "config"}, {"configMap", {{"name", options.name + "-config"}}}};
}

Json runs_volume(const ManifestOptions& options) {
  return {{"name", "runs"}, {"persistentVolumeClaim", {{"claimName", options.name + "-runs"}}}};
}

Json pod_template(const Plan& plan, const Catalog& catalog, const InstanceSpec* instance,
                  const ManifestOptions& options, Json containers, Json volumes) {
  // Finish the step and write the checkpoint before the cloud takes the node: a few seconds under its
  // notice (kubelet sends SIGTERM first, SIGKILL when this runs out).
  const auto grace = static_cast<int>(std::max(10.0, plan.preemption_notice_seconds - 5));
  Json spec = {{"restartPolicy", "OnFailure"},
               {"terminationGracePeriodSeconds", grace},
               {"nodeSelector", node_selector(plan, catalog, instance, options.spot)},
               {"tolerations", tolerations(plan, options.spot)},
               {"containers", std::move(containers)},
               {"volumes", std::move(volumes)}};
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
  Json trainer = trainer_container(plan, instance, options, "trainer", job_command(plan, options),
                                   Json::array({mount("config", kConfigMount, true), mount("runs", kRunsMount)}));
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", metadata(options, options.name)},
          {"spec",
           {// A preempted or failed pod is replaced and resumes from the last checkpoint.
            {"backoffLimit", 10},
            {"template", pod_template(plan, catalog, instance, options, Json::array({trainer}),
                                      Json::array({config_volume(options), runs_volume(options)}))}}}};
}

// Kubeflow's MPI operator (v2beta1, Open MPI): worker pods run sshd as their container's process, and
// the launcher's mpirun starts the nimbus processes in them over ssh with the keys the operator mounts.
// Every worker mounts the shared (ReadWriteMany) claim: rank 0 writes the run there, the other ranks
// read its checkpoints when the job resumes and write their own files to the pod's scratch emptyDir.
Json mpi_job(const Plan& plan, const Catalog& catalog, const InstanceSpec* instance, const ManifestOptions& options) {
  const int gpus_per_node = plan.device_count / plan.nodes;
  const Json worker = trainer_container(
      plan, instance, options, "worker", Json::array({"/usr/sbin/sshd", "-De"}),
      Json::array({mount("config", kConfigMount, true), mount("runs", kRunsMount), mount("scratch", kScratchMount)}));
  const Json worker_volumes =
      Json::array({config_volume(options), runs_volume(options), {{"name", "scratch"}, {"emptyDir", Json::object()}}});
  // The launcher reads the claim (has a previous launcher begun this run?) and passes its environment on.
  const Json launcher = {{"name", "launcher"},
                         {"image", options.image},
                         {"command", launcher_command(plan, options)},
                         {"env", trainer_environment(plan)},
                         {"volumeMounts", Json::array({mount("runs", kRunsMount, true)})}};
  const Json launcher_template = {
      {"metadata", {{"labels", {{"app.kubernetes.io/name", "nimbus"}, {"app.kubernetes.io/instance", options.name}}}}},
      {"spec", {{"containers", Json::array({launcher})}, {"volumes", Json::array({runs_volume(options)})}}}};
  return {
      {"apiVersion", "kubeflow.org/v2beta1"},
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
            {"template", pod_template(plan, catalog, instance, options, Json::array({worker}), worker_volumes)}}}}}}}};
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
  // One pod mounts a Job's claim; an MPIJob's workers on several nodes mount theirs at once.
  if (plan.nodes > 1 && options.storage_class.empty()) {
    throw InvalidArgument(
        fmt::format("plan on {} nodes: its workers share the run directory, which needs a ReadWriteMany volume",
                    plan.nodes),
        "name a storage class that provides one with --storage-class (GKE: standard-rwx, Filestore CSI driver; "
        "EKS: the class of the EFS CSI driver, e.g. efs-sc; AKS: azurefile-csi)");
  }
  Json claim_spec = {{"accessModes", Json::array({plan.nodes > 1 ? "ReadWriteMany" : "ReadWriteOnce"})},
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
