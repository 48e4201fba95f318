// matmul and fused_matmul on CUDA through cuBLASLt (f32, bf16, f16; the 16-bit
// types on Tensor Cores with f32 accumulation and f32 scaling). Nimbus's tensors are
// row-major and cuBLASLt's column-major, so C = op(A) op(B) runs as
// C^T = op(B)^T op(A)^T: B is cuBLASLt's first operand, A its second, and a
// row-major bias over C's columns is cuBLASLt's bias over the rows of C^T.
// fused_matmul's bias and ReLU / tanh-GELU reach the library as epilogues, so
// graph mode's epilogue fusion runs as one cuBLASLt call.
//
// Batches: both operands with the same batch shape, or one of them a plain
// matrix shared by every batch (stride 0); other broadcasts are not served here.
// TF32: off by default (src/kernels/cuda/tf32.h).
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <optional>

#include "nimbus/device/backend.h"
#include "nimbus/ops/activation_table.h"
#include "nimbus/ops/for_kernels/matmul_geometry.h"
#include "nimbus/ops/registry.h"
#include "src/device/cuda/cuda_check.h"
#include "src/device/cuda/cuda_stream.h"
#include "src/device/cuda/lazy_libraries.h"
#include "src/kernels/cuda/tf32.h"

namespace nimbus::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cublasLtHandle_t handle_for(int device) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;  // kept for the process's life, like the streams
  std::lock_guard lock(mutex);
  auto [slot, added] = handles.try_emplace(device, nullptr);
  if (added) {
    NIMBUS_CUDA_CHECK(cudaSetDevice(device));
    NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtCreate(&slot->second));
  }
  return slot->second;
}

// The library's name for the operands' (and the output's) element type.
cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// f32 accumulates in f32 (or TF32 when allowed); bf16 and f16 accumulate in f32 too.
cublasComputeType_t compute_type(DType dtype) {
  if (dtype == DType::kF32 && tf32_allowed()) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

// RAII for the descriptors of one call.
struct MatmulDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~MatmulDescriptors() {
    if (preference != nullptr) cublaslt().cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c}) {
      if (layout != nullptr) cublaslt().cublasLtMatrixLayoutDestroy(layout);
    }
    if (op != nullptr) cublaslt().cublasLtMatmulDescDestroy(op);
  }
};

void set_batch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  const int32_t count = static_cast<int32_t>(batch);
  NIMBUS_CUBLAS_CHECK(
      cublaslt().cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                  &stride, sizeof(stride)));
}

// cuBLASLt's epilogues: bias alone, bias + ReLU, bias + tanh-approximated GELU.
std::optional<cublasLtEpilogue_t> epilogue_for(Activation activation) {
  switch (activation) {
    case Activation::kLinear: return CUBLASLT_EPILOGUE_BIAS;
    case Activation::kRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Activation::kGeluTanh: return CUBLASLT_EPILOGUE_GELU_BIAS;
    default: return std::nullopt;
  }
}

