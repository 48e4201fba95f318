// decode_image and encode_jpeg (libjpeg-turbo, libpng); decode_raw and read_file are in raw_bytes.cc.
#include "nimbus/data/decode.h"

#include <fmt/format.h>
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

// jpeglib.h needs FILE and size_t declared first; jerror.h after it.
#include <jpeglib.h>
// clang-format off
#include <jerror.h>
// clang-format on

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/image_ops.h"

namespace nimbus::data {
namespace {

std::string context(const std::string& what) { return what.empty() ? std::string("image") : "image '" + what + "'"; }

// PIL's decompression-bomb guard: it refuses images of more than twice its MAX_IMAGE_PIXELS (89,478,485).
// A header may claim any size; the pixels are allocated before the data that would fill them is read.
constexpr int64_t kMaxImagePixels = 2 * 89'478'485;

void check_image_size(int64_t height, int64_t width, const std::string& what) {
  if (height * width <= kMaxImagePixels) return;
  throw DataError(fmt::format("{}: its header claims {}x{} pixels, more than the {} decode_image accepts",
                              context(what), width, height, kMaxImagePixels),
                  "a damaged or hostile file (scale real images down first)");
}

// Converts `pixels` interleaved u8 pixels from `from` to `to` channels (1, 2, 3, 4).
void convert_pixels(const uint8_t* src, uint8_t* dst, int64_t pixels, int from, int to) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(pixels * to));
    return;
  }
  for (int64_t p = 0; p < pixels; ++p) {
    const uint8_t* s = src + p * from;
    uint8_t* d = dst + p * to;
    uint8_t r, g, b, a = 255;
    if (from <= 2) {
      r = g = b = s[0];
      if (from == 2) a = s[1];
    } else {
      r = s[0];
      g = s[1];
      b = s[2];
      if (from == 4) a = s[3];
    }
    if (to == 1) {
      // ITU-R BT.601 luma, as libjpeg and TensorFlow use.
      d[0] = from <= 2 ? r : static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
    } else if (to == 3) {
      d[0] = r;
      d[1] = g;
      d[2] = b;
    } else {
      d[0] = r;
      d[1] = g;
      d[2] = b;
      d[3] = a;
    }
  }
}

void check_window(const CropWindow& window, int64_t height, int64_t width, const std::string& what) {
  if (window.top < 0 || window.left < 0 || window.height < 1 || window.width < 1 ||
      window.top + window.height > height || window.left + window.width > width) {
    throw InvalidArgument(
        fmt::format("decode_and_crop_image: {}: window (top {}, left {}, height {}, width {}) "
                    "does not fit the {}x{} (height x width) image",
                    context(what), window.top, window.left, window.height, window.width, height, width));
  }
}

struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool allow_truncated = false;
};

void jpeg_error_exit(j_common_ptr info) {
  auto* error = reinterpret_cast<JpegError*>(info->err);
  (*info->err->format_message)(info, error->message);
  std::longjmp(error->jump, 1);
}
void jpeg_silent(j_common_ptr, int) {}

// libjpeg-turbo only warns when pixel data is missing or corrupt (a file cut
// short, a bad Huffman code) and fills the gap with gray: such an image would
// train as if it were whole. These warnings are errors unless truncated
// images are allowed (as PIL's LOAD_TRUNCATED_IMAGES, TF's
// try_recover_truncated); other warnings (extraneous bytes before a marker, an
// unknown JFIF revision) leave the pixels intact and stay silent.
bool loses_pixels(int message_code) {
  switch (message_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_NOT_SEQUENTIAL: return true;
    default: return false;
  }
}
void jpeg_on_message(j_common_ptr info, int level) {
  const auto* error = reinterpret_cast<const JpegError*>(info->err);
  if (level < 0 && !error->allow_truncated && loses_pixels(info->err->msg_code)) jpeg_error_exit(info);
}

