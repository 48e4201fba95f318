// The cross-backend harness: every op case of tests/core whose op has a CUDA
// kernel runs on the GPU and on the CPU reference with the same seeded random
// inputs. The GPU's outputs are poisoned (all bits set: NaN in every float
// dtype) before the kernel runs, so an element it never writes fails; NaN/Inf
// parity is checked first, then the normalized error; a mostly-zero
// reference output fails the case (it would not exercise the op).
// Tolerance: the case's own in f32 (1e-5 unless it says otherwise); 3e-4 for the
// matmuls with TF32 allowed; 1e-2 in bf16 and f16, for the ops with 16-bit CUDA kernels.
// Ops that write into their inputs (assign, adam_update) are compared by what they wrote.
// Without a GPU every case skips, saying why.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <set>

#include "nimbus/base/error.h"
#include "nimbus/device/backend.h"
#include "nimbus/device/runtime.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"
#include "op_harness.h"

namespace nimbus::testing {
namespace {

std::string why_no_gpu() {
  if (has_backend(DeviceType::kCUDA)) return {};
  try {
    backend(DeviceType::kCUDA);
  } catch (const Error& e) {
    return e.message();
  }
  return "unknown";
}

// The dtype the case's call dispatches on with its floating inputs made in `floating`: its dispatch
// input's (one_hot's integer ids), or for ops without inputs (fill) the dtype it makes.
DType dispatch_dtype(const OpSchema& op, const OpCase& c, DType floating) {
  if (op.dispatch_input >= 0 && static_cast<size_t>(op.dispatch_input) < c.inputs.size()) {
    const DType dtype = c.inputs[static_cast<size_t>(op.dispatch_input)].dtype;
    return is_floating(dtype) ? floating : dtype;
  }
  return c.attrs.has("dtype") ? c.attrs.get_dtype("dtype") : floating;
}

// The cases whose op has a CUDA kernel for the call with floating inputs in `dtype`; for bf16 and f16,
// only the calls that compute in that dtype (an integer-dispatched op runs once, in the f32 pass).
std::vector<OpCase> cases_with_cuda_kernels(DType dtype) {
  std::vector<OpCase> result;
  for (const OpCase& c : op_cases()) {
    const OpSchema* op = OpRegistry::global().find(c.op);
    if (op == nullptr || op->has_side_effects) continue;
    const DType dispatch = dispatch_dtype(*op, c, dtype);
    if (dtype != DType::kF32 && dispatch != dtype) continue;
    if (!op->kernels(DeviceType::kCUDA, dispatch).empty()) result.push_back(c);
  }
  return result;
}

// Runs the case on the GPU and through the CPU's reference kernels, floating inputs in `dtype`.
void expect_cuda_matches_reference(const OpCase& c, DType dtype, double tolerance) {
  const OpSchema& op = OpRegistry::global().get(c.op);
  const std::vector<Tensor> inputs = make_inputs(c, dtype);
  std::vector<Tensor> reference;
  {
    ReferenceKernelsScope scope;
    reference = run_case(c, inputs);
  }
  std::vector<Tensor> device_inputs;
  std::vector<TensorSpec> specs;
  for (const Tensor& input : inputs) {
    device_inputs.push_back(input.to(Device::cuda()));
    specs.push_back({input.shape(), input.dtype()});
  }
  std::vector<Tensor> outputs;
  for (const TensorSpec& spec : infer_outputs(op, specs, c.attrs)) {
    outputs.push_back(Tensor::empty(spec.shape, spec.dtype, Device::cuda()));
    ASSERT_EQ(cudaMemset(outputs.back().raw_data(), 0xff, outputs.back().nbytes()), cudaSuccess);
  }
  try {
    run_kernel(op, c.attrs, device_inputs, outputs);
  } catch (const Unimplemented& e) {
    // The op has CUDA kernels, but none takes this call (a layout or broadcast they turn away).
    GTEST_SKIP() << "no CUDA kernel for this case: " << e.message();
  }
  ASSERT_EQ(outputs.size(), reference.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor host = outputs[i].to(Device::cpu());
    const Comparison result = compare_tensors(host, reference[i], tolerance);
    EXPECT_TRUE(result.ok) << c.op << " output " << i << ": " << result.message;
    if (!c.allow_mostly_zero && reference[i].numel() >= 8 && reference[i].dtype() != DType::kBool) {
      EXPECT_LT(zero_fraction(reference[i]), 0.9) << c.op << " output " << i << " is mostly zeros";
    }
  }
}

class CudaOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOp, MatchesTheCpuReference) {
  // Comparing against the CPU needs a GPU to run the CUDA kernels; without one the case says why.
  if (const std::string reason = why_no_gpu(); !reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  expect_cuda_matches_reference(GetParam(), DType::kF32, GetParam().forward_tolerance);
}

// bf16 and f16: both sides round to the 16-bit type, so the tolerance is the 1e-2.
struct HalfCase {
  OpCase op_case;
  DType dtype;
};
void PrintTo(const HalfCase& c, std::ostream* os) { *os << c.op_case.name << "_" << dtype_name(c.dtype); }

std::vector<HalfCase> half_cases() {
  std::vector<HalfCase> result;
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    for (OpCase& c : cases_with_cuda_kernels(dtype)) result.push_back({std::move(c), dtype});
  }
  return result;
}

class CudaOpHalf : public ::testing::TestWithParam<HalfCase> {};

TEST_P(CudaOpHalf, MatchesTheCpuReference) {
  // Comparing against the CPU needs a GPU to run the CUDA kernels; without one the case says why.
  if (const std::string reason = why_no_gpu(); !reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  expect_cuda_matches_reference(GetParam().op_case, GetParam().dtype, 1e-2);
}

// f64: the elementwise ops' generated kernels in double (the optimizer's step scalars), and the other
// kernels that take it, at the case's own tolerance.
class CudaOpF64 : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpF64, MatchesTheCpuReference) {
  // Comparing against the CPU needs a GPU to run the CUDA kernels; without one the case says why.
  if (const std::string reason = why_no_gpu(); !reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  expect_cuda_matches_reference(GetParam(), DType::kF64, GetParam().forward_tolerance);
}

// TF32 (runtime.allow_tf32): f32 operands rounded to a 10-bit mantissa inside the matmul, the 3e-4.
class CudaOpTf32 : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpTf32, MatchesTheCpuReference) {
  // Comparing against the CPU needs a GPU to run the CUDA kernels; without one the case says why.
  if (const std::string reason = why_no_gpu(); !reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const RuntimeOptions before = runtime_options();
  RuntimeOptions tf32 = before;
  tf32.allow_tf32 = true;
  configure_runtime(tf32);
  expect_cuda_matches_reference(GetParam(), DType::kF32, std::max(GetParam().forward_tolerance, 3e-4));
  configure_runtime(before);
}

std::vector<OpCase> matmul_cases() {
  std::vector<OpCase> result;
  for (const OpCase& c : cases_with_cuda_kernels(DType::kF32)) {
    if (c.op == "matmul" || c.op == "fused_matmul") result.push_back(c);
  }
  return result;
}

// Ops that write into their leading inputs (assign, adam_update) and have an f32 CUDA kernel.
std::vector<OpCase> side_effect_cases_with_cuda_kernels() {
  std::vector<OpCase> result;
  for (const OpCase& c : op_cases()) {
    const OpSchema* op = OpRegistry::global().find(c.op);
    if (op != nullptr && op->has_side_effects && !op->kernels(DeviceType::kCUDA, DType::kF32).empty()) {
      result.push_back(c);
    }
  }
  return result;
}

// The same inputs written on the GPU and by the CPU reference: the written tensors within the case's
// tolerance (every element changes, so one the kernel skips fails), the others unchanged.
class CudaOpSideEffects : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpSideEffects, WritesWhatTheCpuReferenceWrites) {
  // Comparing against the CPU needs a GPU to run the CUDA kernels; without one the case says why.
  if (const std::string reason = why_no_gpu(); !reason.empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const OpCase& c = GetParam();
  const OpSchema& op = OpRegistry::global().get(c.op);
  const size_t written = op.written_inputs(c.attrs);
  const std::vector<Tensor> fresh = make_inputs(c, DType::kF32);
  const std::vector<Tensor> reference = make_inputs(c, DType::kF32);
  {
    ReferenceKernelsScope scope;
    run_case(c, reference);
  }
  std::vector<Tensor> device_inputs;
  for (const Tensor& input : fresh) device_inputs.push_back(input.to(Device::cuda()));
  run_kernel(op, c.attrs, device_inputs, {});
  for (size_t i = 0; i < device_inputs.size(); ++i) {
    const Tensor host = device_inputs[i].to(Device::cpu());
    if (i >= written) {
      EXPECT_TRUE(compare_tensors(host, fresh[i], 0).ok) << c.op << " modified input " << i;
      continue;
    }
    const Comparison result = compare_tensors(host, reference[i], c.forward_tolerance);
    EXPECT_TRUE(result.ok) << c.op << " input " << i << ": " << result.message;
    if (host.numel() > 0) {
      EXPECT_FALSE(compare_tensors(host, fresh[i], 0).ok) << c.op << " did not write input " << i;
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Cases, CudaOp, ::testing::ValuesIn(cases_with_cuda_kernels(DType::kF32)), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaOpF64, ::testing::ValuesIn(cases_with_cuda_kernels(DType::kF64)), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaOpTf32, ::testing::ValuesIn(matmul_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaOpSideEffects, ::testing::ValuesIn(side_effect_cases_with_cuda_kernels()),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Cases, CudaOpHalf, ::testing::ValuesIn(half_cases()),
                         [](const ::testing::TestParamInfo<HalfCase>& info) {
                           return info.param.op_case.name + "_" + std::string(dtype_name(info.param.dtype));
                         });

TEST(CudaHarness, CoversTheElementwiseOps) {
  // Runs without a GPU: the harness has cases to run once one is present.
  EXPECT_GE(cases_with_cuda_kernels(DType::kF32).size(), 30u);
  EXPECT_GE(cases_with_cuda_kernels(DType::kBF16).size(), 20u);  // matmul, fused_matmul, the elementwise ops
  EXPECT_GE(cases_with_cuda_kernels(DType::kF16).size(), 20u);
  EXPECT_GE(cases_with_cuda_kernels(DType::kF64).size(), 20u);
}

TEST(CudaHarness, CoversTheLayoutIndexNormAndDropoutKernels) {
  std::set<std::string> covered;
  for (const OpCase& c : cases_with_cuda_kernels(DType::kF32)) covered.insert(c.op);
  for (const char* op : {"transpose", "slice", "pad", "concat", "gather", "scatter_add", "argmax", "layer_norm",
                         "layer_norm_backward", "dropout_mask", "cast"}) {
    EXPECT_TRUE(covered.count(op)) << op;
  }
}

TEST(CudaHarness, CoversFusedAttentionInEveryFloatingTypeItTakes) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::set<std::string> covered;
    for (const OpCase& c : cases_with_cuda_kernels(dtype)) covered.insert(c.op);
    EXPECT_TRUE(covered.count("scaled_dot_product_attention")) << dtype_name(dtype);
    EXPECT_TRUE(covered.count("scaled_dot_product_attention_backward")) << dtype_name(dtype);
  }
}

TEST(CudaHarness, CoversTheOpsThatWriteTheirInputs) {
  std::set<std::string> covered;
  for (const OpCase& c : side_effect_cases_with_cuda_kernels()) covered.insert(c.op);
  EXPECT_TRUE(covered.count("assign"));
  EXPECT_TRUE(covered.count("adam_update"));
}

TEST(CudaHarness, CoversTheDataMovementOpsOfTheTrainingSteps) {
  // fill, one_hot and reshape run in every traced training step (tests/cuda/training_step_ops_test.cc);
  // assign and adam_update write their inputs: CudaOpSideEffects runs them.
  std::set<std::string> covered;
  for (const OpCase& c : cases_with_cuda_kernels(DType::kF32)) covered.insert(c.op);
  for (const char* op : {"fill", "one_hot", "reshape", "conv2d", "conv2d_backward_input", "conv2d_backward_filter",
                         "fused_conv2d", "max_pool2d", "max_pool2d_backward"}) {
    EXPECT_TRUE(covered.count(op)) << op;
  }
}

TEST(CudaHarness, CoversTheKernelsOfTheMixedPrecisionSteps) {
  // The transformer block's and layer CNN's steps under mixed_bfloat16 (tests/support/policy_step_models.h):
  // bias gradients summed in bf16, the CNN's convolutions fused with a bf16 bias, and broadcast_to in the mean's
  // gradient.
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    std::set<std::string> covered;
    for (const OpCase& c : cases_with_cuda_kernels(dtype)) covered.insert(c.op);
    for (const char* op : {"sum", "mean", "reduce_max", "fused_conv2d", "matmul", "fused_matmul"}) {
      EXPECT_TRUE(covered.count(op)) << op << " in " << dtype_name(dtype);
    }
  }
  std::set<std::string> covered;
  for (const OpCase& c : cases_with_cuda_kernels(DType::kF32)) covered.insert(c.op);
  EXPECT_TRUE(covered.count("broadcast_to"));
}

}  // namespace
}  // namespace nimbus::testing
