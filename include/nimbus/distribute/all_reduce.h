// all_reduce: the op through which a replica's train step sums its gradients
// with the other replicas' (traced into the step's graph like any op).
//
//   // inside Strategy::run, on replica r:
//   std::vector<Tensor> summed = all_reduce_sum(gradients);   // the same tensors on every replica
//
// Outside a replica (or with one replica) each output equals its input. The
// tensors are f32; one call is one collective over their elements laid end to
// end (one gradient bucket).
#pragma once

#include <cstddef>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus::distribute {

std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& tensors);

// Gradients summed over the replicas, in buckets of at most `bucket_bytes` taken in reverse order
// of `gradients` (the order the backward pass produces them: last layer first), one collective per
// bucket. Undefined gradients stay undefined. Outside a replica: the gradients themselves.
std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& gradients, size_t bucket_bytes);

}  // namespace nimbus::distribute
