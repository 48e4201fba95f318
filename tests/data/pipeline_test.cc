// Whole pipelines: the conformance suite every dataset op passes (next,
// cardinality, determinism, stop mid-iteration, save and restore), iterator
// state of a shuffled parallel batched pipeline, stats and AUTOTUNE.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "nimbus/base/error.h"
#include "nimbus/data/dataset.h"
#include "tests/data/data_test_util.h"

namespace nimbus::data {
namespace {

// Flattens every element to its int64 values, for comparisons.
std::vector<std::vector<int64_t>> values(const std::vector<Element>& elements) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& e : elements) {
    std::vector<int64_t> flat;
    for (const auto& t : e) {
      auto v = t.to_vector<int64_t>();
      flat.push_back(static_cast<int64_t>(v.size()));
      flat.insert(flat.end(), v.begin(), v.end());
    }
    out.push_back(flat);
  }
  return out;
}

std::vector<Element> drain(Iterator& it) {
  std::vector<Element> out;
  while (auto e = it.next()) out.push_back(std::move(*e));
  return out;
}

Element twice(const Element& e) { return Element{Tensor::scalar<int64_t>(e[0].item<int64_t>() * 2)}; }

struct Case {
  const char* name;
  std::function<Dataset()> build;  // builds the pipeline afresh, as a new process would
};

std::vector<Case> conformance_cases() {
  auto r = [] { return Dataset::range(37); };
  return {
      {"range", [=] { return r(); }},
      {"from_tensor_slices",
       [] { return Dataset::from_tensor_slices({Tensor::from_vector<int64_t>(testing::iota(23), {23})}); }},
      {"map", [=] { return r().map(twice); }},
      {"map_parallel", [=] { return r().map(twice, 3); }},
      {"map_autotune", [=] { return r().map(twice, kAutotune); }},
      {"filter", [=] { return r().filter([](const Element& e) { return e[0].item<int64_t>() % 3 != 1; }); }},
      {"flat_map",
       [=] { return r().take(9).flat_map([](const Element& e) { return Dataset::from_tensors(e).repeat(2); }); }},
      {"interleave",
       [=] {
         return r().take(9).interleave([](const Element& e) { return Dataset::from_tensors(e).repeat(3); }, 3, 2);
       }},
      {"interleave_parallel",
       [=] {
         return r().take(9).interleave([](const Element& e) { return Dataset::from_tensors(e).repeat(3); }, 3, 1, 3);
       }},
      {"shuffle_seeded", [=] { return r().shuffle(10, 99); }},
      {"shuffle_unseeded", [=] { return r().shuffle(10); }},
      {"batch", [=] { return r().batch(5); }},
      {"batch_drop", [=] { return r().batch(5, true); }},
      {"padded_batch",
       [=] {
         return r()
             .map([](const Element& e) {
               const int64_t n = e[0].item<int64_t>() % 4;
               return Element{Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(n), n), {n})};
             })
             .padded_batch(4);
       }},
      {"unbatch", [=] { return r().batch(4).unbatch(); }},
      {"cache", [=] { return r().cache(); }},
      {"prefetch", [=] { return r().prefetch(3); }},
      {"prefetch_autotune", [=] { return r().prefetch(kAutotune); }},
      {"repeat", [=] { return r().repeat(3); }},
      {"repeat_shuffle", [=] { return r().shuffle(37, 4).repeat(2); }},
      {"take", [=] { return r().take(11); }},
      {"skip", [=] { return r().skip(11); }},
      {"shard", [=] { return r().shard(3, 1); }},
      {"zip",
       [=] {
         return Dataset::zip({r(), r().map(twice)});
       }},
      {"enumerate", [=] { return r().enumerate(100); }},
      {"ignore_errors",
       [=] {
         return r()
             .map(
                 [](const Element& e) {
                   if (e[0].item<int64_t>() % 5 == 0) throw DataError("multiple of 5");
                   return e;
                 },
                 2)
             .ignore_errors();
       }},
      {"everything", [=] { return r().shuffle(8, 1).map(twice, kAutotune).batch(4).prefetch(kAutotune); }},
  };
}

class Conformance : public ::testing::TestWithParam<size_t> {};

