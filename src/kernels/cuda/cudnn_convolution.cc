// conv2d, conv2d_backward_input, conv2d_backward_filter and fused_conv2d on
// CUDA through cuDNN's convolution API (cudnnConvolutionForward /
// BackwardData / BackwardFilter, cudnnConvolutionBiasActivationForward), in
// f32, bf16 and f16 (the 16-bit types on Tensor Cores, accumulating in f32;
// a 16-bit fused_conv2d adds its bias and ReLU in a pass of our own).
//
// - Layouts: NHWC (the Tensor Cores' layout) and NCHW as the op says. Our NHWC
//   filter is TF's (KH, KW, C / groups, F); cuDNN's is (F, KH, KW, C / groups),
//   so the filter is transposed into scratch memory first (and a filter
//   gradient back), as TensorFlow does; filters are small next to images.
// - Algorithms: cuDNN's heuristics (cudnnGet*Algorithm_v7) once per problem
//   (shapes, dtype, layout, TF32 switch) and device, cached for the process;
//   the first result that runs and fits kMaxWorkspace; f32 without TF32 keeps
//   to FMA math and algorithms without FFT or Winograd transforms, so it
//   matches the CPU within 1e-5.
// - Workspace and scratch come from the device's BFC allocator.
// - Cases cuDNN cannot express (asymmetric "same" padding, an empty batch)
//   or has no algorithm for are turned away by supports(), so the direct
//   kernels of window_ops.cc run (f32).
#include <fmt/format.h>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nimbus/base/error.h"
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/for_kernels/window_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/kernels/cudnn_glue_kernels.h"
#include "src/device/cuda/kernels/kernels.h"
#include "src/device/cuda/lazy_libraries.h"
#include "src/kernels/cuda/cudnn_handle.h"
#include "src/kernels/cuda/cudnn_problem.h"
#include "src/kernels/cuda/tf32.h"

