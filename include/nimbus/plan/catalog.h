// The planner's catalogs: GPUs, CPUs and cloud instances with their prices, read from YAML data files
// (data/catalog/*.yaml, plus the user's own with --catalog). Every figure comes with a source and the
// date it was read; prices drift, so they are data, never code.
//
//   Catalog catalog = load_catalog(default_catalog_files());
//   const GpuSpec& gpu = catalog.gpu("a100-80gb");   // case-insensitive; short names pick the common variant
//   for (const InstanceSpec& instance : catalog.instances) ...
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace nimbus::plan {

// Dense rates in TFLOPS; nullopt where the unit does not exist or no figure is published.
struct TensorRates {
  double fp32 = 0;  // CUDA cores (no tensor cores)
  std::optional<double> tf32, bf16, fp16, fp8;
};

struct GpuSpec {
  std::string name;           // "A100-SXM4-80GB"
  std::string short_name;     // "A100-80GB": what the bare name picks; empty for other variants
  std::string product_label;  // Kubernetes node label nvidia.com/gpu.product
  std::string arch;
  double compute_capability = 0;
  double memory_gb = 0;
  double memory_bandwidth_gbps = 0;
  TensorRates tflops;
  std::optional<double> matmul_efficiency;  // measured fraction of the tensor rate a large GEMM sustains
  double pcie_gbps = 0;                     // per direction
  std::optional<double> nvlink_gbps;        // bidirectional per-GPU aggregate
  double tdp_w = 0;
  std::string source, as_of;

  // Nimbus's CUDA 13 build targets compute capability 7.5 and newer (CUDA 13 dropped Volta).
  bool supported() const { return compute_capability >= 7.5; }
};

struct CpuSpec {
  std::string name;
  double fp32_gflops_per_core = 0;
  double memory_bandwidth_gbps_per_core = 0;
  double matmul_efficiency = 0;
  std::string source, as_of;
};

struct CloudSpec {
  std::string name;  // "aws", "gcp", "azure"
  double typical_spot_discount = 0;
  double preemption_notice_seconds = 0;
  std::string source, as_of;
};

// The most GPUs one catalog instance may have (8 on the largest today).
inline constexpr int kMaxGpusPerInstance = 64;

struct InstanceSpec {
  std::string cloud, name;
  std::string gpu;  // catalog GPU name; empty for CPU instances
  int gpu_count = 0;
  std::string cpu;  // catalog CPU name for CPU instances
  int vcpus = 0;
  double ram_gb = 0;
  std::string region;
  double on_demand_usd_per_hour = 0;
  std::optional<double> spot_usd_per_hour;  // observed; else the cloud's typical discount applies
  double network_gbps = 0;                  // between instances
  std::string source, as_of;
};

struct Catalog {
  std::vector<GpuSpec> gpus;
  std::vector<CpuSpec> cpus;
  std::vector<CloudSpec> clouds;
  std::vector<InstanceSpec> instances;

  // By name, case-insensitively: the full name, else the variant whose short name it is. An unknown
  // name throws NotFound listing the known ones.
  const GpuSpec& gpu(const std::string& name) const;
  const CpuSpec& cpu(const std::string& name) const;
  const CloudSpec& cloud(const std::string& name) const;
  // The GPU names a user may type: short names and full names.
  std::vector<std::string> gpu_names() const;
  // The instance's spot price: observed, else on-demand less the cloud's typical discount.
  double spot_usd_per_hour(const InstanceSpec& instance) const;
};

// The source tree's data/, or $NIMBUS_DATA_DIR when that is set.
std::string data_dir();
// data/catalog/*.yaml of data_dir().
std::vector<std::string> default_catalog_files();

// Reads the files in order into one catalog; a later entry with the same name (cloud and name for
// instances) replaces an earlier one, so user files can override prices. A missing field, a wrong type
// or a reference to an unknown GPU, CPU or cloud throws DataError naming the file, the line and the field.
Catalog load_catalog(const std::vector<std::string>& files);

}  // namespace nimbus::plan
