// nimbus predict RUN_DIR|MODEL --output FILE: a trained model's outputs for a data split (docs/training.md).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "model_source_options.h"
#include "nimbus/base/error.h"
#include "nimbus/tensor/npy.h"
#include "nimbus/tensor/safetensors.h"
#include "nimbus/train/config.h"
#include "nimbus/train/run_directory.h"
#include "nimbus/train/trained_model.h"

namespace nimbus::cli {

Command add_predict_command(CLI::App& app) {
  CLI::App* predict = app.add_subcommand("predict", "a trained model's outputs (a run directory or a saved model)");
  auto arguments = std::make_shared<ModelSourceArguments>();
  auto output = std::make_shared<std::string>();
  add_model_source_options(*predict, *arguments, /*with_labels=*/false);
  predict
      ->add_option("--output,-o", *output, "where to write the outputs: FILE.npy or FILE.safetensors ('predictions')")
      ->required();
  return [arguments, output] {
    const bool npy = output->ends_with(".npy");
    if (!npy && !output->ends_with(".safetensors")) {
      throw InvalidArgument(fmt::format("--output {}: unknown format", *output), "name a .npy or .safetensors file");
    }
    train::refuse_output_onto_a_run_file(*output, "--output");
    train::TrainedModel trained = load_model_source(*arguments);
    std::cout << "device: " << trained.device.to_string() << "\n";
    const nlohmann::json split = data_split(*arguments, trained, /*with_labels=*/false);
    const Tensor x = train::load_idx_images(split, trained.trainer.model());
    // A batch that does not fit the device runs in micro-batches that do (said on stdout).
    const Tensor predictions = trained.trainer.predict(x, {.batch_size = batch_size(*arguments, trained)});
    if (npy) {
      write_npy(*output, predictions);
    } else {
      write_safetensors(*output, {{"predictions", predictions}});
    }
    std::cout << fmt::format("{}: predictions {} for {} samples (weights from {})\n", *output,
                             predictions.shape().to_string(), x.dim(0), trained.weights_path);
    return 0;
  };
}

}  // namespace nimbus::cli
