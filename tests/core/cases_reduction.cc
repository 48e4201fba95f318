// Cases for reductions and softmax: all axes, one axis, several axes,
// keepdims, negative axes and size-1 axes.
#include "op_cases.h"

namespace nimbus::testing {

NIMBUS_OP_CASES(reduction) {
  struct Pattern {
    const char* suffix;
    Shape shape;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  const Pattern patterns[] = {
      {"all", {3, 4}, {}, false},        {"axis0", {5, 3}, {0}, false},         {"last_keep", {3, 6}, {-1}, true},
      {"middle", {2, 5, 3}, {1}, false}, {"two_axes", {2, 3, 4}, {0, 2}, true}, {"size1_axis", {3, 1, 4}, {1}, false},
  };
  for (const char* op : {"sum", "mean", "reduce_max", "reduce_min", "variance"}) {
    for (const Pattern& p : patterns) {
      // The variance over a size-1 axis is rightly all zeros.
      const bool zero_result = std::string(op) == "variance" && std::string(p.suffix) == "size1_axis";
      add_op_case({.name = std::string(op) + "_" + p.suffix,
                   .op = op,
                   .inputs = {{p.shape}},
                   .attrs = {{"axes", p.axes}, {"keepdims", p.keepdims}},
                   .allow_mostly_zero = zero_result});
    }
  }
  add_op_case({.name = "sum_i32",
               .op = "sum",
               .inputs = {{{4, 5}, DType::kI32, -9, 9}},
               .attrs = {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}}});
  add_op_case({.name = "argmax_last",
               .op = "argmax",
               .inputs = {{{4, 7}}},
               .attrs = {{"axis", int64_t{-1}}, {"keepdims", false}}});
  add_op_case({.name = "argmax_axis0_keep",
               .op = "argmax",
               .inputs = {{{5, 3}}},
               .attrs = {{"axis", int64_t{0}}, {"keepdims", true}}});
  for (const char* op : {"softmax", "log_softmax"}) {
    add_op_case({.name = std::string(op) + "_last",
                 .op = op,
                 .inputs = {{{4, 7}, DType::kF32, -5, 5}},
                 .attrs = {{"axis", int64_t{-1}}}});
    add_op_case({.name = std::string(op) + "_axis1_of_3",
                 .op = op,
                 .inputs = {{{2, 5, 3}, DType::kF32, -5, 5}},
                 .attrs = {{"axis", int64_t{1}}}});
  }
}

}  // namespace nimbus::testing
