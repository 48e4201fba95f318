// Cases for scaled_dot_product_attention and its backward op: the CPU's
// blocked kernel (and the GPU harness's CUDA kernel) against the reference
// loops (shapes across and inside the 64-row and 64-key blocks, causal, masked,
// head sizes that are not a vector multiple), and autodiff (through both
// outputs, and into the mask: the backward op's score gradient) against finite
// differences.
#include <string>

#include "op_cases.h"

namespace nimbus::testing {

namespace {

// q (B, H, T, D), k (B, H, S, D), v (B, H, S, Dv).
std::vector<InputSpec> attention_inputs(int64_t b, int64_t h, int64_t t, int64_t s, int64_t d, int64_t dv) {
  return {{{b, h, t, d}}, {{b, h, s, d}}, {{b, h, s, dv}}};
}

}  // namespace

NIMBUS_OP_CASES(attention) {
  struct Size {
    const char* suffix;
    int64_t b, h, t, s, d, dv;
    bool gradient;  // the f64 finite differences cost O(inputs x T x S): small shapes only
  };
  const Size sizes[] = {{"t1", 2, 2, 1, 1, 4, 4, true},
                        {"t7", 1, 2, 7, 7, 5, 3, true},
                        {"cross_lengths", 2, 1, 5, 9, 6, 7, true},
                        {"t129", 1, 2, 129, 129, 16, 16, false},
                        {"long_keys", 1, 1, 70, 200, 20, 33, false}};
  for (const Size& size : sizes) {
    for (bool causal : {false, true}) {
      const std::string name = std::string("attention_") + size.suffix + (causal ? "_causal" : "");
      add_op_case({.name = name,
                   .op = "scaled_dot_product_attention",
                   .inputs = attention_inputs(size.b, size.h, size.t, size.s, size.d, size.dv),
                   .attrs = {{"scale", 0.6}, {"causal", causal}},
                   .check_gradient = size.gradient});
    }
    std::vector<InputSpec> masked = attention_inputs(size.b, size.h, size.t, size.s, size.d, size.dv);
    // A mask broadcast over the heads; its gradient is the scores' summed over them.
    masked.push_back({{size.b, 1, size.t, size.s}, DType::kF32, -3, 1});
    add_op_case({.name = std::string("attention_") + size.suffix + "_masked",
                 .op = "scaled_dot_product_attention",
                 .inputs = masked,
                 .attrs = {{"scale", 0.45}, {"causal", false}},
                 .check_gradient = size.gradient});
  }

  // A key-padding mask (B, 1, 1, S), broadcast over heads and queries, with causal on top.
  std::vector<InputSpec> padded = attention_inputs(2, 2, 6, 6, 4, 5);
  padded.push_back({{2, 1, 1, 6}, DType::kF32, -3, 1});
  add_op_case({.name = "attention_key_padding_causal",
               .op = "scaled_dot_product_attention",
               .inputs = padded,
               .attrs = {{"scale", 0.5}, {"causal", true}}});

  for (bool causal : {false, true}) {
    // grad_out, q, k, v, out, logsumexp, grad_logsumexp: any values; the kernels must agree on them.
    const int64_t b = 1, h = 2, t = 67, s = 67, d = 9, dv = 12;
    std::vector<InputSpec> inputs = {{{b, h, t, dv}}};
    for (InputSpec& spec : attention_inputs(b, h, t, s, d, dv)) inputs.push_back(spec);
    inputs.push_back({{b, h, t, dv}});
    // The row statistics stay f32 when the other inputs are 16-bit (the GPU harness's bf16 and f16 runs).
    inputs.push_back({{b, h, t}, DType::kF32, 1, 3, {}, true});
    inputs.push_back({{b, h, t}, DType::kF32, -2, 2, {}, true});
    add_op_case({.name = std::string("attention_backward") + (causal ? "_causal" : ""),
                 .op = "scaled_dot_product_attention_backward",
                 .inputs = inputs,
                 .attrs = {{"scale", 0.5}, {"causal", causal}, {"score_gradient", false}}});
  }
}

}  // namespace nimbus::testing
