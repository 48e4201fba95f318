// The backend seam without a GPU: a toy device type registered by name, with a
// backend that keeps its tensors in host memory and one kernel (add on f32). A
// traced step whose ops all have kernels there runs on it; one with an op the
// toy backend lacks fails when traced, before its first step, naming the op,
// the dtype, the device and what to do.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "nimbus/device/backend.h"
#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"

namespace nimbus {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const DeviceType kToy = DeviceType::registered("toy");

// Work runs at once, in the calling thread, as on the CPU.
class ToyEvent final : public Event {
 public:
  bool query() const override { return true; }
  void synchronize() const override {}
};

class ToyStream final : public Stream {
 public:
  Device device() const override { return {kToy, 0}; }
  void synchronize() override {}
  std::shared_ptr<Event> record() override { return std::make_shared<ToyEvent>(); }
  void wait(const Event&) override {}
};

// One device whose memory is host memory from the CPU's allocator.
class ToyBackend final : public Backend {
 public:
  DeviceType type() const override { return kToy; }
  int device_count() const override { return 1; }
  std::string describe(int index) const override { return fmt::format("toy:{}: host memory, add on f32", index); }
  std::string device_name(int) const override { return "toy"; }
  Allocator& allocator(int) override { return backend(DeviceType::kCPU).allocator(0); }
  Stream& default_stream(int) override { return stream_; }
  void copy(const void* src, Device, void* dst, Device, size_t bytes, Stream&) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }

 private:
  ToyStream stream_;
};

int toy_add_runs = 0;

// Same shapes only: the toy kernel does not broadcast.
void toy_add(KernelContext& ctx) {
  ++toy_add_runs;
  const auto* a = static_cast<const float*>(ctx.inputs[0].raw_data());
  const auto* b = static_cast<const float*>(ctx.inputs[1].raw_data());
  auto* y = static_cast<float*>(ctx.outputs[0].raw_data());
  for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) y[i] = a[i] + b[i];
}

const bool kToyBackendRegistered = [] {
  register_backend(std::make_unique<ToyBackend>());
  return register_kernel("add", {.name = "toy", .device = kToy, .dtypes = {DType::kF32}, .fn = toy_add});
}();

std::vector<TensorSpec> specs(std::initializer_list<TensorSpec> list) { return list; }

TEST(BackendSeam, ARegisteredDeviceTypeParsesAndNamesItself) {
  EXPECT_EQ(DeviceType::registered("toy"), kToy) << "registering a name again gives the same type";
  EXPECT_EQ(DeviceType::find("toy"), kToy);
  EXPECT_EQ(kToy.name(), "toy");
  EXPECT_NE(kToy, DeviceType::kCPU);
  EXPECT_EQ(Device::parse("toy:0"), (Device{kToy, 0}));
  EXPECT_EQ((Device{kToy, 0}).to_string(), "toy:0");
  EXPECT_FALSE(DeviceType::find("no_such_device").has_value());
  EXPECT_TRUE(has_backend(kToy));
}

TEST(BackendSeam, SupportsAnswersFromTheRegisteredKernels) {
  const OpSchema& add = OpRegistry::global().get("add");
  const OpSchema& mul = OpRegistry::global().get("mul");
  const auto f32 = specs({{Shape{3}, DType::kF32}, {Shape{3}, DType::kF32}});
  const auto f64 = specs({{Shape{3}, DType::kF64}, {Shape{3}, DType::kF64}});
  EXPECT_TRUE(supports(add, kToy, f32, std::span(f32).first(1)));
  EXPECT_FALSE(supports(add, kToy, f64, std::span(f64).first(1)));
  EXPECT_FALSE(supports(mul, kToy, f32, std::span(f32).first(1)));
  EXPECT_TRUE(supports(mul, DeviceType::kCPU, f32, std::span(f32).first(1)));
}

TEST(BackendSeam, AStepWhoseOpsAllHaveKernelsRunsOnTheToyDevice) {
  const Device toy{kToy, 0};
  Function step = function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{add(in[0], in[1])}; },
                           {.name = "toy_step", .graph = true, .jit = false});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).to(toy);
  const Tensor y = Tensor::from_vector<float>({10, 20, 30}, {3}).to(toy);
  const int runs = toy_add_runs;
  const Tensor sum = step({x, y})[0];
  EXPECT_EQ(sum.device(), toy);
  EXPECT_EQ(sum.to_vector<float>(), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(toy_add_runs, runs + 1);
}

TEST(BackendSeam, AnOpWithoutAKernelFailsWhenTracedBeforeTheFirstStep) {
  const Device toy{kToy, 0};
  Function step =
      function([](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(add(in[0], in[1]), in[1])}; },
               {.name = "toy_step", .graph = true, .jit = false});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}).to(toy);
  const int runs = toy_add_runs;
  try {
    step({x, x});
    FAIL() << "mul has no toy kernel: the step must not run";
  } catch (const Unimplemented& e) {
    EXPECT_THAT(e.message(), AllOf(HasSubstr("mul"), HasSubstr("f32"), HasSubstr("toy:0")));
    EXPECT_THAT(e.hint(), AllOf(HasSubstr("the toy backend has no kernel for mul"), HasSubstr("run on cpu")));
  }
  EXPECT_EQ(toy_add_runs, runs) << "the add before the mul ran: the check came after the step started";
}

}  // namespace
}  // namespace nimbus
