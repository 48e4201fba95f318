// The manifests of nimbus k8s: what a GPU job on a shared, preemptible cluster needs, the plan's
// training settings in the container's command, an MPIJob's ranks and claims, and a YAML round trip.
// Schema validation and running the commands: test_k8s_manifests.py.
#include "nimbus/plan/k8s.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "nimbus/base/error.h"
#include "tests/plan/shipped_catalog.h"

namespace nimbus::plan {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

Plan plan_on(const std::string& instance, int max_nodes = 1) {
  const Workload work = Workload::from_totals({.parameters = 3e8, .flops_per_sample = 2e12});
  const PlanResult result =
      make_plans(work, shipped(), {.samples = 1'000'000, .batch_size = 1024, .max_nodes = max_nodes});
  for (const Plan& p : result.plans) {
    if (p.instance == instance && p.nodes == max_nodes) return p;
  }
  throw NotFound("no plan on " + instance);
}

const ManifestOptions kOptions{.name = "fmnist-cnn",
                               .image = "registry.example.com/nimbus:0.1.0",
                               .config_text = "model:\n  name: cnn\nfit:\n  epochs: 5\n",
                               .metrics_port = 9400};

// YAML -> JSON through yaml-cpp, with the scalars' types as a YAML 1.2 reader would see them.
Json from_yaml(const YAML::Node& node) {
  if (node.IsMap()) {
    Json out = Json::object();
    for (const auto& item : node) out[item.first.as<std::string>()] = from_yaml(item.second);
    return out;
  }
  if (node.IsSequence()) {
    Json out = Json::array();
    for (const auto& item : node) out.push_back(from_yaml(item));
    return out;
  }
  if (node.IsNull()) return nullptr;
  if (node.Tag() == "!") return node.as<std::string>();  // quoted
  const std::string text = node.as<std::string>();
  if (text == "true" || text == "false") return text == "true";
  try {
    size_t used = 0;
    const int64_t integer = std::stoll(text, &used);
    if (used == text.size()) return integer;
  } catch (const std::exception&) {
  }
  return text;
}

TEST(K8s, SingleNodeJobHasGpusSelectorsTolerationsGraceAndScraping) {
  ManifestOptions options = kOptions;
  options.spot = true;
  const Plan plan = plan_on("g4dn.xlarge");
  const std::vector<Json> docs = manifests(plan, shipped(), options);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0]["kind"], "ConfigMap");
  EXPECT_EQ(docs[0]["data"]["config.yaml"], options.config_text);
  EXPECT_EQ(docs[1]["kind"], "PersistentVolumeClaim");
  const Json& job = docs[2];
  EXPECT_EQ(job["apiVersion"], "batch/v1");
  EXPECT_EQ(job["kind"], "Job");
  const Json& pod = job["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["annotations"]["prometheus.io/scrape"], "true");
  EXPECT_EQ(pod["metadata"]["annotations"]["prometheus.io/port"], "9400");
  const Json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeSelector"]["nvidia.com/gpu.product"], "Tesla-T4");
  EXPECT_EQ(spec["nodeSelector"]["node.kubernetes.io/instance-type"], "g4dn.xlarge");
  EXPECT_EQ(spec["nodeSelector"]["eks.amazonaws.com/capacityType"], "SPOT");
  EXPECT_EQ(spec["tolerations"][0]["key"], "nvidia.com/gpu");
  // AWS gives 2 minutes of notice; the trainer needs SIGTERM before that runs out.
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 115);
  const Json& container = spec["containers"][0];
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_EQ(container["env"][0]["value"], "growth");
  EXPECT_THAT(container["env"][1]["value"].get<std::string>(), HasSubstr("GiB"));
  const std::string command = container["command"][2];
  EXPECT_THAT(command, HasSubstr("nimbus train /etc/nimbus/config.yaml"));
  EXPECT_THAT(command, HasSubstr("--metrics-port 9400 --metrics-address 0.0.0.0"));
  EXPECT_THAT(command, HasSubstr(fmt::format("fit.gradient_accumulation={}", plan.gradient_accumulation)));
  // A replaced pod continues its run once config.json is there (from step 0 before the first checkpoint).
  EXPECT_THAT(command, HasSubstr(R"([ -e "$run"/config.json ] && resume="--resume $run")"));
}

TEST(K8s, GkeSpotPlansSelectAndTolerateSpotNodes) {
  ManifestOptions options = kOptions;
  options.spot = true;
  const Json job = manifests(plan_on("a2-highgpu-1g"), shipped(), options)[2];
  const Json& spec = job["spec"]["template"]["spec"];
  EXPECT_EQ(spec["nodeSelector"]["cloud.google.com/gke-spot"], "true");
  EXPECT_EQ(spec["tolerations"][1]["key"], "cloud.google.com/gke-spot");
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 25);
}

TEST(K8s, YamlRoundTripsThroughAParser) {
  ManifestOptions options = kOptions;
  options.storage_class = "efs-sc";
  for (const int nodes : {1, 2}) {
    const std::vector<Json> docs = manifests(plan_on("p4d.24xlarge", nodes), shipped(), options);
    const std::vector<YAML::Node> parsed = YAML::LoadAll(to_yaml(docs));
    ASSERT_EQ(parsed.size(), docs.size());
    for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(from_yaml(parsed[i]), docs[i]) << to_yaml({docs[i]});
  }
}