namespace nimbus::cuda {
namespace {

using internal::Conv2dGeometry;

constexpr size_t kMaxWorkspace = size_t{512} << 20;

enum class Direction { kForward, kBackwardData, kBackwardFilter };

struct ConvolutionDescriptor : Descriptor<cudnnConvolutionDescriptor_t, &CudnnApi::cudnnCreateConvolutionDescriptor,
                                          &CudnnApi::cudnnDestroyConvolutionDescriptor> {
  explicit ConvolutionDescriptor(const ConvProblem& p) {
    NIMBUS_CUDNN_CHECK(cudnn().cudnnSetConvolution2dDescriptor(
        get(), static_cast<int>(p.pad[0]), static_cast<int>(p.pad[1]), static_cast<int>(p.stride[0]),
        static_cast<int>(p.stride[1]), static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1]),
        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    NIMBUS_CUDNN_CHECK(cudnn().cudnnSetConvolutionGroupCount(get(), static_cast<int>(p.groups)));
    set_math(requested_math(p));
  }

  void set_math(cudnnMathType_t math) { NIMBUS_CUDNN_CHECK(cudnn().cudnnSetConvolutionMathType(get(), math)); }

  // bf16 / f16 on Tensor Cores; f32 on FMA units unless TF32 is allowed (CUDNN_DEFAULT_MATH permits TF32 on Ampere+).
  static cudnnMathType_t requested_math(const ConvProblem& p) {
    if (p.dtype != DType::kF32) return CUDNN_TENSOR_OP_MATH;
    return p.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  }
};

// ReLU for cudnnConvolutionBiasActivationForward.
struct ReluDescriptor : Descriptor<cudnnActivationDescriptor_t, &CudnnApi::cudnnCreateActivationDescriptor,
                                   &CudnnApi::cudnnDestroyActivationDescriptor> {
  ReluDescriptor() {
    NIMBUS_CUDNN_CHECK(cudnn().cudnnSetActivationDescriptor(get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  }
};

// The descriptors of one call.
struct ConvDescriptors {
  explicit ConvDescriptors(const ConvProblem& p)
      : x(p.x, p.dtype, p.channels_last),
        y(p.y, p.dtype, p.channels_last),
        filter(p.filter, p.dtype, p.channels_last),
        convolution(p) {}
  TensorDescriptor x, y;
  FilterDescriptor filter;
  ConvolutionDescriptor convolution;
};

struct Algorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

// Algorithms that sum plain products, as the reference does; FFT and Winograd transforms add rounding of their own.
bool sums_products(cudnnConvolutionFwdAlgo_t a) {
  return a != CUDNN_CONVOLUTION_FWD_ALGO_FFT && a != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD && a != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool sums_products(cudnnConvolutionBwdDataAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT && a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD && a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool sums_products(cudnnConvolutionBwdFilterAlgo_t a) {
  return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT && a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
         a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The heuristics' first choice that cuDNN says runs and fits the workspace cap. f32 without TF32 must
// match the CPU within 1e-5: it keeps to algorithms that sum products, on FMA units whatever the
// heuristics' math (CUDNN_DEFAULT_MATH permits TF32 on Ampere and newer).
template <typename Perf>
std::optional<Algorithm> first_usable(const std::vector<Perf>& perfs, int count, const ConvProblem& p) {
  const bool strict_f32 = p.dtype == DType::kF32 && !p.tf32;
  for (int i = 0; i < count; ++i) {
    const Perf& perf = perfs[static_cast<size_t>(i)];
    if (perf.status != CUDNN_STATUS_SUCCESS || perf.memory > kMaxWorkspace) continue;
    if (strict_f32 && !sums_products(perf.algo)) continue;
    return Algorithm{static_cast<int>(perf.algo), strict_f32 ? CUDNN_FMA_MATH : perf.mathType, perf.memory};
  }
  return std::nullopt;
}

// Asks cuDNN's heuristics (no benchmarking runs, no allocations).
std::optional<Algorithm> ask_heuristics(Direction direction, const ConvProblem& p, cudnnHandle_t handle,
                                        const ConvDescriptors& d) {
  int count = 0, returned = 0;
  switch (direction) {
    case Direction::kForward: {
      NIMBUS_CUDNN_CHECK(cudnn().cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perfs(static_cast<size_t>(count));
      NIMBUS_CUDNN_CHECK(cudnn().cudnnGetConvolutionForwardAlgorithm_v7(
          handle, d.x.get(), d.filter.get(), d.convolution.get(), d.y.get(), count, &returned, perfs.data()));
      return first_usable(perfs, returned, p);
    }
    case Direction::kBackwardData: {
      NIMBUS_CUDNN_CHECK(cudnn().cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perfs(static_cast<size_t>(count));
      NIMBUS_CUDNN_CHECK(cudnn().cudnnGetConvolutionBackwardDataAlgorithm_v7(
          handle, d.filter.get(), d.y.get(), d.convolution.get(), d.x.get(), count, &returned, perfs.data()));
      return first_usable(perfs, returned, p);
    }
    case Direction::kBackwardFilter: {
      NIMBUS_CUDNN_CHECK(cudnn().cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perfs(static_cast<size_t>(count));
      NIMBUS_CUDNN_CHECK(cudnn().cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          handle, d.x.get(), d.y.get(), d.convolution.get(), d.filter.get(), count, &returned, perfs.data()));
      return first_usable(perfs, returned, p);
    }
  }
  return std::nullopt;
}

const char* direction_name(Direction direction) {
  switch (direction) {
    case Direction::kForward: return "forward";
    case Direction::kBackwardData: return "backward data";
    default: return "backward filter";
  }
}

// The heuristics' choice for (direction, device, problem), nullopt when cuDNN has none; asked on the first call only.
std::optional<Algorithm> cached_algorithm(Direction direction, const ConvProblem& p, CudaStream& stream) {
  using Key = std::tuple<Direction, int, ConvProblem>;
  static std::mutex mutex;
  static std::map<Key, std::optional<Algorithm>> cache;
  const Key key{direction, stream.device().index, p};
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const ConvDescriptors d(p);
  return cache.emplace(key, ask_heuristics(direction, p, cudnn_handle(stream), d)).first->second;
}

// The cached algorithm, which supports() made sure of.
Algorithm algorithm_for(Direction direction, const ConvProblem& p, CudaStream& stream) {
  if (std::optional<Algorithm> chosen = cached_algorithm(direction, p, stream)) return *chosen;
  throw InternalError(
      fmt::format("cuDNN has no {} convolution algorithm for x {}x{}x{}x{} (n, c, h, w; {}), filter {}x{}x{}x{}, "
                  "groups {}, dtype {}{}",
                  direction_name(direction), p.x[0], p.x[1], p.x[2], p.x[3], p.channels_last ? "NHWC" : "NCHW",
                  p.filter[0], p.filter[1], p.filter[2], p.filter[3], p.groups, dtype_name(p.dtype),
                  p.dtype == DType::kF32 && !p.tf32 ? " without TF32" : ""),
      "try the other data_format, or f32 with runtime.allow_tf32; report the shape");
}

// The call's cuDNN problem, or nullopt for what the direct kernels serve (asymmetric padding, no images).
std::optional<ConvProblem> problem_for(const Conv2dGeometry& g, DType dtype) {
  if (g.input.numel() == 0 || g.output.numel() == 0) return std::nullopt;
  return conv_problem(g, dtype, tf32_allowed());
}

int sms(CudaStream& stream) { return multiprocessor_count(stream.device().index); }

// Our NHWC filter (KH * KW * C / groups, F) as cuDNN's (F, KH * KW * C / groups) in `scratch`; NCHW filters as they
// are.
const void* cudnn_filter(const ConvProblem& p, const Tensor& filter, Scratch& scratch, CudaStream& stream) {
  if (!p.channels_last) return filter.raw_data();
  const FilterTranspose t = filter_transpose(p);
  NIMBUS_CUDA_CHECK(kernels::transpose_matrix(filter.raw_data(), scratch.get(), t.taps, t.filters,
                                              static_cast<int>(dtype_size(p.dtype)), sms(stream), stream.handle()));
  NIMBUS_CUDA_CHECK_LAUNCH("transpose_matrix (filter to cuDNN's layout)", stream);
  return scratch.get();
}

// Each op's geometry, from its inputs and attributes.
Conv2dGeometry forward_geometry(const KernelContext& ctx) {
  return Conv2dGeometry(ctx.inputs[0].shape(), ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
}
Conv2dGeometry backward_input_geometry(const KernelContext& ctx) {
  return Conv2dGeometry(ctx.attrs.get_shape("input_shape"), ctx.inputs[1].shape(), ctx.attrs, ctx.op.name);
}
Conv2dGeometry backward_filter_geometry(const KernelContext& ctx) {
  return Conv2dGeometry(ctx.inputs[1].shape(), ctx.attrs.get_shape("filter_shape"), ctx.attrs, ctx.op.name);
}

// The call's geometry has a cuDNN problem (symmetric padding, no empty image batch) and cuDNN an algorithm for
// it; otherwise the direct kernels serve it (f32), or no CUDA kernel does.
template <Conv2dGeometry (*geometry)(const KernelContext&), Direction direction>
bool supports(const KernelContext& ctx) {
  const std::optional<ConvProblem> problem = problem_for(geometry(ctx), ctx.inputs[0].dtype());
  return problem && cached_algorithm(direction, *problem, cuda_stream(ctx.stream));
}

// What one call needs: its problem, stream, handle, descriptors, cached algorithm and workspace.
struct ConvCall {
  ConvCall(KernelContext& ctx, const Conv2dGeometry& g, Direction direction)
      : p(*problem_for(g, ctx.inputs[0].dtype())),
        stream(cuda_stream(ctx.stream)),
        handle(cudnn_handle(stream)),
        d(p),
        algorithm(algorithm_for(direction, p, stream)),
        workspace(stream, algorithm.workspace) {
    d.convolution.set_math(algorithm.math);
  }
  const ConvProblem p;
  CudaStream& stream;
  const cudnnHandle_t handle;
  ConvDescriptors d;
  const Algorithm algorithm;
  Scratch workspace;
};

// y = conv2d(x, filter) [+ bias, then ReLU when `relu`]; fused_conv2d gives the bias.
void forward(KernelContext& ctx, const Tensor* bias, bool relu) {
  ConvCall call(ctx, forward_geometry(ctx), Direction::kForward);
  const ConvProblem& p = call.p;
  ConvDescriptors& d = call.d;
  Scratch filter_scratch(call.stream, p.channels_last ? ctx.inputs[1].nbytes() : 0);
  const void* filter = cudnn_filter(p, ctx.inputs[1], filter_scratch, call.stream);
  void* y = ctx.outputs[0].raw_data();
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(call.algorithm.algo);
  // A 16-bit bias goes on in our own pass after the convolution: cuDNN's fused call and cudnnAddTensor
  // have their own rules for 16-bit biases, which want a GPU to confirm (docs/cuda.md).
  const bool sixteen_bit_bias = bias != nullptr && p.dtype != DType::kF32;
  if (bias == nullptr || !relu || sixteen_bit_bias) {
    NIMBUS_CUDNN_CHECK(cudnn().cudnnConvolutionForward(
        call.handle, &kOne, d.x.get(), ctx.inputs[0].raw_data(), d.filter.get(), filter, d.convolution.get(), algo,
        call.workspace.get(), call.workspace.bytes(), &kZero, d.y.get(), y));
  }
  if (sixteen_bit_bias) {
    const kernels::FloatType type = p.dtype == DType::kBF16 ? kernels::FloatType::kBF16 : kernels::FloatType::kF16;
    NIMBUS_CUDA_CHECK(kernels::bias_activation(type, y, bias->raw_data(), ctx.outputs[0].numel(), bias->numel(), relu,
                                               sms(call.stream), call.stream.handle()));
  } else if (bias != nullptr) {
    const TensorDescriptor bias_descriptor({1, p.y[1], 1, 1}, p.dtype, false);
    if (relu) {
      // One pass: relu(conv + 0 * z + bias), z = y (cuDNN's API needs a z; PyTorch passes its output the same way).
      const ReluDescriptor activation;
      NIMBUS_CUDNN_CHECK(cudnn().cudnnConvolutionBiasActivationForward(
          call.handle, &kOne, d.x.get(), ctx.inputs[0].raw_data(), d.filter.get(), filter, d.convolution.get(), algo,
          call.workspace.get(), call.workspace.bytes(), &kZero, d.y.get(), y, bias_descriptor.get(), bias->raw_data(),
          activation.get(), d.y.get(), y));
    } else {
      // The fused call's identity activation takes one algorithm only; an added bias keeps the heuristics' choice.
      NIMBUS_CUDNN_CHECK(
          cudnn().cudnnAddTensor(call.handle, &kOne, bias_descriptor.get(), bias->raw_data(), &kOne, d.y.get(), y));
    }
  }
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), call.stream);
}

void backward_input(KernelContext& ctx) {
  ConvCall call(ctx, backward_input_geometry(ctx), Direction::kBackwardData);
  Scratch filter_scratch(call.stream, call.p.channels_last ? ctx.inputs[1].nbytes() : 0);
  const void* filter = cudnn_filter(call.p, ctx.inputs[1], filter_scratch, call.stream);
  NIMBUS_CUDNN_CHECK(cudnn().cudnnConvolutionBackwardData(
      call.handle, &kOne, call.d.filter.get(), filter, call.d.y.get(), ctx.inputs[0].raw_data(),
      call.d.convolution.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(call.algorithm.algo), call.workspace.get(),
      call.workspace.bytes(), &kZero, call.d.x.get(), ctx.outputs[0].raw_data()));
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), call.stream);
}

void backward_filter(KernelContext& ctx) {
  ConvCall call(ctx, backward_filter_geometry(ctx), Direction::kBackwardFilter);
  const ConvProblem& p = call.p;
  // NHWC: cuDNN writes its (F, KH * KW * C / groups) filter gradient to scratch, transposed into ours after.
  Scratch filter_scratch(call.stream, p.channels_last ? ctx.outputs[0].nbytes() : 0);
  void* grad_filter = p.channels_last ? filter_scratch.get() : ctx.outputs[0].raw_data();
  NIMBUS_CUDNN_CHECK(cudnn().cudnnConvolutionBackwardFilter(
      call.handle, &kOne, call.d.x.get(), ctx.inputs[1].raw_data(), call.d.y.get(), ctx.inputs[0].raw_data(),
      call.d.convolution.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(call.algorithm.algo), call.workspace.get(),
      call.workspace.bytes(), &kZero, call.d.filter.get(), grad_filter));
  if (p.channels_last) {
    const FilterTranspose t = filter_transpose(p);
    NIMBUS_CUDA_CHECK(kernels::transpose_matrix(grad_filter, ctx.outputs[0].raw_data(), t.filters, t.taps,
                                                static_cast<int>(dtype_size(p.dtype)), sms(call.stream),
                                                call.stream.handle()));
  }
  NIMBUS_CUDA_CHECK_LAUNCH(ctx.op.name.c_str(), call.stream);
}

const std::vector<DType> kConvDTypes = {DType::kF32, DType::kBF16, DType::kF16};

const bool kRegistered = [] {
  register_kernel("conv2d", cudnn_kernel(
                                kConvDTypes, [](KernelContext& ctx) { forward(ctx, nullptr, false); },
                                supports<forward_geometry, Direction::kForward>));
  register_kernel("conv2d_backward_input", cudnn_kernel(kConvDTypes, backward_input,
                                                        supports<backward_input_geometry, Direction::kBackwardData>));
  register_kernel(
      "conv2d_backward_filter",
      cudnn_kernel(kConvDTypes, backward_filter, supports<backward_filter_geometry, Direction::kBackwardFilter>));
  // Bias alone, or bias + ReLU: f32 through cuDNN's fused convolution-bias-activation, bf16 / f16 as cuDNN's
  // convolution and our bias pass (channels last, which fused_conv2d always is).
  register_kernel(
      "fused_conv2d",
      cudnn_kernel(
          kConvDTypes,
          [](KernelContext& ctx) { forward(ctx, &ctx.inputs[2], fused_activation_of(ctx.attrs) == Activation::kRelu); },
          [](const KernelContext& ctx) {
            const Activation activation = fused_activation_of(ctx.attrs);
            return (activation == Activation::kLinear || activation == Activation::kRelu) &&
                   supports<forward_geometry, Direction::kForward>(ctx);
          }));
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
