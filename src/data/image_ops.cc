// Image ops for Dataset::map: HWC, any dtype for data movement, f32 math.
#include "nimbus/data/image_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__SSSE3__)
#include <immintrin.h>
#endif

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/decode.h"
#include "src/data/pipeline.h"

namespace nimbus::data {
namespace {

void check_hwc(const Tensor& image, const char* op) {
  if (image.rank() != 3) {
    throw InvalidArgument(fmt::format("{}: expected an (H, W, C) image, got shape {}", op, image.shape().to_string()),
                          "decode_image returns (H, W, C); batch after the image ops");
  }
}

// dst[i] = src[i] * scale[i % block] + shift[i % block] (block a multiple of 8), as scale_shift_to_f32's
// plain loop computes it (a product, then a sum: the same floats), for a batch row: with AVX2 its
// stores stream to memory, so the row is not read in first (write-allocate) and does not evict the
// cache the next decode runs in; about twice as fast for the 150 KB of a 112x112 RGB row.
void scale_shift_u8_streaming(const uint8_t* src, float* dst, int64_t n, const float* scale, const float* shift,
                              int64_t block) {
  int64_t i = 0;
#if defined(__AVX2__)
  if (reinterpret_cast<uintptr_t>(dst) % 32 == 0) {
    for (; i + block <= n; i += block) {
      for (int64_t j = 0; j < block; j += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i + j));
        const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        _mm256_stream_ps(dst + i + j,
                         _mm256_add_ps(_mm256_mul_ps(x, _mm256_loadu_ps(scale + j)), _mm256_loadu_ps(shift + j)));
      }
    }
    _mm_sfence();
  }
#endif
  for (int64_t j = 0; i < n; ++i, j = (j + 1) % block) {
    dst[i] = static_cast<float>(src[i]) * scale[j] + shift[j];
  }
}

Tensor as_f32(const Tensor& image) {
  Tensor out = host_tensor(image.shape(), DType::kF32);
  float* dst = out.data<float>();
  if (image.dtype() == DType::kU8) {
    const uint8_t* src = image.data<uint8_t>();
    for (int64_t i = 0; i < image.numel(); ++i) dst[i] = static_cast<float>(src[i]) * (1.0f / 255.0f);
    return out;
  }
  visit_dtype(image.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(image.raw_data());
    for (int64_t i = 0; i < image.numel(); ++i) dst[i] = static_cast<float>(to_double(src[i]));
  });
  return out;
}

}  // namespace

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  check_hwc(image, "crop");
  const int64_t h = image.dim(0), w = image.dim(1), c = image.dim(2);
  if (top < 0 || left < 0 || height < 0 || width < 0 || top + height > h || left + width > w) {
    throw InvalidArgument(fmt::format("crop: window ({}, {}) + ({}, {}) does not fit an image of shape {}", top, left,
                                      height, width, image.shape().to_string()));
  }
  Tensor out = host_tensor(Shape{height, width, c}, image.dtype());
  const size_t pixel = static_cast<size_t>(c) * dtype_size(image.dtype());
  const auto* src = static_cast<const char*>(image.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t y = 0; y < height; ++y) {
    std::memcpy(dst + static_cast<size_t>(y * width) * pixel, src + static_cast<size_t>((top + y) * w + left) * pixel,
                static_cast<size_t>(width) * pixel);
  }
  return out;
}

namespace {

// The window random_crop draws from `seed` for an image of (image_height, image_width).
CropWindow random_crop_window(int64_t image_height, int64_t image_width, int64_t height, int64_t width, uint64_t seed,
                              const char* op) {
  if (height > image_height || width > image_width) {
    throw InvalidArgument(fmt::format("{}: a ({}, {}) window is larger than the ({}, {}) image", op, height, width,
                                      image_height, image_width));
  }
  detail::Rng rng(detail::mix_seed(seed, 0x63726f70));
  const int64_t top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(image_height - height + 1)));
  const int64_t left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(image_width - width + 1)));
  return CropWindow{top, left, height, width};
}

