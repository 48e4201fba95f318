// What the Nimbus build inside the container image can run (deploy/image.yaml, kept in step with
// deploy/Dockerfile by a test). Plans are made on laptops, and in the tests on CPU-only builds, for
// clouds: the image's capabilities cannot come from the local binary or driver, so they are a record.
//
//   cuda: true                 # the CUDA backend is built
//   cuda_architectures: [80, 86, 89, 90]
//   cudnn: true
//   nccl: true                 # libnccl2, which the build loads at run time: replicas on several GPUs
//   mpi: true                  # multi_worker_mirrored across processes
//
// The planner proposes only GPUs whose compute capability (8.6 as 86) is among cuda_architectures, and
// marks what needs a capability the image lacks (planner.h: Plan::needs).
#pragma once

#include <string>
#include <vector>

namespace nimbus::plan {

struct ImageCapabilities {
  bool cuda = false;
  std::vector<int> cuda_architectures;  // compute capabilities times ten: 80, 86, ...
  bool cudnn = false;
  bool nccl = false;
  bool mpi = false;
  std::string source;  // the file read

  // Whether the image's build has machine code for a GPU of this compute capability (8.6).
  bool runs_on(double compute_capability) const;
};

// Reads the file; a missing key, a wrong type or an unknown key is a DataError naming the file, line and key.
ImageCapabilities load_image_capabilities(const std::string& path);

// The file nimbus plan and nimbus k8s read without --image-capabilities: deploy/image.yaml in the
// config's folder or the nearest folder above it that has one, else the same from the working
// directory, else the source tree's that nimbus was built from. NotFound when there is none.
std::string default_image_capabilities_path(const std::string& config_path);

}  // namespace nimbus::plan
