// nimbus k8s CONFIG.yaml [plan arguments] --plan N: Kubernetes manifests for plan N of `nimbus plan`
// (a Job, or an MPIJob across nodes on a ReadWriteMany volume), to stdout or one file per object in -o DIR.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/base/error.h"
#include "nimbus/plan/k8s.h"
#include "plan_arguments.h"

namespace nimbus::cli {

Command add_k8s_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("k8s", "write the Kubernetes manifests that run a plan");
  auto arguments = std::make_shared<PlanArguments>();
  arguments->add_to(*command);
  struct K8sArguments {
    size_t plan = 1;
    std::string instance, output_dir;
    plan::ManifestOptions manifest;
  };
  auto k8s = std::make_shared<K8sArguments>();
  command->add_option("--plan", k8s->plan, "which plan, counting from 1 in the order nimbus plan prints")
      ->check(whole_number(1, 1'000'000));
  command->add_option("--instance", k8s->instance, "the best plan on this instance type instead of --plan");
  command->add_option("-o,--output", k8s->output_dir, "write one YAML file per object into this folder")
      ->check(non_empty("a folder, or leave the flag out to print the manifests"));
  command->add_option("--name", k8s->manifest.name, "job name (default nimbus-train)");
  command->add_option("--image", k8s->manifest.image, "container image with nimbus (deploy/Dockerfile)")
      ->check(single_word());
  command->add_option("--metrics-port", k8s->manifest.metrics_port, "port of nimbus train's Prometheus exporter")
      ->check(port_number(/*zero_picks_a_free_port=*/false));
  command->add_option("--storage", k8s->manifest.storage, "size of the run-directory volume (default 20Gi)")
      ->check(kubernetes_quantity());
  command
      ->add_option("--storage-class", k8s->manifest.storage_class,
                   "storage class of that volume (multi-node plans: one with ReadWriteMany volumes, e.g. "
                   "standard-rwx on GKE, efs-sc on EKS, azurefile-csi on AKS)")
      ->check(kubernetes_subdomain());
  return [arguments, k8s] {
    PlanArguments::Resolved resolved = arguments->resolve();
    const plan::PlanResult result =
        plan::make_plans(resolved.workload, resolved.catalog, resolved.request, resolved.unfused);
    std::vector<plan::Plan> plans;
    for (const plan::Plan& p : result.plans) {
      if (p.cloud != "local" && (k8s->instance.empty() || p.instance == k8s->instance)) plans.push_back(p);
    }
    if (k8s->plan > plans.size()) {
      throw InvalidArgument(fmt::format("there is no plan {}{}: {} plans", k8s->plan,
                                        k8s->instance.empty() ? "" : " on " + k8s->instance, plans.size()),
                            "run nimbus plan with the same arguments to see them");
    }
    plan::ManifestOptions options = k8s->manifest;
    options.config_text = resolved.config_text;
    options.set_overrides = arguments->overrides;
    options.spot = arguments->spot;
    const plan::Plan& chosen = plans[k8s->plan - 1];
    if (!chosen.needs.empty()) {
      // Written all the same (the manifests are ready for an image that has it), but the pod would refuse it.
      std::cerr << fmt::format(
          "warning: plan {} needs {} ({}), which the image lacks (deploy/image.yaml): its pods "
          "would stop at the trainer's checks\n",
          k8s->plan, fmt::join(chosen.needs, ", "), chosen.needs_reason);
    }
    const std::vector<nlohmann::json> documents = plan::manifests(chosen, resolved.catalog, options);
    if (k8s->output_dir.empty()) {
      std::cout << plan::to_yaml(documents);
      return 0;
    }
    std::error_code unmade;
    std::filesystem::create_directories(k8s->output_dir, unmade);
    if (unmade) {
      throw NotFound(fmt::format("-o {}: cannot make the folder ({})", k8s->output_dir, unmade.message()),
                     "name a folder that can be created");
    }
    for (const nlohmann::json& document : documents) {
      const std::string path = fmt::format("{}/{}-{}.yaml", k8s->output_dir, document["kind"].get<std::string>(),
                                           document["metadata"]["name"].get<std::string>());
      std::ofstream out(path);
      out << plan::to_yaml({document});
      if (!out) throw NotFound(fmt::format("{}: cannot write the manifest", path));
      std::cerr << "wrote " << path << "\n";
    }
    return 0;
  };
}

}  // namespace nimbus::cli
