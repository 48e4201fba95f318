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
  // Large enough that the memcpy kernel splits the copy over threads; too large
  // for finite differences, and the small cases check the gradient.
  add_op_case({.name = "concat_many_rows",
               .op = "concat",
               .inputs = {{{512, 64}}, {{512, 32}}},
               .attrs = {{"axis", int64_t{1}}},
               .check_gradient = false});
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
  // Threaded memcpy, as concat_many_rows.
  add_op_case({.name = "split_many_rows",
               .op = "split",
               .inputs = {{{512, 96}}},
               .attrs = {{"sizes", Sizes{64, -1}}, {"axis", int64_t{-1}}},
               .check_gradient = false});
  // Only the first piece reaches the loss: the second's gradient is zeros.
  add_op_case({.name = "split_unused_piece",
               .op = "split",
               .inputs = {{{4, 5}}},
               .attrs = {{"sizes", Sizes{2, 3}}, {"axis", int64_t{1}}},
               .loss_outputs = {0}});
}

NIMBUS_OP_CASES(slice_pad) {
  using Ints = std::vector<int64_t>;
  add_op_case({.name = "slice_2d",
               .op = "slice",
               .inputs = {{{5, 6}}},
               .attrs = {{"begin", Ints{1, 2}}, {"size", Ints{3, -1}}}});
  add_op_case({.name = "slice_middle_axis",
               .op = "slice",
               .inputs = {{{3, 4, 5}}},
               .attrs = {{"begin", Ints{0, 1, 0}}, {"size", Ints{-1, 2, -1}}}});
  add_op_case({.name = "slice_size1_axes",
               .op = "slice",
               .inputs = {{{4, 1, 3}}},
               .attrs = {{"begin", Ints{2, 0, 1}}, {"size", Ints{1, 1, 2}}}});
  add_op_case({.name = "slice_whole",
               .op = "slice",
               .inputs = {{{2, 3}}},
               .attrs = {{"begin", Ints{0, 0}}, {"size", Ints{2, 3}}}});
  // Threaded memcpy, as concat_many_rows.
  add_op_case({.name = "slice_many_rows",
               .op = "slice",
               .inputs = {{{600, 96}}},
               .attrs = {{"begin", Ints{50, 8}}, {"size", Ints{-1, 64}}},
               .check_gradient = false});
  add_op_case({.name = "slice_u8",
               .op = "slice",
               .inputs = {{{4, 4}, DType::kU8, 1, 200}},
               .attrs = {{"begin", Ints{1, 1}}, {"size", Ints{2, 3}}}});

  add_op_case(
      {.name = "pad_2d", .op = "pad", .inputs = {{{3, 4}}}, .attrs = {{"paddings", Ints{1, 2, 0, 3}}, {"value", 0.0}}});
  add_op_case({.name = "pad_value_3d",
               .op = "pad",
               .inputs = {{{2, 3, 2}}},
               .attrs = {{"paddings", Ints{0, 0, 1, 1, 2, 0}}, {"value", 1.5}}});
  add_op_case({.name = "pad_size1_axis",
               .op = "pad",
               .inputs = {{{1, 5}}},
               .attrs = {{"paddings", Ints{2, 2, 0, 0}}, {"value", -1.0}}});
  add_op_case({.name = "pad_i32",
               .op = "pad",
               .inputs = {{{2, 2}, DType::kI32, 1, 9}},
               .attrs = {{"paddings", Ints{1, 0, 0, 1}}, {"value", 7.0}}});
}

