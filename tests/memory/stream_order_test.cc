// Stream-ordered frees in the BFC allocator (the GPU's case): a block freed on a stream is reused at once
// by the same stream and by others only after the stream has passed the free. The streams here are
// queues whose recorded events complete when the test says so, as a GPU's would when its kernels finish.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "memory_test_support.h"
#include "nimbus/base/error.h"
#include "nimbus/device/bfc_allocator.h"

namespace nimbus {
namespace {

using testing::FakeSubAllocator;

constexpr size_t MiB = 1024 * 1024;

// A stream whose work finishes only when finish() is called: its events stay incomplete until then.
class QueuedStream final : public Stream {
 public:
  struct QueuedEvent final : Event {
    const QueuedStream* stream = nullptr;
    int position = 0;
    mutable int waits = 0;
    bool query() const override { return stream->finished_ >= position; }
    void synchronize() const override {
      ++waits;
      stream->finished_ = std::max(stream->finished_, position);
    }
  };

  Device device() const override { return Device::cpu(); }
  void synchronize() override { finished_ = enqueued_; }
  std::shared_ptr<Event> record() override {
    auto event = std::make_shared<QueuedEvent>();
    event->stream = this;
    event->position = ++enqueued_;
    events.push_back(event);
    return event;
  }
  void wait(const Event& /*event*/) override {}
  void finish() { finished_ = enqueued_; }

  std::vector<std::shared_ptr<QueuedEvent>> events;

 private:
  int enqueued_ = 0;
  mutable int finished_ = 0;
};

BfcAllocator make_allocator(MemoryOptions options = {}) {
  return BfcAllocator("fake:0", std::make_unique<FakeSubAllocator>(), options);
}

TEST(StreamOrder, TheSameStreamReusesAFreedBlockAtOnce) {
  BfcAllocator allocator = make_allocator();
  QueuedStream stream;
  void* p = allocator.allocate(MiB, stream);
  allocator.deallocate_on(p, MiB, stream);
  ASSERT_FALSE(stream.events.back()->query()) << "the kernels that read p are still queued";
  EXPECT_EQ(allocator.allocate(MiB, stream), p);
  EXPECT_EQ(allocator.stats().bytes_in_use, MiB);
  allocator.check_consistency();
}

TEST(StreamOrder, AnotherStreamWaitsUntilTheFreeingStreamHasPassedTheFree) {
  BfcAllocator allocator = make_allocator();
  QueuedStream compute, copy;
  void* p = allocator.allocate(MiB, compute);
  allocator.deallocate_on(p, MiB, compute);
  EXPECT_EQ(allocator.stats().bytes_in_use, MiB) << "a pending block counts as in use";
  void* q = allocator.allocate(MiB, copy);
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  EXPECT_TRUE(b >= a + MiB || b + MiB <= a) << "the copy stream got memory the compute stream may still read";
  compute.finish();
  EXPECT_EQ(allocator.allocate(MiB, copy), p) << "once the event completed, the block is free for every stream";
  EXPECT_EQ(compute.events.back()->waits, 0) << "nobody waited: the allocator only queried the event";
  allocator.check_consistency();
}

TEST(StreamOrder, WaitsForPendingFreesRatherThanRunOutOfMemory) {
  BfcAllocator allocator = make_allocator({.mode = MemoryMode::kGrowth, .limit = 2 * MiB});
  QueuedStream compute, copy;
  void* p = allocator.allocate(2 * MiB, compute);
  allocator.deallocate_on(p, 2 * MiB, compute);
  EXPECT_EQ(allocator.allocate(2 * MiB, copy), p);
  EXPECT_EQ(compute.events.back()->waits, 1) << "the limit left no room: the allocator waited for the stream";
  EXPECT_EQ(allocator.stats().bytes_reserved, 2 * MiB);
  allocator.check_consistency();
}

TEST(StreamOrder, FreeingAPendingBlockAgainIsAnInternalError) {
  BfcAllocator allocator = make_allocator();
  QueuedStream stream;
  void* p = allocator.allocate(MiB, stream);
  allocator.deallocate_on(p, MiB, stream);
  EXPECT_THROW(allocator.deallocate(p, MiB), InternalError);
  EXPECT_THROW(allocator.deallocate_on(p, MiB, stream), InternalError);
  allocator.check_consistency();
}

}  // namespace
}  // namespace nimbus
