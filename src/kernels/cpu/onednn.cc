#include "src/kernels/cpu/onednn.h"

#include <fmt/format.h>
#include <omp.h>

#include <functional>
#include <thread>

#include "nimbus/tensor/tensor.h"

namespace nimbus::cpu {

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

PrimitiveOwner primitive_owner() {
  return {static_cast<int64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id())), omp_get_max_threads()};
}

dnnl::stream& dnnl_stream() {
  // One in-order stream per thread: oneDNN streams are not meant to be shared across threads.
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

bool dnnl_supports(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16; }

bool dnnl_has_native_bf16() {
  static const bool native = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return native;
}

bool dnnl_runs_natively(std::span<const Tensor> inputs, std::span<const Tensor> outputs) {
  const DType dtype = outputs[0].dtype();
  if (dtype != DType::kF32 && !(dtype == DType::kBF16 && dnnl_has_native_bf16())) return false;
  for (std::span<const Tensor> tensors : {inputs, outputs}) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0 || t.dtype() != dtype) return false;
    }
  }
  return true;
}

dnnl::memory::data_type dnnl_data_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return dnnl::memory::data_type::f32;
    case DType::kBF16: return dnnl::memory::data_type::bf16;
    case DType::kF16: return dnnl::memory::data_type::f16;
    case DType::kI32: return dnnl::memory::data_type::s32;
    case DType::kU8: return dnnl::memory::data_type::u8;
    default: throw Unimplemented(fmt::format("oneDNN has no {} type", dtype_name(dtype)));
  }
}

void throw_dnnl_failure(const char* statement, const char* file, int line, const dnnl::error& error) {
  throw InternalError(fmt::format("oneDNN call failed: {} at {}:{}: {} (status {})", statement, file, line,
                                  error.what(), static_cast<int>(error.status)));
}

dnnl::algorithm eltwise_algorithm(Activation activation) {
  switch (activation) {
    case Activation::kRelu: return dnnl::algorithm::eltwise_relu;
    case Activation::kSigmoid: return dnnl::algorithm::eltwise_logistic;
    case Activation::kTanh: return dnnl::algorithm::eltwise_tanh;
    case Activation::kGeluTanh: return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::kGeluErf: return dnnl::algorithm::eltwise_gelu_erf;
    default: throw InternalError(fmt::format("no oneDNN post-op for {}", fused_activation_name(activation)));
  }
}

dnnl::primitive_attr activation_post_op(Activation activation) {
  dnnl::primitive_attr attr;
  if (activation == Activation::kLinear) return attr;
  const dnnl::algorithm algorithm = eltwise_algorithm(activation);
  dnnl::post_ops post_ops;
  post_ops.append_eltwise(1.0f, algorithm, 0.0f, 0.0f);
  attr.set_post_ops(post_ops);
  return attr;
}

}  // namespace nimbus::cpu
