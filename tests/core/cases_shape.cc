// Cases for shape ops.
#include "op_cases.h"

namespace nimbus::testing {

NIMBUS_OP_CASES(shape_basic) {
  add_op_case({.name = "reshape_flatten", .op = "reshape", .inputs = {{{2, 3, 4}}}, .attrs = {{"shape", Shape{6, 4}}}});
  add_op_case({.name = "reshape_to_scalar", .op = "reshape", .inputs = {{{1, 1}}}, .attrs = {{"shape", Shape{}}}});
  add_op_case({.name = "transpose_2d",
               .op = "transpose",
               .inputs = {{{3, 5}}},
               .attrs = {{"perm", std::vector<int64_t>{1, 0}}}});
  add_op_case({.name = "transpose_3d",
               .op = "transpose",
               .inputs = {{{2, 3, 4}}},
               .attrs = {{"perm", std::vector<int64_t>{2, 0, 1}}}});
  // The last axis kept: attention's (batch, sequence, heads, size) <-> (batch, heads, sequence, size).
  add_op_case({.name = "transpose_keeps_last_axis",
               .op = "transpose",
               .inputs = {{{2, 5, 3, 4}}},
               .attrs = {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}});
  add_op_case(
      {.name = "broadcast_to_rows", .op = "broadcast_to", .inputs = {{{4}}}, .attrs = {{"shape", Shape{3, 4}}}});
  add_op_case({.name = "broadcast_to_size1",
               .op = "broadcast_to",
               .inputs = {{{3, 1, 2}}},
               .attrs = {{"shape", Shape{2, 3, 5, 2}}}});
}

}  // namespace nimbus::testing

namespace nimbus::testing {

NIMBUS_OP_CASES(all_reduce) {
  // Outside a replica the op is the identity; tests/distribute runs it across replicas.
  add_op_case({.name = "all_reduce_bucket", .op = "all_reduce", .inputs = {{{3, 4}}, {{5}}}});
  // Outside a replica start hands nothing over (ticket -1) and wait returns its tensors.
  add_op_case({.name = "all_reduce_start_bucket", .op = "all_reduce_start", .inputs = {{{3, 4}}, {{5}}}});
  add_op_case({.name = "all_reduce_wait_bucket",
               .op = "all_reduce_wait",
               .inputs = {{{}, DType::kI64, 0, 0, {-1}}, {{3, 4}}, {{5}}}});
}

NIMBUS_OP_CASES(one_hot) {
  add_op_case({.name = "one_hot_i64",
               .op = "one_hot",
               .inputs = {{{2, 3}, DType::kI64, 0, 5}},
               .attrs = {{"depth", int64_t{5}}, {"dtype", DType::kF32}, {"on", 1.0}, {"off", 0.0}},
               .allow_mostly_zero = true});
  add_op_case({.name = "one_hot_on_off",
               .op = "one_hot",
               .inputs = {{{4}, DType::kI32, 0, 3}},
               .attrs = {{"depth", int64_t{3}}, {"dtype", DType::kF32}, {"on", 0.9}, {"off", 0.05}}});
}

}  // namespace nimbus::testing
