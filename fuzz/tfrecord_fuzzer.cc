// TFRecord framing (plain, zlib or gzip, chosen by the first byte) and tf.train.Example parsing
// of each record: decode_example, and parse_example against a spec with every feature kind.
#include <string_view>

#include "fuzz_input.h"
#include "nimbus/data/example.h"
#include "nimbus/data/tfrecord.h"

using namespace nimbus::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Compression compression = data[0] % 3 == 0   ? Compression::kNone
                                  : data[0] % 3 == 1 ? Compression::kZlib
                                                     : Compression::kGzip;
  const nimbus::fuzz::MemoryFile file(data + 1, size - 1);
  static const std::vector<FeatureSpec> spec = {
      fixed("image", FeatureType::kBytes), fixed("label", FeatureType::kInt64, {}, std::vector<double>{0}),
      fixed("box", FeatureType::kFloat, {2, 2}, std::vector<double>{0}), var_len("tags", FeatureType::kBytes),
      var_len("scores", FeatureType::kFloat)};
  // The raw bytes as one Example too: most inputs never pass the framing's CRCs.
  nimbus::fuzz::expect_clean_errors(
      [&] { (void)decode_example(std::string_view(reinterpret_cast<const char*>(data), size)); });
  nimbus::fuzz::expect_clean_errors([&] {
    TFRecordReader reader(file.path(), compression);
    for (int records = 0; records < 64; ++records) {
      const std::optional<std::string> record = reader.read();
      if (!record) break;
      nimbus::fuzz::expect_clean_errors([&] { (void)decode_example(*record); });
      nimbus::fuzz::expect_clean_errors([&] { (void)parse_example(*record, spec); });
    }
  });
  return 0;
}
