// IDX files (MNIST's format), plain or gzip: read_idx on arbitrary bytes.
#include "fuzz_input.h"
#include "nimbus/data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nimbus::fuzz::MemoryFile file(data, size);
  nimbus::fuzz::expect_clean_errors([&] { (void)nimbus::data::read_idx(file.path()); });
  return 0;
}
