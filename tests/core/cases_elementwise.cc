// Cases for the elementwise families: arithmetic, comparisons, unary math,
// activations, casts. Shapes cover equal shapes, broadcasting from either
// side, size-1 axes and scalars.
#include "nimbus/ops/fused_elementwise.h"
#include "nimbus/ops/registry.h"
#include "op_cases.h"

namespace nimbus::testing {
namespace {

struct BroadcastPattern {
  const char* suffix;
  Shape a, b;
};

const BroadcastPattern kPatterns[] = {
    {"same", {3, 4}, {3, 4}},
    {"rows", {4, 5}, {5}},
    {"cols", {4, 1}, {4, 6}},
    {"scalar", {2, 3, 2}, {}},
    {"both_sides", {3, 1, 5}, {1, 4, 1}},
};

}  // namespace

NIMBUS_OP_CASES(elementwise_binary) {
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum"}) {
    for (const BroadcastPattern& p : kPatterns) {
      add_op_case({.name = std::string(op) + "_" + p.suffix, .op = op, .inputs = {{p.a}, {p.b}}});
    }
  }
  // Divisors and pow bases kept away from zero, where the functions blow up.
  for (const BroadcastPattern& p : kPatterns) {
    add_op_case({.name = std::string("div_") + p.suffix, .op = "div", .inputs = {{p.a}, {p.b, DType::kF32, 0.5, 2.0}}});
    add_op_case({.name = std::string("pow_") + p.suffix,
                 .op = "pow",
                 .inputs = {{p.a, DType::kF32, 0.5, 2.0}, {p.b, DType::kF32, -1.5, 1.5}}});
  }
  add_op_case(
      {.name = "add_i64", .op = "add", .inputs = {{{3, 4}, DType::kI64, -50, 50}, {{4}, DType::kI64, -50, 50}}});
  add_op_case(
      {.name = "mul_i32", .op = "mul", .inputs = {{{3, 4}, DType::kI32, -50, 50}, {{3, 4}, DType::kI32, -50, 50}}});
}

NIMBUS_OP_CASES(comparison) {
  for (const char* op : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
    // Small integers make ties likely, so equality is exercised too.
    add_op_case({.name = std::string(op) + "_f32",
                 .op = op,
                 .inputs = {{{4, 5}, DType::kF32, 0, 0, {}}, {{5}, DType::kF32, 0, 0, {}}}});
    add_op_case({.name = std::string(op) + "_i64",
                 .op = op,
                 .inputs = {{{4, 5}, DType::kI64, 0, 3}, {{4, 1}, DType::kI64, 0, 3}}});
  }
  add_op_case(
      {.name = "logical_and_bcast", .op = "logical_and", .inputs = {{{3, 4}, DType::kBool}, {{4}, DType::kBool}}});
  add_op_case(
      {.name = "logical_or_bcast", .op = "logical_or", .inputs = {{{3, 4}, DType::kBool}, {{3, 1}, DType::kBool}}});
  add_op_case({.name = "logical_not", .op = "logical_not", .inputs = {{{3, 4}, DType::kBool}}});
  add_op_case({.name = "where_same", .op = "where", .inputs = {{{3, 4}, DType::kBool}, {{3, 4}}, {{3, 4}}}});
  add_op_case({.name = "where_bcast", .op = "where", .inputs = {{{3, 1}, DType::kBool}, {{4}}, {{3, 4}}}});
}

NIMBUS_OP_CASES(elementwise_unary) {
  struct Unary {
    const char* op;
    double low, high;
  };
  // Domains avoid the points where a function or its derivative is undefined.
  const Unary unaries[] = {
      {"neg", -2, 2}, {"exp", -2, 2},  {"log", 0.2, 3},    {"sqrt", 0.2, 3}, {"rsqrt", 0.2, 3},
      {"abs", -2, 2}, {"sign", -2, 2}, {"square", -2, 2},  {"sin", -3, 3},   {"cos", -3, 3},
      {"erf", -2, 2}, {"relu", -2, 2}, {"sigmoid", -6, 6}, {"tanh", -3, 3},  {"softplus", -8, 8},
  };
  for (const Unary& u : unaries) {
    add_op_case({.name = std::string(u.op) + "_2d", .op = u.op, .inputs = {{{4, 6}, DType::kF32, u.low, u.high}}});
    add_op_case({.name = std::string(u.op) + "_scalar", .op = u.op, .inputs = {{{}, DType::kF32, u.low, u.high}}});
  }
  add_op_case({.name = "isfinite", .op = "isfinite", .inputs = {{{6}, DType::kF32, 0, 0, {1, -1, 0, 1e30, 3, 4}}}});
  add_op_case({.name = "clip", .op = "clip", .inputs = {{{5, 4}}}, .attrs = {{"low", -1.0}, {"high", 1.5}}});
  for (const char* form : {"tanh", "none"}) {
    add_op_case({.name = std::string("gelu_") + form,
                 .op = "gelu",
                 .inputs = {{{5, 7}, DType::kF32, -4, 4}},
                 .attrs = {{"approximate", std::string(form)}}});
    add_op_case({.name = std::string("gelu_backward_") + form,
                 .op = "gelu_backward",
                 .inputs = {{{5, 7}}, {{5, 7}, DType::kF32, -4, 4}},
                 .attrs = {{"approximate", std::string(form)}}});
  }
  // relu's gradient from its output and the bias gradient: rows and channels, and leading axes summed together.
  add_op_case({.name = "relu_bias_backward_2d", .op = "relu_bias_backward", .inputs = {{{6, 5}}, {{6, 5}}}});
  add_op_case({.name = "relu_bias_backward_3d", .op = "relu_bias_backward", .inputs = {{{2, 3, 4}}, {{2, 3, 4}}}});
  add_op_case({.name = "cast_f32_to_f64", .op = "cast", .inputs = {{{3, 4}}}, .attrs = {{"dtype", DType::kF64}}});
  // A bf16 result cannot match f64 finite differences; cast_f32_to_f64 checks the gradient rule.
  add_op_case({.name = "cast_f32_to_bf16",
               .op = "cast",
               .inputs = {{{3, 4}}},
               .attrs = {{"dtype", DType::kBF16}},
               .check_gradient = false});
  add_op_case({.name = "cast_f32_to_i32",
               .op = "cast",
               .inputs = {{{3, 4}, DType::kF32, -9, 9}},
               .attrs = {{"dtype", DType::kI32}}});
  add_op_case({.name = "cast_i64_to_f32",
               .op = "cast",
               .inputs = {{{3, 4}, DType::kI64, -9, 9}},
               .attrs = {{"dtype", DType::kF32}}});
  add_op_case({.name = "identity", .op = "identity", .inputs = {{{3, 4}}}});
  add_op_case({.name = "stop_gradient", .op = "stop_gradient", .inputs = {{{3, 4}}}});
}

