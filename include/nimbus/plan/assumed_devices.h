// `--assume-devices COUNTxGPU` (nimbus train --dry-run): the GPUs a dry run checks a config against, read
// from the planner's catalog (catalog.h) by name, e.g. "4xA100-80GB", "1×H100" (x or ×; names as
// Catalog::gpu takes them); NODESxCOUNTxGPU ("2x8xH100") for several nodes of COUNT each, as a plan on
// several nodes runs (multi_worker_mirrored, one process per GPU).
#pragma once

#include <string>

#include "nimbus/plan/catalog.h"
#include "nimbus/train/assumed_devices.h"

namespace nimbus::plan {

// InvalidArgument for text that is not [NODESx]COUNTxGPU or a count outside 1 to kMaxGpusPerInstance; NotFound
// for an unknown GPU, naming it and the catalog's close names; Unavailable for a GPU that Nimbus's CUDA
// build does not target (GpuSpec::supported).
train::AssumedDevices assumed_devices(const Catalog& catalog, const std::string& text);

// "4xA100-80GB": the --assume-devices text of `count` of the catalog GPU `gpu` (its short name where it has one).
std::string assumed_devices_text(int count, const GpuSpec& gpu);

}  // namespace nimbus::plan