// Reverses the order of `count` pixels of `Pixel` bytes each.
template <size_t Pixel>
void reverse_pixels(const char* src, char* dst, int64_t count) {
  for (int64_t x = 0; x < count; ++x) std::memcpy(dst + x * Pixel, src + (count - 1 - x) * Pixel, Pixel);
}

// RGB: five pixels per 16-byte shuffle, a fifth of the time of copying them one by one. Destination
// pixels x..x+4 are source pixels p..p+4 (p = count - 5 - x) reversed; the load starts one byte before
// pixel p and the store writes one byte past pixel x+4, which the next five (or the tail) overwrite, so
// both stay inside the row while x + 5 < count.
template <>
void reverse_pixels<3>(const char* src, char* dst, int64_t count) {
  int64_t x = 0;
#if defined(__SSSE3__)
  const __m128i reverse = _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, 0);
  for (; x + 5 < count; x += 5) {
    const __m128i pixels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (count - 5 - x) * 3 - 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + x * 3), _mm_shuffle_epi8(pixels, reverse));
  }
#endif
  for (; x < count; ++x) std::memcpy(dst + x * 3, src + (count - 1 - x) * 3, 3);
}

}  // namespace

Tensor random_crop(const Tensor& image, int64_t height, int64_t width, uint64_t seed) {
  check_hwc(image, "random_crop");
  const CropWindow w = random_crop_window(image.dim(0), image.dim(1), height, width, seed, "random_crop");
  return crop(image, w.top, w.left, w.height, w.width);
}

Tensor decode_and_random_crop(const Tensor& bytes, int64_t height, int64_t width, uint64_t seed, int channels,
                              const std::string& what) {
  return decode_and_crop_image(
      bytes,
      [&](int64_t image_height, int64_t image_width) {
        return random_crop_window(image_height, image_width, height, width, seed, "decode_and_random_crop");
      },
      channels, what);
}

namespace {

// One row of `width` pixels of `pixel` bytes each, reversed.
void reverse_row(const char* src, char* dst, int64_t width, size_t pixel) {
  // Fixed-size copies for the common pixel sizes (u8 gray, RGB, RGBA; f32 RGB): a memcpy of
  // a run-time size per pixel costs a call each.
  switch (pixel) {
    case 1: reverse_pixels<1>(src, dst, width); break;
    case 3: reverse_pixels<3>(src, dst, width); break;
    case 4: reverse_pixels<4>(src, dst, width); break;
    case 12: reverse_pixels<12>(src, dst, width); break;
    default:
      for (int64_t x = 0; x < width; ++x) std::memcpy(dst + x * pixel, src + (width - 1 - x) * pixel, pixel);
  }
}

}  // namespace

