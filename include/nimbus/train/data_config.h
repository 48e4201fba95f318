// The pipeline form of a `nimbus train` config's data.train / data.validation section: a source,
// map steps from a fixed vocabulary of image and tensor ops, cache, shuffle, augmentation, batch
// and prefetch, built into a data::Dataset of (x, y) batches that Trainer::fit(dataset) trains on.
//
//   data:
//     train:
//       source: tfrecord                       # idx | csv | tfrecord | files | text | tokens
//       files: shards/train-*.tfrecord.gz      # a glob pattern or a list of them
//       features: {image: {type: bytes}, label: {type: int64}}
//       steps:                                 # per element, before cache and shuffle
//         - decode_raw: {dtype: uint8, shape: [28, 28, 1]}
//         - convert_dtype: {dtype: float32, scale: 0.00392156862745098}
//       cache: true                            # memory; or a file name (reused by later runs)
//       shuffle: 10000                         # buffer size; seeded by `seed` or runtime.seed
//       augment:                               # per element, after shuffle: random ops
//         - random_flip: {}
//       x: image                               # the model's input: a name, or names of scalars to stack
//       y: label
//       num_parallel_calls: autotune           # the maps' parallelism (the default)
//       prefetch: autotune                     # batches read ahead (the default); 0: none
//       drop_remainder: false                  # the batch size is fit.batch_size
//       ignore_errors: false                   # true: skip bad records, each named in the log once
//       max_bad_records: 10                    # with ignore_errors: more in one pass stop the run
//       allow_truncated_images: false          # true: a JPEG cut short decodes, its missing part gray
//       allow_non_finite: false                # csv: true lets float columns hold nan and inf
//
// Sources and the names of their elements' components:
//   idx        images: FILE, labels: FILE          -> image, label
//   csv        files, columns: [{name: type}, ...], header, delimiter -> the column names
//   tfrecord   files, compression (auto: by .gz/.zlib suffix), features: {name: {type: bytes|int64|float,
//              shape: [...], default: ..., var_len: false}} -> the feature names (others in the records are ignored)
//   files      files (e.g. "photos/*/*.jpg")   -> image (the file's bytes), label (index of the file's
//              folder among the sorted folder names), path
//   text, tokens  language-model windows (x, y): src/train/token_data_config.h, docs/language_models.md
// Map ops (each `- op: {arguments}`, on component `feature`, default image): decode_raw {dtype, shape},
// decode_image {channels}, reshape {shape}, convert_dtype {dtype, scale}, normalize {mean, std},
// resize {height, width}; under augment also random_crop {height, width} and random_flip {}.
// A random op's seed is mixed from the split's seed, the op's place and the element's index after
// shuffle, so the pipeline stays deterministic (and restorable) under parallel maps.
// Every error names the record it came from (file and record index, CSV line, image file) and the
// step that failed; without ignore_errors its remedy names the keys that would skip it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "nimbus/data/dataset.h"

namespace nimbus::train {

// True when the split names a `source` (the pipeline form); false: the IDX shorthand {images, labels, scale}.
bool is_pipeline_split(const nlohmann::json& split);

// Checks a pipeline split's free-form parts (source, features, columns, steps, augment, x, y):
// an unknown name is an InvalidArgument naming its key path (data.train.steps[1].random_crop.hieght)
// with `where(path)` (the file and line), and listing the valid names.
void check_pipeline_split(const nlohmann::json& split, const std::string& section,
                          const std::function<std::string(const std::string&)>& where);

// How many examples a training or validation split holds: the IDX shorthand's labels, or the elements of a
// pipeline's source before its steps (a count of the records where the source does not know it: TFRecord,
// CSV). Reads every record of such a source, without parsing it; bad records are handled as the split says
// (ignore_errors, max_bad_records), with errors naming `section`.
int64_t split_example_count(const nlohmann::json& split, const std::string& section = "data.train");

// data.train.validation_split of a text source (token_data_config.h) made explicit: the last of data.train's
// files become data.validation. Does nothing without the key.
void resolve_validation_split(nlohmann::json& data_section,
                              const std::function<std::string(const std::string&)>& where);

// The split's pipeline: elements are (x, y) batches of batch_size. `seed` seeds shuffle and the
// random ops unless the split gives its own `seed`.
data::Dataset dataset_from_config(const nlohmann::json& split, const std::string& section, int64_t batch_size,
                                  uint64_t seed);

}  // namespace nimbus::train
