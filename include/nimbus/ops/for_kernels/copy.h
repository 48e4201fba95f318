// The kernel of aliasing ops (reshape, stop_gradient): eager mode hands them
// an output that already views the input, so nothing moves; the graph
// executor may give them a separate buffer, which gets a copy. Shared with the kernels (src/kernels/).
#pragma once

#include "nimbus/ops/op_schema.h"

namespace nimbus::internal {

void copy_if_distinct(KernelContext& ctx);

}  // namespace nimbus::internal