Tensor flip_left_right(const Tensor& image) {
  check_hwc(image, "flip_left_right");
  const int64_t h = image.dim(0), w = image.dim(1);
  const size_t pixel = static_cast<size_t>(image.dim(2)) * dtype_size(image.dtype());
  Tensor out = host_tensor(image.shape(), image.dtype());
  const auto* src = static_cast<const char*>(image.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  const size_t row = static_cast<size_t>(w) * pixel;
  for (int64_t y = 0; y < h; ++y) {
    reverse_row(src + static_cast<size_t>(y) * row, dst + static_cast<size_t>(y) * row, w, pixel);
  }
  return out;
}

bool random_flip_drawn(uint64_t seed) {
  detail::Rng rng(detail::mix_seed(seed, 0x666c6970));
  return rng.below(2) == 1;
}

Tensor random_flip_left_right(const Tensor& image, uint64_t seed) {
  return random_flip_drawn(seed) ? flip_left_right(image) : image;
}

Tensor resize_bilinear(const Tensor& image, int64_t height, int64_t width) {
  check_hwc(image, "resize_bilinear");
  if (height < 1 || width < 1) {
    throw InvalidArgument(fmt::format("resize_bilinear: target size ({}, {}) must be positive", height, width));
  }
  const int64_t h = image.dim(0), w = image.dim(1), c = image.dim(2);
  // A u8 image is read in place, each value / 255 as as_f32 gives it: converting it whole would take four times
  // its bytes (1.4 GB for the largest image decode_image accepts; found by fuzz_image).
  const bool u8 = image.dtype() == DType::kU8;
  const Tensor src_f = image.dtype() == DType::kF32 || u8 ? image : as_f32(image);
  const uint8_t* src_u8 = u8 ? image.data<uint8_t>() : nullptr;
  const float* src_f32 = u8 ? nullptr : src_f.data<float>();
  const auto src = [&](int64_t i) { return u8 ? static_cast<float>(src_u8[i]) * (1.0f / 255.0f) : src_f32[i]; };
  const float scale_back = u8 ? 255.0f : 1.0f;  // keep the u8 value range
  Tensor out = host_tensor(Shape{height, width, c}, DType::kF32);
  float* dst = out.data<float>();
  const float sy = static_cast<float>(h) / static_cast<float>(height);
  const float sx = static_cast<float>(w) / static_cast<float>(width);
  for (int64_t y = 0; y < height; ++y) {
    const float fy = std::clamp((static_cast<float>(y) + 0.5f) * sy - 0.5f, 0.0f, static_cast<float>(h - 1));
    const int64_t y0 = static_cast<int64_t>(fy), y1 = std::min(y0 + 1, h - 1);
    const float dy = fy - static_cast<float>(y0);
    for (int64_t x = 0; x < width; ++x) {
      const float fx = std::clamp((static_cast<float>(x) + 0.5f) * sx - 0.5f, 0.0f, static_cast<float>(w - 1));
      const int64_t x0 = static_cast<int64_t>(fx), x1 = std::min(x0 + 1, w - 1);
      const float dx = fx - static_cast<float>(x0);
      for (int64_t k = 0; k < c; ++k) {
        const float a = src((y0 * w + x0) * c + k), b = src((y0 * w + x1) * c + k);
        const float d = src((y1 * w + x0) * c + k), e = src((y1 * w + x1) * c + k);
        const float top = a + (b - a) * dx, bottom = d + (e - d) * dx;
        dst[(y * width + x) * c + k] = (top + (bottom - top) * dy) * scale_back;
      }
    }
  }
  return out;
}

Tensor convert_image_dtype(const Tensor& image, DType dtype) {
  if (image.dtype() == dtype) return image;
  if (image.dtype() == DType::kU8 && is_floating(dtype)) return as_f32(image).to(dtype);
  if (is_floating(image.dtype()) && dtype == DType::kU8) {
    Tensor f = image.dtype() == DType::kF32 ? image : image.to(DType::kF32);
    Tensor out = host_tensor(image.shape(), DType::kU8);
    const float* src = f.data<float>();
    uint8_t* dst = out.data<uint8_t>();
    for (int64_t i = 0; i < image.numel(); ++i) {
      dst[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(src[i] * 255.0f), 0.0f, 255.0f));
    }
    return out;
  }
  if (is_floating(image.dtype()) && is_floating(dtype)) return image.to(dtype);
  throw InvalidArgument(fmt::format("convert_image_dtype: {} to {} is not an image conversion",
                                    dtype_name(image.dtype()), dtype_name(dtype)),
                        "convert between u8 and floating dtypes, or use Tensor::to for plain casts");
}

Tensor normalize(const Tensor& image, const std::vector<float>& mean, const std::vector<float>& std) {
  check_hwc(image, "normalize");
  const int64_t c = image.dim(2);
  if (static_cast<int64_t>(mean.size()) != c || static_cast<int64_t>(std.size()) != c) {
    throw InvalidArgument(
        fmt::format("normalize: {} channels, but {} means and {} standard deviations", c, mean.size(), std.size()));
  }
  const float unit = image.dtype() == DType::kU8 ? 1.0f / 255.0f : 1.0f;
  std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
  for (size_t k = 0; k < scale.size(); ++k) {
    scale[k] = unit / std[k];
    shift[k] = -mean[k] / std[k];
  }
  return scale_shift_to_f32(image, scale, shift);
}