// out = op(a) @ op(b) [+ bias, then the epilogue's activation].
void run_matmul(KernelContext& ctx, const Tensor* bias, cublasLtEpilogue_t epilogue) {
  const Tensor& a = ctx.inputs[0];
  const Tensor& b = ctx.inputs[1];
  const bool ta = ctx.attrs.get_bool("transpose_a"), tb = ctx.attrs.get_bool("transpose_b");
  const internal::MatmulGeometry g(a.shape(), b.shape(), ta, tb);
  if (ctx.outputs[0].numel() == 0) return;
  CudaStream& stream = cuda_stream(ctx.stream);
  const int device = stream.device().index;

  MatmulDescriptors d;
  const cudaDataType_t type = cuda_type(a.dtype());
  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatmulDescCreate(&d.op, compute_type(a.dtype()), CUDA_R_32F));
  // cuBLASLt's first operand is B (row-major k x n is column-major n x k), its second A.
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  NIMBUS_CUBLAS_CHECK(
      cublaslt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  NIMBUS_CUBLAS_CHECK(
      cublaslt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  if (bias != nullptr) {
    NIMBUS_CUBLAS_CHECK(
        cublaslt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    const void* bias_data = bias->raw_data();
    NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_data,
                                                                  sizeof(bias_data)));
  }
  // Column-major shapes (rows, columns, leading dimension) of B, A and C as stored.
  const uint64_t b_rows = tb ? g.k : g.n, b_cols = tb ? g.n : g.k;
  const uint64_t a_rows = ta ? g.m : g.k, a_cols = ta ? g.k : g.m;
  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutCreate(&d.a, type, b_rows, b_cols, static_cast<int64_t>(b_rows)));
  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutCreate(&d.b, type, a_rows, a_cols, static_cast<int64_t>(a_rows)));
  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutCreate(&d.c, type, g.n, g.m, g.n));
  if (g.batch > 1) {
    set_batch(d.a, g.batch, b.rank() == 2 ? 0 : g.k * g.n);
    set_batch(d.b, g.batch, a.rank() == 2 ? 0 : g.m * g.k);
    set_batch(d.c, g.batch, g.m * g.n);
  }

  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatmulPreferenceCreate(&d.preference));
  const size_t workspace_bytes = kWorkspaceBytes;
  NIMBUS_CUBLAS_CHECK(cublaslt().cublasLtMatmulPreferenceSetAttribute(
      d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  const cublasLtHandle_t handle = handle_for(device);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  NIMBUS_CUBLAS_CHECK(
      cublaslt().cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.c, d.c, d.preference, 1, &heuristic, &found));
  if (found == 0) NIMBUS_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);

  // The workspace comes from the device's BFC allocator; freeing it right after the
  // enqueue is safe because every later user of the block runs on the same stream.
  Allocator& allocator = backend(DeviceType::kCUDA).allocator(device);
  void* workspace = allocator.allocate(heuristic.workspaceSize);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublaslt().cublasLtMatmul(
      handle, d.op, &alpha, b.raw_data(), d.a, a.raw_data(), d.b, &beta, ctx.outputs[0].raw_data(), d.c,
      ctx.outputs[0].raw_data(), d.c, &heuristic.algo, workspace, heuristic.workspaceSize, stream.handle());
  allocator.deallocate(workspace, heuristic.workspaceSize);
  NIMBUS_CUBLAS_CHECK(status);
  NIMBUS_CUDA_CHECK_LAUNCH("cublasLtMatmul", stream);
}

// Operands of one dtype (the output's too); same batch shapes, or one operand a plain matrix.
bool supported_batches(const KernelContext& ctx) {
  const Shape& a = ctx.inputs[0].shape();
  const Shape& b = ctx.inputs[1].shape();
  for (const Tensor& t : ctx.inputs) {
    if (t.dtype() != ctx.inputs[0].dtype()) return false;
  }
  if (ctx.outputs[0].dtype() != ctx.inputs[0].dtype()) return false;
  if (a.rank() == 2 || b.rank() == 2) return true;
  return a.rank() == b.rank() && std::equal(a.begin(), a.end() - 2, b.begin());
}

const bool kRegistered = [] {
  register_kernel("matmul", {.name = "cublaslt",
                             .device = DeviceType::kCUDA,
                             .dtypes = {DType::kF32, DType::kBF16, DType::kF16},
                             .priority = 1,
                             .fn = [](KernelContext& ctx) { run_matmul(ctx, nullptr, CUBLASLT_EPILOGUE_DEFAULT); },
                             .supports = supported_batches});
  register_kernel(
      "fused_matmul",
      {.name = "cublaslt",
       .device = DeviceType::kCUDA,
       .dtypes = {DType::kF32, DType::kBF16, DType::kF16},
       .priority = 1,
       .fn = [](KernelContext& ctx) { run_matmul(ctx, &ctx.inputs[2], *epilogue_for(fused_activation_of(ctx.attrs))); },
       // cuBLASLt has the epilogue (epilogue_for) and the operands are 2-D.
       .supports =
           [](const KernelContext& ctx) {
             return ctx.inputs[0].rank() == 2 && ctx.inputs[1].rank() == 2 && supported_batches(ctx) &&
                    epilogue_for(fused_activation_of(ctx.attrs)).has_value();
           }});
  return true;
}();

}  // namespace
}  // namespace nimbus::cuda
