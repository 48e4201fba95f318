// IDX image/label files to TFRecord shards of tf.train.Example (`nimbus data to-tfrecord`):
// each record holds `image` (bytes: the image's raw u8 pixels, row-major) and `label` (int64).
//
//   std::vector<std::string> shards = idx_to_tfrecord(dir + "/train-images-idx3-ubyte.gz",
//                                                     dir + "/train-labels-idx1-ubyte.gz", "out/train", 4);
//   // out/train-00000-of-00004.tfrecord.gz ... out/train-00003-of-00004.tfrecord.gz
//
// Shards hold consecutive runs of the samples, so reading the sorted shard names one after the
// other gives the IDX files' order.
#pragma once

#include <string>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::data {

// Writes the shards (PREFIX-0000k-of-0000N.tfrecord[.gz|.zlib]) and returns their paths. The
// images must be u8; a count that differs from the labels' is a DataError naming both files.
std::vector<std::string> idx_to_tfrecord(const std::string& images_path, const std::string& labels_path,
                                         const std::string& output_prefix, int shards,
                                         Compression compression = Compression::kGzip);

}  // namespace nimbus::data
