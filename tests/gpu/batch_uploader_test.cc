// Double-buffered uploads of input batches: each upload arrives intact on the
// device while the previous batch's tensor still holds its own values.
#include "src/device/cuda/batch_uploader.h"

#include <gtest/gtest.h>

#include "nimbus/device/backend.h"
#include "nimbus/nimbus.h"

namespace nimbus::cuda {
namespace {

TEST(BatchUploader, BatchesArriveIntactAndTheLastTwoStayValid) {
  // Pinned buffers and device copies need a GPU; the `gpu` label runs this where one is lent.
  if (!has_backend(DeviceType::kCUDA)) GTEST_SKIP() << "no CUDA device: the uploader copies to a GPU";
  BatchUploader uploader(0);
  std::vector<Tensor> host, device;
  for (int i = 0; i < 5; ++i) {
    host.push_back(random_normal({64, 784}));
    device.push_back(uploader.upload(host.back()));
    if (i >= 1) {  // the previous batch is still valid: its buffer is reused only by the next upload
      EXPECT_EQ(device[i - 1].to(Device::cpu()).to_vector<float>(), host[i - 1].to_vector<float>());
    }
    EXPECT_EQ(device[i].to(Device::cpu()).to_vector<float>(), host[i].to_vector<float>());
  }
}

}  // namespace
}  // namespace nimbus::cuda
