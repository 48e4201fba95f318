// CSV source and image decoding.
#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/image_ops.h"
#include "tests/data/data_test_util.h"

namespace nimbus::data {
namespace {

using testing::TempDirTest;
using Type = CsvOptions::Type;

class CsvTest : public TempDirTest {
 protected:
  void put(const std::string& name, const std::string& text) {
    std::ofstream out(path(name), std::ios::binary);
    out << text;
  }
};

TEST_F(CsvTest, TypedColumnsHeaderAndQuotes) {
  put("a.csv",
      "id,score,name\n"
      "1,0.5,plain\n"
      "2,-1.25,\"with, comma\"\r\n"
      "3,3e2,\"say \"\"hi\"\"\"\n"
      "4,7,\"two\nlines\"\n");
  CsvOptions options{{Type::kI64, Type::kF32, Type::kString}};
  auto rows = Dataset::csv({path("a.csv")}, options).collect();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][0].item<int64_t>(), 1);
  EXPECT_FLOAT_EQ(rows[1][1].item<float>(), -1.25f);
  EXPECT_EQ(tensor_string(rows[1][2]), "with, comma");
  EXPECT_FLOAT_EQ(rows[2][1].item<float>(), 300.0f);
  EXPECT_EQ(tensor_string(rows[2][2]), "say \"hi\"");
  EXPECT_EQ(tensor_string(rows[3][2]), "two\nlines");
}

TEST_F(CsvTest, WrongColumnCountNamesFileLineAndOffset) {
  put("b.csv", "x,y\n1,2\n3,4,5\n6,7\n");
  CsvOptions options{{Type::kI32, Type::kI32}};
  Iterator it = Dataset::csv({path("b.csv")}, options).iterator();
  EXPECT_EQ(it.next()->at(1).item<int>(), 2);
  try {
    it.next();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("b.csv"), std::string::npos) << message;
    EXPECT_NE(message.find("line 3"), std::string::npos) << message;
    EXPECT_NE(message.find("byte offset 8"), std::string::npos) << message;
    EXPECT_NE(message.find("expected 2 columns, found 3"), std::string::npos) << message;
  }
  EXPECT_EQ(it.next()->at(0).item<int>(), 6);
  EXPECT_EQ(Dataset::csv({path("b.csv")}, options).ignore_errors().collect().size(), 2u);
}

