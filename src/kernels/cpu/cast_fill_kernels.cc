// Vectorized, multithreaded conversions and fills on contiguous tensors:
//   cast   f32 <-> f16 (F16C vcvtps2ph/vcvtph2ps), f32 <-> bf16, f32 <-> f64,
//          f32 <-> i32, u8 -> f32 (images into a model), and any same-dtype
//          cast (a copy). Every pair rounds
//          exactly as the reference: to nearest even, NaN kept quiet, integers
//          truncated toward zero.
//   fill   every dtype.
// Other cast pairs go to the reference kernel.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "nimbus/base/half.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/elementwise_loops.h"
#include "src/kernels/cpu/half_convert.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

// Plain conversions the compiler vectorizes: f32 <-> f64, f32 <-> i32 (truncating), u8 -> f32 (exact).
template <typename In, typename Out>
void convert(const In* in, Out* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(in[i]);
}

// f32 <-> f16 and bf16: the vectorized conversions of half_convert.h.
void convert(const float* in, BFloat16* out, int64_t n) { narrow(in, out, n); }
void convert(const BFloat16* in, float* out, int64_t n) { widen(in, out, n); }
void convert(const float* in, Half* out, int64_t n) { narrow(in, out, n); }
void convert(const Half* in, float* out, int64_t n) { widen(in, out, n); }

template <typename In, typename Out>
void run_cast(KernelContext& ctx) {
  const In* in = static_cast<const In*>(ctx.inputs[0].raw_data());
  Out* out = static_cast<Out*>(ctx.outputs[0].raw_data());
  parallel_for(
      ctx.outputs[0].numel(), kMemoryBoundGrain,
      [&](int64_t begin, int64_t end) { convert(in + begin, out + begin, end - begin); }, kCacheLineElements<Out>);
}

void run_copy(KernelContext& ctx) {
  const auto* in = static_cast<const std::byte*>(ctx.inputs[0].raw_data());
  auto* out = static_cast<std::byte*>(ctx.outputs[0].raw_data());
  if (in == out) return;
  const int64_t bytes = static_cast<int64_t>(ctx.outputs[0].nbytes());
  parallel_for(
      bytes, kMemoryBoundGrain * 4,
      [&](int64_t begin, int64_t end) { std::memcpy(out + begin, in + begin, static_cast<size_t>(end - begin)); }, 64);
}

using CastFn = void (*)(KernelContext&);

// The fast kernel for (input dtype, output dtype), or null where the reference serves.
CastFn cast_kernel(DType in, DType out) {
  if (in == out) return run_copy;
  struct Pair {
    DType in, out;
    CastFn fn;
  };
  static constexpr Pair kPairs[] = {
      {DType::kF32, DType::kF16, run_cast<float, Half>},      {DType::kF16, DType::kF32, run_cast<Half, float>},
      {DType::kF32, DType::kBF16, run_cast<float, BFloat16>}, {DType::kBF16, DType::kF32, run_cast<BFloat16, float>},
      {DType::kF32, DType::kF64, run_cast<float, double>},    {DType::kF64, DType::kF32, run_cast<double, float>},
      {DType::kF32, DType::kI32, run_cast<float, int32_t>},   {DType::kI32, DType::kF32, run_cast<int32_t, float>},
      {DType::kU8, DType::kF32, run_cast<uint8_t, float>},
  };
  for (const Pair& pair : kPairs) {
    if (pair.in == in && pair.out == out) return pair.fn;
  }
  return nullptr;
}

const bool kCastRegistered = register_kernel(
    "cast", {.name = "vectorized",
             .device = DeviceType::kCPU,
             .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
             .priority = 50,
             .fn = [](KernelContext& ctx) { cast_kernel(ctx.inputs[0].dtype(), ctx.outputs[0].dtype())(ctx); },
             .supports =
                 [](const KernelContext& ctx) {
                   return cast_kernel(ctx.inputs[0].dtype(), ctx.outputs[0].dtype()) != nullptr;
                 }});

const bool kFillRegistered = register_kernel(
    "fill", {.name = "vectorized",
             .device = DeviceType::kCPU,
             .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)},
             .priority = 50,
             .fn = [](KernelContext& ctx) {
               const double value = ctx.attrs.get_float("value");
               visit_dtype(ctx.outputs[0].dtype(), [&]<typename T>() {
                 T* out = static_cast<T*>(ctx.outputs[0].raw_data());
                 const T v = from_double<T>(value);
                 parallel_for(
                     ctx.outputs[0].numel(), kMemoryBoundGrain,
                     [&](int64_t begin, int64_t end) { std::fill(out + begin, out + end, v); }, kCacheLineElements<T>);
               });
             }});

}  // namespace
}  // namespace nimbus::cpu
