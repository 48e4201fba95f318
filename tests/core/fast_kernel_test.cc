// What OpForward does not reach for the vectorized CPU kernels:
//   - in place: the output buffer is an input's (the graph executor's memory
//     plan does this); the result must equal the out-of-place result bit for bit;
//   - f64: the f64 instantiations against the reference (OpForward runs f32);
//   - casts from f16, bf16, f64 and i32 (OpForward makes floating inputs in f32);
//   - the 32-byte paths of the math kernels on AVX-512 machines, which must
//     give the same bits as the 64-byte paths OpForward runs there.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "nimbus/device/backend.h"
#include "nimbus/device/runtime.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/dispatch.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/linalg.h"
#include "nimbus/ops/registry.h"
#include "op_harness.h"
#include "src/kernels/cpu/simd.h"

namespace nimbus::testing {
namespace {

const Shape kLarge{300, 517};

Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::kF32) {
  const OpCase seed_case{.name = "fast_kernel_input_" + shape.to_string() + std::to_string(low),
                         .op = "add",
                         .inputs = {{shape, DType::kF64, low, high}}};
  return make_inputs(seed_case, DType::kF64)[0].to(dtype);
}

Tensor positive(const Tensor& x) { return greater(x, scalar_like(x, 0)); }

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// Runs op with its output written over inputs[alias] and checks it against the out-of-place result.
void expect_in_place_matches(const std::string& op_name, std::vector<Tensor> inputs, size_t alias,
                             const Attrs& attrs = {}) {
  SCOPED_TRACE(op_name + " with the output in input " + std::to_string(alias));
  const OpSchema& op = OpRegistry::global().get(op_name);
  const Tensor expected = call_op(op, std::span<const Tensor>(inputs), attrs)[0];
  ASSERT_EQ(expected.shape(), inputs[alias].shape());
  inputs[alias] = inputs[alias].clone();
  std::vector<Tensor> outputs = {inputs[alias]};
  run_kernel(op, attrs, inputs, outputs);
  EXPECT_TRUE(bitwise_equal(outputs[0], expected));
}

TEST(FastKernels, BinaryOpsInPlace) {
  const Tensor a = uniform(kLarge, -2, 2), b = uniform(kLarge, 0.5, 2), column = uniform({300, 1}, 0.5, 2);
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    expect_in_place_matches(op, {a, b}, 0);
    expect_in_place_matches(op, {a, b}, 1);
    expect_in_place_matches(op, {a, column}, 0);
  }
}

TEST(FastKernels, UnaryOpsInPlace) {
  const Tensor x = uniform(kLarge, 0.1, 4);
  for (const char* op :
       {"neg", "abs", "square", "sqrt", "rsqrt", "relu", "exp", "log", "sigmoid", "tanh", "softplus"}) {
    expect_in_place_matches(op, {x}, 0);
  }
  for (const char* form : {"tanh", "none"}) {
    const Attrs attrs{{"approximate", std::string(form)}};
    expect_in_place_matches("gelu", {x}, 0, attrs);
    expect_in_place_matches("gelu_backward", {uniform(kLarge, -1, 1), x}, 0, attrs);
    expect_in_place_matches("gelu_backward", {uniform(kLarge, -1, 1), x}, 1, attrs);
  }
}

TEST(FastKernels, RowOpsAndWhereInPlace) {
  const Tensor x = uniform(kLarge, -10, 10);
  expect_in_place_matches("softmax", {x}, 0, {{"axis", int64_t{-1}}});
  expect_in_place_matches("log_softmax", {x}, 0, {{"axis", int64_t{-1}}});
  const Tensor cond = positive(uniform(kLarge, -1, 1));
  expect_in_place_matches("where", {cond, x, uniform(kLarge, -1, 1)}, 1);
  expect_in_place_matches("where", {cond, x, uniform(kLarge, -1, 1)}, 2);
}

