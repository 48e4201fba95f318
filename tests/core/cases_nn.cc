// Cases for the NN ops: losses, convolution, pooling, normalization, dropout.
#include "op_cases.h"

namespace nimbus::testing {

NIMBUS_OP_CASES(cross_entropy) {
  add_op_case({.name = "sparse_softmax_cross_entropy",
               .op = "sparse_softmax_cross_entropy",
               .inputs = {{{5, 7}, DType::kF32, -4, 4}, {{5}, DType::kI64, 0, 7}}});
  add_op_case({.name = "sparse_softmax_cross_entropy_3d",
               .op = "sparse_softmax_cross_entropy",
               .inputs = {{{2, 3, 4}, DType::kF32, -4, 4}, {{2, 3}, DType::kI32, 0, 4}}});
  add_op_case({.name = "softmax_cross_entropy",
               .op = "softmax_cross_entropy",
               .inputs = {{{4, 6}, DType::kF32, -4, 4}, {{4, 6}, DType::kF32, 0, 1}}});
}

}  // namespace nimbus::testing
