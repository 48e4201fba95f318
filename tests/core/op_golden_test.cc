// Golden tests against PyTorch, an oracle independent of our kernels and
// gradient rules. tests/golden/op_golden.json (written by
// tests/golden/make_op_golden.py with Debian's PyTorch, all in float64; see
// tests/golden/README.md) holds, per entry, a Nimbus op with its attributes and
// inputs, torch's outputs, and torch's gradients of
// L = sum_k sum(output_k * w_k) with respect to each floating input, with the
// weights w_k.
//
// The file also holds a 10-step SGD run of a tiny MLP (OpGoldenTrajectory).
//
// Every entry runs twice through the dispatcher:
//   OpGolden.ReferenceF64, OpGoldenGrad.ReferenceF64: floating inputs in f64,
//     reference kernels only. Error bar 1e-10.
//   OpGolden.DefaultF32, OpGoldenGrad.DefaultF32: floating inputs rounded to
//     f32, the kernels dispatch picks by default (oneDNN, vectorized). Error
//     bar 1e-5, which covers rounding the inputs to f32.
// Error measure: NaN/Inf parity first, then the normalized error
// max |actual - expected| / max(1, max |expected|) over the tensor
// (compare_tensors). Integer and bool outputs must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/autodiff/variable.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/nn.h"
#include "nimbus/ops/reduction.h"
#include "nimbus/ops/registry.h"
#include "op_harness.h"

namespace nimbus::testing {
namespace {

// The layout version this test reads; make_op_golden.py writes the same number.
constexpr int kGoldenVersion = 1;
constexpr const char* kGoldenPath = NIMBUS_GOLDEN_DIR "/op_golden.json";
constexpr double kReferenceTolerance = 1e-10;
constexpr double kDefaultTolerance = 1e-5;

struct GoldenTensor {
  Shape shape;
  std::string dtype;  // a Nimbus dtype name, or "float": the floating dtype of the run
  std::vector<double> values;
};

struct GoldenEntry {
  std::string name;
  std::string op;
  Attrs attrs;
  std::vector<GoldenTensor> inputs = {};
  std::vector<GoldenTensor> outputs = {};
  std::vector<std::optional<std::vector<double>>> weights = {};  // per output; none for non-floating outputs
  std::vector<std::optional<std::vector<double>>> grads = {};    // per input; none where torch has no gradient

