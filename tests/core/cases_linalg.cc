// Cases for matmul: every transpose combination, batches, broadcast batches.
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
}

}  // namespace nimbus::testing
