// The GPU path's bucket and stream ordering (src/distribute/stream_ordered_buckets.h)
// without a GPU: against recording streams, each bucket's all-reduce is queued on the
// communication stream after the compute stream's work so far, and the compute stream
// waits for it before the sums are copied out; and on logical CPU devices over the
// in-process collectives it trains to one device's weights (mirrored_test.cc).
#include "src/distribute/stream_ordered_buckets.h"

#include <gtest/gtest.h>

#include "nimbus/ops/creation.h"
#include "train/train_test_util.h"

namespace nimbus::testing {
namespace {

// Streams that log what is queued on them; CPU work runs at once, as on the CPU backend.
struct Log {
  std::vector<std::string> lines;
  int events = 0;
};

class LoggedEvent final : public Event {
 public:
  explicit LoggedEvent(int id) : id(id) {}
  bool query() const override { return true; }
  void synchronize() const override {}
  int id;
};

class LoggedStream final : public Stream {
 public:
  LoggedStream(std::string name, Log& log) : name_(std::move(name)), log_(log) {}
  Device device() const override { return Device::cpu(); }
  void synchronize() override {}
  std::shared_ptr<Event> record() override {
    auto event = std::make_shared<LoggedEvent>(log_.events++);
    log_.lines.push_back(name_ + " record e" + std::to_string(event->id));
    return event;
  }
  void wait(const Event& event) override {
    log_.lines.push_back(name_ + " wait e" + std::to_string(dynamic_cast<const LoggedEvent&>(event).id));
  }

 private:
  std::string name_;
  Log& log_;
};

// Two replicas holding the same gradients: the sum doubles them.
class DoublingCollectives final : public distribute::DeviceCollectives {
 public:
  explicit DoublingCollectives(Log& log) : log_(log), stream_("communication", log) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Stream& stream() override { return stream_; }
  void all_reduce_sum(float* data, size_t count, Stream& stream) override {
    EXPECT_EQ(&stream, &stream_) << "the all-reduce runs on the communication stream";
    for (size_t i = 0; i < count; ++i) data[i] *= 2;
    log_.lines.push_back("communication all_reduce " + std::to_string(count));
  }
  void broadcast(void*, size_t, int, Stream&) override {}
  void wait_for(const Event& done, const std::string& context) override {
    log_.lines.push_back("host wait_for e" + std::to_string(dynamic_cast<const LoggedEvent&>(done).id) + " at " +
                         context);
  }
  void abort(const std::string&) override {}

 private:
  Log& log_;
  LoggedStream stream_;
};

TEST(StreamOrderedBuckets, EachBucketRunsOnTheCommunicationStreamBetweenTheComputeStreamsEvents) {
  Log log;
  DoublingCollectives collectives(log);
  LoggedStream compute("compute", log);
  distribute::StreamOrderedBuckets buckets(collectives);
  const std::vector<Tensor> first = {random_normal({3, 2}), random_normal({5})};
  const std::vector<Tensor> second = {random_normal({4})};
  buckets.start(first, compute);
  buckets.start(second, compute);
  EXPECT_EQ(buckets.in_flight(), 2u);
  // Waited for in the other order: each bucket is found by its tensors.
  std::vector<Tensor> second_sums = {Tensor::empty(Shape{4})};
  buckets.wait(second, second_sums, compute, "step 3");
  std::vector<Tensor> first_sums = {Tensor::empty(Shape{3, 2}), Tensor::empty(Shape{5})};
  buckets.wait(first, first_sums, compute, "step 3");
  EXPECT_EQ(buckets.in_flight(), 0u);
  const std::vector<std::string> expected = {
      "compute record e0",          "communication wait e0", "communication all_reduce 11", "communication record e1",
      "compute record e2",          "communication wait e2", "communication all_reduce 4",  "communication record e3",
      "host wait_for e3 at step 3", "compute wait e3",       "host wait_for e1 at step 3",  "compute wait e1"};
  EXPECT_EQ(log.lines, expected);
  for (size_t i = 0; i < first.size(); ++i) {
    const std::vector<double> in = values_of(first[i]), out = values_of(first_sums[i]);
    for (size_t k = 0; k < in.size(); ++k) EXPECT_EQ(out[k], 2 * in[k]) << "first bucket, tensor " << i;
  }
  EXPECT_EQ(values_of(second_sums[0])[3], 2 * values_of(second[0])[3]);
}

TEST(StreamOrderedBuckets, ABucketNeverStartedIsAllReducedAtItsWait) {
  Log log;
  DoublingCollectives collectives(log);
  LoggedStream compute("compute", log);
  distribute::StreamOrderedBuckets buckets(collectives);
  const std::vector<Tensor> bucket = {random_normal({6})};
  std::vector<Tensor> sums = {Tensor::empty(Shape{6})};
  buckets.wait(bucket, sums, compute, "step 1");
  EXPECT_EQ(values_of(sums[0])[5], 2 * values_of(bucket[0])[5]);
  EXPECT_EQ(log.lines.front(), "compute record e0");
  EXPECT_EQ(log.lines.back(), "compute wait e1");
}

}  // namespace
}  // namespace nimbus::testing
