// The oneDNN engine and stream every CPU kernel shares, and the check macro
// for oneDNN calls. Internal.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <span>
#include <string_view>

#include "nimbus/base/dtype.h"
#include "nimbus/base/error.h"
#include "nimbus/ops/activation_table.h"

namespace nimbus {
class Tensor;
}  // namespace nimbus

namespace nimbus::cpu {

dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();

// What primitive caches add to their keys so that each thread has its own primitives. This
// oneDNN (built for concurrent execution) gives each primitive its own scratchpad, so two threads
// (replicas on logical devices) must never run one primitive at once; and a primitive splits its
// work for the thread budget it was made under.
struct PrimitiveOwner {
  int64_t thread = 0;  // the calling thread, hashed
  int64_t budget = 0;  // its compute threads
  auto operator<=>(const PrimitiveOwner&) const =
      default;  // NOLINT(modernize-use-nullptr): the defaulted <=> compares with a literal 0
};
PrimitiveOwner primitive_owner();

// oneDNN's element type for ours; throws Unimplemented for types it lacks.
dnnl::memory::data_type dnnl_data_type(DType dtype);
bool dnnl_supports(DType dtype);
// Whether this CPU runs oneDNN's native bf16 primitives (avx512_bf16; they accumulate in f32),
// asked of oneDNN's ISA query at run time. Without them bf16 ops take the widened_f32 kernels.
bool dnnl_has_native_bf16();
// The `supports` test of the oneDNN compute kernels (registered for f32 and bf16): every tensor
// non-empty and of one dtype, f32, or bf16 where dnnl_has_native_bf16().
bool dnnl_runs_natively(std::span<const Tensor> inputs, std::span<const Tensor> outputs);
// An attribute with fused_matmul's / fused_conv2d's activation as an eltwise
// post-op; none for kLinear.
dnnl::primitive_attr activation_post_op(Activation activation);

[[noreturn]] void throw_dnnl_failure(const char* statement, const char* file, int line, const dnnl::error& error);

}  // namespace nimbus::cpu

// Runs a oneDNN statement; a failure becomes a nimbus::InternalError naming the
// statement, file and line.
#define NIMBUS_DNNL_CHECK(...)                                                                \
  do {                                                                                        \
    try {                                                                                     \
      __VA_ARGS__;                                                                            \
    } catch (const dnnl::error& nimbus_dnnl_error) {                                          \
      ::nimbus::cpu::throw_dnnl_failure(#__VA_ARGS__, __FILE__, __LINE__, nimbus_dnnl_error); \
    }                                                                                         \
  } while (0)
