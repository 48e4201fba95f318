// Input pipeline throughput: the issue-5 JPEG pipeline (read file -> decode ->
// random crop 112 from 128x128 -> flip -> normalize -> batch 128 -> prefetch)
// over generated JPEGs, with AUTOTUNE and with fixed parallelism, next to the
// single-thread decode rate (the bound per core). Decode and crop are one
// step that decodes only the window; a last run with AUTOTUNE decodes whole
// images and crops them, for comparison.
//
//   build/release/bench/bench_data [images=4000] [dir=/tmp/nimbus_bench_jpegs] [settings=1,2,-1]
//
// Without images in `dir` it makes its own (smooth gradients plus noise, quality
// 90); bench/jpeg_pipeline.sh gives it Fashion-MNIST ones and runs PyTorch's
// DataLoader on the same files beside it.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nimbus/data/dataset.h"
#include "nimbus/data/decode.h"
#include "nimbus/data/image_ops.h"

namespace {

using namespace nimbus;
using namespace nimbus::data;

void make_images(const std::string& dir, int count) {
  std::filesystem::create_directories(dir);
  if (std::filesystem::exists(dir + "/" + std::to_string(count - 1) + ".jpg")) return;
  std::mt19937 rng(1);
  const int size = 128;
  std::vector<uint8_t> rgb(size * size * 3);
  for (int i = 0; i < count; ++i) {
    for (int y = 0; y < size; ++y) {
      for (int x = 0; x < size; ++x) {
        for (int c = 0; c < 3; ++c) {
          rgb[(y * size + x) * 3 + c] = static_cast<uint8_t>((x * (c + 1) + y * (3 - c) + i * 7 + rng() % 24) & 0xff);
        }
      }
    }
    std::ofstream(dir + "/" + std::to_string(i) + ".jpg", std::ios::binary)
        << encode_jpeg(Tensor::from_vector<uint8_t>(rgb, {size, size, 3}), 90);
  }
}

// The per-image work. decode_and_random_crop decodes only the 112x112
// window random_crop would cut (the same pixels); `whole_image` decodes all of
// it first, to show what that buys.
template <bool whole_image>
Element augment(const Element& e) {
  const auto seed = static_cast<uint64_t>(e[0].item<int64_t>());
  const Tensor bytes = read_file(tensor_string(e[1]));
  Tensor image = whole_image ? random_crop(decode_image(bytes, 3), 112, 112, seed)
                             : decode_and_random_crop(bytes, 112, 112, seed, 3);
  image = random_flip_left_right(image, seed + 1);
  return Element{normalize(image, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f})};
}

constexpr int kWholeImageAutotune = -100;

// CPU time of the whole process (all threads), user and system.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::stoi(argv[1]) : 4000;
  const std::string dir = argc > 2 ? argv[2] : "/tmp/nimbus_bench_jpegs";
  make_images(dir, count);
  std::vector<std::string> files;
  files.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) files.push_back(dir + "/" + std::to_string(i) + ".jpg");

  // The bound: decoding alone on one thread (files already in memory).
  std::vector<Tensor> encoded;
  encoded.reserve(files.size());
  for (const auto& f : files) encoded.push_back(read_file(f));
  for (size_t i = 0; i < std::min<size_t>(encoded.size(), 1000); ++i) decode_image(encoded[i], 3);  // warm-up
  auto start = std::chrono::steady_clock::now();
  for (const auto& bytes : encoded) decode_image(bytes, 3);
  const double decode_rate = count / seconds_since(start);
  fmt::print("{:<38} {:>10.0f} images/s\n", "libjpeg-turbo decode, 1 thread", decode_rate);
  // Decoding only the 112x112 window of each (at random_crop's position for seed i).
  start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < encoded.size(); ++i) decode_and_random_crop(encoded[i], 112, 112, i, 3);
  fmt::print("{:<38} {:>10.0f} images/s\n", "libjpeg-turbo 112x112 window, 1 thread", count / seconds_since(start));

  // Settings to run, in order (argv[3], e.g. "1,2,-1"; -1 = AUTOTUNE).
  std::vector<int> settings = {1, 2, kAutotune};
  if (argc > 3) {
    settings.clear();
    std::string list = argv[3];
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      settings.push_back(std::stoi(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  // The last run decodes whole images (with AUTOTUNE); its label matches none of the patterns
  // bench/jpeg_pipeline.sh picks the best Nimbus, AUTOTUNE and fixed settings by.
  settings.push_back(kWholeImageAutotune);
  for (int setting : settings) {
    const bool whole_image = setting == kWholeImageAutotune;
    const int parallel = whole_image ? kAutotune : setting;
    Dataset ds = Dataset::list_files({dir + "/*.jpg"}, true, 1)
                     .enumerate()
                     .map(whole_image ? augment<true> : augment<false>, parallel)
                     .batch(128, true)
                     .prefetch(kAutotune);
    Iterator it = ds.iterator();
    start = std::chrono::steady_clock::now();
    const double cpu_start = cpu_seconds();
    int images = 0;
    double first_batch = 0;  // seconds: the pipeline's start
    while (auto batch = it.next()) {
      if (images == 0) first_batch = seconds_since(start);
      images += static_cast<int>((*batch)[0].dim(0));
    }
    const double rate = images / seconds_since(start);
    const std::string label = whole_image             ? std::string("nimbus, whole-image decode, autotune")
                              : parallel == kAutotune ? std::string("nimbus pipeline, AUTOTUNE")
                                                      : fmt::format("nimbus pipeline, parallel {}", parallel);
    // CPU per image shows the cost of the work and its hand-offs apart from how
    // much of the machine other processes leave.
    fmt::print(
        "{:<38} {:>10.0f} images/s ({:.2f} of one core's decode bound; {:.0f} us of CPU per image; first batch after "
        "{:.1f} ms)\n",
        label, rate, rate / decode_rate, (cpu_seconds() - cpu_start) / images * 1e6, first_batch * 1e3);
    if (parallel == kAutotune && !whole_image) fmt::print("{}", it.stats());
  }
  return 0;
}
