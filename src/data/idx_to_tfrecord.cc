#include "nimbus/data/idx_to_tfrecord.h"

#include <fmt/format.h>

#include <filesystem>

#include "nimbus/base/error.h"
#include "nimbus/data/example.h"
#include "nimbus/data/idx.h"
#include "nimbus/data/tfrecord.h"

namespace nimbus::data {

std::vector<std::string> idx_to_tfrecord(const std::string& images_path, const std::string& labels_path,
                                         const std::string& output_prefix, int shards, Compression compression) {
  if (shards < 1) throw InvalidArgument(fmt::format("idx_to_tfrecord: shards must be >= 1, got {}", shards));
  const Tensor images = read_idx(images_path);
  const Tensor labels = read_idx(labels_path).to(DType::kI64);
  if (images.dtype() != DType::kU8 || images.rank() < 1) {
    throw DataError(fmt::format("{}: expected u8 images, got {}{}", images_path, dtype_name(images.dtype()),
                                images.shape().to_string()));
  }
  if (labels.rank() != 1 || labels.dim(0) != images.dim(0)) {
    throw DataError(fmt::format("{} has {} images but {} has labels shaped {}", images_path, images.dim(0), labels_path,
                                labels.shape().to_string()),
                    "pass the labels file that belongs to these images");
  }
  const int64_t samples = images.dim(0);
  const size_t image_bytes = samples == 0 ? 0 : images.nbytes() / static_cast<size_t>(samples);
  const auto* pixels = static_cast<const char*>(images.raw_data());
  const int64_t* label = labels.data<int64_t>();
  const char* suffix = compression == Compression::kGzip ? ".gz" : compression == Compression::kZlib ? ".zlib" : "";
  if (const auto parent = std::filesystem::path(output_prefix).parent_path(); !parent.empty()) {
    std::filesystem::create_directories(parent);
  }
  std::vector<std::string> paths;
  for (int shard = 0; shard < shards; ++shard) {
    const std::string path = fmt::format("{}-{:05d}-of-{:05d}.tfrecord{}", output_prefix, shard, shards, suffix);
    TFRecordWriter out(path, compression);
    // Shard k holds samples [k * n / shards, (k + 1) * n / shards): the IDX order, shard after shard.
    for (int64_t i = shard * samples / shards; i < (shard + 1) * samples / shards; ++i) {
      const std::string image(pixels + static_cast<size_t>(i) * image_bytes, image_bytes);
      out.write(serialize_example({{"image", BytesList{{image}}}, {"label", Int64List{{label[i]}}}}));
    }
    out.close();
    paths.push_back(path);
  }
  return paths;
}

}  // namespace nimbus::data
