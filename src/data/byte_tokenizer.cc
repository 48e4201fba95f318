// The byte-level tokenizer: token id = byte value.
#include <fmt/format.h>

#include "nimbus/base/error.h"
#include "nimbus/data/tokenizer.h"

namespace nimbus::data {
namespace {

class ByteTokenizer : public Tokenizer {
 public:
  int64_t vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] > 255) {
        throw InvalidArgument(fmt::format("byte tokenizer: id {} (at {}) is not a byte", ids[i], i),
                              "byte-level ids are 0..255");
      }
      text[i] = static_cast<char>(ids[i]);
    }
    return text;
  }
  std::string describe() const override { return "byte tokenizer (vocabulary 256)"; }
};

}  // namespace

std::shared_ptr<const Tokenizer> byte_tokenizer() {
  static const auto tokenizer = std::make_shared<const ByteTokenizer>();
  return tokenizer;
}

}  // namespace nimbus::data
