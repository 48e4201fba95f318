// Sources and transforms of data::Dataset: one test (or a few) each.
#include "nimbus/data/dataset.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/data/idx.h"
#include "tests/data/data_test_util.h"

namespace nimbus::data {
namespace {

using testing::iota;
using testing::scalars;
using testing::TempDirTest;

TEST(DatasetSources, FromTensorsIsOneElement) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor b = Tensor::scalar<int64_t>(5);
  Dataset ds = Dataset::from_tensors({a, b});
  EXPECT_EQ(ds.cardinality(), 1);
  auto all = ds.collect();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0][0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(all[0][1].item<int64_t>(), 5);
}

TEST(DatasetSources, FromTensorSlicesSlicesTheFirstAxis) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor y = Tensor::from_vector<int64_t>({10, 11, 12}, {3});
  Dataset ds = Dataset::from_tensor_slices({x, y});
  EXPECT_EQ(ds.cardinality(), 3);
  auto all = ds.collect();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2][0].shape(), (Shape{2}));
  EXPECT_EQ(all[2][0].to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_EQ(scalars(all, 1), (std::vector<int64_t>{10, 11, 12}));
  EXPECT_THROW(Dataset::from_tensor_slices({x, Tensor::from_vector<int64_t>({1, 2}, {2})}), InvalidArgument);
}

TEST(DatasetSources, RangeLikePython) {
  EXPECT_EQ(scalars(Dataset::range(5).collect()), iota(5));
  EXPECT_EQ(scalars(Dataset::range(2, 11, 3).collect()), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(scalars(Dataset::range(5, 0, -2).collect()), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(Dataset::range(2, 11, 3).cardinality(), 3);
  EXPECT_EQ(Dataset::range(5, 0, -2).cardinality(), 3);
  EXPECT_EQ(Dataset::range(3, 3).cardinality(), 0);
}

TEST(DatasetSources, FromGeneratorRestartsEachIteration) {
  std::atomic<int> started{0};
  Dataset ds = Dataset::from_generator([&] {
    started++;
    auto i = std::make_shared<int64_t>(0);
    return [i]() -> std::optional<Element> {
      if (*i >= 4) return std::nullopt;
      return Element{Tensor::scalar<int64_t>((*i)++ * 10)};
    };
  });
  EXPECT_EQ(scalars(ds.collect()), (std::vector<int64_t>{0, 10, 20, 30}));
  EXPECT_EQ(scalars(ds.collect()), (std::vector<int64_t>{0, 10, 20, 30}));
  EXPECT_EQ(started.load(), 2);
}

class DatasetFileSources : public TempDirTest {};

TEST_F(DatasetFileSources, IdxZipsImagesAndLabels) {
  write_idx(path("images.idx"), Tensor::from_vector<uint8_t>({1, 2, 3, 4, 5, 6}, {3, 2}));
  write_idx(path("labels.idx"), Tensor::from_vector<uint8_t>({7, 8, 9}, {3}));
  auto all = Dataset::idx({path("images.idx"), path("labels.idx")}).collect();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1][0].to_vector<int>(), (std::vector<int>{3, 4}));
  EXPECT_EQ(all[1][1].item<int>(), 8);
}

TEST_F(DatasetFileSources, IdxReadsFashionMnist) {
  const std::string dir = kFashionMnistDir;
  Dataset ds = Dataset::idx({dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz"});
  EXPECT_EQ(ds.cardinality(), 10000);
  auto first = ds.take(1).collect();
  EXPECT_EQ(first[0][0].shape(), (Shape{28, 28}));
  EXPECT_EQ(first[0][1].item<int>(), 9);  // the first t10k item is an ankle boot
}

TEST_F(DatasetFileSources, TextLineReadsPlainAndGzipFiles) {
  {
    std::ofstream out(path("a.txt"));
    out << "alpha\r\nbeta\n\ngamma";  // CRLF, an empty line, no final newline
  }
  {
    gzFile gz = gzopen(path("b.txt.gz").c_str(), "wb");
    gzputs(gz, "delta\nepsilon\n");
    gzclose(gz);
  }
  std::vector<std::string> lines;
  for (const auto& e : Dataset::text_line({path("a.txt"), path("b.txt.gz")}).collect()) {
    lines.push_back(tensor_string(e[0]));
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"alpha", "beta", "", "gamma", "delta", "epsilon"}));
}

