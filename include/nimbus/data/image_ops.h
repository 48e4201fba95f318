// Per-element image ops for Dataset::map, on HWC tensors (the layout
// decode_image returns). Random ops are stateless: they take a seed, so a
// pipeline stays deterministic under parallel map and restorable; derive the
// seed from the element (enumerate() gives each element its index).
//
//   ds.enumerate().map([](const Element& e) {
//     const uint64_t seed = static_cast<uint64_t>(e[0].item<int64_t>());
//     Tensor image = decode_image(e[1], 3);                   // u8 (128, 128, 3)
//     image = random_crop(image, 112, 112, seed);             // u8 (112, 112, 3)
//     image = random_flip_left_right(image, seed + 1);
//     image = normalize(image, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});  // f32, /255 first
//     return Element{image, e[2]};
//   }, kAutotune);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus::data {

// The window [top, top + height) x [left, left + width) of an (H, W, C) image.
Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width);
// A window of (height, width) at a position drawn uniformly from `seed`.
Tensor random_crop(const Tensor& image, int64_t height, int64_t width, uint64_t seed);
// decode_image then random_crop with the same seed, the same pixels, but a
// JPEG decodes only the window (decode_and_crop_image): faster when a random
// crop follows the decode.
Tensor decode_and_random_crop(const Tensor& bytes, int64_t height, int64_t width, uint64_t seed, int channels = 0,
                              const std::string& what = {});
// Mirrors the W axis.
Tensor flip_left_right(const Tensor& image);
// Mirrors with probability 1/2, drawn from `seed`.
Tensor random_flip_left_right(const Tensor& image, uint64_t seed);
// Whether random_flip_left_right flips for `seed`.
bool random_flip_drawn(uint64_t seed);
// Bilinear resize to (height, width), half-pixel centers (TF2's
// tf.image.resize, antialias off); f32 output.
Tensor resize_bilinear(const Tensor& image, int64_t height, int64_t width);
// u8 -> float in [0, 1] (x / 255), float -> u8 (x * 255, rounded and
// clamped), float <-> float casts; like tf.image.convert_image_dtype.
Tensor convert_image_dtype(const Tensor& image, DType dtype);
// (convert_image_dtype(image, f32) - mean[c]) / std[c] per channel; f32 output.
Tensor normalize(const Tensor& image, const std::vector<float>& mean, const std::vector<float>& std);
// f32(values[i]) * scale[i % k] + shift[i % k] for any shape, k = scale.size() (k = C: per channel of
// an (H, W, C) image; k = 1: one factor for all): one pass, u8 or f32 values read as they are (no
// / 255). normalize's kernel, and what a traced map's cast from u8 followed by scalar arithmetic
// runs as (data/element_function.h). With `flip_left_right`, of the (H, W, C) image flip_left_right
// gives, in the same pass (what a traced random flip before it becomes).
Tensor scale_shift_to_f32(const Tensor& values, const std::vector<float>& scale, const std::vector<float>& shift,
                          bool flip_left_right = false);

}  // namespace nimbus::data
