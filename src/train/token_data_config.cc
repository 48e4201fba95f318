#include "token_data_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include "nimbus/base/error.h"
#include "nimbus/base/logging.h"
#include "nimbus/data/packed_tokens.h"
#include "nimbus/data/sentencepiece.h"
#include "nimbus/data/text_files.h"
#include "nimbus/data/token_windows.h"
#include "nimbus/data/tokenizer.h"

namespace nimbus::train {
namespace {

using Json = nlohmann::json;

const std::vector<std::string> kCommonTokenKeys = {"source",  "files", "sequence_length", "stride",
                                                   "shuffle", "seed",  "drop_remainder",  "prefetch"};

std::vector<std::string> keys_of_token_source(const std::string& source) {
  std::vector<std::string> keys = kCommonTokenKeys;
  if (source == "text") keys.insert(keys.end(), {"tokenizer", "validation_split"});
  if (source == "tokens") keys.push_back("format");
  return keys;
}

int64_t sequence_length_of(const Json& split) { return split.at("sequence_length").get<int64_t>(); }
int64_t stride_of(const Json& split) { return split.value("stride", sequence_length_of(split)); }

std::shared_ptr<const data::Tokenizer> tokenizer_of(const Json& split) {
  const Json tokenizer = split.value("tokenizer", Json("bytes"));
  if (tokenizer.is_object()) return data::sentencepiece_tokenizer(tokenizer.at("sentencepiece").get<std::string>());
  return data::byte_tokenizer();
}

void check_tokenizer(const Json& split, const std::string& section,
                     const std::function<std::string(const std::string&)>& where) {
  if (!split.contains("tokenizer")) return;
  const std::string path = section + ".tokenizer";
  const Json& tokenizer = split["tokenizer"];
  const char* remedy = "tokenizer: bytes (the default), or tokenizer: {sentencepiece: FILE.model}";
  if (tokenizer.is_string()) {
    if (tokenizer != "bytes") {
      throw InvalidArgument(fmt::format("{}: unknown {} '{}'", where(path), path, tokenizer.get<std::string>()),
                            remedy);
    }
    return;
  }
  if (!tokenizer.is_object() || tokenizer.size() != 1 || !tokenizer.contains("sentencepiece") ||
      !tokenizer["sentencepiece"].is_string()) {
    throw InvalidArgument(
        fmt::format("{}: {} must be bytes or {{sentencepiece: FILE}}, got {}", where(path), path, tokenizer.dump()),
        remedy);
  }
  if (!data::sentencepiece_available()) {
    throw Unimplemented(fmt::format("{}: {}.sentencepiece: this build has no SentencePiece", where(path), path),
                        "install libsentencepiece-dev and configure again, or use tokenizer: bytes");
  }
}

// A split's log line once per process: the trainer's checks, its first batch and every epoch build it again.
void log_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  std::lock_guard lock(mutex);
  if (logged.insert(line).second) log_info(line);
}

}  // namespace

bool is_token_split(const Json& split) {
  const std::string source = split.value("source", std::string());
  return source == "text" || source == "tokens";
}

void check_token_split(const Json& split, const std::string& section,
                       const std::function<std::string(const std::string&)>& where) {
  const std::string source = split.at("source").get<std::string>();
  const std::vector<std::string> allowed = keys_of_token_source(source);
  for (const auto& [key, value] : split.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw InvalidArgument(
          fmt::format("{}: {}.{} does not apply to source {}", where(section + "." + key), section, key, source),
          fmt::format("a {} source takes {}", source, fmt::join(allowed, ", ")));
    }
  }
  for (const char* key : {"files", "sequence_length"}) {
    if (!split.contains(key)) {
      throw InvalidArgument(fmt::format("{}: {} (source {}) needs '{}'", where(section), section, source, key),
                            fmt::format("a {} source takes {}", source, fmt::join(allowed, ", ")));
    }
  }
  for (const char* key : {"sequence_length", "stride"}) {
    if (split.contains(key) && !(split[key].is_number_integer() && split[key].get<int64_t>() > 0)) {
      const std::string path = section + "." + key;
      throw InvalidArgument(
          fmt::format("{}: {} must be a positive integer, got {}", where(path), path, split[key].dump()));
    }
  }
  if (split.contains("validation_split")) {
    const std::string path = section + ".validation_split";
    const Json& fraction = split["validation_split"];
    if (section != "data.train") {
      throw InvalidArgument(fmt::format("{}: {} applies to data.train only", where(path), path));
    }
    if (!fraction.is_number() || !(fraction.get<double>() > 0 && fraction.get<double>() < 1)) {
      throw InvalidArgument(
          fmt::format("{}: {} must be a fraction in (0, 1), got {}", where(path), path, fraction.dump()));
    }
  }
  if (split.contains("format")) {
    try {
      (void)data::packed_token_format(split["format"].get<std::string>());
    } catch (const Error& error) {
      throw InvalidArgument(fmt::format("{}: {}.format: {}", where(section + ".format"), section, error.message()),
                            error.hint());
    }
  }
  check_tokenizer(split, section, where);
}

