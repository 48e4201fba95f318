// CSV rows through Dataset::csv: quoting, line ends, numbers; typed columns f32, i64, string.
#include "fuzz_input.h"
#include "nimbus/data/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nimbus::data::CsvOptions;
  const nimbus::fuzz::MemoryFile file(data, size);
  const CsvOptions options{.column_types = {CsvOptions::Type::kF32, CsvOptions::Type::kI64, CsvOptions::Type::kString},
                           .header = size % 2 == 0,
                           .delimiter = ','};
  nimbus::fuzz::expect_clean_errors([&] {
    nimbus::data::Iterator rows = nimbus::data::Dataset::csv({file.path()}, options).iterator(0, 0);
    // After a bad row the iterator goes on with the next one; stop at the first error anyway.
    while (rows.next()) {
    }
  });
  return 0;
}
