// Cases that steer the vectorized CPU kernels (src/kernels/cpu/) down each of
// their paths, so that OpForward checks every path against the reference:
// tensors large enough to split across threads (300 x 517 = 155,100 elements,
// above every grain), lengths that are not a multiple of the vector width,
// each broadcast layout (same shape, scalar on either side, rows, columns,
// generic), multi-block reductions, empty tensors, and special values
// (NaN, +-Inf, -0, subnormals, values past the overflow limits).
//
// The large and special-value cases skip the f64 gradient check
// (check_gradient = false): the gradient rules are checked on the small
// cases in cases_<family>.cc, finite differences over 155,100 elements would
// take minutes, and they are meaningless at NaN and Inf. The small odd-length
// cases keep it, which runs the f64 fast kernels against finite differences.
//
// Every case holds the default 1e-5 forward tolerance: the f32 approximations
// of vector_math.h are within a few ulp (tests/core/vector_math_test.cc).
#include <limits>

#include "op_cases.h"

namespace nimbus::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const Shape kLarge{300, 517};

// 19 values (two vectors and a tail) covering the special cases of f32 math.
const std::vector<double> kSpecial = {kNaN, kInf, -kInf, 0.0,   -0.0, 1e-30, -1e-30, 1e-40, 1e30, -1e30,
                                      88.5, 89.0, -87.5, -104., 0.5,  -0.5,  3.0,    -3.0,  20.0};
// The same values in another order, as a second operand.
const std::vector<double> kSpecialShuffled = {-0.0, 3.0,  kNaN,  -kInf, 0.5,  kInf,  1e30, -3.0,  0.0,  20.0,
                                              -0.5, 88.5, 1e-40, -1e30, 89.0, -104., kNaN, -87.5, 1e-30};

struct Pattern {
  const char* suffix;
  Shape a, b;
  bool large;
};

const Pattern kBinaryPatterns[] = {
    {"same", kLarge, kLarge, true},
    {"scalar_right", kLarge, {}, true},
    {"scalar_left", {}, kLarge, true},
    {"rows", kLarge, {517}, true},
    {"rows_left", {517}, kLarge, true},
    {"cols", {300, 1}, kLarge, true},
    {"cols_right", kLarge, {300, 1}, true},
    {"generic", {20, 1, 517}, {1, 31, 1}, true},
    {"generic_small", {7, 1, 33}, {5, 1}, false},
    {"odd", {19}, {19}, false},
    {"odd_rows", {3, 1031}, {1031}, false},
    {"empty", {0, 5}, {5}, false},
};

}  // namespace

NIMBUS_OP_CASES(fast_binary) {
  for (const char* op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    const bool is_div = std::string(op) == "div";
    for (const Pattern& p : kBinaryPatterns) {
      // Divisors away from zero, where the quotient blows up.
      const InputSpec b = is_div ? InputSpec{p.b, DType::kF32, 0.5, 2.0} : InputSpec{p.b};
      add_op_case(
          {.name = std::string(op) + "_fast_" + p.suffix, .op = op, .inputs = {{p.a}, b}, .check_gradient = !p.large});
    }
    add_op_case({.name = std::string(op) + "_fast_special",
                 .op = op,
                 .inputs = {{{19}, DType::kF32, 0, 0, kSpecial}, {{19}, DType::kF32, 0, 0, kSpecialShuffled}},
                 .check_gradient = false});
  }
  add_op_case({.name = "add_fast_i32_rows",
               .op = "add",
               .inputs = {{kLarge, DType::kI32, -1000, 1000}, {{517}, DType::kI32, -1000, 1000}}});
  add_op_case({.name = "mul_fast_i64_cols",
               .op = "mul",
               .inputs = {{kLarge, DType::kI64, -1000, 1000}, {{300, 1}, DType::kI64, -1000, 1000}}});
  add_op_case({.name = "maximum_fast_i32_scalar",
               .op = "maximum",
               .inputs = {{kLarge, DType::kI32, -1000, 1000}, {{}, DType::kI32, -10, 10}}});
  add_op_case({.name = "sub_fast_i64_odd",
               .op = "sub",
               .inputs = {{{1031}, DType::kI64, -1000, 1000}, {{1031}, DType::kI64, -1000, 1000}}});
}