TEST_F(DatasetFileSources, TextLineMissingFileIsNotFoundNamingIt) {
  Iterator it = Dataset::text_line({path("missing.txt")}).iterator();
  try {
    it.next();
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt"), std::string::npos);
  }
  EXPECT_FALSE(it.next().has_value());  // and then it ends, it does not hang or repeat
}

TEST_F(DatasetFileSources, ListFilesGlobsSortsAndShufflesWithSeed) {
  for (int i = 0; i < 8; ++i) std::ofstream(path("part-" + std::to_string(i) + ".rec")) << i;
  std::ofstream(path("other.txt")) << "x";
  auto names = [](const Dataset& ds) {
    std::vector<std::string> out;
    for (const auto& e : ds.collect()) out.push_back(std::filesystem::path(tensor_string(e[0])).filename());
    return out;
  };
  auto sorted = names(Dataset::list_files({path("part-*.rec")}, /*shuffle=*/false));
  ASSERT_EQ(sorted.size(), 8u);
  EXPECT_TRUE(std::is_sorted(sorted.begin(), sorted.end()));
  auto a = names(Dataset::list_files({path("part-*.rec")}, true, 7));
  auto b = names(Dataset::list_files({path("part-*.rec")}, true, 7));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, sorted);
  EXPECT_EQ(std::set<std::string>(a.begin(), a.end()), std::set<std::string>(sorted.begin(), sorted.end()));
  EXPECT_THROW(Dataset::list_files({path("nothing-*.rec")}), NotFound);
}

// ---- transforms ----

Dataset squares(int parallel, bool deterministic = true) {
  return Dataset::range(100).map(
      [](const Element& e) {
        const int64_t v = e[0].item<int64_t>();
        return Element{Tensor::scalar<int64_t>(v * v)};
      },
      parallel, deterministic);
}

std::vector<int64_t> expected_squares() {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < 100; ++i) out.push_back(i * i);
  return out;
}

TEST(DatasetTransforms, MapSequential) { EXPECT_EQ(scalars(squares(1).collect()), expected_squares()); }

TEST(DatasetTransforms, MapParallelDeterministicKeepsOrder) {
  EXPECT_EQ(scalars(squares(4).collect()), expected_squares());
  EXPECT_EQ(scalars(squares(kAutotune).collect()), expected_squares());
}

TEST(DatasetTransforms, MapParallelNondeterministicYieldsEveryElement) {
  auto got = scalars(squares(4, false).collect());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected_squares());
}

// Calls that take uneven times (element i sleeps (i * 7) % 5 ms) finish out of order.
Dataset uneven_squares(int parallel, bool deterministic, std::atomic<int>* calls) {
  return Dataset::range(40).map(
      [calls](const Element& e) {
        const int64_t v = e[0].item<int64_t>();
        (*calls)++;
        std::this_thread::sleep_for(std::chrono::milliseconds((v * 7) % 5));
        return Element{Tensor::scalar<int64_t>(v * v)};
      },
      parallel, deterministic);
}

TEST(DatasetTransforms, MapKeepsOrderWhenCallsFinishOutOfOrder) {
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 40; ++i) expected.push_back(i * i);
  for (int parallel : {2, 3, kAutotune}) {
    std::atomic<int> calls{0};
    EXPECT_EQ(scalars(uneven_squares(parallel, true, &calls).collect()), expected) << "parallel " << parallel;
    EXPECT_EQ(calls.load(), 40) << "each element is mapped exactly once";
    calls = 0;
    auto got = scalars(uneven_squares(parallel, false, &calls).collect());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "every element exactly once, parallel " << parallel;
    EXPECT_EQ(calls.load(), 40);
  }
}

