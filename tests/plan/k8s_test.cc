// The manifests of nimbus k8s: what a GPU job on a shared, preemptible cluster needs, a YAML round
// trip, and validation against the Kubernetes schemas and the MPIJob CRD by tests/plan/k8s_validator.
#include "nimbus/plan/k8s.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "tests/plan/shipped_catalog.h"
#include "tests/support/run_command.h"

namespace nimbus::plan {
namespace {

using ::testing::HasSubstr;
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

// Runs the validator on `documents`; returns its exit status and output.
std::pair<int, std::string> validate(const std::vector<Json>& documents, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / (name + ".yaml")).string();
  std::ofstream(path) << to_yaml(documents);
  EXPECT_TRUE(std::filesystem::exists("tests/plan/k8s_validator/node_modules/kubernetes-models"))
      << "the validator's npm packages are missing: run scripts/install-deps";
  const std::string output =
      nimbus::testing::run_command("node tests/plan/k8s_validator/validate.mjs " + path + " 2>&1; echo \"rc=$?\"");
  const size_t rc = output.rfind("rc=");
  return {std::stoi(output.substr(rc + 3)), output};
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
  const std::vector<Json> docs = manifests(plan_on("p4d.24xlarge"), shipped(), kOptions);
  const std::vector<YAML::Node> parsed = YAML::LoadAll(to_yaml(docs));
  ASSERT_EQ(parsed.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(from_yaml(parsed[i]), docs[i]) << to_yaml({docs[i]});
}

TEST(K8s, SingleNodeManifestsValidateAgainstKubernetesSchemas) {
  const auto [rc, output] = validate(manifests(plan_on("p4d.24xlarge"), shipped(), kOptions), "nimbus_job");
  EXPECT_EQ(rc, 0) << output;
  EXPECT_THAT(output, HasSubstr("batch/v1/Job fmnist-cnn valid"));
  EXPECT_THAT(output, HasSubstr("v1/ConfigMap fmnist-cnn-config valid"));
  EXPECT_THAT(output, HasSubstr("v1/PersistentVolumeClaim fmnist-cnn-runs valid"));
}

TEST(K8s, MultiNodePlanIsAnMpiJobThatValidatesAgainstItsCrd) {
  const Plan plan = plan_on("p4d.24xlarge", 2);
  const std::vector<Json> docs = manifests(plan, shipped(), kOptions);
  const Json& job = docs[2];
  EXPECT_EQ(job["apiVersion"], "kubeflow.org/v2beta1");
  EXPECT_EQ(job["kind"], "MPIJob");
  EXPECT_EQ(job["spec"]["slotsPerWorker"], 8);
  EXPECT_EQ(job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"], 2);
  const Json& launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(launcher["command"][0], "mpirun");
  EXPECT_EQ(launcher["command"][3], "16");
  const auto [rc, output] = validate(docs, "nimbus_mpijob");
  EXPECT_EQ(rc, 0) << output;
  EXPECT_THAT(output, HasSubstr("kubeflow.org/v2beta1/MPIJob fmnist-cnn valid"));
}

TEST(K8s, ValidatorRejectsABrokenManifest) {
  std::vector<Json> docs = manifests(plan_on("g4dn.xlarge"), shipped(), kOptions);
  docs[2]["spec"]["template"]["spec"]["restartPolicy"] = "Sometimes";
  std::vector<Json> mpi = manifests(plan_on("p4d.24xlarge", 2), shipped(), kOptions);
  mpi[2]["spec"]["slotsPerWorkers"] = 8;  // a misspelled field
  const auto [rc, output] = validate({docs[2], mpi[2]}, "nimbus_broken");
  EXPECT_NE(rc, 0);
  EXPECT_THAT(output, HasSubstr("batch/v1/Job invalid"));
  EXPECT_THAT(output, HasSubstr("MPIJob invalid"));
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
