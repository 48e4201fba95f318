// A parallel map right before a batch writes its results into the batch's rows (BatchSlots): the
// batches equal a sequential map's (the rows copied one by one), also when an element fails, has
// another shape, or holds another component in the row its first component's op was given.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "nimbus/data/image_ops.h"
#include "nimbus/ops/creation.h"
#include "nimbus/ops/elementwise.h"

namespace nimbus::data {
namespace {

// An (n, 8, 7, 3) u8 stack whose image i holds i + 7 * position: 168 values a row, three of
// scale_shift_to_f32's blocks of 16 pixels and a tail.
constexpr int64_t kRowValues = 8 * 7 * 3;
Tensor images(int64_t n) {
  std::vector<uint8_t> v;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < kRowValues; ++p) v.push_back(static_cast<uint8_t>((i + 7 * p) % 256));
  }
  return Tensor::from_vector<uint8_t>(v, {n, 8, 7, 3});
}

std::vector<std::vector<float>> floats(const std::vector<Element>& batches, size_t component) {
  std::vector<std::vector<float>> out;
  for (const Element& batch : batches) out.push_back(batch[component].to(DType::kF32).to_vector<float>());
  return out;
}

// Every batch, and what each next() threw (empty: a batch), until the end.
std::vector<std::string> outcomes(const Dataset& dataset, std::vector<Element>& batches) {
  std::vector<std::string> out;
  Iterator it = dataset.iterator();
  for (;;) {
    try {
      auto batch = it.next();
      if (!batch) return out;
      batches.push_back(std::move(*batch));
      out.emplace_back();
    } catch (const Error& error) {
      out.emplace_back(error.what());
    }
  }
}

Element normalized(const Element& e) {
  return Element{normalize(e[0], {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}), e[0]};
}

TEST(MapIntoBatch, BatchesEqualTheSequentialMapsAndTheRowsAreWrittenInPlace) {
  std::mutex mutex;
  std::set<const void*> results;  // where normalize wrote each element's image
  const auto recording = [&](const Element& e) {
    Element out = normalized(e);
    std::lock_guard lock(mutex);
    results.insert(out[0].raw_data());
    return out;
  };
  const Dataset source = Dataset::from_tensor_slices({images(70)});
  const auto fused = source.map(recording, 2).batch(8).collect();
  const auto reference = source.map(normalized, 1).batch(8).collect();
  ASSERT_EQ(fused.size(), 9u);  // 8 full batches and one of 6
  EXPECT_EQ(fused.back()[0].dim(0), 6);
  EXPECT_EQ(floats(fused, 0), floats(reference, 0));
  EXPECT_EQ(floats(fused, 1), floats(reference, 1));
  // All but the first finished element of each batch (its buffer does not exist yet) were written
  // straight into their rows (with streaming stores: the same floats as the plain loop's, above).
  int in_place = 0;
  for (const Element& batch : fused) {
    for (int64_t row = 0; row < batch[0].dim(0); ++row) {
      in_place += results.count(static_cast<const char*>(batch[0].raw_data()) + row * kRowValues * 4);
    }
  }
  EXPECT_GE(in_place, 70 - 2 * 9);
}

TEST(MapIntoBatch, AnotherComponentInTheFirstOnesRowMovesOutFirst) {
  // normalize's result (given the first component's row) is the second component: the first, written
  // into that row, must not overwrite it.
  const auto swapped = [](const Element& e) {
    Tensor image = normalize(e[0], {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f});
    return Element{image * 2.0, image};
  };
  const Dataset source = Dataset::from_tensor_slices({images(40)});
  const auto fused = source.map(swapped, 2).batch(8).collect();
  const auto reference = source.map(swapped, 1).batch(8).collect();
  EXPECT_EQ(floats(fused, 0), floats(reference, 0));
  EXPECT_EQ(floats(fused, 1), floats(reference, 1));
}

TEST(MapIntoBatch, ErrorsAndOddShapesGiveTheSequentialMapsBatches) {
  // Element 5 fails, element 13 has another shape: each next() says or gives the same as unfused.
  const auto uneven = [](const Element& e) {
    const auto index = e[0].item<int64_t>();
    if (index == 5) throw DataError("element 5 is corrupt");
    Tensor image = normalized(Element{e[1]})[0];
    if (index == 13) image = zeros(Shape{2, 2, 3});
    return Element{image};
  };
  const Dataset source = Dataset::from_tensor_slices({images(40)}).enumerate();
  std::vector<Element> fused_batches, reference_batches;
  const auto fused = outcomes(source.map(uneven, 2).batch(4), fused_batches);
  const auto reference = outcomes(source.map(uneven, 1).batch(4), reference_batches);
  EXPECT_EQ(fused, reference);
  EXPECT_NE(std::count_if(fused.begin(), fused.end(), [](const std::string& s) { return !s.empty(); }), 0);
  EXPECT_EQ(floats(fused_batches, 0), floats(reference_batches, 0));
}

}  // namespace
}  // namespace nimbus::data
