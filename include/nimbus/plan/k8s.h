// nimbus k8s: Kubernetes manifests that run a plan — a ConfigMap with the training config, a
// PersistentVolumeClaim for the run directory (checkpoints survive a preempted pod), and a batch/v1 Job
// for single-node plans or a Kubeflow MPIJob (kubeflow.org/v2beta1, launcher + workers, mpirun) for
// multi-node ones (docs/planning.md, "From plan to pod").
//
// The container runs `nimbus train` as the plan says: on the GPU (runtime.device=cuda), at the plan's
// global batch, gradient accumulation and precision; an MPIJob with multi_worker_mirrored, one process
// per GPU, each rank seeing the GPU of its local rank, rank 0 alone writing the run directory on a
// ReadWriteMany claim (--storage-class names its class). The pod asks for the plan's GPUs in
// resources.limits (nvidia.com/gpu), selects nodes by GPU product and instance type (and the cloud's
// spot label for spot plans), tolerates the GPU and spot taints, gets terminationGracePeriodSeconds a
// little under the cloud's preemption notice (nimbus train checkpoints and exits 0 on SIGTERM), is
// annotated for Prometheus scraping of its metrics port, and runs the allocator in growth mode with a
// limit just above the plan's predicted memory, so jobs that share a card stay within their share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/plan/catalog.h"
#include "nimbus/plan/planner.h"

namespace nimbus::plan {

struct ManifestOptions {
  std::string name = "nimbus-train";  // DNS-1123 name of the job and its parts
  std::string image = "nimbus:latest";
  std::string config_text;                   // the training config (YAML), shipped in the ConfigMap
  std::vector<std::string> set_overrides{};  // extra `--set key=value` for nimbus train
  int metrics_port = 9400;
  std::string storage = "20Gi";  // size of the run-directory volume
  std::string storage_class{};   // empty: the cluster's default (single-node plans only: an MPIJob needs
                                 // a class that provides ReadWriteMany volumes)
  bool spot = false;
};

// The manifests as Kubernetes objects in apply order (ConfigMap, PVC, Job or MPIJob).
std::vector<nlohmann::json> manifests(const Plan& plan, const Catalog& catalog, const ManifestOptions& options);

// Multi-document YAML ("---" between documents), as kubectl apply -f reads it.
std::string to_yaml(const std::vector<nlohmann::json>& documents);

}  // namespace nimbus::plan
