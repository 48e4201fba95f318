// safetensors files (https://github.com/huggingface/safetensors): named
// tensors plus string metadata, readable by PyTorch, JAX and TensorFlow tools.
//
//   write_safetensors("model.safetensors", {{"dense/kernel", w}, {"dense/bias", b}}, {{"format", "nimbus"}});
//   SafetensorsFile file = read_safetensors("model.safetensors");
//   file.tensors.at("dense/kernel");  file.metadata.at("format");
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "value"}}), then the tensors' bytes, little-endian,
// row-major, each at its offsets from the end of the header. Files are
// written atomically: to a temporary file in the same folder, flushed to disk,
// then renamed over the target, and the folder flushed so the rename survives a
// power loss: a reader never sees a torn file. A
// truncated or malformed file is a DataError naming the file and the tensor.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nimbus/tensor/tensor.h"

namespace nimbus {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::vector<std::string> order;  // tensor names in file order
  std::map<std::string, std::string> metadata;
};

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
SafetensorsFile read_safetensors(const std::string& path);
// Only the metadata (reads the header, not the tensors).
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

}  // namespace nimbus
