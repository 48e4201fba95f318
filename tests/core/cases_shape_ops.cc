// Cases for the shape ops that select, join and rearrange elements: concat,
// split, slice, pad, gather, scatter_add, tril, triu, top_k. First, middle and
// last axes, negative axes, size-1 axes; duplicate indices so that gradients
// must accumulate.
#include "op_cases.h"

namespace nimbus::testing {

NIMBUS_OP_CASES(concat_split) {
  using Sizes = std::vector<int64_t>;
  add_op_case({.name = "concat_axis0",
               .op = "concat",
               .inputs = {{{2, 3}}, {{4, 3}}, {{1, 3}}},
               .attrs = {{"axis", int64_t{0}}}});
  add_op_case({.name = "concat_middle",
               .op = "concat",
               .inputs = {{{2, 3, 4}}, {{2, 1, 4}}, {{2, 2, 4}}},
               .attrs = {{"axis", int64_t{1}}}});
  add_op_case({.name = "concat_last_negative",
               .op = "concat",
               .inputs = {{{3, 2}}, {{3, 5}}},
               .attrs = {{"axis", int64_t{-1}}}});
  add_op_case({.name = "concat_one_input", .op = "concat", .inputs = {{{3, 4}}}, .attrs = {{"axis", int64_t{1}}}});
  add_op_case({.name = "concat_i64",
               .op = "concat",
               .inputs = {{{2, 2}, DType::kI64, -50, 50}, {{2, 3}, DType::kI64, -50, 50}},
               .attrs = {{"axis", int64_t{1}}}});

  add_op_case({.name = "split_axis0",
               .op = "split",
               .inputs = {{{5, 3}}},
               .attrs = {{"sizes", Sizes{2, 3}}, {"axis", int64_t{0}}}});
  add_op_case({.name = "split_middle_rest",
               .op = "split",
               .inputs = {{{2, 6, 3}}},
               .attrs = {{"sizes", Sizes{1, -1, 2}}, {"axis", int64_t{1}}}});
  add_op_case({.name = "split_last_negative",
               .op = "split",
               .inputs = {{{3, 4}}},
               .attrs = {{"sizes", Sizes{1, 1, 2}}, {"axis", int64_t{-1}}}});
  add_op_case({.name = "split_empty_piece",
               .op = "split",
               .inputs = {{{4, 2}}},
               .attrs = {{"sizes", Sizes{0, 4}}, {"axis", int64_t{0}}}});
  // Only the first piece reaches the loss: the second's gradient is zeros.
  add_op_case({.name = "split_unused_piece",
               .op = "split",
               .inputs = {{{4, 5}}},
               .attrs = {{"sizes", Sizes{2, 3}}, {"axis", int64_t{1}}},
               .loss_outputs = {0}});
}

}  // namespace nimbus::testing