  bool has_gradients() const {
    return std::any_of(grads.begin(), grads.end(), [](const auto& g) { return g.has_value(); });
  }
};

void PrintTo(const GoldenEntry& entry, std::ostream* os) { *os << entry.name; }

// Numbers, booleans, and the strings "nan", "inf" and "-inf" (JSON has no such numbers).
double parse_value(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (!v.is_string()) return v.get<double>();
  const std::string text = v.get<std::string>();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  throw std::runtime_error("value '" + text + "' is not a number");
}

std::vector<double> parse_values(const nlohmann::json& values) {
  std::vector<double> result;
  result.reserve(values.size());
  for (const nlohmann::json& v : values) result.push_back(parse_value(v));
  return result;
}

Shape parse_shape(const nlohmann::json& dims) { return Shape(dims.get<std::vector<int64_t>>()); }

GoldenTensor parse_tensor(const nlohmann::json& j) {
  return {parse_shape(j.at("shape")), j.at("dtype").get<std::string>(), parse_values(j.at("values"))};
}

// {"axes": {"ints": [0]}, "keepdims": {"bool": true}, ...}: each value carries its Attrs type.
Attrs parse_attrs(const nlohmann::json& j) {
  Attrs attrs;
  for (const auto& [name, typed] : j.items()) {
    if (!typed.is_object() || typed.size() != 1) {
      throw std::runtime_error("attribute '" + name + "' is not {type: value}");
    }
    const std::string type = typed.begin().key();
    const nlohmann::json& value = typed.begin().value();
    if (type == "bool") {
      attrs.set(name, value.get<bool>());
    } else if (type == "int") {
      attrs.set(name, value.get<int64_t>());
    } else if (type == "float") {
      attrs.set(name, value.get<double>());
    } else if (type == "string") {
      attrs.set(name, value.get<std::string>());
    } else if (type == "ints") {
      attrs.set(name, value.get<std::vector<int64_t>>());
    } else if (type == "dtype") {
      attrs.set(name, parse_dtype(value.get<std::string>()));
    } else if (type == "shape") {
      attrs.set(name, parse_shape(value));
    } else {
      throw std::runtime_error("attribute '" + name + "' has unknown type '" + type + "'");
    }
  }
  return attrs;
}

std::optional<std::vector<double>> parse_optional_values(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return parse_values(j);
}

struct GoldenFile {
  nlohmann::json header;
  std::vector<GoldenEntry> entries;
  std::string error;  // why the file could not be read; the file tests report it
};

const GoldenFile& golden_file() {
  static const GoldenFile file = [] {
    GoldenFile result;
    try {
      std::ifstream stream(kGoldenPath);
      if (!stream) throw std::runtime_error("cannot open the file");
      result.header = nlohmann::json::parse(stream);
      for (const nlohmann::json& e : result.header.at("entries")) {
        GoldenEntry entry{.name = e.at("name").get<std::string>(),
                          .op = e.at("op").get<std::string>(),
                          .attrs = parse_attrs(e.at("attrs"))};
        for (const auto& t : e.at("inputs")) entry.inputs.push_back(parse_tensor(t));
        for (const auto& t : e.at("outputs")) entry.outputs.push_back(parse_tensor(t));
        for (const auto& w : e.at("weights")) entry.weights.push_back(parse_optional_values(w));
        for (const auto& g : e.at("grads")) entry.grads.push_back(parse_optional_values(g));
        result.entries.push_back(std::move(entry));
      }
      result.header.erase("entries");
    } catch (const std::exception& e) {
      result.error = std::string(kGoldenPath) + ": " + e.what();
      result.entries.clear();
    }
    return result;
  }();
  return file;
}

std::vector<GoldenEntry> entries_with_gradients() {
  std::vector<GoldenEntry> result;
  for (const GoldenEntry& entry : golden_file().entries) {
    if (entry.has_gradients()) result.push_back(entry);
  }
  return result;
}

DType resolve_dtype(const std::string& name, DType floating) { return name == "float" ? floating : parse_dtype(name); }

// How one pass over an entry runs: the floating dtype, the kernels, the error bar.
struct Mode {
  DType floating;
  bool reference_only;
  double tolerance;
};
constexpr Mode kReferenceF64{DType::kF64, true, kReferenceTolerance};
constexpr Mode kDefaultF32{DType::kF32, false, kDefaultTolerance};

// Calls fn() with dispatch restricted to reference kernels when the mode asks for it.
template <typename Fn>
void in_mode(const Mode& mode, Fn fn) {
  if (mode.reference_only) {
    ReferenceKernelsScope scope;
    fn();
  } else {
    fn();
  }
}

std::vector<Tensor> make_inputs(const GoldenEntry& entry, const Mode& mode) {
  std::vector<Tensor> inputs;
  for (const GoldenTensor& t : entry.inputs) {
    inputs.push_back(Tensor::from_vector<double>(t.values, t.shape).to(resolve_dtype(t.dtype, mode.floating)));
  }
  return inputs;
}

std::vector<Tensor> run_entry(const GoldenEntry& entry, const std::vector<Tensor>& inputs) {
  return call_op(OpRegistry::global().get(entry.op), std::span<const Tensor>(inputs), entry.attrs);
}

// actual (any dtype) against torch's values, compared in f64.
void expect_matches(const Tensor& actual, const Shape& shape, const std::vector<double>& expected, double tolerance,
                    const std::string& what) {
  ASSERT_EQ(actual.shape(), shape) << what;
  const bool exact = !is_floating(actual.dtype());
  const Comparison result =
      compare_tensors(actual.to(DType::kF64), Tensor::from_vector<double>(expected, shape), exact ? 0.0 : tolerance);
  EXPECT_TRUE(result.ok) << what << ": " << result.message;
}

void check_outputs(const GoldenEntry& entry, const Mode& mode) {
  in_mode(mode, [&] {
    const std::vector<Tensor> outputs = run_entry(entry, make_inputs(entry, mode));
    ASSERT_EQ(outputs.size(), entry.outputs.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      const GoldenTensor& expected = entry.outputs[k];
      const std::string what = entry.op + " output " + std::to_string(k);
      EXPECT_EQ(outputs[k].dtype(), resolve_dtype(expected.dtype, mode.floating)) << what;
      expect_matches(outputs[k], expected.shape, expected.values, mode.tolerance, what);
    }
  });
}

void check_gradients(const GoldenEntry& entry, const Mode& mode) {
  in_mode(mode, [&] {
    const std::vector<Tensor> inputs = make_inputs(entry, mode);
    GradientTape tape;
    for (const Tensor& input : inputs) {
      if (is_floating(input.dtype())) tape.watch(input);
    }
    const std::vector<Tensor> outputs = run_entry(entry, inputs);
    ASSERT_EQ(outputs.size(), entry.weights.size());
    // L = sum_k sum(output_k * w_k), w_k in output_k's dtype (as torch rounds the incoming gradient).
    Tensor loss = zeros({}, DType::kF64);
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!entry.weights[k]) continue;
      const Tensor w = Tensor::from_vector<double>(*entry.weights[k], outputs[k].shape()).to(outputs[k].dtype());
      loss = add(loss, sum(mul(outputs[k], w)).to(DType::kF64));
    }
    const std::vector<Tensor> grads = tape.gradient(loss, inputs, {}, UnconnectedGradients::kZero);
    ASSERT_EQ(grads.size(), entry.grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!entry.grads[i]) continue;
      const std::string what = entry.op + ": d loss / d input " + std::to_string(i);
      ASSERT_TRUE(grads[i].defined()) << what;
      EXPECT_EQ(grads[i].dtype(), inputs[i].dtype()) << what;
      expect_matches(grads[i], inputs[i].shape(), *entry.grads[i], mode.tolerance, what);
    }
  });
}

