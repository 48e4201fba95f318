// The language-model sources of a pipeline split (data_config.h):
//
//   data:
//     train:
//       source: text                 # files read as one byte stream, tokenized, cut into windows
//       files: corpus/*.txt          # globs; gzip read through zlib; concatenated in sorted order
//       tokenizer: bytes             # the default; or {sentencepiece: FILE.model}
//       sequence_length: 256         # windows of sequence_length + 1 tokens: x = window[:-1], y = window[1:]
//       stride: 256                  # the default: sequence_length
//       validation_split: 0.05       # text only: the last files, by bytes on disk, become data.validation
//       shuffle: 1000                # windows; seed, drop_remainder and prefetch as for other sources
//     validation: {source: text, files: held_out/*.txt, sequence_length: 256}
//
//   source: tokens, files: ..., format: auto | llmc | nanogpt   # packed uint16 token files (packed_tokens.h)
//
// Elements are (x, y), both int32 (sequence_length); a model reads them with model.input_dtype: int32.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nimbus/data/dataset.h"

namespace nimbus::train {

// source: text or tokens.
bool is_token_split(const nlohmann::json& split);

// Checks a text or tokens split's keys and values; errors name the key path with `where(path)`.
void check_token_split(const nlohmann::json& split, const std::string& section,
                       const std::function<std::string(const std::string&)>& where);

// The split's (x, y) windows from its files `paths` (sorted), unbatched and unshuffled. Logs, once per
// process and split, the files, tokens and windows per epoch.
data::Dataset token_windows_from_config(const nlohmann::json& split, const std::string& section,
                                        const std::vector<std::string>& paths);

// data.train.validation_split (text only) made explicit: the last of data.train's files (sorted), as few as
// hold at least that fraction of its bytes, become data.validation (the same tokenizer and windows), and
// data.train keeps the rest, its files listed by name. A split that would need part of a file (one file,
// or a fraction the last files cannot meet without taking them all) is an InvalidArgument naming the key.
void apply_validation_split(nlohmann::json& data_section, const std::vector<std::string>& train_paths,
                            const std::function<std::string(const std::string&)>& where);

}  // namespace nimbus::train
