// Cases for matmul: every transpose combination, batches, broadcast batches;
// fused_matmul: each activation, transposes, a batch, and sizes where oneDNN
// blocks the product; matmul_pair: a dense layer's two gradient products, small
// (one after the other) and large enough to run side by side.
#include "nimbus/ops/activation_table.h"
#include "op_cases.h"

namespace nimbus::testing {

NIMBUS_OP_CASES(linalg) {
  struct Pattern {
    const char* suffix;
    Shape a, b;
    bool ta, tb;
  };
  const Pattern patterns[] = {
      {"plain", {3, 4}, {4, 5}, false, false},
      {"ta", {4, 3}, {4, 5}, true, false},
      {"tb", {3, 4}, {5, 4}, false, true},
      {"ta_tb", {4, 3}, {5, 4}, true, true},
      {"batched", {2, 3, 4}, {2, 4, 5}, false, false},
      {"broadcast_batch", {2, 1, 3, 4}, {3, 4, 2}, false, false},
      {"weights_shared", {2, 3, 4}, {4, 5}, false, false},
      {"vector_like", {1, 6}, {6, 1}, false, false},
  };
  for (const Pattern& p : patterns) {
    add_op_case({.name = std::string("matmul_") + p.suffix,
                 .op = "matmul",
                 .inputs = {{p.a}, {p.b}},
                 .attrs = {{"transpose_a", p.ta}, {"transpose_b", p.tb}}});
  }
  for (std::string_view activation : fused_activation_names()) {
    add_op_case({.name = "fused_matmul_" + std::string(activation),
                 .op = "fused_matmul",
                 .inputs = {{{5, 7}}, {{7, 6}}, {{6}}},
                 .attrs = {{"transpose_a", false}, {"transpose_b", false}, {"activation", std::string(activation)}}});
  }
  add_op_case({.name = "fused_matmul_ta_tb_relu",
               .op = "fused_matmul",
               .inputs = {{{7, 5}}, {{6, 7}}, {{6}}},
               .attrs = {{"transpose_a", true}, {"transpose_b", true}, {"activation", std::string("relu")}}});
  add_op_case({.name = "fused_matmul_batched_gelu",
               .op = "fused_matmul",
               .inputs = {{{2, 3, 4}}, {{4, 5}}, {{5}}},
               .attrs = {{"transpose_a", false}, {"transpose_b", false}, {"activation", std::string("gelu_tanh")}}});
  add_op_case({.name = "fused_matmul_large_relu",
               .op = "fused_matmul",
               .inputs = {{{64, 200}}, {{200, 96}}, {{96}}},
               .attrs = {{"transpose_a", false}, {"transpose_b", false}, {"activation", std::string("relu")}}});
  // g @ wᵀ and xᵀ @ g; the large ones take 128 x 160 x 96 multiply-adds each, above the calling-thread bound.
  const Attrs gradient_products{
      {"transpose_a0", false}, {"transpose_b0", true}, {"transpose_a1", true}, {"transpose_b1", false}};
  add_op_case({.name = "matmul_pair_small",
               .op = "matmul_pair",
               .inputs = {{{5, 6}}, {{4, 6}}, {{5, 4}}, {{5, 6}}},
               .attrs = gradient_products});
  add_op_case({.name = "matmul_pair_large",
               .op = "matmul_pair",
               .inputs = {{{128, 96}}, {{160, 96}}, {{128, 160}}, {{128, 96}}},
               .attrs = gradient_products});
  add_op_case(
      {.name = "matmul_pair_plain_and_ta_tb",
       .op = "matmul_pair",
       .inputs = {{{3, 4}}, {{4, 5}}, {{4, 3}}, {{5, 4}}},
       .attrs = {{"transpose_a0", false}, {"transpose_b0", false}, {"transpose_a1", true}, {"transpose_b1", true}}});
}

}  // namespace nimbus::testing