TEST(OpGoldenFile, LoadsWithTheCurrentVersion) {
  const GoldenFile& file = golden_file();
  ASSERT_TRUE(file.error.empty()) << file.error;
  EXPECT_EQ(file.header.at("version").get<int>(), kGoldenVersion)
      << "op_golden.json has another layout version than this test reads: regenerate it (tests/golden/README.md) "
         "or update the test";
  EXPECT_GT(file.entries.size(), 100u);
  std::set<std::string> names;
  for (const GoldenEntry& entry : file.entries) EXPECT_TRUE(names.insert(entry.name).second) << entry.name;
}

// A new op needs a torch entry in make_op_golden.py, or a line in its
// NO_TORCH_EQUIVALENT saying why not.
TEST(OpGoldenFile, CoversEveryOp) {
  const GoldenFile& file = golden_file();
  ASSERT_TRUE(file.error.empty()) << file.error;
  std::set<std::string> covered;
  for (const GoldenEntry& entry : file.entries) covered.insert(entry.op);
  for (const auto& [op, reason] : file.header.at("no_torch_equivalent").items()) covered.insert(op);
  for (const OpSchema* op : OpRegistry::global().ops()) {
    EXPECT_TRUE(covered.count(op->name)) << op->name
                                         << " has no entry in tests/golden/make_op_golden.py (nor a reason in its "
                                            "NO_TORCH_EQUIVALENT); add one and regenerate op_golden.json";
  }
  for (const std::string& op : covered) {
    EXPECT_NE(OpRegistry::global().find(op), nullptr) << "op_golden.json names op '" << op << "', which is not defined";
  }
}

// A tiny MLP trained for ten SGD steps from torch's initial parameters: the
// losses and the final parameters must follow torch's.
void check_mlp_trajectory(const Mode& mode) {
  const GoldenFile& file = golden_file();
  ASSERT_TRUE(file.error.empty()) << file.error;
  const nlohmann::json& golden = file.header.at("mlp_sgd");
  auto make = [&](const nlohmann::json& j) {
    const GoldenTensor t = parse_tensor(j);
    return Tensor::from_vector<double>(t.values, t.shape).to(resolve_dtype(t.dtype, mode.floating));
  };
  in_mode(mode, [&] {
    const Tensor x = make(golden.at("x"));
    const Tensor labels = make(golden.at("labels"));
    std::vector<Variable> params;
    for (const nlohmann::json& p : golden.at("params")) params.emplace_back(make(p));
    const double learning_rate = golden.at("learning_rate").get<double>();
    const std::vector<double> expected_losses = parse_values(golden.at("losses"));
    std::vector<double> losses;
    for (size_t step = 0; step < expected_losses.size(); ++step) {
      GradientTape tape;
      const Tensor hidden = relu(matmul(x, params[0].value()) + params[1].value());
      const Tensor logits = matmul(hidden, params[2].value()) + params[3].value();
      const Tensor loss = mean(sparse_softmax_cross_entropy(logits, labels));
      const std::vector<Tensor> grads = tape.gradient(loss, params);
      for (size_t i = 0; i < params.size(); ++i) params[i].assign_sub(grads[i] * learning_rate);
      losses.push_back(loss.item<double>());
    }
    const Shape steps{static_cast<int64_t>(losses.size())};
    expect_matches(Tensor::from_vector(losses, steps), steps, expected_losses, mode.tolerance, "losses");
    const nlohmann::json& final_params = golden.at("final_params");
    ASSERT_EQ(final_params.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const GoldenTensor expected = parse_tensor(final_params[i]);
      expect_matches(params[i].value(), expected.shape, expected.values, mode.tolerance,
                     "final parameter " + std::to_string(i));
    }
  });
}

TEST(OpGoldenTrajectory, MlpSgdReferenceF64) { check_mlp_trajectory(kReferenceF64); }
TEST(OpGoldenTrajectory, MlpSgdDefaultF32) { check_mlp_trajectory(kDefaultF32); }

class OpGolden : public ::testing::TestWithParam<GoldenEntry> {};
class OpGoldenGrad : public ::testing::TestWithParam<GoldenEntry> {};

TEST_P(OpGolden, ReferenceF64) { check_outputs(GetParam(), kReferenceF64); }
TEST_P(OpGolden, DefaultF32) { check_outputs(GetParam(), kDefaultF32); }
TEST_P(OpGoldenGrad, ReferenceF64) { check_gradients(GetParam(), kReferenceF64); }
TEST_P(OpGoldenGrad, DefaultF32) { check_gradients(GetParam(), kDefaultF32); }

std::string entry_name(const ::testing::TestParamInfo<GoldenEntry>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Torch, OpGolden, ::testing::ValuesIn(golden_file().entries), entry_name);
INSTANTIATE_TEST_SUITE_P(Torch, OpGoldenGrad, ::testing::ValuesIn(entries_with_gradients()), entry_name);

}  // namespace
}  // namespace nimbus::testing