TEST(DatasetTransforms, MapRunsOnPipelineThreadsNotTheCaller) {
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_caller{0};
  Dataset ds = Dataset::range(20).map(
      [&](const Element& e) {
        if (std::this_thread::get_id() == caller) on_caller++;
        return e;
      },
      2);
  EXPECT_EQ(ds.collect().size(), 20u);
  EXPECT_EQ(on_caller.load(), 0);
}

TEST(DatasetTransforms, FailingMapEndsWithItsErrorAndDoesNotHang) {
  for (int parallel : {1, 3}) {
    Dataset ds = Dataset::range(10).map(
        [](const Element& e) {
          if (e[0].item<int64_t>() == 4) throw DataError("element 4 is bad");
          return e;
        },
        parallel);
    Iterator it = ds.iterator();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(it.next()->at(0).item<int64_t>(), i);
    EXPECT_THROW(it.next(), DataError) << "parallel " << parallel;
    // The error belongs to element 4 only; iteration can go on.
    EXPECT_EQ(it.next()->at(0).item<int64_t>(), 5);
    // ignore_errors skips it and counts it.
    Iterator skipping = ds.ignore_errors().iterator();
    std::vector<int64_t> got;
    while (auto e = skipping.next()) got.push_back(e->at(0).item<int64_t>());
    EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7, 8, 9}));
    EXPECT_NE(skipping.stats().find("skipped 1 bad elements"), std::string::npos) << skipping.stats();
  }
}

TEST(DatasetTransforms, DestroyingAnIteratorMidEpochIsPrompt) {
  // A slow infinite pipeline with parallel map, interleave and prefetch.
  Dataset ds = Dataset::range(0, 1000000)
                   .repeat()
                   .map(
                       [](const Element& e) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(5));
                         return e;
                       },
                       4)
                   .interleave([](const Element& e) { return Dataset::from_tensors(e).repeat(3); }, 2, 1, 2)
                   .prefetch(8);
  const auto start = std::chrono::steady_clock::now();
  {
    Iterator it = ds.iterator();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(it.next().has_value());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);
}

TEST(DatasetTransforms, Filter) {
  auto got =
      scalars(Dataset::range(10).filter([](const Element& e) { return e[0].item<int64_t>() % 3 == 0; }).collect());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 3, 6, 9}));
}

TEST(DatasetTransforms, FlatMap) {
  Dataset ds = Dataset::range(1, 4).flat_map([](const Element& e) {
    const int64_t n = e[0].item<int64_t>();
    return Dataset::range(n * 10, n * 10 + n);
  });
  EXPECT_EQ(scalars(ds.collect()), (std::vector<int64_t>{10, 20, 21, 30, 31, 32}));
}

TEST(DatasetTransforms, InterleaveRoundRobinWithBlocks) {
  auto inner = [](const Element& e) {
    const int64_t n = e[0].item<int64_t>();
    return Dataset::range(n * 100, n * 100 + 3);
  };
  // TF: cycle 2, block 2 over inputs 1, 2, 3.
  const std::vector<int64_t> expected = {100, 101, 200, 201, 102, 202, 300, 301, 302};
  EXPECT_EQ(scalars(Dataset::range(1, 4).interleave(inner, 2, 2).collect()), expected);
  EXPECT_EQ(scalars(Dataset::range(1, 4).interleave(inner, 2, 2, 2).collect()), expected);
  EXPECT_EQ(scalars(Dataset::range(1, 4).interleave(inner, 2, 2, kAutotune).collect()), expected);
  // Fewer read-ahead threads than open datasets: same order, and stats say how many.
  const Dataset sequential = Dataset::range(1, 9).interleave(inner, 4, 1);
  const Dataset two_ahead = Dataset::range(1, 9).interleave(inner, 4, 1, 2);
  EXPECT_EQ(scalars(two_ahead.collect()), scalars(sequential.collect()));
  Iterator it = two_ahead.iterator();
  while (it.next()) {
  }
  EXPECT_NE(it.stats().find("2 of 4 open datasets read ahead"), std::string::npos) << it.stats();
}

TEST(DatasetTransforms, ShuffleIsAPermutationDeterminedByTheSeed) {
  auto run = [](uint64_t seed) { return scalars(Dataset::range(50).shuffle(16, seed).collect()); };
  auto a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, iota(50));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(50));
}

