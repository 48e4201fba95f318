// oneDNN memory descriptors for our image batches. Internal.
#pragma once

#include "nimbus/ops/for_kernels/window_geometry.h"
#include "src/kernels/cpu/onednn.h"

namespace nimbus::cpu {

// A batch of images in its own layout: oneDNN's logical dims are (N, C, H, W) for both.
inline dnnl::memory::desc image_desc(const internal::ImageLayout& image, DType dtype) {
  return dnnl::memory::desc({image.batch, image.channels, image.height, image.width}, dnnl_data_type(dtype),
                            image.channels_last ? dnnl::memory::format_tag::nhwc : dnnl::memory::format_tag::nchw);
}

}  // namespace nimbus::cpu
