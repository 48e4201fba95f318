// Elementwise ops on CUDA: fused_elementwise nodes from graph mode, and every
// single elementwise op the code generator knows as a one-instruction program,
// all compiled at run time by NVRTC (kernel_cache.h). No .cu file to build, and
// the fused and unfused paths share one formula per op.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "nimbus/ops/for_kernels/elementwise_defs.h"
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/kernels/cuda/fused_codegen.h"
#include "src/kernels/cuda/kernel_cache.h"

namespace nimbus::cuda {
namespace {

constexpr int kThreads = 256;

struct CachedKernel {
  std::shared_ptr<const ExpressionProgram> program;  // kept alive with its kernel
  FusedKernelSource source;
};

// Generating the source costs more than a launch, so kernels are kept by what
// determines the source: the program's text and the inputs' dtypes and feeds.
const FusedKernelSource& kernel_for(const std::string& key, const std::function<CachedKernel()>& make) {
  static std::mutex mutex;
  static std::map<std::string, CachedKernel> kernels;
  std::lock_guard lock(mutex);
  auto found = kernels.find(key);
  if (found == kernels.end()) found = kernels.emplace(key, make()).first;
  return found->second.source;
}

std::string feed_key(std::span<const TensorSpec> inputs, const Shape& shape) {
  std::string key;
  for (const TensorSpec& input : inputs) {
    key += fmt::format("|{}:{}", dtype_name(input.dtype), static_cast<int>(feed_kind(input.shape, shape)));
  }
  return key;
}

void launch(KernelContext& ctx, const FusedKernelSource& source, std::span<const TensorSpec> inputs,
            const Shape& shape) {
  const int64_t n = shape.numel();
  if (n == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  const int device = stream.device().index;
  const cudaKernel_t function = KernelCache::global().load(source, device);
  std::vector<const void*> input_data;
  for (const Tensor& input : ctx.inputs) input_data.push_back(input.raw_data());
  std::vector<void*> output_data;
  for (Tensor& output : ctx.outputs) output_data.push_back(output.raw_data());
  FusedArgs args = fused_args(inputs, input_data, output_data, shape);
  // Enough blocks to fill every SM many times over; the grid-stride loop covers the rest.
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{multiprocessor_count(device)} * 32);
  void* params[] = {&args};
  NIMBUS_CUDA_CHECK(cudaSetDevice(device));
  NIMBUS_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(function), dim3(static_cast<unsigned>(blocks)),
                                     dim3(kThreads), params, 0, stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH(source.name.c_str(), stream);
}

std::vector<TensorSpec> specs_of(std::span<const Tensor> tensors) {
  std::vector<TensorSpec> specs;
  for (const Tensor& t : tensors) specs.push_back({t.shape(), t.dtype()});
  return specs;
}

void fused_kernel(KernelContext& ctx) {
  const AttrObjectPtr& object = ctx.attrs.get_object("program");
  const auto program = std::dynamic_pointer_cast<const ExpressionProgram>(object);
  const Shape& shape = ctx.attrs.get_shape("shape");
  const std::vector<TensorSpec> inputs = specs_of(ctx.inputs);
  const FusedKernelSource& source = kernel_for(program->to_string() + feed_key(inputs, shape), [&] {
    return CachedKernel{program, generate_fused_kernel(*program, inputs, shape)};
  });
  launch(ctx, source, inputs, shape);
}

// One op as a one-instruction program reading each input once.
void single_op_kernel(KernelContext& ctx) {
  const Shape& shape = ctx.outputs[0].shape();
  const std::vector<TensorSpec> inputs = specs_of(ctx.inputs);
  const std::string key = fmt::format("{}({}) -> {}{}", ctx.op.name, ctx.attrs.to_string(),
                                      dtype_name(ctx.outputs[0].dtype()), feed_key(inputs, shape));
  const FusedKernelSource& source = kernel_for(key, [&] {
    return CachedKernel{nullptr, single_op_source(ctx.op, ctx.attrs, inputs, ctx.outputs[0].dtype(), shape)};
  });
  launch(ctx, source, inputs, shape);
}

// The dtypes each op's CUDA kernel takes: those of its CPU reference kernel (src/ops), all of which the
// generated code has a type for. Listed here rather than read from the registry, whose CPU entries
// may register after these (static initializers run in no fixed order across files).
std::vector<DType> cuda_dtypes(const std::string& op) {
  using internal::kFloatingDTypes, internal::kNumericDTypes;
  static const std::set<std::string, std::less<>> all = {"cast",    "identity",     "stop_gradient", "where",
                                                         "equal",   "not_equal",    "less",          "less_equal",
                                                         "greater", "greater_equal"};
  static const std::set<std::string, std::less<>> numeric = {"add", "sub", "mul", "maximum", "minimum", "clip"};
  static const std::set<std::string, std::less<>> signed_numeric = {"neg", "abs", "sign", "square"};
  if (op == "logical_and" || op == "logical_or" || op == "logical_not") return {DType::kBool};
  if (all.count(op)) return {std::begin(kAllDTypes), std::end(kAllDTypes)};
  if (numeric.count(op)) return internal::dtype_list(kNumericDTypes);
  if (signed_numeric.count(op)) {
    return {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
  }
  return internal::dtype_list(kFloatingDTypes);
}

const bool kRegistered = [] {
  // Graph mode fuses f32, f16, bf16 and bool ops; the generated code takes every dtype.
  register_kernel("fused_elementwise", {.name = "nvrtc",
                                        .device = DeviceType::kCUDA,
                                        .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
                                        .priority = 1,
                                        .fn = fused_kernel});
  for (const std::string& op : ops_with_cuda_expressions()) {
    register_kernel(op, {.name = "nvrtc",
                         .device = DeviceType::kCUDA,
                         .dtypes = cuda_dtypes(op),
                         .priority = 1,
                         .fn = single_op_kernel});
  }
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
