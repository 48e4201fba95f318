// matmul and fused_matmul on oneDNN: one primitive per (shapes, transposes,
// dtype, bias, activation), created once and cached, so a training step pays
// only for execution. fused_matmul's bias and activation are the primitive's
// bias operand and eltwise post-op, applied while the output is in cache.
// Small 2-D float32 matmuls call oneDNN's sgemm instead (see small_sgemm), and
// the smallest products of either path run on the calling thread. matmul_pair runs two products side by side.

#include <fmt/format.h>

#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "nimbus/device/runtime.h"
#include "nimbus/ops/for_kernels/matmul_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/kernels/cpu/onednn.h"
#include "src/kernels/cpu/parallel.h"

namespace nimbus::cpu {
namespace {

using dnnl::memory;

// oneDNN wants every operand at the output's rank, batch axes of size 1 broadcasting.
memory::dims padded_dims(const Shape& batch, int rank, int64_t rows, int64_t cols) {
  memory::dims dims(static_cast<size_t>(rank), 1);
  const int offset = rank - 2 - batch.rank();
  for (int i = 0; i < batch.rank(); ++i) dims[static_cast<size_t>(offset) + static_cast<size_t>(i)] = batch.dims()[i];
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
  bool bias = false;
  Activation activation = Activation::kLinear;
  PrimitiveOwner owner = primitive_owner();  // one primitive per thread (onednn.h)
  auto tie() const { return std::tie(a_dims, b_dims, transpose_a, transpose_b, dtype, bias, activation, owner); }
  bool operator<(const Key& other) const { return tie() < other.tie(); }
};

struct CachedMatmul {
  dnnl::matmul primitive;
  memory::desc a, b, bias, c;
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
  const dnnl::primitive_attr attr = activation_post_op(key.activation);
  if (key.bias) {
    const memory::dims bias_dims = padded_dims(Shape{}, rank, 1, g.n);
    entry.bias = memory::desc(bias_dims, dt, strides_for(bias_dims, false));
  }
  const dnnl::matmul::desc desc = key.bias ? dnnl::matmul::desc(entry.a, entry.b, entry.bias, entry.c)
                                           : dnnl::matmul::desc(entry.a, entry.b, entry.c);
  NIMBUS_DNNL_CHECK(entry.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, dnnl_engine())));
  return cache.emplace(key, std::move(entry)).first->second;
}

// Up to this many multiply-adds (about 12 us on one AVX-512 core) a product runs on the calling thread:
// splitting it saves less than waking a sleeping worker and joining it costs (the MLP's last layer and
// its gradients at batch 256: 256 x 256 x 10).
constexpr int64_t kCallingThreadWork = int64_t{1} << 20;

int64_t multiply_adds(const internal::MatmulGeometry& g) { return g.batch * g.m * g.n * g.k; }

// matmul, or fused_matmul with its bias (input 2) and activation.
void onednn_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  const bool fused = ctx.inputs.size() == 3;
  const bool transpose_a = ctx.attrs.get_bool("transpose_a"), transpose_b = ctx.attrs.get_bool("transpose_b");
  const internal::MatmulGeometry g(a.shape(), b.shape(), transpose_a, transpose_b);
  // Before the key: its owner's thread budget then makes a primitive for one thread.
  std::optional<CallingThreadOnly> calling_thread;
  if (multiply_adds(g) <= kCallingThreadWork) calling_thread.emplace();
  const Key key{a.shape().to_vector(),
                b.shape().to_vector(),
                transpose_a,
                transpose_b,
                a.dtype(),
                fused,
                fused ? fused_activation_of(ctx.attrs) : Activation::kLinear};
  const CachedMatmul& mm = get_matmul(key, g);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(mm.a, dnnl_engine(), a.raw_data())},
                                       {DNNL_ARG_WEIGHTS, memory(mm.b, dnnl_engine(), b.raw_data())},
                                       {DNNL_ARG_DST, memory(mm.c, dnnl_engine(), ctx.outputs[0].raw_data())}};
  if (fused) args.emplace(DNNL_ARG_BIAS, memory(mm.bias, dnnl_engine(), ctx.inputs[2].raw_data()));
  dnnl::stream& stream = dnnl_stream();
  NIMBUS_DNNL_CHECK(mm.primitive.execute(stream, args));
  stream.wait();
}

bool supports(const KernelContext& ctx) { return dnnl_runs_natively(ctx.inputs, ctx.outputs); }

// Up to this many multiply-adds, running a cached primitive costs more than its arithmetic: three
// memory objects and an execution context per call (about 4 us, against 8 us for a 64x64x64 product).
// dnnl_sgemm runs the same JIT GEMM (the primitive's `gemm:jit`) without them, which is what eager
// calls from Python (issue 22's per-call bound) and small layers need. Above it the primitive, which
// may pick another implementation (brgemm on AVX-512), is kept.
constexpr int64_t kSmallSgemmWork = int64_t{128} * 128 * 128;

