// matmul on oneDNN: one primitive per (shapes, transposes, dtype), created once
// and cached, so a training step pays only for execution.
#include <map>
#include <mutex>
#include <tuple>

#include "nimbus/ops/registry.h"
#include "src/device/cpu/onednn.h"
#include "src/ops/internal/matmul_geometry.h"

namespace nimbus::cpu {
namespace {

using dnnl::memory;

// oneDNN wants every operand at the output's rank, batch axes of size 1 broadcasting.
memory::dims padded_dims(const Shape& batch, int rank, int64_t rows, int64_t cols) {
  memory::dims dims(static_cast<size_t>(rank), 1);
  const int offset = rank - 2 - batch.rank();
  for (int i = 0; i < batch.rank(); ++i) dims[static_cast<size_t>(offset + i)] = batch.dims()[i];
  dims[static_cast<size_t>(rank - 2)] = rows;
  dims[static_cast<size_t>(rank - 1)] = cols;
  return dims;
}

// Row-major strides of the stored matrix; a transposed operand swaps the last two.
memory::dims strides_for(const memory::dims& dims, bool transposed) {
  const size_t rank = dims.size();
  memory::dims stored = dims;
  if (transposed) std::swap(stored[rank - 1], stored[rank - 2]);
  memory::dims strides(rank);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    strides[i] = stride;
    stride *= stored[i];
  }
  if (transposed) std::swap(strides[rank - 1], strides[rank - 2]);
  return strides;
}

struct Key {
  std::vector<int64_t> a_dims, b_dims;
  bool transpose_a, transpose_b;
  DType dtype;
  auto tie() const { return std::tie(a_dims, b_dims, transpose_a, transpose_b, dtype); }
  bool operator<(const Key& other) const { return tie() < other.tie(); }
};

struct CachedMatmul {
  dnnl::matmul primitive;
  memory::desc a, b, c;
};

const CachedMatmul& get_matmul(const Key& key, const internal::MatmulGeometry& g) {
  static std::mutex mutex;
  static std::map<Key, CachedMatmul> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const int rank = g.output_shape.rank();
  const memory::data_type dt = dnnl_data_type(key.dtype);
  const memory::dims a_dims = padded_dims(g.a_batch_shape, rank, g.m, g.k);
  const memory::dims b_dims = padded_dims(g.b_batch_shape, rank, g.k, g.n);
  const memory::dims c_dims = padded_dims(g.batch_shape, rank, g.m, g.n);
  CachedMatmul entry;
  entry.a = memory::desc(a_dims, dt, strides_for(a_dims, key.transpose_a));
  entry.b = memory::desc(b_dims, dt, strides_for(b_dims, key.transpose_b));
  entry.c = memory::desc(c_dims, dt, strides_for(c_dims, false));
  NIMBUS_DNNL_CHECK(entry.primitive = dnnl::matmul(
                        dnnl::matmul::primitive_desc(dnnl::matmul::desc(entry.a, entry.b, entry.c), dnnl_engine())));
  return cache.emplace(key, std::move(entry)).first->second;
}

void onednn_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  const Key key{a.shape().to_vector(), b.shape().to_vector(), ctx.attrs.get_bool("transpose_a"),
                ctx.attrs.get_bool("transpose_b"), a.dtype()};
  const internal::MatmulGeometry g(a.shape(), b.shape(), key.transpose_a, key.transpose_b);
  const CachedMatmul& mm = get_matmul(key, g);
  dnnl::stream& stream = dnnl_stream();
  NIMBUS_DNNL_CHECK(
      mm.primitive.execute(stream, {{DNNL_ARG_SRC, memory(mm.a, dnnl_engine(), a.raw_data())},
                                    {DNNL_ARG_WEIGHTS, memory(mm.b, dnnl_engine(), b.raw_data())},
                                    {DNNL_ARG_DST, memory(mm.c, dnnl_engine(), ctx.outputs[0].raw_data())}}));
  stream.wait();
}

const bool kRegistered = register_kernel("matmul", {.name = "onednn",
                                                    .device = DeviceType::kCPU,
                                                    .dtypes = {DType::kF32},
                                                    .priority = 100,
                                                    .fn = onednn_matmul,
                                                    .supports = [](const KernelContext& ctx) {
                                                      return ctx.outputs[0].numel() > 0 && ctx.inputs[0].numel() > 0;
                                                    }});

}  // namespace
}  // namespace nimbus::cpu
