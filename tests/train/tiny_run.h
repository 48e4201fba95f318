// A tiny IDX dataset and a config that trains on it, for the run-directory, checkpoint and CLI
// tests: the class of each image is which quarter of it is bright.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "nimbus/data/idx.h"
#include "nimbus/tensor/tensor.h"

namespace nimbus::testing {

// A fresh folder under the temporary directory, removed with the object.
struct TemporaryFolder {
  std::filesystem::path path;
  explicit TemporaryFolder(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TemporaryFolder() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// Writes `samples` images of side x side pixels and their labels to folder/images.idx and
// folder/labels.idx; returns a config training a Dense model on them (validation: the same files),
// with a hidden Dense + Dropout layer when `hidden` > 0, and `fit` as its fit section.
inline std::string write_tiny_run(const TemporaryFolder& folder, int samples = 64, int side = 4, int hidden = 0,
                                  const std::string& fit = "{epochs: 2, batch_size: 16, verbose: 0}") {
  const int pixels_per_image = side * side, half = side / 2;
  std::vector<uint8_t> pixels(static_cast<size_t>(samples * pixels_per_image), 10),
      labels(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    labels[i] = static_cast<uint8_t>(i % 4);
    const int row = (i % 4) / 2 * half, col = (i % 4) % 2 * half;
    for (int r = 0; r < half; ++r)
      for (int c = 0; c < half; ++c) {
        pixels[static_cast<size_t>(i * pixels_per_image + (row + r) * side + col + c)] =
            static_cast<uint8_t>(120 + (i * 7 + r * 3 + c) % 130);
      }
  }
  data::write_idx(folder / "images.idx", Tensor::from_vector<uint8_t>(pixels, {samples, side, side}));
  data::write_idx(folder / "labels.idx", Tensor::from_vector<uint8_t>(labels, {samples}));
  const std::string split = "{images: " + (folder / "images.idx") + ", labels: " + (folder / "labels.idx") + "}";
  return "model:\n  input_shape: [" + std::to_string(side) + ", " + std::to_string(side) +
         ", 1]\n  layers:\n    - Flatten: {}\n" +
         (hidden > 0
              ? "    - Dense: {units: " + std::to_string(hidden) + ", activation: relu}\n    - Dropout: {rate: 0.2}\n"
              : "") +
         "    - Dense: {units: 4}\n"
         "compile:\n  optimizer: {name: adam, learning_rate: 0.05}\n"
         "  loss: {name: sparse_categorical_crossentropy, from_logits: true}\n"
         "  metrics: [accuracy]\n"
         "data:\n  train: " +
         split + "\n  validation: " + split +
         "\n"
         "fit: " +
         fit +
         "\n"
         "runtime: {seed: 5, deterministic: true}\n";
}

}  // namespace nimbus::testing