// One decompressor per thread, reused from image to image (jpeg_abort_decompress readies it for the
// next): creating one sets up libjpeg's memory manager and tables each time. `rows` keeps its memory
// between images too, so that it is neither allocated nor zeroed per image.
struct ThreadJpegDecoder {
  jpeg_decompress_struct info{};
  JpegError error{};
  std::vector<uint8_t> rows;  // the window's decoded rows when they need cropping or converting
  // Larger row buffers (a crop of a large photo) are given back after the image.
  static constexpr size_t kRowsKeptMax = size_t{8} << 20;

  ThreadJpegDecoder() {
    info.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = jpeg_error_exit;
    error.manager.emit_message = jpeg_on_message;
    if (setjmp(error.jump) != 0) throw OutOfMemory(fmt::format("decode_image: libjpeg: {}", error.message));
    jpeg_create_decompress(&info);
  }
  ~ThreadJpegDecoder() { jpeg_destroy_decompress(&info); }
  ThreadJpegDecoder(const ThreadJpegDecoder&) = delete;
  ThreadJpegDecoder& operator=(const ThreadJpegDecoder&) = delete;

  // Ends the image early or after an error: the decoder is ready for the next one.
  void abort() {
    jpeg_abort_decompress(&info);
    if (rows.capacity() > kRowsKeptMax) std::vector<uint8_t>().swap(rows);
  }
};

ThreadJpegDecoder& thread_jpeg_decoder() {
  // On the heap: libnimbus's thread-locals must fit the few hundred bytes of static TLS that Python's
  // dlopen leaves it (host memory's are initial-exec).
  thread_local std::unique_ptr<ThreadJpegDecoder> decoder;
  if (decoder == nullptr) decoder = std::make_unique<ThreadJpegDecoder>();
  return *decoder;
}

// Decodes the window `choose` picks from the image's size (the whole image
// when `choose` is empty). libjpeg-turbo skips the rows above the window
// (entropy decoding only), decodes only the iMCU columns that hold it, and
// stops after its last row: such an image is checked for corruption up to the
// window's last row only.
Tensor decode_jpeg(std::string_view bytes, int channels, const std::string& what, const ChooseWindow& choose,
                   bool allow_truncated) {
  ThreadJpegDecoder& decoder = thread_jpeg_decoder();
  jpeg_decompress_struct& info = decoder.info;
  decoder.error.allow_truncated = allow_truncated;
  // Locals changed after setjmp are indeterminate after a longjmp: what is
  // written after it lives behind pointers that do not change.
  auto out = std::make_unique<Tensor>();
  if (setjmp(decoder.error.jump) != 0) {
    decoder.abort();
    throw DataError(fmt::format("{}: corrupt JPEG: {}", context(what), decoder.error.message),
                    allow_truncated ? "the file is damaged or not a JPEG: replace it"
                                    : "the file is damaged, cut short or not a JPEG: replace it, or accept truncated "
                                      "images, their missing part gray (allow_truncated; in a training config, "
                                      "allow_truncated_images: true)");
  }
  // A C++ exception (a bad window, no memory) leaves the decoder mid-image: it is reset first.
  try {
    jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&info, TRUE);
    const int64_t image_height = info.image_height, image_width = info.image_width;
    CropWindow window{0, 0, image_height, image_width};
    if (image_height * image_width > kMaxImagePixels) check_image_size(image_height, image_width, what);
    if (choose) window = choose(image_height, image_width);
    check_window(window, image_height, image_width, what);
    info.out_color_space = (channels == 1 || (channels == 0 && info.num_components == 1)) ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&info);
    const int from = info.output_components;
    const int to = channels == 0 ? from : channels;
    // The columns to decode: one pixel more on the left and one iMCU (at most
    // 32 pixels) more on the right than the window, because chroma upsampling
    // at the edges of a cropped decode repeats the edge sample instead of
    // blending in its neighbour; libjpeg-turbo widens the left edge further to
    // an iMCU boundary. Without that the window's edge pixels differ from a
    // full decode's by a level or two.
    const int64_t first = std::max<int64_t>(0, window.left - 1);
    const int64_t last = std::min(image_width, window.left + window.width + 32);
    JDIMENSION first_column = static_cast<JDIMENSION>(first), columns = static_cast<JDIMENSION>(last - first);
    if (last - first < image_width) jpeg_crop_scanline(&info, &first_column, &columns);
    if (window.top > 0) jpeg_skip_scanlines(&info, static_cast<JDIMENSION>(window.top));
    *out = host_tensor(Shape{window.height, window.width, to}, DType::kU8);
    auto* dst = out->data<uint8_t>();
    const size_t out_row = static_cast<size_t>(window.width * to);
    // Rows go straight into the tensor when they need no conversion.
    const bool direct = from == to && columns == static_cast<JDIMENSION>(window.width);
    // Otherwise all the window's rows go into a buffer first and are copied out after: copying each row
    // out right after the decoder wrote it ran several times slower (the loads waiting on its stores).
    const size_t row_bytes = static_cast<size_t>(columns) * static_cast<size_t>(from);
    if (!direct) decoder.rows.resize(std::max(decoder.rows.size(), row_bytes * static_cast<size_t>(window.height)));
    uint8_t* buffer = decoder.rows.data();
    const size_t skip = static_cast<size_t>(window.left - first_column) * static_cast<size_t>(from);
    for (int64_t y = 0; y < window.height; ++y) {
      JSAMPROW row = direct ? dst + static_cast<size_t>(y) * out_row : buffer + static_cast<size_t>(y) * row_bytes;
      jpeg_read_scanlines(&info, &row, 1);
    }
    if (!direct) {
      for (int64_t y = 0; y < window.height; ++y) {
        convert_pixels(buffer + static_cast<size_t>(y) * row_bytes + skip, dst + static_cast<size_t>(y) * out_row,
                       window.width, from, to);
      }
    }
    // Reading to the end checks the rest of the file; a window that ends above the last row leaves it unread.
    if (window.top + window.height == image_height) jpeg_finish_decompress(&info);
  } catch (...) {
    decoder.abort();
    throw;
  }
  decoder.abort();
  return std::move(*out);
}