TEST_F(CsvTest, NanAndInfInFloatColumnsAreRefusedUnlessAllowed) {
  put("n.csv", "w,h\n1,2\n3,NaN\n-INFINITY,4\n+inf,5\n6,7\n");
  CsvOptions options{.column_types = {Type::kF32, Type::kF64}, .column_names = {"w", "h"}};
  Iterator it = Dataset::csv({path("n.csv")}, options).iterator();
  EXPECT_EQ(it.next()->at(0).item<float>(), 1.0f);
  for (const char* expected :
       {"line 3 (byte offset 8), column 2 ('h'): 'NaN' is not a finite number",
        "line 4 (byte offset 14), column 1 ('w'): '-INFINITY' is not a finite number", "column 1 ('w'): '+inf'"}) {
    try {
      it.next();
      ADD_FAILURE() << "no error for " << expected;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("CSV file '" + path("n.csv") + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(it.next()->at(1).item<double>(), 7.0);  // the rows after go on
  options.allow_non_finite = true;
  const auto rows = Dataset::csv({path("n.csv")}, options).collect();
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_TRUE(std::isnan(rows[1][1].item<double>()));
  EXPECT_EQ(rows[2][0].item<float>(), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(rows[3][0].item<float>(), std::numeric_limits<float>::infinity());
}

TEST_F(CsvTest, AnOverLongFieldIsQuotedByItsStartOnly) {
  put("long.csv", "1," + std::string(1 << 20, 'x') + "\n");
  CsvOptions options{{Type::kI64, Type::kF32}, /*header=*/false};
  try {
    Dataset::csv({path("long.csv")}, options).collect();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
    EXPECT_NE(message.find("'" + std::string(40, 'x') + "...' (1048576 bytes) is not a valid f32"), std::string::npos)
        << message;
  }
}

TEST_F(CsvTest, WithOriginAppendsTheFileAndLineOfEachRow) {
  put("o.csv", "a\n1\n\"two\nlines\"\n3\n");
  CsvOptions options{.column_types = {Type::kString}, .with_origin = true};
  const auto rows = Dataset::csv({path("o.csv")}, options).collect();
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_EQ(rows[2].size(), 2u);
  EXPECT_EQ(tensor_string(rows[0][1]), "CSV file '" + path("o.csv") + "', line 2");
  EXPECT_EQ(tensor_string(rows[2][1]), "CSV file '" + path("o.csv") + "', line 5");  // after a two-line field
}

TEST_F(CsvTest, BadNumberNamesTheColumn) {
  put("c.csv", "1,abc\n");
  CsvOptions options{{Type::kI64, Type::kF64}, /*header=*/false};
  try {
    Dataset::csv({path("c.csv")}, options).collect();
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("column 2: 'abc' is not a valid f64"), std::string::npos) << e.what();
  }
}

// ---- images ----

std::string encode_jpeg(int width, int height, int components, const std::vector<uint8_t>& pixels) {
  return data::encode_jpeg(Tensor::from_vector<uint8_t>(pixels, {height, width, components}), 100);
}

std::string encode_png_rgba(int width, int height, const std::vector<uint8_t>& pixels, const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               PNG_COLOR_TYPE_RGB_ALPHA, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) png_write_row(png, const_cast<uint8_t*>(pixels.data()) + y * width * 4);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class ImageTest : public TempDirTest {};

TEST_F(ImageTest, DecodesJpegToHwcWithChannels) {
  // A flat color survives JPEG (quality 100) within a level or two.
  const int w = 16, h = 8;
  std::vector<uint8_t> rgb;
  for (int i = 0; i < w * h; ++i) rgb.insert(rgb.end(), {200, 100, 50});
  const std::string jpeg = encode_jpeg(w, h, 3, rgb);
  Tensor image = decode_image(std::string_view(jpeg));
  EXPECT_EQ(image.shape(), (Shape{h, w, 3}));
  EXPECT_EQ(image.dtype(), DType::kU8);
  EXPECT_NEAR(image.at<int>({3, 5, 0}), 200, 3);
  EXPECT_NEAR(image.at<int>({3, 5, 1}), 100, 3);
  EXPECT_NEAR(image.at<int>({3, 5, 2}), 50, 3);
  Tensor gray = decode_image(std::string_view(jpeg), 1);
  EXPECT_EQ(gray.shape(), (Shape{h, w, 1}));
  EXPECT_NEAR(gray.at<int>({0, 0, 0}), (299 * 200 + 587 * 100 + 114 * 50) / 1000, 3);
  Tensor rgba = decode_image(std::string_view(jpeg), 4);
  EXPECT_EQ(rgba.at<int>({0, 0, 3}), 255);
}

TEST_F(ImageTest, DecodesPngExactly) {
  const int w = 3, h = 2;
  std::vector<uint8_t> rgba(static_cast<size_t>(w * h * 4));
  for (size_t i = 0; i < static_cast<size_t>(w * h); ++i) {
    rgba[4 * i] = static_cast<uint8_t>(i * 40);
    rgba[4 * i + 1] = 7;
    rgba[4 * i + 2] = 9;
    rgba[4 * i + 3] = static_cast<uint8_t>(100 + i);
  }
  const std::string png = encode_png_rgba(w, h, rgba, path("a.png"));
  Tensor image = decode_image(read_file(path("a.png")));
  EXPECT_EQ(image.shape(), (Shape{h, w, 4}));
  EXPECT_EQ(image.to_vector<int>(), std::vector<int>(rgba.begin(), rgba.end()));
  EXPECT_EQ(decode_image(std::string_view(png), 3).shape(), (Shape{h, w, 3}));
}

TEST_F(ImageTest, CorruptImagesAreDataErrorsNamingTheFile) {
  std::vector<uint8_t> rgb(8 * 8 * 3, 128);
  const std::string jpeg = encode_jpeg(8, 8, 3, rgb);
  for (const std::string& bad :
       {jpeg.substr(0, jpeg.size() / 3), std::string("\xff\xd8\xff garbage"), std::string("not an image at all")}) {
    try {
      decode_image(std::string_view(bad), 0, "cat.jpg");
      // libjpeg may pad a truncated stream with gray and only warn: accept a
      // decoded image for the first case, never a crash.
      EXPECT_EQ(bad.size(), jpeg.size() / 3);
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("cat.jpg"), std::string::npos) << e.what();
    }
  }
  std::vector<uint8_t> rgba(4 * 4 * 4, 1);
  const std::string png = encode_png_rgba(4, 4, rgba, path("b.png"));
  EXPECT_THROW(decode_image(std::string_view(png.substr(0, png.size() - 20)), 0, "b.png"), DataError);
}

// Textured pixels (a gradient plus noise), so that chroma subsampling and
// libjpeg-turbo's fancy upsampling make each pixel depend on its neighbours.
std::vector<uint8_t> textured(int width, int height, int components) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width * height * components));
  uint32_t noise = 12345;
  for (size_t i = 0; i < pixels.size(); ++i) {
    noise = noise * 1664525u + 1013904223u;
    pixels[i] = static_cast<uint8_t>((i * 3 / static_cast<size_t>(components)) % 200 + (noise >> 27));
  }
  return pixels;
}