data::Dataset token_windows_from_config(const Json& split, const std::string& section,
                                        const std::vector<std::string>& paths) {
  const int64_t sequence_length = sequence_length_of(split), stride = stride_of(split);
  std::shared_ptr<const data::TokenSequence> tokens;
  std::string origin;
  if (split.at("source") == "text") {
    const std::string text = data::read_text_files(paths);
    const auto tokenizer = tokenizer_of(split);
    tokens = data::tokens_in_memory(tokenizer->encode(text), fmt::format("{} text files", paths.size()));
    origin = fmt::format("{} text files from '{}' ({} bytes), {}: {} tokens", paths.size(), paths.front(), text.size(),
                         tokenizer->describe(), tokens->size());
  } else {
    try {
      tokens = data::map_packed_tokens(paths, data::packed_token_format(split.value("format", std::string("auto"))));
    } catch (const Error& error) {
      throw DataError(fmt::format("{}.files: {}", section, error.message()), error.hint());
    }
    origin = tokens->describe();
  }
  const int64_t windows = data::token_window_count(tokens->size(), sequence_length, stride);
  if (windows == 0) {
    throw DataError(fmt::format("{}: {} tokens, fewer than one window of sequence_length + 1 = {}", section,
                                tokens->size(), sequence_length + 1),
                    fmt::format("give {}.files more text, or a shorter {}.sequence_length", section, section));
  }
  log_once(fmt::format("{}: {}; {} windows of {} + 1 tokens, stride {}, per epoch", section, origin, windows,
                       sequence_length, stride));
  return data::token_windows(tokens, sequence_length, stride);
}

void apply_validation_split(Json& data_section, const std::vector<std::string>& train_paths,
                            const std::function<std::string(const std::string&)>& where) {
  Json& train = data_section["train"];
  const std::string path = "data.train.validation_split";
  const double fraction = train.at("validation_split").get<double>();
  if (data_section.contains("validation")) {
    throw InvalidArgument(fmt::format("{}: {} and data.validation both give validation data", where(path), path),
                          "keep one of them");
  }
  std::vector<uintmax_t> sizes;
  uintmax_t total = 0;
  for (const std::string& file : train_paths) total += sizes.emplace_back(std::filesystem::file_size(file));
  // The fewest last files holding at least the fraction.
  size_t first_held_out = train_paths.size();
  uintmax_t held_out = 0;
  while (first_held_out > 0 && static_cast<double>(held_out) < fraction * static_cast<double>(total)) {
    held_out += sizes[--first_held_out];
  }
  if (first_held_out == 0) {
    throw InvalidArgument(
        fmt::format("{}: {}: {} of {} file(s) ({} bytes) would split inside a file: validation must hold whole "
                    "files, and training must keep at least one",
                    where(path), path, fraction, train_paths.size(), total),
        "give data.train more files, a smaller validation_split, or data.validation its own files");
  }
  Json validation = train;
  validation.erase("validation_split");
  validation.erase("shuffle");
  validation["files"] = std::vector<std::string>(train_paths.begin() + first_held_out, train_paths.end());
  train.erase("validation_split");
  train["files"] = std::vector<std::string>(train_paths.begin(), train_paths.begin() + first_held_out);
  log_once(fmt::format("{}: {} of {} files ({} of {} bytes, {:.1f}%) held out for validation: {}", path,
                       train_paths.size() - first_held_out, train_paths.size(), held_out, total,
                       100.0 * static_cast<double>(held_out) / static_cast<double>(total),
                       fmt::join(validation["files"].get<std::vector<std::string>>(), ", ")));
  data_section["validation"] = std::move(validation);
}

}  // namespace nimbus::train