TEST(DatasetTransforms, ShuffleReshufflesEachEpochUnlessTold) {
  auto epochs = [](bool reshuffle) {
    auto all = scalars(Dataset::range(20).shuffle(20, 3, reshuffle).repeat(2).collect());
    return std::make_pair(std::vector<int64_t>(all.begin(), all.begin() + 20),
                          std::vector<int64_t>(all.begin() + 20, all.end()));
  };
  auto [a1, a2] = epochs(true);
  EXPECT_NE(a1, a2);
  auto [b1, b2] = epochs(false);
  EXPECT_EQ(b1, b2);
  // Two pipelines built alike give the same sequence of orders.
  auto [c1, c2] = epochs(true);
  EXPECT_EQ(a1, c1);
  EXPECT_EQ(a2, c2);
}

TEST(DatasetTransforms, ShuffleWithoutSeedDiffersBetweenIterators) {
  Dataset ds = Dataset::range(100).shuffle(100);
  EXPECT_NE(scalars(ds.collect()), scalars(ds.collect()));
}

TEST(DatasetTransforms, BatchAndDropRemainder) {
  auto batches = Dataset::range(10).batch(4).collect();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0][0].shape(), (Shape{4}));
  EXPECT_EQ(batches[2][0].to_vector<int64_t>(), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(Dataset::range(10).batch(4).cardinality(), 3);
  auto dropped = Dataset::range(10).batch(4, true).collect();
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(Dataset::range(10).batch(4, true).cardinality(), 2);
}

TEST(DatasetTransforms, BatchOfDifferentShapesSaysUsePaddedBatch) {
  Dataset ds = Dataset::range(1, 3).map([](const Element& e) {
    return Element{Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(e[0].item<int64_t>()), 1.0f),
                                              {e[0].item<int64_t>()})};
  });
  try {
    ds.batch(2).collect();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("padded_batch"), std::string::npos);
  }
}

// batch copies each element into its row as it arrives: rows past the first
// allocation (64 MiB) grow it, and a short last batch holds only its rows.
TEST(DatasetTransforms, BatchPastItsFirstAllocationKeepsEveryRow) {
  const int64_t row = int64_t{1} << 18;  // 1 MiB of f32 each: 64 rows fit the first allocation
  Dataset ds = Dataset::range(70).map([row](const Element& e) {
    const int64_t i = e[0].item<int64_t>();
    return Element{
        Tensor::from_vector<float>(std::vector<float>(static_cast<size_t>(row), static_cast<float>(i)), {row}), e[0]};
  });
  auto batches = ds.batch(1000).collect();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0][0].shape(), (Shape{70, row}));
  const auto values = batches[0][0].to_vector<float>();
  for (int64_t i = 0; i < 70; ++i) {
    EXPECT_EQ(values[static_cast<size_t>(i * row)], static_cast<float>(i));
    EXPECT_EQ(values[static_cast<size_t>(i * row + row - 1)], static_cast<float>(i));
  }
  EXPECT_EQ(batches[0][1].to_vector<int64_t>(), iota(70));
}

TEST(DatasetTransforms, BatchRestartsAfterAnElementOfAnotherShape) {
  // Element 2 has two values, the others one: the batch [2, 3] is refused and the next one is [4, 5].
  Dataset ds = Dataset::range(6).map([](const Element& e) {
    const int64_t i = e[0].item<int64_t>();
    const int64_t n = i == 2 ? 2 : 1;
    return Element{Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(n), i), {n})};
  });
  Iterator it = ds.batch(2).iterator();
  EXPECT_EQ(it.next()->at(0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  try {
    it.next();
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("i64 [2] with i64 [1] (element 1 of the batch)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(it.next()->at(0).to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
  EXPECT_FALSE(it.next().has_value());
}

TEST(DatasetTransforms, PaddedBatchPadsToLargestOrGivenShape) {
  Dataset ds = Dataset::range(1, 4).map([](const Element& e) {
    const int64_t n = e[0].item<int64_t>();
    return Element{Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(n), n), {n})};
  });
  auto b = ds.padded_batch(3).collect();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0][0].shape(), (Shape{3, 3}));
  EXPECT_EQ(b[0][0].to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 2, 2, 0, 3, 3, 3}));
  auto fixed = ds.padded_batch(2, {Shape{5}}, {-1}).collect();
  ASSERT_EQ(fixed.size(), 2u);
  EXPECT_EQ(fixed[0][0].to_vector<int64_t>(), (std::vector<int64_t>{1, -1, -1, -1, -1, 2, 2, -1, -1, -1}));
  EXPECT_THROW(ds.padded_batch(3, {Shape{2}}).collect(), InvalidArgument);
}

