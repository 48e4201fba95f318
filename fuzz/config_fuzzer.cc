// Training configs: load_yaml (the config loader) on arbitrary text. Its limits (depth, expanded
// values, sizes) and cycle check must turn every hostile text into a nimbus::Error.
#include "fuzz_input.h"
#include "nimbus/train/yaml_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nimbus::fuzz::expect_clean_errors([&] { (void)nimbus::train::load_yaml(text, "fuzz.yaml"); });
  return 0;
}