// The dispatched kernel against the reference on f64 inputs.
void expect_f64_matches_reference(const std::string& op_name, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs = {}) {
  SCOPED_TRACE(op_name);
  const OpSchema& op = OpRegistry::global().get(op_name);
  ASSERT_NE(select_kernel(KernelContext{op, attrs, inputs, {}, default_stream_for(Device::cpu())}).name,
            kReferenceKernel);
  const Tensor fast = call_op(op, std::span<const Tensor>(inputs), attrs)[0];
  Tensor reference;
  {
    ReferenceKernelsScope scope;
    reference = call_op(op, std::span<const Tensor>(inputs), attrs)[0];
  }
  // Exact ops match bit for bit; sums differ from the reference's sequential order by rounding only.
  const Comparison result = compare_tensors(fast, reference, 1e-13);
  EXPECT_TRUE(result.ok) << result.message;
}

TEST(FastKernels, F64MatchesReference) {
  const Tensor a = uniform(kLarge, -2, 2, DType::kF64), b = uniform({517}, 0.5, 2, DType::kF64);
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    expect_f64_matches_reference(op, {a, b});
    expect_f64_matches_reference(op, {uniform({300, 1}, 0.5, 2, DType::kF64), a});
  }
  for (const char* op : {"neg", "abs", "square", "relu"}) expect_f64_matches_reference(op, {a});
  for (const char* op : {"sqrt", "rsqrt"}) expect_f64_matches_reference(op, {b});
  for (const char* op : {"sum", "mean", "reduce_max", "reduce_min"}) {
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{}, {0}, {1}}) {
      expect_f64_matches_reference(op, {a}, {{"axes", axes}, {"keepdims", false}});
    }
  }
  expect_f64_matches_reference("where", {positive(a), a, b});
}

// where selects bits under a mask (no branch per element): NaN payloads, signed zeros, infinities and
// the integer dtypes come through as they are, with a rank-0 operand broadcast as a relu gradient's zero.
template <typename T>
void expect_where_selects_bits(DType dtype, const std::vector<T>& a_values) {
  SCOPED_TRACE(dtype_name(dtype));
  const int64_t n = static_cast<int64_t>(a_values.size());
  std::vector<uint8_t> flags(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) flags[static_cast<size_t>(i)] = (i * 7 + i / 3) % 5 < 2 ? 1 : 0;
  const Tensor cond = Tensor::from_vector<uint8_t>(flags, {n}).to(DType::kBool);
  const Tensor a = Tensor::from_vector<T>(a_values, {n});
  std::vector<T> b_values(a_values.rbegin(), a_values.rend());
  const Tensor b = Tensor::from_vector<T>(b_values, {n});
  const Tensor zero = scalar_like(a, 0);
  const Tensor selected = where(cond, a, b), with_zero = where(cond, a, zero);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const T expected = flags[k] ? a_values[k] : b_values[k];
    const T expected_with_zero = flags[k] ? a_values[k] : T(0);
    EXPECT_EQ(std::memcmp(&selected.data<T>()[i], &expected, sizeof(T)), 0) << "element " << i;
    EXPECT_EQ(std::memcmp(&with_zero.data<T>()[i], &expected_with_zero, sizeof(T)), 0) << "element " << i;
  }
}

TEST(FastKernels, WhereSelectsBitsExactly) {
  std::vector<float> f32;
  std::vector<double> f64;
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::denorm_min(), 3.5f};
  for (int i = 0; i < 1000; ++i) {  // past a vector's width and a row of the broadcast layout
    f32.push_back(i % 7 == 0 ? specials[i / 7 % 5] : float(i) - 500.5f);
    f64.push_back(i % 7 == 0 ? -0.0 : double(i) * 1e300);
    i32.push_back(i % 2 ? std::numeric_limits<int32_t>::min() + i : i);
    i64.push_back(i % 2 ? std::numeric_limits<int64_t>::max() - i : -i);
  }
  expect_where_selects_bits(DType::kF32, f32);
  expect_where_selects_bits(DType::kF64, f64);
  expect_where_selects_bits(DType::kI32, i32);
  expect_where_selects_bits(DType::kI64, i64);
}