NIMBUS_OP_CASES(creation) {
  add_op_case(
      {.name = "fill_f32", .op = "fill", .attrs = {{"shape", Shape{3, 4}}, {"dtype", DType::kF32}, {"value", 2.5}}});
  add_op_case(
      {.name = "fill_i64", .op = "fill", .attrs = {{"shape", Shape{5}}, {"dtype", DType::kI64}, {"value", 7.0}}});
  add_op_case({.name = "range_f32",
               .op = "range",
               .attrs = {{"start", 1.0}, {"stop", 10.0}, {"step", 1.5}, {"dtype", DType::kF32}}});
  add_op_case({.name = "random_uniform",
               .op = "random_uniform",
               .attrs = {{"shape", Shape{64}},
                         {"dtype", DType::kF32},
                         {"seed", int64_t{7}},
                         {"offset", int64_t{0}},
                         {"low", -1.0},
                         {"high", 1.0}}});
  add_op_case({.name = "random_normal",
               .op = "random_normal",
               .attrs = {{"shape", Shape{64}},
                         {"dtype", DType::kF32},
                         {"seed", int64_t{7}},
                         {"offset", int64_t{3}},
                         {"mean", 0.5},
                         {"stddev", 2.0}}});
}

}  // namespace nimbus::testing

namespace nimbus::testing {

NIMBUS_OP_CASES(assign) {
  // assign has no outputs: the forward check compares nothing but runs both kernels.
  add_op_case({.name = "assign", .op = "assign", .inputs = {{{3, 4}}, {{3, 4}}}});
}

}  // namespace nimbus::testing

namespace nimbus::testing {

NIMBUS_OP_CASES(fused_elementwise) {
  // gelu(x * w + b) and x * w as two outputs, with a broadcast bias.
  auto program = std::make_shared<ExpressionProgram>();
  const OpRegistry& registry = OpRegistry::global();
  program->instructions = {
      {.op = &registry.get("mul"), .operands = {{true, 0}, {true, 1}}},
      {.op = &registry.get("add"), .operands = {{false, 0}, {true, 2}}},
      {.op = &registry.get("gelu"), .attrs = {{"approximate", std::string("tanh")}}, .operands = {{false, 1}}},
      {.op = &registry.get("greater"), .operands = {{false, 2}, {true, 2}}, .dtype = DType::kBool},
      {.op = &registry.get("where"), .operands = {{false, 3}, {false, 2}, {false, 0}}},
  };
  program->outputs = {4, 0};
  add_op_case({.name = "fused_elementwise",
               .op = "fused_elementwise",
               .inputs = {{{6, 9}}, {{6, 9}}, {{9}}},
               .attrs = {{"program", AttrObjectPtr(program)}, {"shape", Shape{6, 9}}}});
  // A scalar input (passed to the ops whole), a trailing-axes input (copied in runs) and a
  // column-broadcast one (gathered), over many blocks with a partial last one, in parallel.
  auto scaled = std::make_shared<ExpressionProgram>();
  scaled->instructions = {
      {.op = &registry.get("mul"), .operands = {{true, 0}, {true, 1}}},
      {.op = &registry.get("sub"), .operands = {{false, 0}, {true, 2}}},
      {.op = &registry.get("maximum"), .operands = {{false, 1}, {true, 3}}},
      {.op = &registry.get("exp"), .operands = {{false, 2}}},
  };
  scaled->outputs = {1, 3};
  add_op_case({.name = "fused_elementwise_scalar_rows_columns",
               .op = "fused_elementwise",
               .inputs = {{{70, 333}}, {{}}, {{333}}, {{70, 1}}},
               .attrs = {{"program", AttrObjectPtr(scaled)}, {"shape", Shape{70, 333}}}});
  // Many blocks (a partial last one), run in parallel; a column-broadcast input is gathered per block.
  add_op_case({.name = "fused_elementwise_blocks",
               .op = "fused_elementwise",
               .inputs = {{{130, 257}}, {{130, 1}}, {{257}}},
               .attrs = {{"program", AttrObjectPtr(program)}, {"shape", Shape{130, 257}}}});
}

}  // namespace nimbus::testing