TEST_F(ImageTest, DecodeAndCropGivesTheSamePixelsAsDecodeThenCrop) {
  const int w = 100, h = 75;                                             // neither a multiple of the 16-pixel iMCU
  const std::string rgb_jpeg = encode_jpeg(w, h, 3, textured(w, h, 3));  // 4:2:0, as libjpeg's defaults
  const std::string gray_jpeg = encode_jpeg(w, h, 1, textured(w, h, 1));
  std::vector<uint8_t> rgba = textured(w, h, 4);
  const std::string png = encode_png_rgba(w, h, rgba, path("t.png"));
  std::vector<CropWindow> windows = {{0, 0, h, w},         {0, 0, 10, 10}, {17, 33, 40, 50},
                                     {h - 1, w - 1, 1, 1}, {5, 1, 70, 99}, {31, 64, 20, 36},
                                     {0, 16, h, 16},       {60, 0, 15, w}, {h - 16, 84, 16, 16}};
  uint32_t draw = 7;
  for (int i = 0; i < 20; ++i) {  // and random ones
    draw = draw * 1664525u + 1013904223u;
    const int64_t height = 1 + (draw >> 8) % h, width = 1 + (draw >> 16) % w;
    windows.push_back({(draw >> 4) % (h - height + 1), (draw >> 20) % (w - width + 1), height, width});
  }
  for (const std::string* image : {&rgb_jpeg, &gray_jpeg, &png}) {
    const Tensor bytes = string_tensor(*image);
    for (int channels : {0, 1, 3, 4}) {
      const Tensor full = decode_image(bytes, channels);
      for (const CropWindow& c : windows) {
        const Tensor window = decode_and_crop_image(bytes, c, channels);
        ASSERT_EQ(window.shape(), crop(full, c.top, c.left, c.height, c.width).shape());
        ASSERT_EQ(window.to_vector<int>(), crop(full, c.top, c.left, c.height, c.width).to_vector<int>())
            << "window (" << c.top << ", " << c.left << ", " << c.height << ", " << c.width << "), channels "
            << channels << ", "
            << (image == &png         ? "PNG"
                : image == &gray_jpeg ? "gray JPEG"
                                      : "RGB JPEG");
      }
    }
  }
}

TEST_F(ImageTest, DecodeAndRandomCropMatchesRandomCropOfTheDecodedImage) {
  const Tensor bytes = string_tensor(encode_jpeg(128, 128, 3, textured(128, 128, 3)));
  const Tensor full = decode_image(bytes, 3);
  for (uint64_t seed = 0; seed < 30; ++seed) {
    ASSERT_EQ(decode_and_random_crop(bytes, 112, 112, seed, 3).to_vector<int>(),
              random_crop(full, 112, 112, seed).to_vector<int>())
        << "seed " << seed;
  }
}