struct PngSource {
  std::string_view bytes;
  size_t pos = 0;
};

void png_read_memory(png_structp png, png_bytep out, png_size_t size) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->bytes.size() - source->pos < size) png_error(png, "the data ends early (truncated PNG)");
  std::memcpy(out, source->bytes.data() + source->pos, size);
  source->pos += size;
}

struct PngMessage {
  char text[256] = {0};
};
void png_on_error(png_structp png, png_const_charp message) {
  auto* m = static_cast<PngMessage*>(png_get_error_ptr(png));
  std::snprintf(m->text, sizeof(m->text), "%s", message);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

Tensor decode_png(std::string_view bytes, int channels, const std::string& what, const ChooseWindow& choose) {
  PngMessage message;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &message, png_on_error, png_on_warning);
  if (png == nullptr) throw OutOfMemory("decode_image: libpng cannot allocate its decoder");
  png_infop info = png_create_info_struct(png);
  PngSource source{bytes, 0};
  auto buffers = std::make_unique<std::pair<std::vector<uint8_t>, std::vector<png_bytep>>>();
  std::vector<uint8_t>& pixels = buffers->first;
  std::vector<png_bytep>& rows = buffers->second;
  png_uint_32 width = 0, height = 0;
  int file_channels = 0;
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw DataError(fmt::format("{}: corrupt PNG: {}", context(what), message.text),
                    "the file is damaged or not a PNG: replace it");
  }
  png_set_read_fn(png, &source, png_read_memory);
  png_read_info(png, info);
  width = png_get_image_width(png, info);
  height = png_get_image_height(png, info);
  if (static_cast<int64_t>(height) * width > kMaxImagePixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    check_image_size(height, width, what);
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (depth == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  file_channels = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  pixels.resize(row_bytes * height);
  rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) rows[y] = pixels.data() + y * row_bytes;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  const int to = channels == 0 ? file_channels : channels;
  Tensor out = host_tensor(Shape{height, width, to}, DType::kU8);
  convert_pixels(pixels.data(), out.data<uint8_t>(), static_cast<int64_t>(height) * width, file_channels, to);
  if (!choose) return out;
  const CropWindow window = choose(height, width);
  check_window(window, height, width, what);
  return crop(out, window.top, window.left, window.height, window.width);
}