NIMBUS_OP_CASES(gather_scatter) {
  // Embedding lookup with repeated rows: their gradients must add up.
  add_op_case({.name = "gather_rows_duplicates",
               .op = "gather",
               .inputs = {{{6, 4}}, {{6}, DType::kI64, 0, 0, {1, 3, 1, 0, 5, 3}}},
               .attrs = {{"axis", int64_t{0}}}});
  add_op_case({.name = "gather_middle_axis_2d_indices",
               .op = "gather",
               .inputs = {{{3, 5, 2}}, {{2, 3}, DType::kI32, 0, 5}},
               .attrs = {{"axis", int64_t{1}}}});
  add_op_case({.name = "gather_last_negative",
               .op = "gather",
               .inputs = {{{4, 3}}, {{4}, DType::kI64, 0, 0, {2, 2, 0, 1}}},
               .attrs = {{"axis", int64_t{-1}}}});
  add_op_case({.name = "gather_scalar_index",
               .op = "gather",
               .inputs = {{{5, 3}}, {{}, DType::kI64, 0, 0, {2}}},
               .attrs = {{"axis", int64_t{0}}}});
  add_op_case({.name = "gather_size1_axis",
               .op = "gather",
               .inputs = {{{1, 4}}, {{3}, DType::kI32, 0, 0, {0, 0, 0}}},
               .attrs = {{"axis", int64_t{0}}}});
  // Threaded memcpy, as concat_many_rows.
  add_op_case({.name = "gather_many_rows",
               .op = "gather",
               .inputs = {{{300, 64}}, {{40, 50}, DType::kI64, 0, 300}},
               .attrs = {{"axis", int64_t{0}}},
               .check_gradient = false});
  add_op_case({.name = "gather_bool",
               .op = "gather",
               .inputs = {{{5, 2}, DType::kBool}, {{4}, DType::kI64, 0, 5}},
               .attrs = {{"axis", int64_t{0}}}});

  add_op_case({.name = "scatter_add_rows_duplicates",
               .op = "scatter_add",
               .inputs = {{{5, 3}}, {{5}, DType::kI64, 0, 0, {0, 2, 0, 3, 2}}},
               .attrs = {{"shape", Shape{4, 3}}, {"axis", int64_t{0}}}});
  add_op_case({.name = "scatter_add_middle_axis",
               .op = "scatter_add",
               .inputs = {{{2, 2, 3, 4}}, {{2, 3}, DType::kI32, 0, 5}},
               .attrs = {{"shape", Shape{2, 5, 4}}, {"axis", int64_t{1}}}});
  add_op_case({.name = "scatter_add_last_negative",
               .op = "scatter_add",
               .inputs = {{{3, 6}}, {{6}, DType::kI64, 0, 0, {3, 0, 3, 1, 2, 3}}},
               .attrs = {{"shape", Shape{3, 4}}, {"axis", int64_t{-1}}}});
  add_op_case({.name = "scatter_add_i32",
               .op = "scatter_add",
               .inputs = {{{4, 2}, DType::kI32, -9, 9}, {{4}, DType::kI64, 0, 0, {1, 1, 0, 2}}},
               .attrs = {{"shape", Shape{3, 2}}, {"axis", int64_t{0}}}});
}

NIMBUS_OP_CASES(triangular) {
  struct Pattern {
    const char* suffix;
    Shape shape;
    int64_t k;
    bool mostly_zero;  // k far below (tril) or above (triu) the diagonal keeps almost nothing
  };
  const Pattern patterns[] = {
      {"square_k0", {4, 4}, 0, false},   {"batch_k1", {2, 3, 5}, 1, false},   {"batch_k_neg1", {3, 4, 4}, -1, false},
      {"wide_k_neg3", {4, 6}, -3, true}, {"size1_rows", {2, 1, 5}, 2, false}, {"k_beyond", {3, 3}, 5, true},
  };
  for (const char* op : {"tril", "triu"}) {
    for (const Pattern& p : patterns) {
      add_op_case({.name = std::string(op) + "_" + p.suffix,
                   .op = op,
                   .inputs = {{p.shape}},
                   .attrs = {{"k", p.k}},
                   .allow_mostly_zero = p.mostly_zero});
    }
    add_op_case({.name = std::string(op) + "_bool",
                 .op = op,
                 .inputs = {{{5, 5}, DType::kBool}},
                 .attrs = {{"k", int64_t{0}}}});
  }
}

NIMBUS_OP_CASES(top_k) {
  // Continuous random values: no ties, so the choice is stable under finite differences.
  add_op_case({.name = "top_k_rows", .op = "top_k", .inputs = {{{5, 8}}}, .attrs = {{"k", int64_t{3}}}});
  add_op_case({.name = "top_k_full_sort_3d", .op = "top_k", .inputs = {{{2, 3, 6}}}, .attrs = {{"k", int64_t{6}}}});
  add_op_case({.name = "top_k_size1_axis", .op = "top_k", .inputs = {{{4, 1}}}, .attrs = {{"k", int64_t{1}}}});
  add_op_case({.name = "top_k_k0", .op = "top_k", .inputs = {{{3, 4}}}, .attrs = {{"k", int64_t{0}}}});
  add_op_case({.name = "top_k_i32_ties",
               .op = "top_k",
               .inputs = {{{3, 10}, DType::kI32, 0, 4}},
               .attrs = {{"k", int64_t{4}}}});
}

}  // namespace nimbus::testing
