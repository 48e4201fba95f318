// scaled_dot_product_attention (the fused op and its gradient) against
//   - the unfused ops (matmul, scale, mask add, softmax, matmul) run in f64: the reference;
//   - PyTorch 1.13's attention written out in torch ops, in f64 on the same inputs
//     (tests/core/attention_torch_reference.py, one run over every case's inputs);
// in f32 and bf16 (f32 accumulation), causal and with an additive mask, for T = 1, 7, 128
// (two query blocks), 129 (a block and one row) and 1000. The bar is the cross-backend
// harness's normalized error: 1e-5 for f32, 1e-2 for bf16.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "nimbus/autodiff/gradient_tape.h"
#include "nimbus/base/rng.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"
#include "nimbus/ops/nn.h"
#include "nimbus/tensor/npy.h"
#include "op_harness.h"
#include "src/kernels/cpu/simd.h"

namespace nimbus::testing {
namespace {

struct AttentionCase {
  int64_t sequence;
  bool causal;  // else an additive mask (B, 1, T, T) with some keys cut off entirely (-1e9)
  DType dtype;

  int64_t batch() const { return sequence >= 1000 ? 1 : 2; }
  int64_t heads() const { return 2; }
  int64_t head_size() const { return sequence >= 1000 ? 16 : 24; }
  double tolerance() const { return dtype == DType::kF32 ? 1e-5 : 1e-2; }
  std::string name() const {
    return fmt::format("t{}_{}_{}", sequence, causal ? "causal" : "masked", dtype_name(dtype));
  }
};

// Inputs in f64, already rounded to the case's dtype so that every computation sees the same values:
// q, k, v, the mask (undefined when causal) and the output gradient.
struct AttentionInputs {
  Tensor q, k, v, mask, grad_out;
};

AttentionInputs make_attention_inputs(const AttentionCase& c) {
  Generator generator(static_cast<uint64_t>(c.sequence * 4 + (c.causal ? 1 : 0) + (c.dtype == DType::kF32 ? 0 : 2)));
  const auto draw = [&](const Shape& shape, double low, double high) {
    return cast(cast(random_uniform(shape, low, high, DType::kF64, Device::cpu(), &generator), c.dtype), DType::kF64);
  };
  const int64_t b = c.batch(), h = c.heads(), t = c.sequence, d = c.head_size();
  AttentionInputs in;
  in.q = draw({b, h, t, d}, -1.5, 1.5);
  in.k = draw({b, h, t, d}, -1.5, 1.5);
  in.v = draw({b, h, t, d}, -1, 1);
  in.grad_out = draw({b, h, t, d}, -1, 1);
  if (!c.causal) {
    std::vector<double> mask = draw({b, 1, t, t}, -2, 0.5).to_vector<double>();
    // Key padding: the last quarter of the keys of example 0 is cut off, as an attention mask does.
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = t - t / 4; j < t; ++j) mask[static_cast<size_t>(i * t + j)] = -1e9;
    }
    in.mask = Tensor::from_vector(mask, Shape{b, 1, t, t});
  }
  return in;
}

struct AttentionResult {
  Tensor out, grad_q, grad_k, grad_v;  // f64
};

// Runs attention (fused or not) on the inputs cast to `dtype`; returns the output and
// the gradients of sum(out * grad_out), as f64.
AttentionResult run_attention(const AttentionInputs& in, const AttentionCase& c, DType dtype, bool fused) {
  const Tensor q = cast(in.q, dtype), k = cast(in.k, dtype), v = cast(in.v, dtype);
  GradientTape tape;
  for (const Tensor& x : {q, k, v}) tape.watch(x);
  AttentionOptions options{.causal = c.causal, .scale = 0.7};
  if (in.mask.defined()) options.mask = cast(in.mask, dtype);
  const Tensor out =
      fused ? scaled_dot_product_attention(q, k, v, options) : scaled_dot_product_attention_unfused(q, k, v, options);
  const std::vector<Tensor> grads = tape.gradient(out, {q, k, v}, cast(in.grad_out, dtype));
  return {cast(out, DType::kF64), cast(grads[0], DType::kF64), cast(grads[1], DType::kF64),
          cast(grads[2], DType::kF64)};
}

