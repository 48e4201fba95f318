// Vectorized, multithreaded unary elementwise kernels on contiguous tensors:
//   neg, abs, square, sqrt, rsqrt, relu        f32, f64 (exact: the reference's expressions)
//   exp, log, sigmoid, tanh, softplus, gelu    f32 (polynomial approximations of vector_math.h)
//   gelu_backward(grad_y, x)                   f32, both inputs of one shape
// gelu and gelu_backward take the attribute approximate = "tanh" | "none".
// The math ops run on 64-byte vectors where the CPU has AVX-512: they are
// compute-bound on 32-byte vectors, and the lanes compute the same
// operations either way, so results are identical. Outputs may alias the
// input; empty tensors do nothing.
#include <cstdint>
#include <string>

#include "nimbus/base/error.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/elementwise_loops.h"
#include "src/kernels/cpu/parallel.h"
#include "src/kernels/cpu/vector_math.h"

namespace nimbus::cpu {
namespace {

// ---- memory-bound ops: streaming stores for large outputs ----

template <typename T, typename F>
void run_exact(const Tensor& x, Tensor& out, F f) {
  const int64_t n = out.numel();
  const T* px = static_cast<const T*>(x.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const bool streaming = n * static_cast<int64_t>(sizeof(T)) >= kStreamingStoreBytes;
  parallel_for(
      n, kMemoryBoundGrain,
      [&](int64_t begin, int64_t end) { map1<simd::Vec<T>>(px + begin, po + begin, end - begin, f, streaming); },
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
                                  run_exact<float>(ctx.inputs[0], ctx.outputs[0], f);
                                } else {
                                  run_exact<double>(ctx.inputs[0], ctx.outputs[0], f);
                                }
                              }});
}

const bool kExactRegistered = register_exact("neg", [](auto x) { return -x; }) &&
                              register_exact("abs", [](auto x) { return simd::abs(x); }) &&
                              register_exact("square", [](auto x) { return x * x; }) &&
                              register_exact("sqrt", [](auto x) { return simd::sqrt(x); }) &&
                              register_exact("rsqrt", [](auto x) { return 1.0 / simd::sqrt(x); }) &&
                              // As the reference: x < 0 ? 0 : x, so NaN stays NaN.
                              register_exact("relu", [](auto x) { return x < 0.0 ? decltype(x){} : x; });

// ---- math ops: f32, compute-bound ----
// Plain stores: their loops run slower than memory, and streaming stores
// issued that slowly measured 20-25% slower on one thread of the Zen 5 VM
// (write-combining buffers drain half-filled).

template <typename F>
void map_math(const float* x, float* out, int64_t n, F f) {
  map1<simd::Vec<float>>(x, out, n, f, false);
}
template <typename F>
NIMBUS_TARGET_AVX512 void map_math_avx512(const float* x, float* out, int64_t n, F f) {
  map1<simd::Vec<float, 64>>(x, out, n, f, false);
}

// `f` is a generic, always-inline functor of a vector.
template <typename F>
void run_math(const Tensor& x, Tensor& out, F f) {
  const float* px = static_cast<const float*>(x.raw_data());
  float* po = static_cast<float*>(out.raw_data());
  const bool wide = has_avx512();
  parallel_for(
      out.numel(), kMathGrain,
      [&](int64_t begin, int64_t end) {
        if (wide) {
          map_math_avx512(px + begin, po + begin, end - begin, f);
        } else {
          map_math(px + begin, po + begin, end - begin, f);
        }
      },
      kCacheLineElements<float>);
}

template <typename F>
bool register_math(const char* op, F f) {
  return register_kernel(op, {.name = "vectorized",
                              .device = DeviceType::kCPU,
                              .dtypes = {DType::kF32},
                              .priority = 50,
                              .fn = [f](KernelContext& ctx) { run_math(ctx.inputs[0], ctx.outputs[0], f); }});
}

const bool kMathRegistered = register_math("exp", [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::exp(x); }) &&
                             register_math("log", [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::log(x); }) &&
                             register_math("sigmoid", [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::sigmoid(x); }) &&
                             register_math("tanh", [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::tanh(x); }) &&
                             register_math("softplus", [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::softplus(x); });

bool uses_tanh_form(const KernelContext& ctx) { return ctx.attrs.get_string("approximate") == "tanh"; }

const bool kGeluRegistered = register_kernel(
    "gelu",
    {.name = "vectorized",
     .device = DeviceType::kCPU,
     .dtypes = {DType::kF32},
     .priority = 50,
     .fn = [](KernelContext& ctx) {
       if (uses_tanh_form(ctx)) {
         run_math(ctx.inputs[0], ctx.outputs[0], [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::gelu_tanh(x); });
       } else {
         run_math(ctx.inputs[0], ctx.outputs[0], [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::gelu_erf(x); });
       }
     }});

// out = grad_y * derivative(x); `derivative` is a generic, always-inline functor.
template <typename F>
void map_gelu_backward(const float* g, const float* x, float* out, int64_t n, F derivative) {
  map2<1, 1, simd::Vec<float>>(
      g, x, out, n, [&](auto gv, auto xv) NIMBUS_LAMBDA_INLINE { return gv * derivative(xv); }, false);
}
template <typename F>
NIMBUS_TARGET_AVX512 void map_gelu_backward_avx512(const float* g, const float* x, float* out, int64_t n,
                                                   F derivative) {
  map2<1, 1, simd::Vec<float, 64>>(
      g, x, out, n, [&](auto gv, auto xv) NIMBUS_LAMBDA_INLINE { return gv * derivative(xv); }, false);
}

template <typename F>
void run_gelu_backward(KernelContext& ctx, F derivative) {
  const float* pg = static_cast<const float*>(ctx.inputs[0].raw_data());
  const float* px = static_cast<const float*>(ctx.inputs[1].raw_data());
  float* po = static_cast<float*>(ctx.outputs[0].raw_data());
  const bool wide = has_avx512();
  parallel_for(
      ctx.outputs[0].numel(), kMathGrain,
      [&](int64_t begin, int64_t end) {
        if (wide) {
          map_gelu_backward_avx512(pg + begin, px + begin, po + begin, end - begin, derivative);
        } else {
          map_gelu_backward(pg + begin, px + begin, po + begin, end - begin, derivative);
        }
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
             run_gelu_backward(ctx, [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::gelu_tanh_derivative(x); });
           } else {
             run_gelu_backward(ctx, [](auto x) NIMBUS_LAMBDA_INLINE { return vmath::gelu_erf_derivative(x); });
           }
         },
     // Broadcast gradients are rare here; the reference handles them.
     .supports = [](const KernelContext& ctx) { return ctx.inputs[0].shape() == ctx.inputs[1].shape(); }});

}  // namespace
}  // namespace nimbus::cpu
