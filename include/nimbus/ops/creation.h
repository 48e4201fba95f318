// Creating tensors. Each of these is an op (fill, range, random_uniform,
// random_normal), so it also works inside traced functions.
//
//   Tensor z = zeros({2, 3});                          // f32 on cpu:0
//   Tensor r = arange(0, 10, 2, DType::kI64);          // [0, 2, 4, 6, 8]
//   Generator gen(42);
//   Tensor w = random_normal({784, 512}, 0.0, 0.05, DType::kF32, Device::cpu(), &gen);
//
// Random ops draw from `generator` (the process-wide default_generator() when
// null): the same seed gives the same values on any thread count.
#pragma once

#include "nimbus/base/rng.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus {

Tensor full(const Shape& shape, double value, DType dtype = DType::kF32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::kF32, Device device = Device::cpu());
Tensor full_like(const Tensor& like, double value);
Tensor zeros_like(const Tensor& like);
Tensor ones_like(const Tensor& like);
// A rank-0 tensor with `like`'s dtype and device: how scalars enter binary ops.
Tensor scalar_like(const Tensor& like, double value);

// [start, start + step, ...) up to but excluding `stop`, like numpy.arange.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::kF32, Device device = Device::cpu());

// Uniform in [low, high).
Tensor random_uniform(const Shape& shape, double low = 0, double high = 1, DType dtype = DType::kF32,
                      Device device = Device::cpu(), Generator* generator = nullptr);
// Normal with the given mean and standard deviation.
Tensor random_normal(const Shape& shape, double mean = 0, double stddev = 1, DType dtype = DType::kF32,
                     Device device = Device::cpu(), Generator* generator = nullptr);

}  // namespace nimbus
