// JIT fusion on CUDA, without a GPU: every fused_elementwise program that
// graph mode makes of the MLP, CNN and residual-block training steps becomes
// CUDA C that NVRTC compiles, to machine code for sm_80 and to PTX for
// compute_75; the kernel cache serves a second request from memory and a
// second process (a fresh cache on the same folder) from disk, compiling nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "nimbus/graph/function.h"
#include "nimbus/nimbus.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cuda/fused_codegen.h"
#include "src/kernels/cuda/kernel_cache.h"
#include "support/step_models.h"

namespace nimbus::cuda {
namespace {

using ::testing::HasSubstr;

// The fused nodes of a model's optimized training step, as kernels to generate.
std::vector<FusedKernelSource> fused_kernels_of(std::unique_ptr<testing::Model> model, std::vector<Tensor> inputs) {
  testing::Model* m = model.get();
  Function step = function([m](const std::vector<Tensor>& in) { return m->step(in); },
                           {.name = "train_step", .graph = true, .jit = true});
  const graph::Graph& g = step.traced_for(inputs).optimized;
  std::vector<FusedKernelSource> kernels;
  for (const graph::Node& node : g.nodes()) {
    if (node.removed || node.kind != graph::NodeKind::kOp || node.op != &fused_elementwise_op()) continue;
    const auto program = std::dynamic_pointer_cast<const ExpressionProgram>(node.attrs.get_object("program"));
    std::vector<TensorSpec> specs;
    for (const graph::ValueRef& input : node.inputs) specs.push_back(g.spec(input));
    kernels.push_back(generate_fused_kernel(*program, specs, node.attrs.get_shape("shape")));
  }
  return kernels;
}

std::vector<FusedKernelSource> training_step_kernels() {
  Generator gen(3);
  const Tensor labels = cast(random_uniform({16}, 0, 10, DType::kF64, Device::cpu(), &gen), DType::kI64);
  const Tensor step_size = testing::Adam::step_size(1);
  std::vector<FusedKernelSource> kernels =
      fused_kernels_of(testing::make_mlp(), {random_uniform({16, 784}, 0, 1), labels, step_size});
  // bench_gpu's MLP (784-512-512-10).
  for (auto& k :
       fused_kernels_of(testing::make_mlp(Device::cpu(), 512), {random_uniform({16, 784}, 0, 1), labels, step_size})) {
    kernels.push_back(std::move(k));
  }
  for (auto& k : fused_kernels_of(testing::make_cnn(), {random_uniform({16, 28, 28, 1}, 0, 1), labels, step_size})) {
    kernels.push_back(std::move(k));
  }
  for (auto& k :
       fused_kernels_of(testing::make_block(32), {random_normal({8, 32}), random_normal({8, 32}), step_size})) {
    kernels.push_back(std::move(k));
  }
  return kernels;
}

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("nimbus_kernels_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                "_" + std::to_string(getpid()));
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(CudaFusion, EveryFusedProgramOfTheTrainingStepsCompilesWithNvrtc) {
  const std::vector<FusedKernelSource> kernels = training_step_kernels();
  // Adam's updates alone give each parameter fused nodes; fewer means fusion did not run.
  ASSERT_GE(kernels.size(), 10u);
  TempDir dir;
  KernelCache cache(dir.path);
  for (const FusedKernelSource& kernel : kernels) {
    const std::string cubin = cache.image(kernel, "sm_80");
    ASSERT_GE(cubin.size(), 4u) << kernel.source;
    EXPECT_EQ(cubin.substr(0, 4),
              "\x7f"
              "ELF")
        << "not a cubin: " << kernel.name;
    const std::string ptx = cache.image(kernel, "compute_75");
    EXPECT_THAT(ptx, HasSubstr(".entry " + kernel.name)) << kernel.source;
    EXPECT_THAT(ptx, HasSubstr(".target sm_75"));
  }
  // Programs repeat across parameters: the cache compiled each distinct one once per architecture.
  std::set<uint64_t> distinct;
  for (const FusedKernelSource& kernel : kernels) distinct.insert(kernel.hash);
  EXPECT_EQ(cache.stats().compiles, 2 * distinct.size());
  EXPECT_EQ(cache.stats().memory_hits, 2 * (kernels.size() - distinct.size()));

  // A new process finds every image on disk.
  KernelCache second_run(dir.path);
  for (const FusedKernelSource& kernel : kernels) second_run.image(kernel, "sm_80");
  EXPECT_EQ(second_run.stats().compiles, 0u);
  EXPECT_EQ(second_run.stats().disk_hits, distinct.size());
}

TEST(CudaFusion, TheSourceReadsEachInputByItsBroadcast) {
  auto program = std::make_shared<ExpressionProgram>();
  const OpSchema& add = OpRegistry::global().get("add");
  const OpSchema& mul = OpRegistry::global().get("mul");
  const OpSchema& relu = OpRegistry::global().get("relu");
  program->instructions = {{.op = &add, .operands = {{true, 0}, {true, 1}}},
                           {.op = &mul, .operands = {{false, 0}, {true, 2}}},
                           {.op = &mul, .operands = {{false, 1}, {true, 3}}},
                           {.op = &relu, .operands = {{false, 2}}}};
  program->outputs = {3, 0};
  const Shape shape{4, 3};
  const std::vector<TensorSpec> inputs = {{shape}, {Shape{3}}, {Shape{}}, {Shape{4, 1}}};
  const FusedKernelSource kernel = generate_fused_kernel(*program, inputs, shape);
  EXPECT_THAT(kernel.source, HasSubstr("const float i0 = nimbus_load(static_cast<const float*>(a.inputs[0])[i]);"));
  EXPECT_THAT(kernel.source, HasSubstr("[i % a.periods[1]]"));
  EXPECT_THAT(kernel.source, HasSubstr("static_cast<const float*>(a.inputs[2])[0]"));
  EXPECT_THAT(kernel.source, HasSubstr("[nimbus_offset(i, a, 3)]"));
  EXPECT_THAT(kernel.source, HasSubstr("const float t3 = nimbus_relu(t2);"));
  EXPECT_THAT(kernel.source, HasSubstr("static_cast<float*>(a.outputs[1])[i] = t0;"));
  EXPECT_FALSE(nvrtc_compile(kernel.source, kernel.name, "sm_90").empty());

  // The same program over other broadcasts is another kernel; the same one is the same name.
  const std::vector<TensorSpec> all_full = {{shape}, {shape}, {shape}, {shape}};
  EXPECT_NE(generate_fused_kernel(*program, all_full, shape).name, kernel.name);
  EXPECT_EQ(generate_fused_kernel(*program, inputs, shape).name, kernel.name);

  // The argument block the host fills: a bias repeats every 3 elements, a column broadcasts down rows.
  const std::vector<const void*> in_data(4, nullptr);
  const std::vector<void*> out_data(2, nullptr);
  const FusedArgs args = fused_args(inputs, in_data, out_data, shape);
  EXPECT_EQ(args.n, 12);
  EXPECT_EQ(args.periods[1], 3);
  EXPECT_EQ(args.strides[3][0], 1);
  EXPECT_EQ(args.strides[3][1], 0);
}

// Every op the generator knows, for every dtype its CUDA kernel is registered for, compiles: one
// program per dtype with an instruction per op (and a cast to every dtype). Single ops on CUDA run
// through the same generator, so this covers them too; infer_outputs checks each dtype is one the
// op's schema takes.
TEST(CudaFusion, EveryOpWithACudaExpressionCompilesInEachOfItsDtypes) {
  const Shape shape{8};
  for (const DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<TensorSpec> inputs = {{shape, dtype}, {shape, dtype}, {shape, dtype}, {shape, DType::kBool}};
    auto program = std::make_shared<ExpressionProgram>();
    auto add_instruction = [&](const OpSchema& op, Attrs attrs) {
      ExpressionInstruction instruction{.op = &op, .attrs = std::move(attrs)};
      const bool logical = op.name.starts_with("logical_");
      for (int i = 0; i < op.num_inputs; ++i) instruction.operands.push_back({true, logical ? 3 : i});
      if (op.name == "where") instruction.operands = {{true, 3}, {true, 0}, {true, 1}};
      std::vector<TensorSpec> specs;
      for (const ExpressionOperand& operand : instruction.operands)
        specs.push_back(inputs[static_cast<size_t>(operand.index)]);
      instruction.dtype = infer_outputs(op, specs, instruction.attrs).at(0).dtype;
      program->instructions.push_back(std::move(instruction));
    };
    for (const std::string& name : ops_with_cuda_expressions()) {
      const OpSchema& op = OpRegistry::global().get(name);
      const DType dispatch = name == "where" ? dtype : name.starts_with("logical_") ? DType::kBool : dtype;
      if (op.kernels(DeviceType::kCUDA, dispatch).empty()) continue;
      if (name == "cast") {
        for (const DType to : kAllDTypes) add_instruction(op, Attrs{{"dtype", to}});
        continue;
      }
      Attrs attrs;
      if (name == "clip") attrs = Attrs{{"low", -1.0}, {"high", 1.0}};
      if (name == "gelu") attrs = Attrs{{"approximate", std::string("tanh")}};
      if (name == "gelu_backward") attrs = Attrs{{"approximate", std::string("none")}};
      add_instruction(op, std::move(attrs));
    }
    for (int k = 0; k < kMaxFusedOutputs; ++k)
      program->outputs.push_back(static_cast<int>(program->instructions.size()) - 1 - k);
    ASSERT_GE(program->instructions.size(), dtype == DType::kBool ? 10u : 14u);
    const FusedKernelSource kernel = generate_fused_kernel(*program, inputs, shape);
    EXPECT_THAT(nvrtc_compile(kernel.source, kernel.name, "compute_75"), HasSubstr(".entry " + kernel.name));
  }
}

TEST(CudaFusion, AnOpWithoutAnExpressionIsANamedError) {
  auto program = std::make_shared<ExpressionProgram>();
  program->instructions = {{.op = &OpRegistry::global().get("softmax"), .operands = {{true, 0}}}};
  program->outputs = {0};
  const std::vector<TensorSpec> inputs = {{Shape{2}}};
  EXPECT_THAT([&] { generate_fused_kernel(*program, inputs, Shape{2}); },
              ::testing::ThrowsMessage<Unimplemented>(HasSubstr("no CUDA expression for op 'softmax'")));
}

TEST(CudaFusion, NvrtcKnowsTheDefaultArchitectures) {
  const std::vector<std::string> archs = nvrtc_architectures();
  for (const char* arch : {"sm_75", "sm_80", "sm_90"}) EXPECT_THAT(archs, ::testing::Contains(arch));
}

}  // namespace
}  // namespace nimbus::cuda
