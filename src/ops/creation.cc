// Source ops: fill, range, random_uniform, random_normal. They have no inputs;
// their attributes say everything, and the kernel is chosen by output dtype.
#include "nimbus/ops/creation.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "nimbus/base/error.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/for_kernels/kernel_util.h"
#include "nimbus/ops/registry.h"
#include "src/ops/internal/random_stream.h"

namespace nimbus {
namespace {

std::vector<TensorSpec> infer_from_attrs(const InferContext& ctx) {
  return {{ctx.attrs.get_shape("shape"), ctx.attrs.get_dtype("dtype")}};
}

// ---- fill ----

const OpSchema& kFill = define_op({
    .name = "fill",
    .summary = "a tensor of `shape` with every element `value`",
    .kind = OpKind::kSource,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 0,
    .infer = infer_from_attrs,
    .differentiable = false,
    .dispatch_input = -1,
});

const bool kFillReference = register_kernel(
    "fill",
    {.name = kReferenceKernel, .dtypes = {std::begin(kAllDTypes), std::end(kAllDTypes)}, .fn = [](KernelContext& ctx) {
       const double value = ctx.attrs.get_float("value");
       visit_dtype(ctx.outputs[0].dtype(), [&]<typename T>() {
         T* out = static_cast<T*>(ctx.outputs[0].raw_data());
         const T v = from_double<T>(value);
         for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) out[i] = v;
       });
     }});

// ---- range ----

int64_t range_length(double start, double stop, double step) {
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) {
    throw InvalidArgument(fmt::format("arange: start {}, stop {} and step {} must be finite", start, stop, step));
  }
  if (step == 0) throw InvalidArgument("arange: step must not be zero");
  const double length = std::ceil((stop - start) / step);
  // Converting a double past the int64 range is undefined; no tensor is that long anyway.
  if (length > 0x1p62) {
    throw InvalidArgument(
        fmt::format("arange: start {}, stop {}, step {} would give {:g} elements", start, stop, step, length));
  }
  return std::max<int64_t>(0, static_cast<int64_t>(length));
}

const OpSchema& kRange = define_op({
    .name = "range",
    .summary = "start, start + step, ... below stop (numpy.arange)",
    .kind = OpKind::kSource,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 0,
    .infer =
        [](const InferContext& ctx) {
          const int64_t n =
              range_length(ctx.attrs.get_float("start"), ctx.attrs.get_float("stop"), ctx.attrs.get_float("step"));
          return std::vector<TensorSpec>{{Shape{n}, ctx.attrs.get_dtype("dtype")}};
        },
    .differentiable = false,
    .dispatch_input = -1,
});

const bool kRangeReference = register_kernel(
    "range", {.name = kReferenceKernel,
              .dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kU8},
              .fn = [](KernelContext& ctx) {
                const double start = ctx.attrs.get_float("start"), step = ctx.attrs.get_float("step");
                visit_dtype(ctx.outputs[0].dtype(), [&]<typename T>() {
                  T* out = static_cast<T*>(ctx.outputs[0].raw_data());
                  for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) {
                    out[i] = from_double<T>(start + static_cast<double>(i) * step);
                  }
                });
              }});

// ---- random_uniform, random_normal ----

const OpSchema& kRandomUniform = define_op({
    .name = "random_uniform",
    .summary = "uniform in [low, high) from Philox stream (seed, offset)",
    .kind = OpKind::kRandom,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 0,
    .infer = infer_from_attrs,
    .differentiable = false,
    .dispatch_input = -1,
});

const OpSchema& kRandomNormal = define_op({
    .name = "random_normal",
    .summary = "normal(mean, stddev) from Philox stream (seed, offset)",
    .kind = OpKind::kRandom,
    .precision = PrecisionRule::kFollowInputs,
    .num_inputs = 0,
    .infer = infer_from_attrs,
    .differentiable = false,
    .dispatch_input = -1,
});

template <typename Draw>
void fill_random(KernelContext& ctx, Draw draw) {
  const uint64_t seed = static_cast<uint64_t>(ctx.attrs.get_int("seed"));
  const uint64_t offset = static_cast<uint64_t>(ctx.attrs.get_int("offset"));
  visit_dtype(ctx.outputs[0].dtype(), [&]<typename T>() {
    T* out = static_cast<T*>(ctx.outputs[0].raw_data());
    for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) {
      out[i] = from_double<T>(draw(seed, offset + static_cast<uint64_t>(i)));
    }
  });
}