NIMBUS_OP_CASES(fast_comparison) {
  for (const char* op : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
    add_op_case({.name = std::string(op) + "_fast_rows", .op = op, .inputs = {{kLarge}, {{517}}}});
    add_op_case({.name = std::string(op) + "_fast_special",
                 .op = op,
                 .inputs = {{{19}, DType::kF32, 0, 0, kSpecial}, {{19}, DType::kF32, 0, 0, kSpecialShuffled}},
                 .allow_mostly_zero = true});
  }
  add_op_case({.name = "less_fast_i64_cols",
               .op = "less",
               .inputs = {{kLarge, DType::kI64, 0, 5}, {{300, 1}, DType::kI64, 0, 5}}});
  add_op_case({.name = "where_fast_same",
               .op = "where",
               .inputs = {{kLarge, DType::kBool}, {kLarge}, {kLarge}},
               .check_gradient = false});
  add_op_case({.name = "where_fast_scalar",
               .op = "where",
               .inputs = {{kLarge, DType::kBool}, {kLarge}, {{}}},
               .check_gradient = false});
  add_op_case({.name = "where_fast_cols_rows",
               .op = "where",
               .inputs = {{{300, 1}, DType::kBool}, {{517}}, {kLarge}},
               .check_gradient = false});
  add_op_case({.name = "where_fast_odd", .op = "where", .inputs = {{{19}, DType::kBool}, {{19}}, {{19}}}});
  add_op_case({.name = "where_fast_i32",
               .op = "where",
               .inputs = {{kLarge, DType::kBool}, {kLarge, DType::kI32, -9, 9}, {{517}, DType::kI32, -9, 9}}});
}

NIMBUS_OP_CASES(fast_unary) {
  struct Unary {
    const char* op;
    double low, high;
  };
  // Wide ranges reach the range reductions; normalized error scales by the
  // largest result, which stays moderate (and so do the losses of the f64
  // gradient check on the odd-length cases, whose finite differences lose
  // precision in proportion).
  const Unary unaries[] = {
      {"neg", -5, 5},       {"abs", -5, 5},    {"square", -5, 5},     {"sqrt", 0.001, 100},
      {"rsqrt", 0.01, 100}, {"relu", -5, 5},   {"exp", -10, 3},       {"log", 1e-3, 1e3},
      {"sigmoid", -20, 20}, {"tanh", -10, 10}, {"softplus", -20, 20},
  };
  for (const Unary& u : unaries) {
    add_op_case({.name = std::string(u.op) + "_fast_large",
                 .op = u.op,
                 .inputs = {{kLarge, DType::kF32, u.low, u.high}},
                 .check_gradient = false});
    add_op_case(
        {.name = std::string(u.op) + "_fast_odd", .op = u.op, .inputs = {{{1031}, DType::kF32, u.low, u.high}}});
    add_op_case({.name = std::string(u.op) + "_fast_special",
                 .op = u.op,
                 .inputs = {{{19}, DType::kF32, 0, 0, kSpecial}},
                 .allow_mostly_zero = true,
                 .check_gradient = false});
    add_op_case({.name = std::string(u.op) + "_fast_empty", .op = u.op, .inputs = {{{0, 3}}}});
  }
  for (const char* form : {"tanh", "none"}) {
    const Attrs attrs{{"approximate", std::string(form)}};
    add_op_case({.name = std::string("gelu_fast_large_") + form,
                 .op = "gelu",
                 .inputs = {{kLarge, DType::kF32, -8, 8}},
                 .attrs = attrs,
                 .check_gradient = false});
    add_op_case({.name = std::string("gelu_fast_odd_") + form,
                 .op = "gelu",
                 .inputs = {{{1031}, DType::kF32, -8, 8}},
                 .attrs = attrs});
    add_op_case({.name = std::string("gelu_fast_special_") + form,
                 .op = "gelu",
                 .inputs = {{{19}, DType::kF32, 0, 0, kSpecial}},
                 .attrs = attrs,
                 .check_gradient = false});
    add_op_case({.name = std::string("gelu_backward_fast_large_") + form,
                 .op = "gelu_backward",
                 .inputs = {{kLarge}, {kLarge, DType::kF32, -8, 8}},
                 .attrs = attrs});
    add_op_case({.name = std::string("gelu_backward_fast_odd_") + form,
                 .op = "gelu_backward",
                 .inputs = {{{1031}}, {{1031}, DType::kF32, -8, 8}},
                 .attrs = attrs});
    add_op_case({.name = std::string("gelu_backward_fast_special_") + form,
                 .op = "gelu_backward",
                 .inputs = {{{19}, DType::kF32, 0, 0, kSpecialShuffled}, {{19}, DType::kF32, 0, 0, kSpecial}},
                 .attrs = attrs});
  }
}

