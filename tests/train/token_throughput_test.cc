// tokens_per_sec: for labels that are token sequences (a language model's (N, T) ids),
// History::tokens_per_sec is samples_per_sec x T and the progress bar shows tokens/s; class
// labels have none.
#include <gtest/gtest.h>

#include <sstream>

#include "nimbus/nn/layers.h"
#include "nimbus/train/trainer.h"
#include "train_test_util.h"

namespace nimbus::testing {
namespace {

train::Trainer token_model_trainer() {
  const nn::KerasTensor ids = nn::Input({6}, DType::kI32);
  nn::Model model({ids}, {nn::Dense(5)(nn::Embedding(5, 4)(ids))});
  return train::compile(model, {.optimizer = train::Adam(),
                                .loss = train::SparseCategoricalCrossentropy({.from_logits = true}),
                                .metrics = {"accuracy", "perplexity"}});
}

TEST(TokenThroughput, TokenLabelsGiveTokensPerSecAndTheProgressBarShowsThem) {
  train::Trainer trainer = token_model_trainer();
  std::vector<int32_t> values(24 * 6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>((i * 7) % 5);
  const Tensor x = Tensor::from_vector<int32_t>(values, {24, 6});
  std::ostringstream out;
  const train::History history = trainer.fit(x, x, {.epochs = 1, .batch_size = 4, .verbose = 2, .output = &out});
  ASSERT_GT(history.samples_per_sec, 0);
  EXPECT_DOUBLE_EQ(history.tokens_per_sec, history.samples_per_sec * 6);
  EXPECT_NE(out.str().find(" tokens/s"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(" perplexity: "), std::string::npos) << out.str();
  EXPECT_EQ(trainer.last_step.tokens, 4 * 6);

  // Class ids, one per sample: no tokens.
  const nn::KerasTensor features = nn::Input({3});
  train::Trainer classifier =
      train::compile(nn::Model({features}, {nn::Dense(2)(features)}),
                     {.optimizer = train::Adam(), .loss = train::SparseCategoricalCrossentropy({.from_logits = true})});
  std::ostringstream quiet;
  const train::History plain =
      classifier.fit(random_input({8, 3}), Tensor::from_vector<int32_t>({0, 1, 0, 1, 1, 0, 0, 1}, {8, 1}),
                     {.epochs = 1, .batch_size = 2, .verbose = 2, .output = &quiet});
  EXPECT_GT(plain.samples_per_sec, 0);
  EXPECT_EQ(plain.tokens_per_sec, 0);
  EXPECT_EQ(quiet.str().find("tokens/s"), std::string::npos) << quiet.str();
}

}  // namespace
}  // namespace nimbus::testing