// The i-th uniform of stream `seed` in [0, 1) with as many random bits as T's
// significand holds, so that T represents every draw exactly (a 24-bit draw
// rounded to bf16 would give 1.0 about once in 512).
template <typename T>
double unit_uniform(uint64_t seed, uint64_t i) {
  if constexpr (std::is_same_v<T, double>) {
    return philox_uniform_double(seed, i);
  } else {
    constexpr int kBits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
    return std::ldexp(std::floor(std::ldexp(static_cast<double>(philox_uniform(seed, i)), kBits)), -kBits);
  }
}

// The largest T below `high`: where low + (high - low) u goes when rounding it to T reaches high.
template <typename T>
T largest_below(double high) {
  const T nearest = from_double<T>(high);
  if (to_double(nearest) < high) return nearest;
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(nearest, -std::numeric_limits<T>::infinity());
  } else {
    // Half and BFloat16: one step of the bit pattern toward -infinity.
    uint16_t bits = nearest.bits;
    if ((bits & 0x7fffu) == 0) {
      bits = 0x8001u;  // from zero to the smallest negative subnormal
    } else if ((bits & 0x8000u) != 0) {
      ++bits;  // negative: one step larger in magnitude
    } else {
      --bits;
    }
    return T::from_bits(bits);
  }
}

const bool kRandomUniformReference = register_kernel(
    "random_uniform", {.name = kReferenceKernel,
                       .dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16},
                       .fn = [](KernelContext& ctx) {
                         const double low = ctx.attrs.get_float("low"), high = ctx.attrs.get_float("high");
                         const uint64_t seed = static_cast<uint64_t>(ctx.attrs.get_int("seed"));
                         const uint64_t offset = static_cast<uint64_t>(ctx.attrs.get_int("offset"));
                         visit_dtype(ctx.outputs[0].dtype(), [&]<typename T>() {
                           if constexpr (std::is_floating_point_v<internal::compute_t<T>>) {
                             T* out = static_cast<T*>(ctx.outputs[0].raw_data());
                             const T top = largest_below<T>(high);
                             const bool top_in_range = to_double(top) >= low;
                             for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) {
                               const double u = unit_uniform<T>(seed, offset + static_cast<uint64_t>(i));
                               const T value = from_double<T>(low + (high - low) * u);
                               out[i] = to_double(value) >= high && top_in_range ? top : value;
                             }
                           }
                         });
                       }});

const bool kRandomNormalReference = register_kernel(
    "random_normal", {.name = kReferenceKernel,
                      .dtypes = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16},
                      .fn = [](KernelContext& ctx) {
                        const double mean = ctx.attrs.get_float("mean"), stddev = ctx.attrs.get_float("stddev");
                        fill_random(ctx,
                                    [&](uint64_t seed, uint64_t i) { return mean + stddev * philox_normal(seed, i); });
                      }});

Attrs random_attrs(const Shape& shape, DType dtype, Generator* generator) {
  if (!is_floating(dtype)) {
    throw InvalidArgument(fmt::format("random tensors need a floating dtype, not {}", dtype_name(dtype)));
  }
  Attrs attrs{{"shape", shape}, {"dtype", dtype}};
  internal::claim_random_stream(attrs, generator, shape.numel());
  return attrs;
}

}  // namespace

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return call_op1(kFill, {}, Attrs{{"shape", shape}, {"dtype", dtype}, {"value", value}}, device);
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor full_like(const Tensor& like, double value) { return full(like.shape(), value, like.dtype(), like.device()); }
Tensor zeros_like(const Tensor& like) { return full_like(like, 0.0); }
Tensor ones_like(const Tensor& like) { return full_like(like, 1.0); }
Tensor scalar_like(const Tensor& like, double value) { return full(Shape{}, value, like.dtype(), like.device()); }

Tensor arange(double start, double stop, double step, DType dtype, Device device) {
  return call_op1(kRange, {}, Attrs{{"start", start}, {"stop", stop}, {"step", step}, {"dtype", dtype}}, device);
}

Tensor random_uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* generator) {
  Attrs attrs = random_attrs(shape, dtype, generator);
  attrs.set("low", low).set("high", high);
  return call_op1(kRandomUniform, {}, attrs, device);
}

Tensor random_normal(const Shape& shape, double mean, double stddev, DType dtype, Device device, Generator* generator) {
  Attrs attrs = random_attrs(shape, dtype, generator);
  attrs.set("mean", mean).set("stddev", stddev);
  return call_op1(kRandomNormal, {}, attrs, device);
}

}  // namespace nimbus
