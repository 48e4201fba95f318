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
#include <memory>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus::distribute {

std::vector<Tensor> all_reduce_sum(const std::vector<Tensor>& tensors);

// Every replica's `tensors` (its weights and optimizer state, before the first step) <- replica 0's,
// in place: on GPUs through NCCL on the replica's communication stream, else through its host
// collectives. Outside a replica: nothing.
void broadcast_from_replica_0(const std::vector<Tensor>& tensors);

// Gradients summed over the replicas, in buckets of at most `bucket_bytes` taken in reverse order
// of `gradients` (the order the backward pass produces them: last layer first), one collective per
// bucket. Undefined gradients stay undefined. Outside a replica: the gradients themselves.
std::vector<Tensor> all_reduce_gradients(const std::vector<Tensor>& gradients, size_t bucket_bytes);

// The all-reduce split in two ops so that it runs beside other work: all_reduce_start hands the
// tensors (one bucket) to the replica's communication thread and returns a ticket at once;
// all_reduce_wait(ticket, the same tensors) returns their sums once it is done. Outside a replica
// (or with one) both do nothing: wait returns the tensors. A replica without a communication thread
// (overlap off) sums in wait, on its own thread.
Tensor all_reduce_start(const std::vector<Tensor>& tensors);
std::vector<Tensor> all_reduce_wait(const Tensor& ticket, const std::vector<Tensor>& tensors);

// Gradients all-reduced in buckets while the backward pass still runs (PyTorch DDP's reducer): the
// buckets are those of all_reduce_gradients over `variables` (reverse order, at most `bucket_bytes`),
// and a bucket's all-reduce starts as soon as ready() has been given all of its gradients.
//
//   OverlappedAllReduce reduce(vars, replica->bucket_bytes);
//   tape.on_gradient_ready([&](size_t i, const Tensor& g) { reduce.ready(i, g); });
//   tape.gradient(loss, vars);
//   std::vector<Tensor> summed = reduce.finish();   // before the optimizer
//
// Every replica makes its gradients ready in the same order (the same program), so every replica
// starts the same buckets in the same order.
class OverlappedAllReduce {
 public:
  OverlappedAllReduce(const std::vector<Tensor>& variables, size_t bucket_bytes);
  // Variable i's whole gradient (every micro-batch's); starts its bucket's all-reduce when it is the last missing.
  void ready(size_t i, const Tensor& gradient);
  // Starts the buckets still missing gradients (variables that got none stay undefined), waits for
  // every bucket, and returns the summed gradients in the order of the variables.
  std::vector<Tensor> finish();

 private:
  void start(size_t bucket);

  std::vector<std::vector<size_t>> buckets_;  // variable indices, reverse order
  std::vector<size_t> bucket_of_;             // variable -> bucket
  std::vector<size_t> missing_;               // gradients each bucket still waits for
  std::vector<Tensor> gradients_;
  std::vector<Tensor> tickets_;  // per bucket; undefined until started
};

}  // namespace nimbus::distribute
