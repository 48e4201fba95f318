// The image decode path: decode_image (JPEG through libjpeg-turbo, PNG through libpng) with the
// channel count from the first byte, then a resize of what decoded.
#include <array>
#include <string_view>

#include "fuzz_input.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/image_ops.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int channels = std::array{0, 1, 3, 4}[data[0] % 4];
  nimbus::fuzz::expect_clean_errors([&] {
    const nimbus::Tensor image =
        nimbus::data::decode_image(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), channels);
    (void)nimbus::data::resize_bilinear(image, 7, 5);
  });
  return 0;
}
