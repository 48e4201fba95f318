// Image ops for map.
#include "nimbus/data/image_ops.h"

#include <gtest/gtest.h>

#include <set>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"

namespace nimbus::data {
namespace {

// (H, W, C) u8 with value 10*y + x + 100*c.
Tensor ramp(int64_t h, int64_t w, int64_t c) {
  std::vector<uint8_t> v;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) v.push_back(static_cast<uint8_t>(10 * y + x + 100 * k));
  return Tensor::from_vector<uint8_t>(v, {h, w, c});
}

TEST(ImageOps, CropAndRandomCrop) {
  Tensor image = ramp(5, 6, 2);
  Tensor window = crop(image, 1, 2, 2, 3);
  EXPECT_EQ(window.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(window.at<int>({0, 0, 0}), 12);
  EXPECT_EQ(window.at<int>({1, 2, 1}), 124);
  EXPECT_THROW(crop(image, 4, 0, 2, 2), InvalidArgument);
  std::set<int> corners;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    Tensor r = random_crop(image, 3, 3, seed);
    EXPECT_EQ(r.shape(), (Shape{3, 3, 2}));
    EXPECT_EQ(r.to_vector<int>(), random_crop(image, 3, 3, seed).to_vector<int>());  // same seed, same window
    corners.insert(r.at<int>({0, 0, 0}));
  }
  EXPECT_EQ(corners.size(), 12u);  // every one of the 3 x 4 positions is drawn
}

TEST(ImageOps, Flip) {
  Tensor image = ramp(2, 3, 1);
  EXPECT_EQ(flip_left_right(image).to_vector<int>(), (std::vector<int>{2, 1, 0, 12, 11, 10}));
  int flipped = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) flipped += random_flip_left_right(image, seed).at<int>({0, 0, 0}) == 2;
  EXPECT_GT(flipped, 30);
  EXPECT_LT(flipped, 70);
}

// Every width around RGB flip's five-pixel steps, against a plain loop.
TEST(ImageOps, FlipOfRgbRowsOfEveryWidthMatchesAPlainLoop) {
  for (int64_t w = 1; w <= 41; ++w) {
    const Tensor image = ramp(3, w, 3);
    const std::vector<int> values = image.to_vector<int>(), flipped = flip_left_right(image).to_vector<int>();
    for (int64_t y = 0; y < 3; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t c = 0; c < 3; ++c) {
          ASSERT_EQ(flipped[static_cast<size_t>((y * w + x) * 3 + c)],
                    values[static_cast<size_t>((y * w + (w - 1 - x)) * 3 + c)])
              << "width " << w << ", pixel (" << y << ", " << x << "), channel " << c;
        }
      }
    }
  }
}

TEST(ImageOps, ResizeBilinearHalfPixelCenters) {
  // 2x2 -> 4x4 as tf.image.resize(bilinear): corners keep their values,
  // the next sample is 3/4 one + 1/4 the other.
  Tensor image = Tensor::from_vector<float>({0, 4, 8, 12}, {2, 2, 1});
  Tensor big = resize_bilinear(image, 4, 4);
  EXPECT_EQ(big.shape(), (Shape{4, 4, 1}));
  EXPECT_FLOAT_EQ(big.at<float>({0, 0, 0}), 0.0f);
  EXPECT_FLOAT_EQ(big.at<float>({0, 1, 0}), 1.0f);
  EXPECT_FLOAT_EQ(big.at<float>({0, 3, 0}), 4.0f);
  EXPECT_FLOAT_EQ(big.at<float>({3, 3, 0}), 12.0f);
  EXPECT_FLOAT_EQ(big.at<float>({1, 1, 0}), 0.75f * 1.0f + 0.25f * 9.0f);
  // u8 keeps its value range.
  EXPECT_FLOAT_EQ(resize_bilinear(ramp(2, 2, 1), 2, 2).at<float>({1, 1, 0}), 11.0f);
}

