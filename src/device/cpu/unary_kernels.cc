// Vectorized, multithreaded unary elementwise kernels on contiguous tensors:
//   neg, abs, square, sqrt, rsqrt, relu        f32, f64 (exact: the reference's expressions)
//   exp, log, sigmoid, tanh, softplus, gelu    f32 (polynomial approximations of vector_math.h)
//   gelu_backward(grad_y, x)                   f32, both inputs of one shape
// gelu and gelu_backward take the attribute approximate = "tanh" | "none".
// Outputs may alias the input; empty tensors do nothing.
#include <cstdint>
#include <string>

#include "nimbus/base/error.h"
#include "nimbus/ops/registry.h"
#include "src/device/cpu/elementwise_loops.h"
#include "src/device/cpu/parallel.h"
#include "src/device/cpu/vector_math.h"

namespace nimbus::cpu {
namespace {

// Memory-bound ops run with kMemoryBoundGrain and streaming stores for large
// outputs; math ops with kMathGrain and plain stores (their loops run slower
// than memory, and streaming stores issued that slowly measured 20-25% slower
// on one thread of the Zen 5 VM: write-combining buffers drain half-filled).
enum class Cost { kMemoryBound, kMath };

template <typename T, typename F>
void run_unary(const Tensor& x, Tensor& out, Cost cost, F f) {
  const int64_t n = out.numel();
  const T* px = static_cast<const T*>(x.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const bool streaming = cost == Cost::kMemoryBound && n * static_cast<int64_t>(sizeof(T)) >= kStreamingStoreBytes;
  const int64_t grain = cost == Cost::kMemoryBound ? kMemoryBoundGrain : kMathGrain;
  parallel_for(
      n, grain, [&](int64_t begin, int64_t end) { map1(px + begin, po + begin, end - begin, f, streaming); },
      kCacheLineElements<T>);
}

// Ops whose vector expression is exact, for f32 and f64 alike (`f` is generic).
template <typename F>
bool register_exact(const char* op, F f) {
  return register_kernel(op, {.name = "vectorized",
                              .device = DeviceType::kCPU,
                              .dtypes = {DType::kF32, DType::kF64},
                              .priority = 50,
                              .fn = [f](KernelContext& ctx) {
                                if (ctx.inputs[0].dtype() == DType::kF32) {
                                  run_unary<float>(ctx.inputs[0], ctx.outputs[0], Cost::kMemoryBound, f);
                                } else {
                                  run_unary<double>(ctx.inputs[0], ctx.outputs[0], Cost::kMemoryBound, f);
                                }
                              }});
}

const bool kExactRegistered = register_exact("neg", [](auto x) { return -x; }) &&
                              register_exact("abs", [](auto x) { return simd::abs(x); }) &&
                              register_exact("square", [](auto x) { return x * x; }) &&
                              register_exact("sqrt", [](auto x) { return simd::sqrt(x); }) &&
                              register_exact("rsqrt", [](auto x) { return 1.0 / simd::sqrt(x); }) &&
                              // As the reference: x > 0 ? x : 0, so NaN gives 0.
                              register_exact("relu", [](auto x) { return x > 0.0 ? x : decltype(x){}; });

// f32 ops computed with vector_math.h; `f` maps an f32x8 to an f32x8.
template <typename F>
bool register_math(const char* op, F f) {
  return register_kernel(
      op, {.name = "vectorized",
           .device = DeviceType::kCPU,
           .dtypes = {DType::kF32},
           .priority = 50,
           .fn = [f](KernelContext& ctx) { run_unary<float>(ctx.inputs[0], ctx.outputs[0], Cost::kMath, f); }});
}

const bool kMathRegistered = register_math("exp", [](simd::f32x8 x) { return vmath::exp(x); }) &&
                             register_math("log", [](simd::f32x8 x) { return vmath::log(x); }) &&
                             register_math("sigmoid", [](simd::f32x8 x) { return vmath::sigmoid(x); }) &&
                             register_math("tanh", [](simd::f32x8 x) { return vmath::tanh(x); }) &&
                             register_math("softplus", [](simd::f32x8 x) { return vmath::softplus(x); });

bool uses_tanh_form(const KernelContext& ctx) { return ctx.attrs.get_string("approximate") == "tanh"; }

const bool kGeluRegistered =
    register_kernel("gelu", {.name = "vectorized",
                             .device = DeviceType::kCPU,
                             .dtypes = {DType::kF32},
                             .priority = 50,
                             .fn = [](KernelContext& ctx) {
                               if (uses_tanh_form(ctx)) {
                                 run_unary<float>(ctx.inputs[0], ctx.outputs[0], Cost::kMath,
                                                  [](simd::f32x8 x) { return vmath::gelu_tanh(x); });
                               } else {
                                 run_unary<float>(ctx.inputs[0], ctx.outputs[0], Cost::kMath,
                                                  [](simd::f32x8 x) { return vmath::gelu_erf(x); });
                               }
                             }});

template <typename F>
void run_gelu_backward(KernelContext& ctx, F derivative) {
  const int64_t n = ctx.outputs[0].numel();
  const float* pg = static_cast<const float*>(ctx.inputs[0].raw_data());
  const float* px = static_cast<const float*>(ctx.inputs[1].raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  parallel_for(
      n, kMathGrain,
      [&](int64_t begin, int64_t end) {
        map2<1, 1>(
            pg + begin, px + begin, po + begin, end - begin,
            [&](simd::f32x8 g, simd::f32x8 x) { return g * derivative(x); }, false);
      },
      kCacheLineElements<float>);
}

const bool kGeluBackwardRegistered = register_kernel(
    "gelu_backward",
    {.name = "vectorized",
     .device = DeviceType::kCPU,
     .dtypes = {DType::kF32},
     .priority = 50,
     .fn =
         [](KernelContext& ctx) {
           if (uses_tanh_form(ctx)) {
             run_gelu_backward(ctx, [](simd::f32x8 x) { return vmath::gelu_tanh_derivative(x); });
           } else {
             run_gelu_backward(ctx, [](simd::f32x8 x) { return vmath::gelu_erf_derivative(x); });
           }
         },
     // Broadcast gradients are rare here; the reference handles them.
     .supports = [](const KernelContext& ctx) { return ctx.inputs[0].shape() == ctx.inputs[1].shape(); }});

}  // namespace
}  // namespace nimbus::cpu