TEST_P(Conformance, NextCardinalityDeterminismStopAndRestore) {
  const Case c = conformance_cases()[GetParam()];
  SCOPED_TRACE(c.name);
  Dataset ds = c.build();
  // next() and cardinality.
  Iterator full = ds.iterator();
  const std::vector<Element> all = drain(full);
  ASSERT_FALSE(all.empty());
  EXPECT_FALSE(full.next().has_value());  // stays at the end
  if (ds.cardinality() >= 0) {
    EXPECT_EQ(ds.cardinality(), static_cast<int64_t>(all.size()));
  }
  // Every element has the same component dtypes.
  for (const auto& e : all) {
    ASSERT_EQ(e.size(), all[0].size());
    for (size_t i = 0; i < e.size(); ++i) EXPECT_EQ(e[i].dtype(), all[0][i].dtype());
  }
  // Determinism: a pipeline built alike yields the same elements (unseeded
  // shuffles aside, which the restore below covers).
  if (std::string(c.name) != "shuffle_unseeded") {
    EXPECT_EQ(values(c.build().collect()), values(all));
  }
  // Stop mid-iteration: destroying a half-read iterator is fine.
  for (size_t stop : {size_t{0}, all.size() / 2}) {
    Iterator it = ds.iterator();
    for (size_t i = 0; i < stop; ++i) ASSERT_TRUE(it.next().has_value());
  }
  // Save mid-iteration, restore into a freshly built pipeline: the rest is
  // what the saved iterator would have produced.
  for (size_t stop : {size_t{0}, size_t{1}, all.size() / 2, all.size()}) {
    Iterator it = ds.iterator();
    for (size_t i = 0; i < stop; ++i) ASSERT_TRUE(it.next().has_value());
    const std::string state = it.save();
    const auto expected = values(drain(it));
    Iterator restored = Iterator::restore(c.build(), state);
    EXPECT_EQ(values(drain(restored)), expected) << "stopped after " << stop;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, Conformance, ::testing::Range<size_t>(0, conformance_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::string(conformance_cases()[info.param].name);
                         });

TEST(IteratorState, ShuffledParallelBatchedPipelineResumesExactly) {
  auto build = [] {
    return Dataset::range(1000)
        .shuffle(100)  // unseeded: the seed travels in the state
        .map(twice, 4)
        .batch(16, true)
        .repeat(2)
        .prefetch(2);
  };
  Iterator it = build().iterator();
  std::vector<Element> seen;
  for (int i = 0; i < 70; ++i) seen.push_back(*it.next());  // into the second epoch
  const std::string state = it.save();
  EXPECT_NE(state.find("nimbus.data.iterator/1"), std::string::npos);
  const auto rest = values(drain(it));
  ASSERT_EQ(rest.size(), 2u * (1000 / 16) - 70);
  Iterator resumed = Iterator::restore(build(), state);
  EXPECT_EQ(values(drain(resumed)), rest);
}

// Restores `state` in a child process (fork: a fresh address space with no
// pipeline threads) and returns the values the child read.
std::vector<int64_t> restore_in_new_process(const std::function<Dataset()>& build, const std::string& state) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      Iterator it = Iterator::restore(build(), state);
      while (auto e = it.next()) {
        for (const auto& t : *e) {
          for (int64_t v : t.to_vector<int64_t>()) {
            if (::write(fds[1], &v, sizeof(v)) != static_cast<ssize_t>(sizeof(v))) code = 2;
          }
        }
      }
    } catch (...) {
      code = 1;
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  std::vector<int64_t> out;
  int64_t v;
  while (::read(fds[0], &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) out.push_back(v);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return out;
}

TEST(IteratorState, ResumesInANewProcess) {
  auto build = [] { return Dataset::range(300).shuffle(64).map(twice, 3).batch(8).prefetch(2); };
  std::string state;
  std::vector<int64_t> rest;
  {
    Iterator it = build().iterator();
    for (int i = 0; i < 17; ++i) it.next();
    state = it.save();
    for (const auto& e : drain(it)) {
      for (int64_t v : e[0].to_vector<int64_t>()) rest.push_back(v);
    }
  }
  ASSERT_EQ(rest.size(), 300u - 17u * 8u);
  EXPECT_EQ(restore_in_new_process(build, state), rest);
}

TEST(IteratorState, RefusesAnotherPipelineAndNondeterministicMaps) {
  Iterator it = Dataset::range(10).batch(2).iterator();
  it.next();
  const std::string state = it.save();
  EXPECT_THROW(Iterator::restore(Dataset::range(10).batch(3), state), InvalidArgument);
  EXPECT_THROW(Iterator::restore(Dataset::range(10).batch(2), "{not json"), DataError);
  Iterator loose = Dataset::range(10).map(twice, 2, /*deterministic=*/false).iterator();
  EXPECT_THROW(loose.save(), InvalidArgument);
}

// The stats node called `name` (the first one, from the consumer's side).
nlohmann::json node(const Iterator& it, const std::string& name) {
  const nlohmann::json stats = nlohmann::json::parse(it.stats_json());
  for (const auto& n : stats["nodes"]) {
    if (n["name"] == name) return n;
  }
  ADD_FAILURE() << "no stats node " << name << " in " << it.stats_json();
  return nlohmann::json::object();
}

TEST(Stats, NamesEveryNodeWithCounts) {
  Dataset ds = Dataset::range(100).map(twice, 2).shuffle(10, 1).batch(10).prefetch(2);
  Iterator it = ds.iterator();
  drain(it);
  const std::string text = it.stats();
  for (const char* name : {"range", "map", "shuffle", "batch", "prefetch"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
  }
  EXPECT_EQ(node(it, "range")["produced"], 100);
  EXPECT_EQ(node(it, "map")["produced"], 100);
  EXPECT_EQ(node(it, "map")["parallelism"], 2);
  EXPECT_EQ(node(it, "batch")["produced"], 10);
  EXPECT_EQ(node(it, "shuffle")["buffer_capacity"], 10);
  EXPECT_EQ(node(it, "prefetch")["buffer_capacity"], 2);
  EXPECT_GT(node(it, "map")["busy_ns"].get<int64_t>(), 0);
  EXPECT_GT(node(it, "batch")["input_wait_ns"].get<int64_t>(), 0);
}

TEST(Stats, CountsHostMemoryAndNamesTheLargestBuffer) {
  Dataset ds = Dataset::range(1000)
                   .map([](const Element& e) { return Element{Tensor::empty(Shape{256}, DType::kF32)}; })
                   .shuffle(500, 1)
                   .prefetch(2);
  Iterator it = ds.iterator();
  for (int i = 0; i < 10; ++i) it.next();
  EXPECT_GE(node(it, "shuffle")["buffer_bytes"].get<int64_t>(), 490 * 1024);
  EXPECT_NE(it.stats().find("the largest consumer is shuffle"), std::string::npos) << it.stats();
  // No parallel map: no pool thread was started.
  EXPECT_NE(it.stats().find(" 0 of "), std::string::npos) << it.stats();
}

// A map that sleeps (no CPU) stands in for slow decoding.
Element slow(const Element& e) {
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  return e;
}

TEST(Stats, ParallelMapAndPrefetchCutTheStepsInputWait) {
  auto run = [](const Dataset& ds) {
    Iterator it = ds.iterator();
    while (it.next()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the "step"
    return it.wait_seconds();
  };
  const double serial = run(Dataset::range(60).map(slow));
  const double parallel = run(Dataset::range(60).map(slow, 6).prefetch(4));
  EXPECT_GT(serial, 0.12);  // 60 x 3 ms of waiting, at least most of it
  EXPECT_LT(parallel, 0.6 * serial) << "serial " << serial << " s, parallel " << parallel << " s";
}

TEST(ParallelMap, RunsUpToItsParallelismAndBuffersAhead) {
  std::atomic<int> running{0}, most_running{0}, started{0};
  Dataset ds = Dataset::range(1000).map(
      [&](const Element& e) {
        started++;
        const int now = ++running;
        for (int seen = most_running.load(); now > seen && !most_running.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        running--;
        return e;
      },
      2);
  Iterator it = ds.iterator();
  for (int i = 0; i < 30; ++i) ASSERT_EQ(it.next()->at(0).item<int64_t>(), i);
  // The consumer pauses: the pool threads run ahead until the ordered buffer
  // (four times the parallelism, refilled when down to half) is full, then stop.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GT(started.load(), 30 + 2 * 2);
  EXPECT_LE(started.load(), 30 + 4 * 2);
  const int cores = nlohmann::json::parse(it.stats_json())["cores"];
  EXPECT_EQ(most_running.load(), std::min(2, cores));
  EXPECT_EQ(node(it, "map")["buffer_capacity"], 8);
}

TEST(Autotune, RaisesParallelismWithinFiftyBatchesAndSaysWhy) {
  Dataset ds = Dataset::range(100000).map(slow, kAutotune).batch(4).prefetch(kAutotune);
  Iterator it = ds.iterator();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(it.next().has_value());
  const nlohmann::json map = node(it, "map");
  const int cores = nlohmann::json::parse(it.stats_json())["cores"];
  EXPECT_TRUE(map["autotuned"].get<bool>());
  // The consumer never pauses and a call sleeps 3 ms: as many calls in
  // flight as there are cores, never more.
  EXPECT_EQ(map["parallelism"].get<int>(), cores) << it.stats();
  EXPECT_NE(map["note"].get<std::string>().find("a call takes"), std::string::npos) << it.stats();
  const nlohmann::json prefetch = node(it, "prefetch");
  EXPECT_TRUE(prefetch["autotuned"].get<bool>());
  EXPECT_NE(prefetch["note"].get<std::string>().find("autotune: buffer"), std::string::npos) << it.stats();
  EXPECT_NE(it.stats().find("chosen by AUTOTUNE"), std::string::npos);
}

TEST(Autotune, StaysLowWhenTheConsumerIsSlow) {
  Dataset ds = Dataset::range(100000).map(twice, kAutotune);
  Iterator it = ds.iterator();
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(it.next().has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a step far slower than the map
  }
  EXPECT_LE(node(it, "map")["parallelism"].get<int>(), 2) << it.stats();
}

}  // namespace
}  // namespace nimbus::data
