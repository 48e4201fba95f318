// SentencePiece tokenizers and training, through Debian's libsentencepiece
// where CMake found it (NIMBUS_SENTENCEPIECE); otherwise each entry point
// refuses with the package to install.
#include "nimbus/data/sentencepiece.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "nimbus/base/error.h"
#include "nimbus/data/text_files.h"

#if NIMBUS_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace nimbus::data {

#if NIMBUS_SENTENCEPIECE

namespace {

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(path) {
    if (!std::filesystem::exists(path)) {
      throw NotFound(fmt::format("sentencepiece model '{}' not found", path),
                     "make one with `nimbus data train-tokenizer`");
    }
    if (const auto status = processor_.Load(path); !status.ok()) {
      throw DataError(fmt::format("sentencepiece model '{}': {}", path, status.ToString()),
                      "give a .model file written by SentencePiece's trainer");
    }
  }
  int64_t vocab_size() const override { return processor_.GetPieceSize(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    if (const auto status = processor_.Encode(text, &ids); !status.ok()) {
      throw DataError(fmt::format("sentencepiece model '{}': encoding failed: {}", path_, status.ToString()));
    }
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab_size()) {
        throw InvalidArgument(fmt::format("sentencepiece model '{}': id {} (at {}) is outside the vocabulary of {}",
                                          path_, ids[i], i, vocab_size()));
      }
    }
    std::string text;
    (void)processor_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    return text;
  }
  std::string describe() const override {
    return fmt::format("sentencepiece '{}' (vocabulary {})", path_, vocab_size());
  }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

bool sentencepiece_available() { return true; }

std::shared_ptr<const Tokenizer> sentencepiece_tokenizer(const std::string& model_path) {
  return std::make_shared<const SentencePieceTokenizer>(model_path);
}

std::string train_sentencepiece(const SentencePieceTraining& options) {
  if (options.input_files.empty()) throw InvalidArgument("train_sentencepiece: no input files given");
  if (options.model_prefix.empty()) throw InvalidArgument("train_sentencepiece: no model prefix given");
  // One plain-text file of every input, so that gzip inputs read as plain ones.
  const std::string corpus = options.model_prefix + ".corpus.txt";
  {
    std::ofstream out(corpus, std::ios::binary);
    if (!out) throw InvalidArgument(fmt::format("train_sentencepiece: cannot write '{}'", corpus));
    for (const std::string& path : options.input_files) out << read_text_file(path) << '\n';
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train({
      {"input", corpus},
      {"model_prefix", options.model_prefix},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model_type},
      {"character_coverage", fmt::format("{}", options.character_coverage)},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"minloglevel", "1"},
  });
  std::filesystem::remove(corpus);
  if (!status.ok()) {
    throw InvalidArgument(fmt::format("train_sentencepiece: {}", status.ToString()),
                          "a smaller vocab_size fits a small corpus; model_type: unigram, bpe, char or word");
  }
  return options.model_prefix + ".model";
}

#else

namespace {
[[noreturn]] void no_sentencepiece(const std::string& what) {
  throw Unimplemented(fmt::format("{}: this build has no SentencePiece", what),
                      "install libsentencepiece-dev and configure again (cmake finds it), or use the byte tokenizer");
}
}  // namespace

bool sentencepiece_available() { return false; }

std::shared_ptr<const Tokenizer> sentencepiece_tokenizer(const std::string& model_path) {
  no_sentencepiece(fmt::format("sentencepiece model '{}'", model_path));
}

std::string train_sentencepiece(const SentencePieceTraining&) { no_sentencepiece("train_sentencepiece"); }

#endif

}  // namespace nimbus::data
