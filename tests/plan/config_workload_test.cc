// The workload of a nimbus train config: the traced step's cost is linear in the micro-batch, so two
// traces predict a third; and nimbus plan prices the examples end to end.
#include "nimbus/plan/config_workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "nimbus/data/example.h"
#include "nimbus/data/tfrecord.h"
#include "nimbus/train/config.h"
#include "nimbus/train/memory_check.h"
#include "tests/support/run_command.h"

namespace nimbus::plan {
namespace {

using ::testing::HasSubstr;

TEST(ConfigWorkload, TwoTracesPredictAThirdMicroBatch) {
  for (const char* example : {"examples/fashion_mnist_mlp.yaml", "examples/fashion_mnist_cnn.yaml"}) {
    const nlohmann::json config = train::load_config(example);
    const Workload work = workload_from_config(config, true);
    const train::StepAnalysis at_100 = train::analyze_train_step(config, 100);
    double flops = 0;
    double bytes = 0;
    for (const Kernel& kernel : work.kernels_at(100, Precision::kFloat32)) {
      flops += kernel.flops;
      bytes += kernel.bytes;
    }
    // Exact but for the few fills constant folding keeps as constants at small batches only (they run
    // as kernels at 100): a few hundred thousandths of the step.
    EXPECT_NEAR(flops / at_100.cost.flops, 1.0, 1e-3) << example;
    EXPECT_NEAR(bytes / static_cast<double>(at_100.cost.bytes_read + at_100.cost.bytes_written), 1.0, 1e-3) << example;
    EXPECT_NEAR(work.memory_bytes(100, Precision::kFloat32) / static_cast<double>(at_100.memory.total()), 1.0, 0.01)
        << example;
    EXPECT_EQ(work.gradient_bytes, static_cast<double>(at_100.memory.gradient_bytes)) << example;
    // The CNN's convolutions and the MLP's matmuls reach the matrix units.
    EXPECT_TRUE(std::ranges::any_of(work.kernels, [](const LinearKernel& k) { return on_matrix_units(k.unit); }));
  }
}

TEST(ConfigWorkload, ConvolutionsAreToldApartAndTheUpdateRunsOncePerStep) {
  const Workload cnn = workload_from_config(train::load_config("examples/fashion_mnist_cnn.yaml"), true);
  EXPECT_TRUE(std::ranges::any_of(cnn.kernels, [](const LinearKernel& k) { return k.unit == Unit::kConvolution; }));
  EXPECT_TRUE(std::ranges::any_of(cnn.kernels, [](const LinearKernel& k) { return k.per_step; }));
  EXPECT_EQ(training_samples(train::load_config("examples/fashion_mnist_cnn.yaml")), 60000);
}

// The MLP example with its training data as an IDX pipeline whose map does `steps` per image.
nlohmann::json mlp_with_pipeline(const std::string& steps) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  return train::parse_config(
      "model: {input_shape: [28, 28, 1], layers: [{Flatten: {}}, {Dense: {units: 10}}]}\n"
      "compile: {optimizer: adam, loss: {name: sparse_categorical_crossentropy, from_logits: true}}\n"
      "data:\n  train:\n    source: idx\n    images: " +
          dir +
          "train-images-idx3-ubyte.gz\n"
          "    labels: " +
          dir +
          "train-labels-idx1-ubyte.gz\n    x: image\n    y: label\n"
          "    steps: [{reshape: {shape: [28, 28, 1]}}, {convert_dtype: {dtype: float32, scale: 0.0039}}" +
          steps +
          "]\n"
          "fit: {batch_size: 64}\n",
      "test config");
}

TEST(ConfigWorkload, TrainingSamplesCountsAPipelinesExamples) {
  EXPECT_EQ(training_samples(mlp_with_pipeline("")), 60000);
  // TFRecord shards do not say how many records they hold: they are counted.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "nimbus_plan_tfrecord";
  std::filesystem::create_directories(dir);
  for (const auto& [shard, records] : {std::pair{"train-0.tfrecord.gz", 7}, std::pair{"train-1.tfrecord.gz", 5}}) {
    data::TFRecordWriter out((dir / shard).string(), data::Compression::kGzip);
    for (int i = 0; i < records; ++i) {
      out.write(data::serialize_example(
          {{"image", data::BytesList{{std::string(784, '\x7f')}}}, {"label", data::Int64List{{i % 10}}}}));
    }
    out.close();
  }
  nlohmann::json config = train::load_config("examples/fashion_mnist_tfrecord.yaml");
  config["data"]["train"]["files"] = (dir / "train-*.tfrecord.gz").string();
  EXPECT_EQ(training_samples(config), 12);
  std::filesystem::remove_all(dir);
}

TEST(InputWork, RowsInMemoryAreGatheredInTheStepAndAPipelinesMapCostsPerSample) {
  const InputWork gathered = input_work_from_config(train::load_config("examples/fashion_mnist_mlp.yaml"));
  EXPECT_TRUE(gathered.in_step);
  // A row is 3 KiB: well under a millisecond, and not nothing.
  EXPECT_GT(gathered.seconds_per_sample, 0);
  EXPECT_LT(gathered.seconds_per_sample, 1e-3);

  const InputWork plain = input_work_from_config(mlp_with_pipeline(""));
  // Resizing to 224 x 224 writes 64 times the pixels of the 28 x 28 image.
  const InputWork resized = input_work_from_config(mlp_with_pipeline(", {resize: {height: 224, width: 224}}"));
  EXPECT_FALSE(plain.in_step);
  EXPECT_GT(plain.seconds_per_sample, 0);
  EXPECT_GT(resized.seconds_per_sample, 4 * plain.seconds_per_sample);
}

TEST(PlanCli, PricesTheCnnExampleKeepingItsBatch) {
  const std::string output = nimbus::testing::run_command(
      std::string(NIMBUS_CLI) + " plan examples/fashion_mnist_cnn.yaml --gpus T4,A100-40GB --json 2>/dev/null");
  const nlohmann::json result = nlohmann::json::parse(output);
  ASSERT_FALSE(result["plans"].empty());
  for (const auto& plan : result["plans"]) {
    EXPECT_EQ(plan["micro_batch"].get<int64_t>() * plan["gradient_accumulation"].get<int64_t>() *
                  plan["device_count"].get<int64_t>(),
              128);
  }
  EXPECT_THAT(result["worth"].dump(), HasSubstr("JIT fusion"));
}

}  // namespace
}  // namespace nimbus::plan
