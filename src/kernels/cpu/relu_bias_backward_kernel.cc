// relu_bias_backward for f32: grad_z = grad_y where y > 0, else 0, written while the same pass adds grad_z up
// per column in the blocks and order of sum over the leading axes (column_blocks.h), so that both outputs are
// the unfused where's and sum's to the bit, from one fork of the pool instead of two.
#include <algorithm>
#include <vector>

#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/column_blocks.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

// Elements per thread from which the pass forks: 8 times a plain memory-bound pass's. Its gradient input
// was mostly just written on the calling thread (a dense layer's input gradient: matmul_pair computes it
// there), so a worker would first pull its half from this core's cache, after waking.
constexpr int64_t kReluBiasBackwardGrain = 8 * kMemoryBoundGrain;

// grad_y, y (rows, C) -> grad_z (rows, C), grad_b (C).
void relu_bias_backward_f32(KernelContext& ctx) {
  const float* grad_y = static_cast<const float*>(ctx.inputs[0].raw_data());
  const float* y = static_cast<const float*>(ctx.inputs[1].raw_data());
  float* grad_z = static_cast<float*>(ctx.outputs[0].raw_data());
  float* grad_b = static_cast<float*>(ctx.outputs[1].raw_data());
  const int64_t channels = ctx.outputs[1].numel();
  const ColumnBlocks blocks(ctx.outputs[0].numel() / channels, channels);
  // Each block's column sums, in f64 for the combination in row order below (none with one block of rows).
  std::vector<double> partial(blocks.row_blocks > 1 ? static_cast<size_t>(blocks.row_blocks * channels) : 0);
  parallel_for(blocks.items(), blocks.grain(kReluBiasBackwardGrain), [&](int64_t begin, int64_t end) {
    float acc[ColumnBlocks::kColumnsPerBlock];
    for (int64_t item = begin; item < end; ++item) {
      const ColumnBlocks::Block b = blocks.block(item);
      std::fill(acc, acc + b.columns, 0.0f);
      for (int64_t r = b.first_row; r < b.end_row; ++r) {
        const int64_t at = r * channels + b.first_column;
        const float* g_row = grad_y + at;
        const float* y_row = y + at;
        float* out_row = grad_z + at;
#pragma omp simd
        for (int64_t c = 0; c < b.columns; ++c) {
          const float value = y_row[c] > 0.0f ? g_row[c] : 0.0f;
          out_row[c] = value;
          acc[c] += value;
        }
      }
      if (blocks.row_blocks == 1) {
        std::copy(acc, acc + b.columns, grad_b + b.first_column);
      } else {
        std::copy(acc, acc + b.columns, partial.begin() + b.row_block * channels + b.first_column);
      }
    }
  });
  if (blocks.row_blocks == 1) return;
  for (int64_t c = 0; c < channels; ++c) {
    double total = 0;
    for (int64_t rb = 0; rb < blocks.row_blocks; ++rb) total += partial[static_cast<size_t>(rb * channels + c)];
    grad_b[c] = static_cast<float>(total);
  }
}

const bool kReluBiasBackwardRegistered = register_kernel("relu_bias_backward", {.name = "vectorized",
                                                                                .device = DeviceType::kCPU,
                                                                                .dtypes = {DType::kF32},
                                                                                .priority = 50,
                                                                                .fn = relu_bias_backward_f32});

}  // namespace
}  // namespace nimbus::cpu
