// Mixed-precision policies, as Keras's keras.mixed_precision: a layer's
// policy says in which dtype it computes and in which its variables live.
//
//   nn::set_global_policy("mixed_float16");      // layers made from now on compute in f16
//   nn::Layer dense = nn::Dense(10);              // dense->dtype_policy.name == "mixed_float16"
//   dense->dtype_policy = nn::DTypePolicy::named("float32");   // per layer (Keras's dtype=...)
//
// Policies: "float32" (the default: everything f32), "mixed_float16" and
// "mixed_bfloat16" (variables f32, the master weights the optimizer updates;
// computation in f16 / bf16). A layer under a mixed policy casts its floating
// inputs to the compute dtype and runs its call under an AutocastScope, so its
// ops follow the per-op precision table (ops/precision.h): matmuls and
// convolutions read f16 copies of the f32 variables, softmax and statistics
// run in f32. A model's outputs come back f32 whatever its layers compute in.
#pragma once

#include <string>
#include <string_view>

#include "nimbus/base/dtype.h"

namespace nimbus::nn {

struct DTypePolicy {
  std::string name = "float32";
  DType compute_dtype = DType::kF32;
  DType variable_dtype = DType::kF32;

  // "float32", "mixed_float16", "mixed_bfloat16"; anything else throws InvalidArgument naming the choices.
  static DTypePolicy named(std::string_view name);
  bool is_mixed() const { return compute_dtype != variable_dtype; }
  // Whether the trainer scales the loss under this policy: f16's range needs it, bf16's does not.
  bool needs_loss_scaling() const { return compute_dtype == DType::kF16; }
  bool operator==(const DTypePolicy& other) const { return name == other.name; }
};

// The policy new layers take (Keras's mixed_precision.set_global_policy); "float32" unless set.
DTypePolicy global_policy();
void set_global_policy(const DTypePolicy& policy);
void set_global_policy(std::string_view name);

}  // namespace nimbus::nn
