// Decoding bytes into tensors, for Dataset::map.
//
//   Tensor pixels = decode_raw(record_bytes, DType::kU8, {28, 28});  // little-endian values
//   Tensor image  = decode_image(file_bytes);                  // JPEG or PNG -> u8 (H, W, C)
//   Tensor gray   = decode_image(file_bytes, /*channels=*/1);  // converted to 1 channel
//
// decode_image tells JPEG from PNG by their magic bytes. channels: 0 keeps
// the file's (JPEG: 1 or 3; PNG: 1-4, 16-bit samples scaled to 8), 1 = gray,
// 3 = RGB, 4 = RGBA. Corrupt or truncated data is a DataError saying what
// the decoder reported; `what` (a file name, a record) goes into the message.
// A JPEG whose data ends early or is corrupt mid-stream (libjpeg-turbo's
// "Premature end of JPEG file", "bad Huffman code", ... warnings) is such an
// error too, unless allow_truncated: then its missing part decodes gray.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus::data {

// Reinterprets the bytes of a u8 tensor (or a string) as `dtype` values
// (little-endian) of `shape`; shape may hold one -1. A size mismatch is a
// DataError.
Tensor decode_raw(const Tensor& bytes, DType dtype, std::vector<int64_t> shape);
Tensor decode_raw(std::string_view bytes, DType dtype, std::vector<int64_t> shape);

Tensor decode_image(const Tensor& bytes, int channels = 0, const std::string& what = {}, bool allow_truncated = false);
Tensor decode_image(std::string_view bytes, int channels = 0, const std::string& what = {},
                    bool allow_truncated = false);

// A window of an image: rows [top, top + height), columns [left, left + width).
struct CropWindow {
  int64_t top = 0, left = 0, height = 0, width = 0;
};
// Picks a window from the image's (height, width), read from its header.
using ChooseWindow = std::function<CropWindow(int64_t height, int64_t width)>;

// decode_image, then the window: the same pixels as crop(decode_image(bytes,
// channels), ...), as tf.io.decode_and_crop_jpeg. A JPEG decodes only the
// window (libjpeg-turbo skips the rows above it, decodes only the 8- or
// 16-pixel column blocks that hold it and stops after its last row), so
// corruption below the window goes unnoticed; a PNG decodes whole. A window
// that does not fit the image is an InvalidArgument naming both.
Tensor decode_and_crop_image(const Tensor& bytes, CropWindow window, int channels = 0, const std::string& what = {},
                             bool allow_truncated = false);
Tensor decode_and_crop_image(const Tensor& bytes, const ChooseWindow& choose, int channels = 0,
                             const std::string& what = {}, bool allow_truncated = false);

// Encodes a u8 (H, W, 1) or (H, W, 3) image as a JPEG (libjpeg-turbo),
// quality 1-100: for making test and benchmark images.
std::string encode_jpeg(const Tensor& image, int quality = 90);

// Reads a whole file as a u8 string tensor (NotFound if missing).
Tensor read_file(const std::string& path);

}  // namespace nimbus::data