TEST(DatasetTransforms, UnbatchInvertsBatch) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2});
  auto rows = Dataset::from_tensor_slices({x}).batch(2).unbatch().collect();
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[3][0].to_vector<float>(), (std::vector<float>{6, 7}));
}

TEST(DatasetTransforms, RepeatTakeSkip) {
  EXPECT_EQ(scalars(Dataset::range(3).repeat(2).collect()), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(Dataset::range(3).repeat(2).cardinality(), 6);
  EXPECT_EQ(Dataset::range(3).repeat().cardinality(), kInfiniteCardinality);
  EXPECT_EQ(scalars(Dataset::range(3).repeat().take(7).collect()), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(Dataset::range(3).repeat().take(7).cardinality(), 7);
  EXPECT_EQ(scalars(Dataset::range(6).skip(4).collect()), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Dataset::range(6).skip(4).cardinality(), 2);
  EXPECT_EQ(Dataset::range(6).skip(10).collect().size(), 0u);
  // An empty dataset repeated forever ends instead of spinning.
  EXPECT_EQ(Dataset::range(0).repeat().take(3).collect().size(), 0u);
}

TEST(DatasetTransforms, ShardsCoverEveryElementExactlyOnce) {
  const Dataset base = Dataset::range(103);
  std::vector<int64_t> all;
  for (int64_t i = 0; i < 4; ++i) {
    const Dataset shard = base.shard(4, i);
    auto part = scalars(shard.collect());
    EXPECT_EQ(static_cast<int64_t>(part.size()), shard.cardinality());
    for (int64_t v : part) EXPECT_EQ(v % 4, i);
    all.insert(all.end(), part.begin(), part.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, iota(103));
  EXPECT_THROW(base.shard(4, 4), InvalidArgument);
}

TEST(DatasetTransforms, ZipEndsWithTheShortest) {
  auto all = Dataset::zip({Dataset::range(5), Dataset::range(100, 103)}).collect();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(scalars(all, 1), (std::vector<int64_t>{100, 101, 102}));
  EXPECT_EQ(Dataset::zip({Dataset::range(5), Dataset::range(100, 103)}).cardinality(), 3);
}

TEST(DatasetTransforms, EnumeratePrependsACounter) {
  auto all = Dataset::range(10, 13).enumerate(5).collect();
  EXPECT_EQ(scalars(all, 0), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(scalars(all, 1), (std::vector<int64_t>{10, 11, 12}));
}

TEST(DatasetTransforms, PrefetchKeepsOrderAndPropagatesErrors) {
  EXPECT_EQ(scalars(Dataset::range(50).prefetch(4).collect()), iota(50));
  EXPECT_EQ(scalars(Dataset::range(50).prefetch(kAutotune).collect()), iota(50));
  Dataset failing = Dataset::range(5)
                        .map([](const Element& e) {
                          if (e[0].item<int64_t>() == 2) throw DataError("bad");
                          return e;
                        })
                        .prefetch(2);
  EXPECT_EQ(scalars(failing.ignore_errors().collect()), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_THROW(failing.collect(), DataError);
}

TEST(DatasetTransforms, IgnoreErrorsHandsEachErrorAndItsCountToTheHandler) {
  const Dataset failing = Dataset::range(8).map([](const Element& e) {
    const int64_t i = e[0].item<int64_t>();
    if (i == 1 || i == 3 || i == 6) throw DataError(fmt::format("bad {}", i));
    return e;
  });
  std::vector<std::string> seen;
  const Dataset limited = failing.ignore_errors([&seen](const Error& error, int64_t count) {
    seen.push_back(fmt::format("{}:{}", count, error.message()));
    if (count > 2) throw DataError("too many");
  });
  Iterator it = limited.iterator();
  std::vector<int64_t> values;
  try {
    while (auto element = it.next()) values.push_back(element->at(0).item<int64_t>());
    FAIL() << "the handler's limit did not stop the iteration";
  } catch (const DataError& e) {
    EXPECT_EQ(e.message(), "too many");
  }
  EXPECT_EQ(values, (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(seen, (std::vector<std::string>{"1:bad 1", "2:bad 3", "3:bad 6"}));
  // Each iteration counts afresh.
  seen.clear();
  EXPECT_EQ(scalars(limited.take(4).collect()), (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(seen, (std::vector<std::string>{"1:bad 1", "2:bad 3"}));
}

TEST(DatasetTransforms, CardinalityUnknownAfterFilter) {
  EXPECT_EQ(Dataset::range(10).filter([](const Element&) { return true; }).cardinality(), kUnknownCardinality);
  EXPECT_EQ(Dataset::range(10).map([](const Element& e) { return e; }).cardinality(), 10);
}

// ---- cache ----

// A source that counts how many elements it produced.
Dataset counting_source(std::atomic<int>& reads, int n) {
  return Dataset::from_generator([&reads, n] {
    auto i = std::make_shared<int64_t>(0);
    return [&reads, i, n]() -> std::optional<Element> {
      if (*i >= n) return std::nullopt;
      reads++;
      return Element{Tensor::scalar<int64_t>((*i)++)};
    };
  });
}

TEST(DatasetCache, MemoryCacheSecondEpochReadsNoSource) {
  std::atomic<int> reads{0};
  Dataset ds = counting_source(reads, 10).cache();
  EXPECT_EQ(scalars(ds.collect()), iota(10));
  EXPECT_EQ(reads.load(), 10);
  EXPECT_EQ(scalars(ds.collect()), iota(10));
  EXPECT_EQ(reads.load(), 10);
  // Through repeat, within one iteration.
  std::atomic<int> reads2{0};
  EXPECT_EQ(scalars(counting_source(reads2, 5).cache().repeat(3).collect()).size(), 15u);
  EXPECT_EQ(reads2.load(), 5);
}

TEST(DatasetCache, PartialPassCachesNothing) {
  std::atomic<int> reads{0};
  Dataset ds = counting_source(reads, 10).cache();
  EXPECT_EQ(ds.take(3).collect().size(), 3u);
  EXPECT_EQ(scalars(ds.collect()), iota(10));
  EXPECT_EQ(reads.load(), 13);
}

class DatasetFileCache : public TempDirTest {};

TEST_F(DatasetFileCache, FileCacheIsReusedByALaterRun) {
  std::atomic<int> reads{0};
  const std::string file = path("cache.bin");
  {
    Dataset ds = counting_source(reads, 6)
                     .map([](const Element& e) {
                       return Element{e[0], Tensor::from_vector<float>({1.5f, 2.5f}, {2})};
                     })
                     .cache(file);
    auto first = ds.collect();
    EXPECT_EQ(reads.load(), 6);
    EXPECT_TRUE(std::filesystem::exists(file));
  }
  // "A later run": a new pipeline over the same file.
  Dataset again = counting_source(reads, 6).map([](const Element& e) { return Element{e[0], e[0]}; }).cache(file);
  auto all = again.collect();
  EXPECT_EQ(reads.load(), 6);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(scalars(all), iota(6));
  EXPECT_EQ(all[4][1].to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
}

TEST_F(DatasetFileCache, PartialPassLeavesNoFile) {
  std::atomic<int> reads{0};
  const std::string file = path("cache.bin");
  Dataset ds = counting_source(reads, 6).cache(file);
  EXPECT_EQ(ds.take(2).collect().size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 0);
}

}  // namespace
}  // namespace nimbus::data
