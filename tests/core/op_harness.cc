#include "op_harness.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "nimbus/base/rng.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/registry.h"

namespace nimbus::testing {

namespace {
std::vector<OpCase>& mutable_cases() {
  static std::vector<OpCase> cases;
  return cases;
}
}  // namespace

void add_op_case(OpCase op_case) { mutable_cases().push_back(std::move(op_case)); }
const std::vector<OpCase>& op_cases() { return mutable_cases(); }

std::vector<Tensor> make_inputs(const OpCase& op_case, DType floating_dtype) {
  const uint64_t seed = std::hash<std::string>{}(op_case.name);
  std::vector<Tensor> inputs;
  uint64_t stream = 0;
  for (const InputSpec& spec : op_case.inputs) {
    const int64_t n = spec.shape.numel();
    std::vector<double> values = spec.values;
    if (values.empty()) {
      for (int64_t i = 0; i < n; ++i) {
        const double u = philox_uniform_double(seed, stream++);
        if (spec.dtype == DType::kBool) {
          values.push_back(u < 0.5 ? 0.0 : 1.0);
        } else if (is_integral(spec.dtype)) {
          values.push_back(std::floor(spec.low + u * (spec.high - spec.low)));
        } else {
          values.push_back(spec.low + u * (spec.high - spec.low));
        }
      }
    }
    if (static_cast<int64_t>(values.size()) != n) {
      throw std::runtime_error(
          fmt::format("case {}: {} values for shape {}", op_case.name, values.size(), spec.shape.to_string()));
    }
    const DType dtype = is_floating(spec.dtype) && !spec.fixed_dtype ? floating_dtype : spec.dtype;
    inputs.push_back(Tensor::from_vector<double>(values, spec.shape).to(dtype));
  }
  return inputs;
}

std::vector<Tensor> run_case(const OpCase& op_case, const std::vector<Tensor>& inputs) {
  const OpSchema& op = OpRegistry::global().get(op_case.op);
  return call_op(op, std::span<const Tensor>(inputs), op_case.attrs);
}

Comparison compare_tensors(const Tensor& actual, const Tensor& expected, double tolerance) {
  if (actual.shape() != expected.shape()) {
    return {false, fmt::format("shape {} vs expected {}", actual.shape().to_string(), expected.shape().to_string())};
  }
  if (actual.dtype() != expected.dtype()) {
    return {false, fmt::format("dtype {} vs expected {}", dtype_name(actual.dtype()), dtype_name(expected.dtype()))};
  }
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> e = expected.to_vector<double>();
  double scale = 1.0;
  for (double v : e) {
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  }
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool a_finite = std::isfinite(a[i]), e_finite = std::isfinite(e[i]);
    if (a_finite != e_finite || std::isnan(a[i]) != std::isnan(e[i]) ||
        (!a_finite && !std::isnan(a[i]) && a[i] != e[i])) {
      return {false, fmt::format("element {}: {} vs expected {} (NaN/Inf parity)", i, a[i], e[i])};
    }
    if (!a_finite) continue;
    const double err = std::abs(a[i] - e[i]) / scale;
    if (err > worst) {
      worst = err;
      worst_index = i;
    }
  }
  if (worst > tolerance) {
    return {false, fmt::format("normalized error {:.3g} > {:.3g} at element {}: {} vs expected {}", worst, tolerance,
                               worst_index, a[worst_index], e[worst_index])};
  }
  return {};
}

double zero_fraction(const Tensor& t) {
  if (t.numel() == 0) return 0;
  const std::vector<double> v = t.to_vector<double>();
  size_t zeros = 0;
  for (double x : v) zeros += x == 0.0;
  return static_cast<double>(zeros) / static_cast<double>(v.size());
}

}  // namespace nimbus::testing
