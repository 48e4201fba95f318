// assign: overwrite a tensor's elements in place with a value of the same
// shape and dtype. Variables update through it, so inside a traced function an
// optimizer's updates become graph nodes that run in program order.
//
//   assign(weights, weights - grad * lr);
#pragma once

#include "nimbus/tensor/tensor.h"

namespace nimbus {

void assign(const Tensor& target, const Tensor& value);

}  // namespace nimbus