TEST(ImageOps, ConvertAndNormalize) {
  Tensor u8 = Tensor::from_vector<uint8_t>({0, 51, 255}, {1, 1, 3});
  Tensor f = convert_image_dtype(u8, DType::kF32);
  EXPECT_FLOAT_EQ(f.at<float>({0, 0, 1}), 0.2f);
  EXPECT_EQ(convert_image_dtype(f, DType::kU8).to_vector<int>(), (std::vector<int>{0, 51, 255}));
  Tensor n = normalize(u8, {0.0f, 0.1f, 0.5f}, {1.0f, 0.5f, 0.25f});
  EXPECT_FLOAT_EQ(n.at<float>({0, 0, 0}), 0.0f);
  EXPECT_FLOAT_EQ(n.at<float>({0, 0, 1}), (0.2f - 0.1f) / 0.5f);
  EXPECT_FLOAT_EQ(n.at<float>({0, 0, 2}), 2.0f);
  EXPECT_THROW(normalize(u8, {0}, {1}), InvalidArgument);
}

TEST(ImageOps, ScaleShiftToF32MatchesAPlainLoop) {
  const Tensor u8 = ramp(5, 7, 3);  // 105 values: six blocks of 16 pixels' worth and a tail
  const std::vector<float> scale{0.5f, -2.0f, 1.0f / 255.0f}, shift{1.0f, 0.25f, -3.0f};
  const std::vector<float> got = scale_shift_to_f32(u8, scale, shift).to_vector<float>();
  const std::vector<int> in = u8.to_vector<int>();
  ASSERT_EQ(got.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_NEAR(got[i], static_cast<float>(in[i]) * scale[i % 3] + shift[i % 3], 1e-5f) << i;
  }
  // One factor for all values, of any shape and dtype.
  const Tensor ints = Tensor::from_vector<int32_t>({-4, 0, 9}, {3});
  EXPECT_EQ(scale_shift_to_f32(ints, {2.0f}, {1.0f}).to_vector<float>(), (std::vector<float>{-7.0f, 1.0f, 19.0f}));
  EXPECT_EQ(scale_shift_to_f32(ints, {2.0f}, {1.0f}).dtype(), DType::kF32);
  EXPECT_THROW(scale_shift_to_f32(ints, {1.0f, 2.0f}, {0.0f}), InvalidArgument);
}

// The flip read in the same pass: the values of scale_shift_to_f32(flip_left_right(image)), for u8 and
// f32 images of 1 to 20 rows (parts of eight rows and a shorter last one) and odd widths.
TEST(ImageOps, ScaleShiftToF32WithFlipMatchesFlipThenScaleShift) {
  const std::vector<float> scale{0.5f, -2.0f, 1.0f / 255.0f}, shift{1.0f, 0.25f, -3.0f};
  for (int64_t h : {1, 7, 8, 9, 20}) {
    for (int64_t w : {1, 5, 13}) {
      const Tensor u8 = ramp(h, w, 3);
      for (const Tensor& image : {u8, u8.to(DType::kF32)}) {
        EXPECT_EQ(scale_shift_to_f32(image, scale, shift, /*flip_left_right=*/true).to_vector<float>(),
                  scale_shift_to_f32(flip_left_right(image), scale, shift).to_vector<float>())
            << h << "x" << w << " " << dtype_name(image.dtype());
      }
    }
  }
  EXPECT_THROW(scale_shift_to_f32(Tensor::from_vector<uint8_t>({1, 2, 3}, {3}), {1.0f}, {0.0f}, true), InvalidArgument);
  int flips = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const Tensor image = ramp(2, 3, 1);
    flips += random_flip_drawn(seed);
    EXPECT_EQ(random_flip_left_right(image, seed).to_vector<int>(),
              (random_flip_drawn(seed) ? flip_left_right(image) : image).to_vector<int>());
  }
  EXPECT_GT(flips, 30);
  EXPECT_LT(flips, 70);
}

TEST(ImageOps, AugmentationPipelineIsDeterministicAndRestorable) {
  Tensor images = ramp(8, 8, 3).reshape(Shape{1, 8, 8, 3});
  auto build = [&] {
    return Dataset::from_tensors({images}).unbatch().repeat(20).enumerate().map(
        [](const Element& e) {
          const auto seed = static_cast<uint64_t>(e[0].item<int64_t>());
          Tensor image = random_flip_left_right(random_crop(e[1], 6, 6, seed), seed + 1);
          return Element{normalize(image, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f})};
        },
        kAutotune);
  };
  auto a = build().batch(4).collect();
  auto b = build().batch(4).collect();
  ASSERT_EQ(a.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i][0].to_vector<float>(), b[i][0].to_vector<float>());
  EXPECT_EQ(a[0][0].shape(), (Shape{4, 6, 6, 3}));
}

}  // namespace
}  // namespace nimbus::data