TEST_F(ImageTest, ACropWindowOutsideTheImageNamesBoth) {
  const Tensor bytes = string_tensor(encode_jpeg(16, 8, 3, textured(16, 8, 3)));
  try {
    decode_and_crop_image(bytes, CropWindow{4, 0, 8, 16}, 3, "cat.jpg");
    FAIL() << "a window below the image was decoded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cat.jpg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("top 4, left 0, height 8, width 16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("8x16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_and_random_crop(bytes, 9, 9, 1, 3), InvalidArgument);
}

// Found by fuzz/image_fuzzer.cc: a header claiming 60000x60000 pixels made decode_image allocate
// 10 GiB before reading any data.
TEST_F(ImageTest, AHeaderClaimingAHugeImageIsRefusedBeforeAllocating) {
  std::string jpeg = encode_jpeg(8, 8, 3, std::vector<uint8_t>(8 * 8 * 3, 90));
  const size_t frame = jpeg.find("\xff\xc0");  // SOF0: length (2), precision (1), height (2), width (2)
  ASSERT_NE(frame, std::string::npos);
  for (size_t at : {frame + 5, frame + 7}) {
    jpeg[at] = static_cast<char>(60000 >> 8);
    jpeg[at + 1] = static_cast<char>(60000 & 0xff);
  }
  try {
    decode_image(std::string_view(jpeg), 3, "bomb.jpg");
    FAIL() << "a 60000x60000 JPEG header was decoded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("bomb.jpg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("60000x60000"), std::string::npos) << e.what();
  }
}

// libjpeg-turbo only warns about a file cut short and fills the rest with gray.
TEST_F(ImageTest, AJpegCutShortIsAnErrorUnlessTruncatedImagesAreAllowed) {
  const std::string whole = encode_jpeg(64, 64, 3, textured(64, 64, 3));
  const std::string cut = whole.substr(0, whole.size() * 6 / 10);
  try {
    decode_image(std::string_view(cut), 3, "cut.jpg");
    FAIL() << "a JPEG cut short decoded without a word";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("image 'cut.jpg': corrupt JPEG: Premature end of JPEG file"),
              std::string::npos)
        << e.what();
  }
  const Tensor recovered = decode_image(std::string_view(cut), 3, "cut.jpg", /*allow_truncated=*/true);
  EXPECT_EQ(recovered.shape(), (Shape{64, 64, 3}));
  // The rows that were read are the whole image's; the missing ones are not.
  const Tensor full = decode_image(std::string_view(whole), 3);
  EXPECT_EQ(crop(recovered, 0, 0, 8, 64).to_vector<int>(), crop(full, 0, 0, 8, 64).to_vector<int>());
  EXPECT_NE(crop(recovered, 56, 0, 8, 64).to_vector<int>(), crop(full, 56, 0, 8, 64).to_vector<int>());
  // A window above the cut decodes: the rows below it are never read.
  EXPECT_EQ(decode_and_crop_image(string_tensor(cut), CropWindow{0, 0, 8, 64}, 3).to_vector<int>(),
            crop(full, 0, 0, 8, 64).to_vector<int>());
}

// Each thread reuses one libjpeg decompressor: an image that fails, a window that stops above the
// last row and a bad window must each leave it ready for the next image.
TEST_F(ImageTest, AnImageAfterAFailureOrAnEarlyEndDecodesAsOnItsOwn) {
  const std::string whole = encode_jpeg(64, 48, 3, textured(64, 48, 3));
  const std::string other = encode_jpeg(40, 56, 1, textured(40, 56, 1));
  const Tensor expected = decode_image(std::string_view(whole), 3);
  const Tensor expected_other = decode_image(std::string_view(other), 0);
  const std::string cut = whole.substr(0, whole.size() / 2);
  std::string garbled = whole;
  for (size_t i = garbled.size() / 3; i < garbled.size() / 3 + 64; ++i) garbled[i] = static_cast<char>(0xff);
  const std::vector<std::function<void()>> disturbances = {
      [&] { EXPECT_THROW(decode_image(std::string_view(cut), 3), DataError); },
      [&] { EXPECT_THROW(decode_image(std::string_view(garbled), 3), DataError); },
      [&] { EXPECT_THROW(decode_image(std::string_view("\xff\xd8\xff junk"), 3), DataError); },
      [&] {
        decode_and_crop_image(string_tensor(whole), CropWindow{3, 5, 7, 9}, 3);
      },
      [&] {
        EXPECT_THROW(decode_and_crop_image(string_tensor(whole), CropWindow{60, 0, 8, 8}, 3), InvalidArgument);
      },
      [&] { decode_image(std::string_view(cut), 3, "", /*allow_truncated=*/true); },
  };
  for (size_t i = 0; i < disturbances.size(); ++i) {
    disturbances[i]();
    ASSERT_EQ(decode_image(std::string_view(whole), 3).to_vector<int>(), expected.to_vector<int>()) << "after " << i;
    disturbances[i]();
    ASSERT_EQ(decode_image(std::string_view(other), 0).to_vector<int>(), expected_other.to_vector<int>())
        << "after " << i;
  }
}

TEST_F(ImageTest, ImagePipelineWithIgnoreErrors) {
  std::vector<uint8_t> rgb(4 * 4 * 3, 10);
  for (int i = 0; i < 3; ++i) {
    std::ofstream(path("img" + std::to_string(i) + ".jpg"), std::ios::binary) << encode_jpeg(4, 4, 3, rgb);
  }
  std::ofstream(path("img9.jpg"), std::ios::binary) << "broken";
  Dataset ds = Dataset::list_files({path("img*.jpg")}, true, 1)
                   .map([](const Element& e) { return Element{decode_image(read_file(tensor_string(e[0])))}; }, 2)
                   .ignore_errors()
                   .batch(3);
  auto batches = ds.collect();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0][0].shape(), (Shape{3, 4, 4, 3}));
}

}  // namespace
}  // namespace nimbus::data