Tensor scale_shift_to_f32(const Tensor& values, const std::vector<float>& scale, const std::vector<float>& shift,
                          bool flip_left_right) {
  const auto k = static_cast<int64_t>(scale.size());
  if (k == 0 || shift.size() != scale.size()) {
    throw InvalidArgument(fmt::format("scale_shift_to_f32: {} scales and {} shifts", scale.size(), shift.size()));
  }
  if (flip_left_right) check_hwc(values, "scale_shift_to_f32 with flip_left_right");
  // Blocks of 16 * k values whose per-position scale and shift are precomputed: the inner loop has no
  // modulo and vectorizes.
  const bool from_u8 = values.dtype() == DType::kU8;
  const Tensor source = from_u8 || values.dtype() == DType::kF32 ? values : values.to(DType::kF32);
  const int64_t block = 16 * k;
  std::vector<float> block_scale(static_cast<size_t>(block)), block_shift(static_cast<size_t>(block));
  for (int64_t j = 0; j < block; ++j) {
    block_scale[static_cast<size_t>(j)] = scale[static_cast<size_t>(j % k)];
    block_shift[static_cast<size_t>(j)] = shift[static_cast<size_t>(j % k)];
  }
  const detail::ElementOutput output = detail::element_output_tensor(values.shape(), DType::kF32);
  // n values from src (u8 or f32) to dst, a part that starts at a multiple of k.
  const auto convert = [&](const void* src, float* dst, int64_t n) {
    if (from_u8 && output.batch_row) {
      scale_shift_u8_streaming(static_cast<const uint8_t*>(src), dst, n, block_scale.data(), block_shift.data(), block);
      return;
    }
    const auto run = [&](const auto* in) {
      int64_t i = 0;
      for (; i + block <= n; i += block) {
        for (int64_t j = 0; j < block; ++j) {
          dst[i + j] =
              static_cast<float>(in[i + j]) * block_scale[static_cast<size_t>(j)] + block_shift[static_cast<size_t>(j)];
        }
      }
      for (int64_t j = 0; i < n; ++i, ++j) {
        dst[i] = static_cast<float>(in[i]) * block_scale[static_cast<size_t>(j)] + block_shift[static_cast<size_t>(j)];
      }
    };
    if (from_u8) {
      run(static_cast<const uint8_t*>(src));
    } else {
      run(static_cast<const float*>(src));
    }
  };
  float* dst = output.tensor.data<float>();
  if (!flip_left_right) {
    convert(source.raw_data(), dst, values.numel());
    return output.tensor;
  }
  // Eight rows at a time reversed into a buffer that stays in cache, then converted: eight rows of f32
  // span a multiple of 32 bytes, so each part's streaming stores start aligned if the first's do.
  constexpr int64_t kRows = 8;
  const int64_t h = values.dim(0), w = values.dim(1), row_values = w * values.dim(2);
  const size_t item = dtype_size(source.dtype()), row_bytes = static_cast<size_t>(row_values) * item;
  std::vector<char> reversed(static_cast<size_t>(std::min(h, kRows)) * row_bytes);
  const auto* src = static_cast<const char*>(source.raw_data());
  for (int64_t y = 0; y < h; y += kRows) {
    const int64_t rows = std::min(kRows, h - y);
    for (int64_t r = 0; r < rows; ++r) {
      reverse_row(src + static_cast<size_t>(y + r) * row_bytes, reversed.data() + static_cast<size_t>(r) * row_bytes, w,
                  static_cast<size_t>(values.dim(2)) * item);
    }
    convert(reversed.data(), dst + y * row_values, rows * row_values);
  }
  return output.tensor;
}

}  // namespace nimbus::data