// relu_bias_backward's vectorized kernel: several blocks of rows and of columns (300 x 517: 5 x 3 blocks, the
// last ones partial, split over threads), one block (a batch-32 dense layer), and special values in both inputs
// (NaN in y selects 0; NaN or Inf in grad_y where y > 0 reaches the sum).
NIMBUS_OP_CASES(fast_relu_bias_backward) {
  add_op_case({.name = "relu_bias_backward_fast_large",
               .op = "relu_bias_backward",
               .inputs = {{kLarge}, {kLarge}},
               .check_gradient = false});
  add_op_case(
      {.name = "relu_bias_backward_fast_one_block", .op = "relu_bias_backward", .inputs = {{{32, 70}}, {{32, 70}}}});
  add_op_case({.name = "relu_bias_backward_fast_special",
               .op = "relu_bias_backward",
               .inputs = {{{19, 1}, DType::kF32, 0, 0, kSpecialShuffled}, {{19, 1}, DType::kF32, 0, 0, kSpecial}},
               .check_gradient = false});
}

NIMBUS_OP_CASES(fast_cast_fill) {
  // Values that round to ties, overflow f16, and fall into f16 subnormals.
  const std::vector<double> rounding = {1.0 + 1.0 / 2048,
                                        1.0 + 3.0 / 2048,
                                        65504,
                                        65520,
                                        1e5,
                                        -1e5,
                                        6e-8,
                                        3e-8,
                                        1e-6,
                                        -1e-6,
                                        kNaN,
                                        kInf,
                                        -kInf,
                                        -0.0,
                                        0.0,
                                        1.0 + 1.0 / 256,
                                        1.0 + 3.0 / 256,
                                        3.14159,
                                        -2.71828};
  for (DType dtype : {DType::kF16, DType::kBF16, DType::kF64}) {
    const std::string name = std::string(dtype_name(dtype));
    add_op_case({.name = "cast_fast_f32_to_" + name,
                 .op = "cast",
                 .inputs = {{kLarge}},
                 .attrs = {{"dtype", dtype}},
                 .check_gradient = false});
    add_op_case({.name = "cast_fast_special_f32_to_" + name,
                 .op = "cast",
                 .inputs = {{{19}, DType::kF32, 0, 0, rounding}},
                 .attrs = {{"dtype", dtype}},
                 .check_gradient = false});
  }
  add_op_case({.name = "cast_fast_f32_to_i32",
               .op = "cast",
               .inputs = {{kLarge, DType::kF32, -1e6, 1e6}},
               .attrs = {{"dtype", DType::kI32}},
               .check_gradient = false});
  add_op_case({.name = "cast_fast_i32_to_f32",
               .op = "cast",
               .inputs = {{kLarge, DType::kI32, -(1 << 30), 1 << 30}},
               .attrs = {{"dtype", DType::kF32}}});
  add_op_case({.name = "cast_fast_u8_to_f32",
               .op = "cast",
               .inputs = {{kLarge, DType::kU8, 0, 255}},
               .attrs = {{"dtype", DType::kF32}},
               .check_gradient = false});
  add_op_case({.name = "cast_fast_f32_to_f32",
               .op = "cast",
               .inputs = {{kLarge}},
               .attrs = {{"dtype", DType::kF32}},
               .check_gradient = false});
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kBool}) {
    add_op_case({.name = "fill_fast_" + std::string(dtype_name(dtype)),
                 .op = "fill",
                 .attrs = {{"shape", kLarge}, {"dtype", dtype}, {"value", 1.0}}});
  }
}

