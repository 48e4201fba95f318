// adam_update cases that only the gpu suite runs (they join op_cases(), so
// cross_backend_test.cc's CudaOpSideEffects compares the CUDA kernel's writes
// with the CPU reference's): more tensors than one launch takes (64), one
// empty tensor (no blocks), and tensors longer than a block's 4096-element
// chunk, so several launches, several chunks per tensor and the block-to-tensor
// search all run.
#include <gtest/gtest.h>

#include "nimbus/ops/registry.h"
#include "op_cases.h"

namespace nimbus::testing {

NIMBUS_OP_CASES(cuda_optimizer_updates) {
  std::vector<Shape> shapes;
  for (int i = 0; i < 70; ++i) shapes.push_back(Shape{1 + (i * 37) % 300});
  shapes[5] = Shape{0};
  shapes[20] = Shape{9000};
  shapes[66] = Shape{64, 130};
  std::vector<InputSpec> inputs;
  for (const Shape& shape : shapes) inputs.push_back({shape});
  for (const Shape& shape : shapes) inputs.push_back({shape, DType::kF32, -0.5, 0.5});
  for (const Shape& shape : shapes) inputs.push_back({shape, DType::kF32, 0.1, 1.0});
  for (const Shape& shape : shapes) inputs.push_back({shape});
  inputs.push_back({.shape = {}, .dtype = DType::kF64, .values = {0.02}, .fixed_dtype = true});
  inputs.push_back({.shape = {}, .dtype = DType::kF64, .values = {0.001}, .fixed_dtype = true});
  add_op_case(
      {.name = "cuda_adam_update_70_tensors_in_two_launches",
       .op = "adam_update",
       .inputs = inputs,
       .attrs = Attrs{
           {"count", int64_t{70}}, {"beta_1", 0.9}, {"beta_2", 0.999}, {"epsilon", 1e-7}, {"weight_decay", true}}});
}

namespace {

TEST(CudaOptimizerCases, HaveMoreTensorsThanOneLaunchTakes) {
  // Runs without a GPU: the harness has this case to run once one is present.
  bool found = false;
  for (const OpCase& c : op_cases()) {
    if (c.name == "cuda_adam_update_70_tensors_in_two_launches") found = c.attrs.get_int("count") > 64;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace nimbus::testing