TEST(K8s, AOneGpuPlanTrainsOnCudaAtThePlansBatchAccumulationAndPrecision) {
  ManifestOptions options = kOptions;
  options.set_overrides = {"fit.epochs=2", "model.name=it's mine"};
  const Plan plan = plan_on("a2-highgpu-1g");
  ASSERT_EQ(plan.device_count, 1);
  const std::string command =
      manifests(plan, shipped(), options)[2]["spec"]["template"]["spec"]["containers"][0]["command"][2];
  // The device, the user's overrides (the plan was made with them), then the plan's, which win.
  EXPECT_THAT(command, HasSubstr("exec nimbus train /etc/nimbus/config.yaml --device cuda --set fit.epochs=2 --set "
                                 "'model.name=it'\\''s mine' --set fit.batch_size="));
  EXPECT_THAT(command, HasSubstr(fmt::format("fit.batch_size={}", plan.micro_batch * plan.gradient_accumulation)));
  EXPECT_THAT(command, HasSubstr(fmt::format("fit.gradient_accumulation={}", plan.gradient_accumulation)));
  if (plan.precision != Precision::kFloat32) {
    EXPECT_THAT(command, HasSubstr("runtime.precision=" + precision_name(plan.precision)));
  }
  EXPECT_THAT(command, Not(HasSubstr("runtime.strategy")));
}

TEST(K8s, MultiNodePlanIsAnMpiJobOfOneMultiWorkerProcessPerGpuOnAReadWriteManyClaim) {
  const Plan plan = plan_on("p4d.24xlarge", 2);
  ManifestOptions options = kOptions;
  options.storage_class = "efs-sc";
  const std::vector<Json> docs = manifests(plan, shipped(), options);
  EXPECT_EQ(docs[1]["spec"]["accessModes"], Json::array({"ReadWriteMany"}));
  EXPECT_EQ(docs[1]["spec"]["storageClassName"], "efs-sc");
  const Json& job = docs[2];
  EXPECT_EQ(job["apiVersion"], "kubeflow.org/v2beta1");
  EXPECT_EQ(job["kind"], "MPIJob");
  EXPECT_EQ(job["spec"]["slotsPerWorker"], 8);
  const Json& workers = job["spec"]["mpiReplicaSpecs"]["Worker"];
  EXPECT_EQ(workers["replicas"], 2);
  const Json& worker = workers["template"]["spec"]["containers"][0];
  EXPECT_EQ(worker["command"], Json::array({"/usr/sbin/sshd", "-De"}));
  EXPECT_EQ(worker["resources"]["limits"]["nvidia.com/gpu"], 8);
  // The workers' volumes: the config, the shared claim, and a scratch folder of each pod's own.
  const Json& volumes = workers["template"]["spec"]["volumes"];
  ASSERT_EQ(volumes.size(), 3u);
  EXPECT_EQ(volumes[1]["persistentVolumeClaim"]["claimName"], "fmnist-cnn-runs");
  EXPECT_EQ(volumes[2]["emptyDir"], Json::object());
  const Json& launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(launcher["env"][2], Json({{"name", "NCCL_DEBUG"}, {"value", "WARN"}}));
  const std::string command = launcher["command"][2];
  EXPECT_THAT(command, HasSubstr("exec mpirun --allow-run-as-root -np 16 -bind-to none -x PATH -x LD_LIBRARY_PATH -x "
                                 "NIMBUS_MEMORY_MODE -x NIMBUS_MEMORY_LIMIT -x NCCL_DEBUG /bin/sh -c "));
  EXPECT_THAT(command, HasSubstr(R"(export CUDA_VISIBLE_DEVICES="$OMPI_COMM_WORLD_LOCAL_RANK"; exec nimbus train)"));
  EXPECT_THAT(command, HasSubstr("exec nimbus train /etc/nimbus/config.yaml --device cuda "));
  EXPECT_THAT(command, HasSubstr("--set runtime.strategy.type=multi_worker_mirrored"));
  EXPECT_THAT(command, HasSubstr(fmt::format("fit.batch_size={}", plan.micro_batch * 16)));
  EXPECT_THAT(command, HasSubstr("--run-dir /runs/fmnist-cnn --worker-dir /scratch"));
  EXPECT_THAT(command, HasSubstr("rank $resume"));
}

TEST(K8s, AnMpiJobWithoutAStorageClassIsRefused) {
  try {
    manifests(plan_on("p4d.24xlarge", 2), shipped(), kOptions);
    FAIL() << "no error";
  } catch (const InvalidArgument& error) {
    EXPECT_THAT(error.message(), HasSubstr("ReadWriteMany"));
    EXPECT_THAT(error.hint(), HasSubstr("--storage-class"));
  }
}

TEST(K8s, BadNamesAndLocalPlansAreRefused) {
  ManifestOptions options = kOptions;
  options.name = "Fashion_MNIST";
  EXPECT_THROW(manifests(plan_on("g4dn.xlarge"), shipped(), options), InvalidArgument);
  Plan local = plan_on("g4dn.xlarge");
  local.cloud = "local";
  EXPECT_THROW(manifests(local, shipped(), kOptions), InvalidArgument);
}

}  // namespace
}  // namespace nimbus::plan