Tensor decode(std::string_view bytes, int channels, const std::string& what, const ChooseWindow& choose,
              bool allow_truncated) {
  if (channels != 0 && channels != 1 && channels != 3 && channels != 4) {
    throw InvalidArgument(fmt::format("decode_image: channels must be 0, 1, 3 or 4, got {}", channels));
  }
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
    return decode_jpeg(bytes, channels, what, choose, allow_truncated);
  }
  if (bytes.size() >= 8 && std::memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) {
    return decode_png(bytes, channels, what, choose);
  }
  throw DataError(fmt::format("{}: neither JPEG nor PNG ({} bytes, first bytes do not match either signature)",
                              context(what), bytes.size()),
                  "decode_image reads JPEG and PNG files");
}

std::string_view bytes_of(const Tensor& bytes, const char* op) {
  if (bytes.dtype() != DType::kU8) throw InvalidArgument(fmt::format("{}: expects encoded bytes (a u8 tensor)", op));
  return std::string_view(static_cast<const char*>(bytes.raw_data()), bytes.nbytes());
}

}  // namespace

Tensor decode_image(std::string_view bytes, int channels, const std::string& what, bool allow_truncated) {
  return decode(bytes, channels, what, {}, allow_truncated);
}

Tensor decode_image(const Tensor& bytes, int channels, const std::string& what, bool allow_truncated) {
  return decode(bytes_of(bytes, "decode_image"), channels, what, {}, allow_truncated);
}

Tensor decode_and_crop_image(const Tensor& bytes, CropWindow window, int channels, const std::string& what,
                             bool allow_truncated) {
  return decode(
      bytes_of(bytes, "decode_and_crop_image"), channels, what, [window](int64_t, int64_t) { return window; },
      allow_truncated);
}

Tensor decode_and_crop_image(const Tensor& bytes, const ChooseWindow& choose, int channels, const std::string& what,
                             bool allow_truncated) {
  return decode(bytes_of(bytes, "decode_and_crop_image"), channels, what, choose, allow_truncated);
}

std::string encode_jpeg(const Tensor& image, int quality) {
  if (image.dtype() != DType::kU8 || image.rank() != 3 || (image.dim(2) != 1 && image.dim(2) != 3)) {
    throw InvalidArgument(fmt::format("encode_jpeg: expected a u8 (H, W, 1 or 3) image, got {} {}",
                                      dtype_name(image.dtype()), image.shape().to_string()));
  }
  if (quality < 1 || quality > 100) {
    throw InvalidArgument(fmt::format("encode_jpeg: quality {} not in 1..100", quality));
  }
  jpeg_compress_struct info{};
  JpegError error{};
  info.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = jpeg_error_exit;
  error.manager.emit_message = jpeg_silent;
  // Written by libjpeg after setjmp: kept behind a pointer that does not change.
  struct Destination {
    unsigned char* data = nullptr;
    unsigned long bytes = 0;
    ~Destination() { std::free(data); }
  };
  auto destination = std::make_unique<Destination>();
  if (setjmp(error.jump) != 0) {
    jpeg_destroy_compress(&info);
    throw InternalError(fmt::format("encode_jpeg: libjpeg failed: {}", error.message));
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, &destination->data, &destination->bytes);
  info.image_height = static_cast<JDIMENSION>(image.dim(0));
  info.image_width = static_cast<JDIMENSION>(image.dim(1));
  info.input_components = static_cast<int>(image.dim(2));
  info.in_color_space = image.dim(2) == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  const auto* pixels = static_cast<const unsigned char*>(image.raw_data());
  const size_t row_bytes = static_cast<size_t>(image.dim(1) * image.dim(2));
  while (info.next_scanline < info.image_height) {
    auto* row = const_cast<JSAMPROW>(pixels + info.next_scanline * row_bytes);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return std::string(reinterpret_cast<char*>(destination->data), destination->bytes);
}

}  // namespace nimbus::data
