// PrecisionRule: how mixed precision casts one op's inputs. Each op states
// its rule in its schema (OpSchema::precision, set in src/ops/<family>.cc);
// autocast applies it (ops/precision.h, docs/mixed_precision.md).
#pragma once

#include <string_view>

namespace nimbus {

enum class PrecisionRule {
  // Runs in the compute dtype (f16 / bf16): matmul and convolutions, the Tensor Core work.
  kComputeDType,
  // Runs in f32 whatever its inputs: softmax, cross-entropy, exp / log / pow, sums, means,
  // variances and normalization statistics, where f16's range or precision loses the result.
  kFloat32,
  // Computes in its inputs' dtype; inputs of different floating dtypes are cast to the compute dtype.
  kFollowInputs,
  // Never casts: the op writes into its input (assign) or its dtype is the point (cast).
  kKeepInputs,
};

std::string_view precision_rule_name(PrecisionRule rule);

}  // namespace nimbus
