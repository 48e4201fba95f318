// Ops that move, select or rearrange elements.
//
//   reshape(x, {-1, 784});               // one dimension may be -1
//   transpose(x, {0, 2, 1});             // permute axes (a copy: tensors stay contiguous)
//   concat({a, b}, 1);  split(x, {2, 3}, 1);
//   slice(x, {0, 2}, {4, 5});            // begin and size per axis, size -1 = to the end
//   pad(x, {{0, 0}, {1, 1}}, 0.0);       // (before, after) per axis
//   gather(embeddings, token_ids, 0);    // embedding lookup; gradient: scatter_add
//   one_hot(labels, 10);  tril(mask);    // causal masks: tril(ones({T, T}))
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

Tensor reshape(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const std::vector<int64_t>& shape);  // may contain one -1
Tensor expand_dims(const Tensor& x, int64_t axis);
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes = {});  // empty: every size-1 axis
Tensor flatten(const Tensor& x);                                         // (N, ...) -> (N, prod(...))

// perm[i] is the input axis that becomes output axis i.
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm);
// Swaps the last two axes.
Tensor matrix_transpose(const Tensor& x);
Tensor broadcast_to(const Tensor& x, const Shape& shape);

// Joins tensors of one dtype along `axis`; every other dimension must match.
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis);
// Pieces of x along `axis` with the given lengths, which sum to x's length there;
// one size may be -1 for what the others leave (as in TensorFlow).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis);

// begin[i] and size[i] per axis; size -1 takes the rest of the axis. begin counts
// from the start of the axis (negative begins are an error, not "from the end").
Tensor slice(const Tensor& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size);
// paddings[i] = (before, after) for axis i, both >= 0, filled with `value`.
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& paddings, double value = 0);

// Output shape: params.shape[:axis] + indices.shape + params.shape[axis+1:]. Indices are i32 or i64;
// one outside [0, params.shape[axis]) is an InvalidArgument naming its position and value.
Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0);
// The gradient of gather: a tensor of `shape` with updates summed into the gathered positions
// (duplicate indices accumulate). updates.shape = shape[:axis] + indices.shape + shape[axis+1:].
Tensor scatter_add(const Tensor& updates, const Tensor& indices, const Shape& shape, int64_t axis = 0);
// TF's unsorted_segment_sum: out[segment_ids[i]] += data[i] along axis 0; out has num_segments
// rows, and segments without ids are zero. segment_ids is (data.shape[0]) of i32 or i64, each in
// [0, num_segments) (TF drops negative ids; Nimbus reports them).
Tensor segment_sum(const Tensor& data, const Tensor& segment_ids, int64_t num_segments);

// (..., ) integer indices -> (..., depth) with on/off values.
Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype = DType::kF32, double on = 1, double off = 0);
// Keep elements on and below (tril) / on and above (triu) diagonal k of the last two axes; zero the rest.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

// The k largest values along the last axis, sorted descending, and their indices (i64).
// Equal values come in index order (as in TensorFlow); NaN ranks above every number.
std::pair<Tensor, Tensor> top_k(const Tensor& x, int64_t k);

}  // namespace nimbus
