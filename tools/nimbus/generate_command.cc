// nimbus generate RUN_DIR --prompt TEXT --max-tokens N: text from a trained language model, printed
// token by token as it comes (docs/language_models.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "commands.h"
#include "flag_checks.h"
#include "nimbus/base/error.h"
#include "nimbus/data/sentencepiece.h"
#include "nimbus/data/tokenizer.h"
#include "nimbus/nn/generation.h"
#include "nimbus/train/trained_model.h"

namespace nimbus::cli {

namespace {

struct GenerateArguments {
  std::string run_dir, prompt, checkpoint = "last", device = "cpu";
  int64_t max_tokens = 256;
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool no_cache = false;
};

// The tokenizer the run trained with: data.train.tokenizer of its config (bytes unless it names a
// SentencePiece model); none for packed token files (source: tokens), whose ids are read and written as numbers.
std::shared_ptr<const data::Tokenizer> run_tokenizer(const nlohmann::json& config) {
  const nlohmann::json train = config.is_object() && config.contains("data")
                                   ? config["data"].value("train", nlohmann::json())
                                   : nlohmann::json();
  if (train.is_object() && train.value("source", std::string()) == "tokens") return nullptr;
  const nlohmann::json tokenizer = train.is_object() ? train.value("tokenizer", nlohmann::json("bytes")) : "bytes";
  if (tokenizer.is_object()) return data::sentencepiece_tokenizer(tokenizer.at("sentencepiece").get<std::string>());
  return data::byte_tokenizer();
}

std::vector<int64_t> prompt_ids(const std::string& prompt, const data::Tokenizer* tokenizer) {
  std::vector<int64_t> ids;
  if (tokenizer != nullptr) {
    for (const int32_t id : tokenizer->encode(prompt)) ids.push_back(id);
    return ids;
  }
  std::istringstream numbers(prompt);
  std::string word;
  while (numbers >> word) {
    try {
      ids.push_back(std::stoll(word));
    } catch (const std::exception&) {
      throw InvalidArgument(fmt::format("--prompt: '{}' is not a token id", word),
                            "this run trained on packed token files (source: tokens): give the prompt as ids, "
                            "e.g. --prompt '50256 464'");
    }
  }
  return ids;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  CLI::App* generate = app.add_subcommand("generate", "text from a trained language model (a run directory)");
  auto arguments = std::make_shared<GenerateArguments>();
  generate->add_option("run_dir", arguments->run_dir, "the run directory of a language model")->required();
  generate->add_option("--prompt", arguments->prompt, "the text to continue")->required();
  generate->add_option("--max-tokens", arguments->max_tokens, "tokens to generate (default 256)")
      ->check(whole_number(0, 1 << 30));
  generate->add_option("--temperature", arguments->temperature, "divides the logits; 0 is greedy (default 1)")
      ->check(CLI::Range(0.0, 1e6));
  generate->add_option("--top-k", arguments->top_k, "sample among the k most likely tokens (default: all)")
      ->check(whole_number(1, 1 << 30));
  generate->add_option("--top-p", arguments->top_p, "sample among the fewest tokens whose probability reaches p")
      ->check(CLI::Range(1e-9, 1.0));
  generate->add_option("--seed", arguments->seed, "the sampling seed (default 0)");
  generate->add_flag("--no-cache", arguments->no_cache,
                     "recompute the whole prefix for each token instead of the KV cache (the same tokens, slower)");
  generate->add_option("--checkpoint", arguments->checkpoint, "last (default), best, or a checkpoint file");
  generate->add_option("--device", arguments->device, "where the model runs: cpu (default), auto, cuda, cuda:N");
  return [arguments] {
    train::TrainedModel trained = train::load_trained_model(
        arguments->run_dir, {.checkpoint = arguments->checkpoint, .device = arguments->device}, std::cerr);
    const std::shared_ptr<const data::Tokenizer> tokenizer = run_tokenizer(trained.config);
    const std::vector<int64_t> prompt = prompt_ids(arguments->prompt, tokenizer.get());
    if (prompt.empty()) throw InvalidArgument("--prompt: no tokens", "give some text to continue");
    std::cerr << fmt::format("{} from {} on {}\n", tokenizer ? tokenizer->describe() : "token ids",
                             trained.weights_path, trained.device.to_string());
    // Printed as they come: the new text each token adds to the decoded whole (a multi-byte character
    // shows once complete).
    std::vector<int32_t> generated;
    std::string printed;
    nn::GenerateOptions options{
        .max_tokens = arguments->max_tokens, .temperature = arguments->temperature, .seed = arguments->seed};
    if (arguments->top_k > 0) options.top_k = arguments->top_k;
    if (arguments->top_p < 1.0) options.top_p = arguments->top_p;
    options.on_token = [&](int64_t token, const std::vector<float>&) {
      if (tokenizer == nullptr) {
        std::cout << token << " " << std::flush;
        return;
      }
      generated.push_back(static_cast<int32_t>(token));
      const std::string text = tokenizer->decode(generated);
      if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
        std::cout << text.substr(printed.size()) << std::flush;
        printed = text;
      }
    };
    nn::generate(trained.trainer.model(), prompt, options);
    std::cout << "\n";
    return 0;
  };
}

}  // namespace nimbus::cli
