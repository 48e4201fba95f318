// CUDA C source for an expression program (nimbus/ops/fused_elementwise.h):
// one thread per output element (a grid-stride loop), every instruction a
// local variable, so intermediates stay in registers and each output is
// written once. Each input is read as its feed says: the element itself, a
// scalar, a bias that repeats every `period` elements, or a general broadcast
// through strides. Single elementwise ops on CUDA run through the same path
// as one-instruction programs.
//
//   FusedKernelSource k = generate_fused_kernel(program, input_specs, shape);
//   k.name;    // "nimbus_fused_3f2a9c0d1b7e6f42" (the hash of the source)
//   k.source;  // extern "C" __global__ void nimbus_fused_...(const NimbusFusedArgs args) { ... }
//
// The kernel takes one argument, a NimbusFusedArgs (fused_args below) by value.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nimbus/ops/fused_elementwise.h"

namespace nimbus::cuda {

inline constexpr int kMaxFusedInputs = 16;
inline constexpr int kMaxFusedOutputs = 8;

enum class FeedKind : uint8_t {
  kElement,  // same shape as the output: element i
  kScalar,   // one element
  kRows,     // a trailing part of the output shape (a bias): element i % period
  kStrided,  // any other broadcast: through the output's multi-index
};

// The kernel's argument, laid out as the generated `struct NimbusFusedArgs`.
struct FusedArgs {
  int64_t n = 0;
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};
  std::array<const void*, kMaxFusedInputs> inputs{};
  std::array<void*, kMaxFusedOutputs> outputs{};
  std::array<int64_t, kMaxFusedInputs> periods{};
  std::array<std::array<int64_t, kMaxRank>, kMaxFusedInputs> strides{};
};

struct FusedKernelSource {
  std::string name;
  std::string source;
  uint64_t hash = 0;  // FNV-1a of the source: the kernel cache's key
};

FeedKind feed_kind(const Shape& input, const Shape& output);

// Throws Unimplemented naming the op when an instruction has no CUDA expression,
// and InvalidArgument beyond kMaxFusedInputs inputs or kMaxFusedOutputs outputs.
FusedKernelSource generate_fused_kernel(const ExpressionProgram& program, std::span<const TensorSpec> inputs,
                                        const Shape& shape);

// One op as a one-instruction program reading each input once (how single elementwise ops run on CUDA).
FusedKernelSource single_op_source(const OpSchema& op, const Attrs& attrs, std::span<const TensorSpec> inputs,
                                   DType output, const Shape& shape);

// The argument for a launch over `inputs` and `outputs` (device pointers) at `shape`.
FusedArgs fused_args(std::span<const TensorSpec> inputs, std::span<const void* const> input_data,
                     std::span<void* const> output_data, const Shape& shape);

uint64_t fnv1a(std::string_view text);

// The elementwise ops the generator has an expression for (CUDA runs each of them through it).
std::vector<std::string> ops_with_cuda_expressions();

}  // namespace nimbus::cuda