// With one key the probabilities are 1 whatever q and k are: their gradients are exactly zero.
void expect_close(const AttentionResult& actual, const AttentionResult& expected, double tolerance,
                  const std::string& what, bool single_key) {
  const std::pair<const char*, std::pair<Tensor, Tensor>> pairs[] = {{"out", {actual.out, expected.out}},
                                                                     {"grad_q", {actual.grad_q, expected.grad_q}},
                                                                     {"grad_k", {actual.grad_k, expected.grad_k}},
                                                                     {"grad_v", {actual.grad_v, expected.grad_v}}};
  for (const auto& [name, tensors] : pairs) {
    const Comparison comparison = compare_tensors(tensors.first, tensors.second, tolerance);
    EXPECT_TRUE(comparison.ok) << what << ", " << name << ": " << comparison.message;
    const bool zero_gradient = single_key && (std::string(name) == "grad_q" || std::string(name) == "grad_k");
    if (!zero_gradient) EXPECT_LT(zero_fraction(tensors.first), 0.5) << what << ", " << name << " is mostly zeros";
  }
}

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name(); }

std::vector<AttentionCase> attention_cases() {
  std::vector<AttentionCase> cases;
  for (int64_t t : {1, 7, 128, 129, 1000}) {
    for (bool causal : {true, false}) {
      for (DType dtype : {DType::kF32, DType::kBF16}) cases.push_back({t, causal, dtype});
    }
  }
  return cases;
}

class FusedAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(FusedAttention, MatchesTheUnfusedOpsInF64) {
  const AttentionCase& c = GetParam();
  const AttentionInputs in = make_attention_inputs(c);
  const AttentionResult reference = run_attention(in, c, DType::kF64, false);
  expect_close(run_attention(in, c, c.dtype, true), reference, c.tolerance(), "fused " + c.name(), c.sequence == 1);
  // In f32 the unfused ops meet the same bar. In bf16 they round the scores and probabilities to
  // bf16 between ops (errors up to 2.6e-2 measured), which the fused op, in f32 inside, does not.
  if (c.dtype == DType::kF32) {
    expect_close(run_attention(in, c, c.dtype, false), reference, c.tolerance(), "unfused " + c.name(),
                 c.sequence == 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedAttention, ::testing::ValuesIn(attention_cases()),
                         [](const auto& info) { return info.param.name(); });

// ---- against PyTorch ----

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kTorchScript = "tests/core/attention_torch_reference.py";

std::vector<double> read_doubles(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<double> values(bytes.size() / sizeof(double));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  return values;
}

// Every case at once: the inputs of each go to a folder of their own, one run of the torch script
// (one Python start, about 2 s on a quiet machine) computes them all, then each case is compared.
TEST(AttentionVsTorch, MatchesTorchAttentionWrittenInOpsInEveryCase) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / fmt::format("nimbus_attention_torch_{}", ::getpid());
  const std::vector<AttentionCase> cases = attention_cases();
  std::vector<AttentionInputs> inputs;
  for (const AttentionCase& c : cases) {
    const std::filesystem::path dir = root / c.name();
    std::filesystem::create_directories(dir);
    inputs.push_back(make_attention_inputs(c));
    const AttentionInputs& in = inputs.back();
    write_npy(dir / "q.npy", in.q);
    write_npy(dir / "k.npy", in.k);
    write_npy(dir / "v.npy", in.v);
    write_npy(dir / "grad_out.npy", in.grad_out);
    if (in.mask.defined()) write_npy(dir / "mask.npy", in.mask);
    std::ofstream(dir / "attrs.txt") << (c.causal ? "causal" : "masked") << " 0.7\n";
  }
  const std::filesystem::path log =
      std::filesystem::temp_directory_path() / fmt::format("nimbus_attention_torch_{}.log", ::getpid());
  const std::string command = fmt::format("{} {} {} > {} 2>&1", kPython, kTorchScript, root.string(), log.string());
  const int status = std::system(command.c_str());
  std::ifstream log_file(log);
  const std::string log_text((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  std::filesystem::remove(log);
  if (status != 0) {
    std::filesystem::remove_all(root);
    if (log_text.find("No module named 'torch'") != std::string::npos) GTEST_SKIP() << kPython << " has no torch";
    FAIL() << kTorchScript << " failed: " << log_text;
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const AttentionCase& c = cases[i];
    const AttentionInputs& in = inputs[i];
    const std::filesystem::path dir = root / c.name();
    const auto torch_tensor = [&](const char* name, const Tensor& like) {
      std::vector<double> values = read_doubles(dir / (std::string(name) + ".f64"));
      EXPECT_EQ(static_cast<int64_t>(values.size()), like.numel()) << c.name() << " " << name;
      values.resize(static_cast<size_t>(like.numel()));
      return Tensor::from_vector(values, like.shape());
    };
    const AttentionResult torch{torch_tensor("out", in.q), torch_tensor("grad_q", in.q), torch_tensor("grad_k", in.k),
                                torch_tensor("grad_v", in.v)};
    expect_close(run_attention(in, c, c.dtype, true), torch, c.tolerance(), "fused vs torch " + c.name(),
                 c.sequence == 1);
  }
  std::filesystem::remove_all(root);
}

// A row whose every key is masked (-inf) attends to nothing: output 0 and no NaN, in both kernels.
TEST(FusedAttentionEdges, FullyMaskedRowGivesZeros) {
  const Tensor q = ones({1, 1, 3, 4}), k = ones({1, 1, 5, 4}), v = ones({1, 1, 5, 4});
  std::vector<float> mask(15, 0.0f);
  for (int j = 0; j < 5; ++j) mask[static_cast<size_t>(5 + j)] = -std::numeric_limits<float>::infinity();
  const Tensor out = scaled_dot_product_attention(q, k, v, {.mask = Tensor::from_vector(mask, Shape{3, 5})});
  const std::vector<float> values = out.to_vector<float>();
  for (int d = 0; d < 4; ++d) {
    EXPECT_FLOAT_EQ(values[static_cast<size_t>(d)], 1.0f);
    EXPECT_FLOAT_EQ(values[static_cast<size_t>(4 + d)], 0.0f);
  }
}

// The CPU kernel's 32-byte (AVX2) path against the reference loop, in f32 and bf16, forward and backward
// (on this AVX-512 machine the cases above take the 64-byte path).
TEST(FusedAttentionVectorWidths, The32BytePathMatchesTheReferenceToo) {
  struct NarrowVectors {
    NarrowVectors() { cpu::limit_vector_bytes(32); }
    ~NarrowVectors() { cpu::limit_vector_bytes(0); }
  } narrow;
  for (const AttentionCase& c : {AttentionCase{129, true, DType::kF32}, AttentionCase{129, false, DType::kBF16},
                                 AttentionCase{7, false, DType::kF32}}) {
    const AttentionInputs in = make_attention_inputs(c);
    expect_close(run_attention(in, c, c.dtype, true), run_attention(in, c, DType::kF64, false), c.tolerance(),
                 "32-byte vectors, " + c.name(), false);
  }
}

TEST(FusedAttentionErrors, NamesTheShapesAtFault) {
  const Tensor q = ones({2, 4, 8, 16}), k = ones({2, 4, 8, 8});
  try {
    scaled_dot_product_attention(q, k, k);
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 4, 8, 16]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scaled_dot_product_attention"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nimbus::testing