// The smallest products run on the calling thread (onednn_matmul.cc): on both of oneDNN's paths (sgemm for
// a plain matmul, a primitive for fused_matmul) the result matches the reference kernel and the compute
// threads are what they were before the call.
TEST(FastKernels, SmallMatmulsMatchTheReferenceAndKeepTheThreadCount) {
  const int threads = compute_threads();
  const Tensor a = uniform({64, 40}, -1, 1), b = uniform({40, 10}, -1, 1), bias = uniform({10}, -1, 1);
  const Tensor product = matmul(a, b), fused = fused_matmul(a, b, bias, "relu");
  const Tensor transposed = matmul(b, a, true, true);
  EXPECT_EQ(compute_threads(), threads);
  ReferenceKernelsScope reference;
  EXPECT_TRUE(compare_tensors(product, matmul(a, b), 1e-5).ok);
  EXPECT_TRUE(compare_tensors(fused, fused_matmul(a, b, bias, "relu"), 1e-5).ok);
  EXPECT_TRUE(compare_tensors(transposed, matmul(b, a, true, true), 1e-5).ok);
}

TEST(FastKernels, CastsToF32MatchReference) {
  const Tensor values = uniform(kLarge, -70000, 70000);
  const OpSchema& cast = OpRegistry::global().get("cast");
  const Attrs to_f32{{"dtype", DType::kF32}};
  for (DType from : {DType::kF16, DType::kBF16, DType::kF64, DType::kI32}) {
    SCOPED_TRACE(dtype_name(from));
    const Tensor source = values.to(from);
    const std::vector<Tensor> inputs = {source};
    const Tensor fast = call_op(cast, std::span<const Tensor>(inputs), to_f32)[0];
    ReferenceKernelsScope scope;
    EXPECT_TRUE(bitwise_equal(fast, call_op(cast, std::span<const Tensor>(inputs), to_f32)[0]));
  }
}

// Forces the 32-byte vector paths while alive.
class NarrowVectorsScope {
 public:
  NarrowVectorsScope() { cpu::limit_vector_bytes(32); }
  ~NarrowVectorsScope() { cpu::limit_vector_bytes(0); }
  NarrowVectorsScope(const NarrowVectorsScope&) = delete;
  NarrowVectorsScope& operator=(const NarrowVectorsScope&) = delete;
};

TEST(FastKernels, MathKernelsGiveTheSameBitsAtEveryVectorWidth) {
  // Skipped only where there is nothing to compare: without AVX-512 the
  // 64-byte paths do not exist. This project's machines have AVX-512, so it runs here.
  if (!cpu::has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512, so only the 32-byte paths exist";
  const Tensor x = uniform({301, 517}, -12, 12), g = uniform({301, 517}, -1, 1);
  const Tensor labels = uniform({301}, 0, 517).to(DType::kI64), row_values = uniform({301}, 0.5, 2);
  const Tensor gamma = uniform({517}, 0.5, 2), beta = uniform({517}, -1, 1);
  struct Call {
    std::string op;
    std::vector<Tensor> inputs;
    Attrs attrs;
  };
  std::vector<Call> calls = {{"exp", {x}, {}},
                             {"log", {x}, {}},
                             {"sigmoid", {x}, {}},
                             {"tanh", {x}, {}},
                             {"softplus", {x}, {}},
                             {"softmax", {x}, {{"axis", int64_t{-1}}}},
                             {"log_softmax", {x}, {{"axis", int64_t{-1}}}},
                             {"sparse_softmax_cross_entropy", {x, labels}, {}},
                             {"sparse_softmax_cross_entropy_backward", {x, labels, row_values}, {}},
                             {"layer_norm", {x, gamma, beta}, {{"epsilon", 1e-5}}},
                             {"layer_norm_backward", {g, x, gamma, row_values, row_values}, {}}};
  for (const char* form : {"tanh", "none"}) {
    calls.push_back({"gelu", {x}, {{"approximate", std::string(form)}}});
    calls.push_back({"gelu_backward", {g, x}, {{"approximate", std::string(form)}}});
  }
  for (const Call& call : calls) {
    SCOPED_TRACE(call.op);
    const OpSchema& op = OpRegistry::global().get(call.op);
    const Tensor wide = call_op(op, std::span<const Tensor>(call.inputs), call.attrs)[0];
    NarrowVectorsScope narrow;
    EXPECT_TRUE(bitwise_equal(wide, call_op(op, std::span<const Tensor>(call.inputs), call.attrs)[0]));
  }
}

}  // namespace
}  // namespace nimbus::testing
