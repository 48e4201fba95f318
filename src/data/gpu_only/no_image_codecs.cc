// A GPU-only build (cmake/NimbusGpuOnly.cmake) has no libjpeg or libpng: the image codecs of
// decode.h say so. decode_raw and read_file (raw_bytes.cc) and the IDX reader are there.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/data/decode.h"

namespace nimbus::data {
namespace {

[[noreturn]] void no_codecs(const char* function) {
  throw Unavailable(fmt::format("{}: this GPU-only build of nimbus has no image codecs (libjpeg, libpng)", function),
                    "use the full build (scripts/install-deps), or IDX / raw data (decode_raw)");
}

}  // namespace

Tensor decode_image(std::string_view, int, const std::string&, bool) { no_codecs("decode_image"); }
Tensor decode_image(const Tensor&, int, const std::string&, bool) { no_codecs("decode_image"); }
Tensor decode_and_crop_image(const Tensor&, CropWindow, int, const std::string&, bool) {
  no_codecs("decode_and_crop_image");
}
Tensor decode_and_crop_image(const Tensor&, const ChooseWindow&, int, const std::string&, bool) {
  no_codecs("decode_and_crop_image");
}
std::string encode_jpeg(const Tensor&, int) { no_codecs("encode_jpeg"); }

}  // namespace nimbus::data
