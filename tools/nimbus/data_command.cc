// nimbus data to-tfrecord: Fashion-MNIST's IDX files to gzip-compressed TFRecord shards of
// tf.train.Example (image: the 784 raw u8 pixels as bytes, label: int64), which
// examples/fashion_mnist_tfrecord.yaml trains from (docs/data.md).
// nimbus data train-tokenizer: a SentencePiece .model from text files, for a text source's
// tokenizer: {sentencepiece: FILE} (docs/language_models.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/idx.h"
#include "nimbus/data/idx_to_tfrecord.h"
#include "nimbus/data/sentencepiece.h"

namespace nimbus::cli {

Command add_data_command(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "input data tools");
  data->require_subcommand(1);
  CLI::App* to_tfrecord =
      data->add_subcommand("to-tfrecord", "convert Fashion-MNIST's IDX files to TFRecord shards of tf.train.Example");
  struct Arguments {
    std::string source_dir = data::kFashionMnistDir, output_dir;
    int shards = 4;
  };
  auto arguments = std::make_shared<Arguments>();
  to_tfrecord->add_option("--source-dir", arguments->source_dir, "the IDX files' folder")->capture_default_str();
  to_tfrecord->add_option("-o,--output-dir", arguments->output_dir, "where the shards go")->required();
  to_tfrecord->add_option("--shards", arguments->shards, "shards per split")
      ->capture_default_str()
      ->check(whole_number(1, 10'000));
  auto tokenizer = std::make_shared<data::SentencePieceTraining>();
  auto patterns = std::make_shared<std::vector<std::string>>();
  CLI::App* train_tokenizer = data->add_subcommand(
      "train-tokenizer", "train a SentencePiece tokenizer on text files (needs a build with libsentencepiece-dev)");
  train_tokenizer->add_option("files", *patterns, "text files or glob patterns (gzip is read through zlib)")
      ->required();
  train_tokenizer->add_option("-o,--output", tokenizer->model_prefix, "writes OUTPUT.model and OUTPUT.vocab")
      ->required();
  train_tokenizer->add_option("--vocab-size", tokenizer->vocab_size, "pieces in the vocabulary")
      ->capture_default_str()
      ->check(whole_number(8, 1'000'000));
  train_tokenizer->add_option("--model-type", tokenizer->model_type, "SentencePiece's model_type")
      ->capture_default_str()
      ->check(CLI::IsMember({"unigram", "bpe", "char", "word"}));
  return [arguments, to_tfrecord, tokenizer, patterns] {
    if (!to_tfrecord->parsed()) {
      tokenizer->input_files.clear();
      for (const data::Element& file : data::Dataset::list_files(*patterns, /*shuffle=*/false).collect()) {
        tokenizer->input_files.push_back(data::tensor_string(file[0]));
      }
      const std::string model = data::train_sentencepiece(*tokenizer);
      std::cout << fmt::format("nimbus data train-tokenizer: wrote {} ({}) from {} files\n", model,
                               data::sentencepiece_tokenizer(model)->describe(), tokenizer->input_files.size());
      return 0;
    }
    // train-images-idx3-ubyte.gz -> OUT/train-0000k-of-0000N.tfrecord.gz; t10k -> OUT/test-...
    for (const auto& [idx_name, split] : {std::pair{"train", "train"}, std::pair{"t10k", "test"}}) {
      const std::string dir = arguments->source_dir;
      const auto shards = data::idx_to_tfrecord(fmt::format("{}/{}-images-idx3-ubyte.gz", dir, idx_name),
                                                fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, idx_name),
                                                fmt::format("{}/{}", arguments->output_dir, split), arguments->shards);
      std::cout << fmt::format("nimbus data to-tfrecord: wrote {} shards: {} ... {}\n", shards.size(), shards.front(),
                               shards.back());
    }
    return 0;
  };
}

}  // namespace nimbus::cli