NIMBUS_OP_CASES(fast_reduction) {
  struct Layout {
    const char* suffix;
    Shape shape;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  const Layout layouts[] = {
      {"trailing", kLarge, {-1}, false},        // rows, split across threads
      {"leading", kLarge, {0}, false},          // bias gradient (N,D) -> (D), 5 row blocks
      {"all", kLarge, {}, false},               // 19 blocks of 8192 combined in order
      {"middle", {6, 700, 33}, {1}, true},      // (outer, reduced, inner) with 3 row blocks
      {"long_rows", {3, 20000}, {1}, false},    // 3 blocks per row
      {"tall", {20000, 3}, {0}, false},         // narrow columns, 79 row blocks
      {"merged", {5, 1, 7, 9}, {2, 3}, false},  // size-1 axis dropped, two trailing axes merged
      {"size1_middle", {5, 1, 7, 9}, {1, 2}, true},
      {"odd", {1031}, {0}, false},
  };
  for (const char* op : {"sum", "mean", "reduce_max", "reduce_min"}) {
    for (const Layout& l : layouts) {
      add_op_case({.name = std::string(op) + "_fast_" + l.suffix,
                   .op = op,
                   .inputs = {{l.shape}},
                   .attrs = {{"axes", l.axes}, {"keepdims", l.keepdims}},
                   .check_gradient = l.shape.numel() < 2000});
    }
    // Rows: +inf among finite values, -inf, both infinities, NaN, and signed zeros.
    const std::vector<double> special = {1, kInf, -2,   3, -0.0, -kInf, 1, 2,    3,   4,    kInf, -kInf, 1,
                                         2, 3,    kNaN, 1, 2,    3,     4, -0.0, 0.0, -1.0, -2.0, -3.0};
    for (int64_t axis : {0, 1}) {
      add_op_case({.name = std::string(op) + "_fast_special_axis" + std::to_string(axis),
                   .op = op,
                   .inputs = {{{5, 5}, DType::kF32, 0, 0, special}},
                   .attrs = {{"axes", std::vector<int64_t>{axis}}, {"keepdims", false}},
                   .allow_mostly_zero = true,
                   .check_gradient = false});
    }
  }
  for (const char* op : {"sum", "mean"}) {
    add_op_case({.name = std::string(op) + "_fast_empty",
                 .op = op,
                 .inputs = {{{0, 5}}},
                 .attrs = {{"axes", std::vector<int64_t>{0}}, {"keepdims", false}},
                 .check_gradient = false});
  }
}

NIMBUS_OP_CASES(fast_softmax) {
  for (const char* op : {"softmax", "log_softmax"}) {
    const Attrs last{{"axis", int64_t{-1}}};
    add_op_case({.name = std::string(op) + "_fast_large",
                 .op = op,
                 .inputs = {{kLarge, DType::kF32, -10, 10}},
                 .attrs = last,
                 .check_gradient = false});
    add_op_case({.name = std::string(op) + "_fast_odd",
                 .op = op,
                 .inputs = {{{3, 1031}, DType::kF32, -10, 10}},
                 .attrs = last});
    add_op_case({.name = std::string(op) + "_fast_trailing_size1",
                 .op = op,
                 .inputs = {{{4, 19, 1}, DType::kF32, -5, 5}},
                 .attrs = {{"axis", int64_t{1}}}});
    // Rows: one -inf (fine), one +inf, one NaN, all -inf (the last three give NaN rows).
    add_op_case({.name = std::string(op) + "_fast_special",
                 .op = op,
                 .inputs = {{{4, 5}, DType::kF32, 0, 0, {1, -kInf, 2, 3, 0.5, 1,     kInf,  2,     3,     0.5,
                                                         1, kNaN,  2, 3, 0.5, -kInf, -kInf, -kInf, -kInf, -kInf}}},
                 .attrs = last,
                 .check_gradient = false});
    add_op_case({.name = std::string(op) + "_fast_empty", .op = op, .inputs = {{{0, 5}}}, .attrs = last});
  }
  add_op_case({.name = "sparse_softmax_cross_entropy_fast_large",
               .op = "sparse_softmax_cross_entropy",
               .inputs = {{kLarge, DType::kF32, -10, 10}, {{300}, DType::kI64, 0, 517}},
               .check_gradient = false});
  add_op_case({.name = "sparse_softmax_cross_entropy_fast_u8",
               .op = "sparse_softmax_cross_entropy",
               .inputs = {{{1000, 10}, DType::kF32, -10, 10}, {{1000}, DType::kU8, 0, 10}},
               .check_gradient = false});
  add_op_case({.name = "sparse_softmax_cross_entropy_fast_odd",
               .op = "sparse_softmax_cross_entropy",
               .inputs = {{{33, 19}, DType::kF32, -5, 5}, {{33}, DType::kI32, 0, 19}}});
  // Its gradient op: not differentiable itself, so forward checks only.
  add_op_case({.name = "sparse_softmax_cross_entropy_backward_fast_large",
               .op = "sparse_softmax_cross_entropy_backward",
               .inputs = {{kLarge, DType::kF32, -10, 10}, {{300}, DType::kI64, 0, 517}, {{300}, DType::kF32, -2, 2}},
               .check_gradient = false});
  add_op_case(
      {.name = "sparse_softmax_cross_entropy_backward_fast_3d_u8",
       .op = "sparse_softmax_cross_entropy_backward",
       .inputs = {{{4, 50, 10}, DType::kF32, -10, 10}, {{4, 50}, DType::kU8, 0, 10}, {{4, 50}, DType::kF32, -2, 2}},
       .check_gradient = false});
  add_op_case({.name = "sparse_softmax_cross_entropy_backward_fast_odd",
               .op = "sparse_softmax_cross_entropy_backward",
               .inputs = {{{33, 19}, DType::kF32, -5, 5}, {{33}, DType::kI32, 0, 19}, {{33}, DType::kF32, -2, 2}},
               .check_gradient = false});
}

NIMBUS_OP_CASES(fast_layer_norm) {
  // Rows of 517 features (whole 16-lane vectors and a tail) split across threads; rows of 6 (a tail
  // only); the GPT's 128 features over 130 rows: grad_gamma's blocks of 64 rows, the last one partial.
  for (const Shape& x : {kLarge, Shape{13, 6}, Shape{2, 65, 128}}) {
    const int64_t d = x[-1];
    const Shape rows = Shape(std::span<const int64_t>(x.begin(), static_cast<size_t>(x.rank() - 1)));
    const std::string suffix = std::to_string(x.numel()) + "_" + std::to_string(d);
    add_op_case({.name = "layer_norm_fast_" + suffix,
                 .op = "layer_norm",
                 .inputs = {{x, DType::kF32, -3, 5}, {{d}, DType::kF32, 0.5, 2.0}, {{d}}},
                 .attrs = {{"epsilon", 1e-5}},
                 .check_gradient = false});
    add_op_case(
        {.name = "layer_norm_backward_fast_" + suffix,
         .op = "layer_norm_backward",
         .inputs = {{x}, {x, DType::kF32, -3, 5}, {{d}}, {rows, DType::kF32, -1, 1}, {rows, DType::kF32, 0.5, 2.0}}});
  }
}

NIMBUS_OP_CASES(fast_data_movement) {
  // Attention's heads moved out and in: 4096 runs of 32, split across threads, so that ranges start
  // mid-index; and a position table broadcast over a batch, with a size-1 axis between.
  add_op_case({.name = "transpose_fast_heads",
               .op = "transpose",
               .inputs = {{{8, 128, 4, 32}}},
               .attrs = {{"perm", std::vector<int64_t>{0, 2, 1, 3}}},
               .check_gradient = false});
  add_op_case({.name = "transpose_fast_heads_back",
               .op = "transpose",
               .inputs = {{{8, 4, 128, 33}}},
               .attrs = {{"perm", std::vector<int64_t>{0, 2, 1, 3}}},
               .check_gradient = false});
  add_op_case({.name = "broadcast_to_fast_rows",
               .op = "broadcast_to",
               .inputs = {{{1, 128, 1, 32}}},
               .attrs = {{"shape", Shape{16, 128, 3, 32}}},
               .check_gradient = false});
}

}  // namespace nimbus::testing
