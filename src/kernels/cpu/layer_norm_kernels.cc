// Vectorized, multithreaded layer_norm and layer_norm_backward on f32,
// normalizing over the last axis (D features per row):
//   forward   per row: mean, then the centred sum of squares (two passes over
//             a row that sits in L1), y = (x - mean) rstd gamma + beta.
//   backward  per row: sum(dxhat) and sum(dxhat xhat) with dxhat = g gamma,
//             then grad_x = rstd / D (D dxhat - sum(dxhat) - xhat sum(dxhat xhat));
//             grad_gamma and grad_beta summed over blocks of kLayerNormRows rows
//             (one partial per block, whatever the thread count), the blocks'
//             partials then added in order in f64.
// Row sums run over 16 lanes (one 64-byte vector, or two 32-byte ones on
// CPUs without AVX-512) then a fixed tree, tail elements last, so results
// depend neither on the thread count nor on the vector width.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/parallel.h"
#include "src/kernels/cpu/simd.h"

namespace nimbus::cpu {
namespace {

using LayerNormVec = simd::Vec<float, 64>;  // 16 lanes; two AVX2 registers on the baseline build
constexpr int64_t kLayerNormLanes = simd::kLanesOf<LayerNormVec>;
// Rows per partial sum of grad_gamma and grad_beta.
constexpr int64_t kLayerNormRows = 64;

NIMBUS_ALWAYS_INLINE float layer_norm_lane_sum(LayerNormVec v) {
  float lanes[kLayerNormLanes];
  simd::store(lanes, v);
  for (int64_t width = kLayerNormLanes / 2; width > 0; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// Rows [begin, end) of x (rows, d).
NIMBUS_ALWAYS_INLINE void layer_norm_rows(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                          float* rstd, int64_t d, float epsilon, int64_t begin, int64_t end) {
  const int64_t whole = d / kLayerNormLanes * kLayerNormLanes;
  for (int64_t r = begin; r < end; ++r) {
    const float* row = x + r * d;
    LayerNormVec acc{};
    for (int64_t j = 0; j < whole; j += kLayerNormLanes) acc += simd::load<LayerNormVec>(row + j);
    float total = layer_norm_lane_sum(acc);
    for (int64_t j = whole; j < d; ++j) total += row[j];
    const float mu = total / static_cast<float>(d);
    acc = LayerNormVec{};
    for (int64_t j = 0; j < whole; j += kLayerNormLanes) {
      const LayerNormVec centred = simd::load<LayerNormVec>(row + j) - mu;
      acc += centred * centred;
    }
    float squares = layer_norm_lane_sum(acc);
    for (int64_t j = whole; j < d; ++j) squares += (row[j] - mu) * (row[j] - mu);
    const float rs = 1.0f / std::sqrt(squares / static_cast<float>(d) + epsilon);
    float* out = y + r * d;
    for (int64_t j = 0; j < whole; j += kLayerNormLanes) {
      const LayerNormVec xhat = (simd::load<LayerNormVec>(row + j) - mu) * rs;
      simd::store(out + j, xhat * simd::load<LayerNormVec>(gamma + j) + simd::load<LayerNormVec>(beta + j));
    }
    for (int64_t j = whole; j < d; ++j) out[j] = (row[j] - mu) * rs * gamma[j] + beta[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}
NIMBUS_TARGET_AVX512 void layer_norm_rows_avx512(const float* x, const float* gamma, const float* beta, float* y,
                                                 float* mean, float* rstd, int64_t d, float epsilon, int64_t begin,
                                                 int64_t end) {
  layer_norm_rows(x, gamma, beta, y, mean, rstd, d, epsilon, begin, end);
}

void run_layer_norm(KernelContext& ctx) {
  const int64_t d = ctx.inputs[0].dim(-1);
  const int64_t rows = d == 0 ? 0 : ctx.inputs[0].numel() / d;
  const auto* x = static_cast<const float*>(ctx.inputs[0].raw_data());
  const auto* gamma = static_cast<const float*>(ctx.inputs[1].raw_data());
  const auto* beta = static_cast<const float*>(ctx.inputs[2].raw_data());
  auto* y = static_cast<float*>(ctx.outputs[0].raw_data());
  auto* mean = static_cast<float*>(ctx.outputs[1].raw_data());
  auto* rstd = static_cast<float*>(ctx.outputs[2].raw_data());
  const auto epsilon = static_cast<float>(ctx.attrs.get_float("epsilon"));
  const bool wide = has_avx512();
  parallel_for(rows, std::max<int64_t>(1, kMemoryBoundGrain / std::max<int64_t>(d, 1)),
               [&](int64_t begin, int64_t end) {
                 if (wide) {
                   layer_norm_rows_avx512(x, gamma, beta, y, mean, rstd, d, epsilon, begin, end);
                 } else {
                   layer_norm_rows(x, gamma, beta, y, mean, rstd, d, epsilon, begin, end);
                 }
               });
}

struct LayerNormBackwardCall {
  const float *g, *x, *gamma, *mean, *rstd;
  float* grad_x;
  float* partials;  // per block of rows: grad_gamma (d), then grad_beta (d)
  int64_t rows, d;
};

// Blocks [first, last) of kLayerNormRows rows: grad_x, and each block's grad_gamma and grad_beta partial.
NIMBUS_ALWAYS_INLINE void layer_norm_backward_blocks(const LayerNormBackwardCall& call, int64_t first, int64_t last) {
  const int64_t d = call.d, whole = d / kLayerNormLanes * kLayerNormLanes;
  const float inverse_d = 1.0f / static_cast<float>(d);
  for (int64_t block = first; block < last; ++block) {
    float* grad_gamma = call.partials + block * 2 * d;
    float* grad_beta = grad_gamma + d;
    std::fill(grad_gamma, grad_gamma + 2 * d, 0.0f);
    const int64_t end = std::min(call.rows, (block + 1) * kLayerNormRows);
    for (int64_t r = block * kLayerNormRows; r < end; ++r) {
      const float *g = call.g + r * d, *x = call.x + r * d;
      const float mu = call.mean[r], rs = call.rstd[r];
      LayerNormVec sum_dxhat{}, sum_dxhat_xhat{};
      for (int64_t j = 0; j < whole; j += kLayerNormLanes) {
        const LayerNormVec gv = simd::load<LayerNormVec>(g + j);
        const LayerNormVec xhat = (simd::load<LayerNormVec>(x + j) - mu) * rs;
        const LayerNormVec dxhat = gv * simd::load<LayerNormVec>(call.gamma + j);
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
        simd::store(grad_gamma + j, simd::load<LayerNormVec>(grad_gamma + j) + gv * xhat);
        simd::store(grad_beta + j, simd::load<LayerNormVec>(grad_beta + j) + gv);
      }
      float a = layer_norm_lane_sum(sum_dxhat), b = layer_norm_lane_sum(sum_dxhat_xhat);
      for (int64_t j = whole; j < d; ++j) {
        const float xhat = (x[j] - mu) * rs, dxhat = g[j] * call.gamma[j];
        a += dxhat;
        b += dxhat * xhat;
        grad_gamma[j] += g[j] * xhat;
        grad_beta[j] += g[j];
      }
      // grad_x = rstd (dxhat - (a + xhat b) / D)
      const float mean_dxhat = a * inverse_d, mean_dxhat_xhat = b * inverse_d;
      float* out = call.grad_x + r * d;
      for (int64_t j = 0; j < whole; j += kLayerNormLanes) {
        const LayerNormVec xhat = (simd::load<LayerNormVec>(x + j) - mu) * rs;
        const LayerNormVec dxhat = simd::load<LayerNormVec>(g + j) * simd::load<LayerNormVec>(call.gamma + j);
        simd::store(out + j, (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) * rs);
      }
      for (int64_t j = whole; j < d; ++j) {
        const float xhat = (x[j] - mu) * rs;
        out[j] = (g[j] * call.gamma[j] - mean_dxhat - xhat * mean_dxhat_xhat) * rs;
      }
    }
  }
}
NIMBUS_TARGET_AVX512 void layer_norm_backward_blocks_avx512(const LayerNormBackwardCall& call, int64_t first,
                                                            int64_t last) {
  layer_norm_backward_blocks(call, first, last);
}

void run_layer_norm_backward(KernelContext& ctx) {
  const int64_t d = ctx.inputs[1].dim(-1);
  const int64_t rows = d == 0 ? 0 : ctx.inputs[1].numel() / d;
  const int64_t blocks = (rows + kLayerNormRows - 1) / kLayerNormRows;
  std::vector<float> partials(static_cast<size_t>(blocks * 2 * d));
  const LayerNormBackwardCall call{.g = static_cast<const float*>(ctx.inputs[0].raw_data()),
                                   .x = static_cast<const float*>(ctx.inputs[1].raw_data()),
                                   .gamma = static_cast<const float*>(ctx.inputs[2].raw_data()),
                                   .mean = static_cast<const float*>(ctx.inputs[3].raw_data()),
                                   .rstd = static_cast<const float*>(ctx.inputs[4].raw_data()),
                                   .grad_x = static_cast<float*>(ctx.outputs[0].raw_data()),
                                   .partials = partials.data(),
                                   .rows = rows,
                                   .d = d};
  const bool wide = has_avx512();
  const int64_t grain = std::max<int64_t>(1, kMemoryBoundGrain / std::max<int64_t>(d * kLayerNormRows, 1));
  parallel_for(blocks, grain, [&](int64_t first, int64_t last) {
    if (wide) {
      layer_norm_backward_blocks_avx512(call, first, last);
    } else {
      layer_norm_backward_blocks(call, first, last);
    }
  });
  auto* grad_gamma = static_cast<float*>(ctx.outputs[1].raw_data());
  auto* grad_beta = static_cast<float*>(ctx.outputs[2].raw_data());
  for (int64_t j = 0; j < d; ++j) {
    double gamma_total = 0, beta_total = 0;
    for (int64_t block = 0; block < blocks; ++block) {
      gamma_total += partials[static_cast<size_t>(block * 2 * d + j)];
      beta_total += partials[static_cast<size_t>(block * 2 * d + d + j)];
    }
    grad_gamma[j] = static_cast<float>(gamma_total);
    grad_beta[j] = static_cast<float>(beta_total);
  }
}

const bool kRegistered = register_kernel("layer_norm", {.name = "vectorized",
                                                        .device = DeviceType::kCPU,
                                                        .dtypes = {DType::kF32},
                                                        .priority = 50,
                                                        .fn = run_layer_norm}) &&
                         register_kernel("layer_norm_backward", {.name = "vectorized",
                                                                 .device = DeviceType::kCPU,
                                                                 .dtypes = {DType::kF32},
                                                                 .priority = 50,
                                                                 .fn = run_layer_norm_backward});

}  // namespace
}  // namespace nimbus::cpu