bool small_sgemm_supports(const KernelContext& ctx) {
  if (ctx.inputs.size() != 2 || ctx.outputs[0].dtype() != DType::kF32) return false;
  if (!dnnl_runs_natively(ctx.inputs, ctx.outputs)) return false;
  const Tensor& a = ctx.inputs[0];
  if (a.rank() != 2 || ctx.inputs[1].rank() != 2) return false;
  const int64_t k = ctx.attrs.get_bool("transpose_a") ? a.dim(0) : a.dim(1);
  return ctx.outputs[0].numel() * k <= kSmallSgemmWork;
}

void small_sgemm(KernelContext& ctx) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  Tensor& c = ctx.outputs[0];
  const bool transpose_a = ctx.attrs.get_bool("transpose_a");
  const bool transpose_b = ctx.attrs.get_bool("transpose_b");
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  std::optional<CallingThreadOnly> calling_thread;
  if (c.numel() * k <= kCallingThreadWork) calling_thread.emplace();
  // Row-major, so each leading dimension is the stored row length whatever the transpose.
  const dnnl_status_t status =
      dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', c.dim(0), c.dim(1), k, 1.0f, a.data<float>(),
                 a.dim(1), b.data<float>(), b.dim(1), 0.0f, c.data<float>(), c.dim(1));
  if (status != dnnl_success) {
    throw InternalError(fmt::format("dnnl_sgemm failed (status {}) for {} @ {}", static_cast<int>(status),
                                    a.shape().to_string(), b.shape().to_string()));
  }
}

// One product of a matmul_pair as matmul runs it: dnnl_sgemm when small, else the cached primitive.
void run_pair_product(KernelContext& pair, size_t product) {
  const Attrs attrs{{"transpose_a", pair.attrs.get_bool(fmt::format("transpose_a{}", product))},
                    {"transpose_b", pair.attrs.get_bool(fmt::format("transpose_b{}", product))}};
  KernelContext ctx{pair.op, attrs, pair.inputs.subspan(2 * product, 2), pair.outputs.subspan(product, 1), pair.stream};
  if (small_sgemm_supports(ctx)) {
    small_sgemm(ctx);
  } else {
    onednn_matmul(ctx);
  }
}

// matmul_pair: on a pool of two threads, with both products worth a thread, each product runs on one thread
// at once. The MLP's layer-2 gradient products at
// batch 256 (2 x 256 x 256 x 512 multiply-adds) took 660 us split over both threads one after the other (each
// fork wakes the sleeping worker, and the halves are small), 540 us side by side on one thread each, from one
// fork (2-vCPU Xeon). Otherwise the two run one after the other, each as matmul runs it.
void matmul_pair(KernelContext& ctx) {
  const auto work = [&](size_t product) {
    return multiply_adds(internal::MatmulGeometry(ctx.inputs[2 * product].shape(), ctx.inputs[2 * product + 1].shape(),
                                                  ctx.attrs.get_bool(fmt::format("transpose_a{}", product)),
                                                  ctx.attrs.get_bool(fmt::format("transpose_b{}", product))));
  };
  const bool side_by_side = !omp_in_parallel() && omp_get_max_threads() == 2;
  const bool worth_a_thread_each = work(0) > kCallingThreadWork && work(1) > kCallingThreadWork;
  if (!side_by_side || !worth_a_thread_each) {
    run_pair_product(ctx, 0);
    run_pair_product(ctx, 1);
    return;
  }
  // An exception must not leave the region: each thread keeps its own, rethrown after the join.
  std::exception_ptr errors[2];
#pragma omp parallel num_threads(2)
  {
    const CallingThreadOnly one_thread;  // a primitive for one thread, run on this one
    for (int product = omp_get_thread_num(); product < 2; product += omp_get_num_threads()) {
      try {
        run_pair_product(ctx, static_cast<size_t>(product));
      } catch (...) {
        errors[product] = std::current_exception();
      }
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

const bool kRegistered = register_kernel("matmul", {.name = "onednn_sgemm",
                                                    .device = DeviceType::kCPU,
                                                    .dtypes = {DType::kF32},
                                                    .priority = 110,
                                                    .fn = small_sgemm,
                                                    .supports = small_sgemm_supports}) &&
                         register_kernel("matmul", {.name = "onednn",
                                                    .device = DeviceType::kCPU,
                                                    .dtypes = {DType::kF32, DType::kBF16},
                                                    .priority = 100,
                                                    .fn = onednn_matmul,
                                                    .supports = supports}) &&
                         register_kernel("fused_matmul", {.name = "onednn",
                                                          .device = DeviceType::kCPU,
                                                          .dtypes = {DType::kF32, DType::kBF16},
                                                          .priority = 100,
                                                          .fn = onednn_matmul,
                                                          .supports = supports}) &&
                         register_kernel("matmul_pair", {.name = "onednn",
                                                         .device = DeviceType::kCPU,
                                                         .dtypes = {DType::kF32},
                                                         .priority = 100,
                                                         .fn = matmul_pair,
                                                         .supports = supports});

}  // namespace
}  // namespace nimbus::cpu
