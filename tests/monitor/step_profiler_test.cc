// The step profiler: spans add up, nest exclusively, land in the ring buffer and the aggregates.
#include "nimbus/monitor/step_profiler.h"

#include <gtest/gtest.h>

#include <thread>

#include "nimbus/monitor/trace.h"

namespace nimbus::monitor {
namespace {

void busy_for(std::chrono::microseconds duration) {
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
  }
}

TEST(StepProfiler, SpansAreTimedAndAddUpToAtMostTheStep) {
  StepProfiler profiler;
  profiler.begin_step(1, 0);
  {
    auto span = profiler.span(Span::kInputWait);
    busy_for(std::chrono::microseconds(3000));
  }
  {
    auto span = profiler.span(Span::kCompute);
    busy_for(std::chrono::microseconds(6000));
  }
  profiler.end_step(32, 0.5);
  const std::vector<StepRecord> steps = profiler.recent_steps();
  ASSERT_EQ(steps.size(), 1u);
  const StepRecord& step = steps[0];
  EXPECT_GE(step.spans[Span::kInputWait], 0.003);
  EXPECT_GE(step.spans[Span::kCompute], 0.006);
  EXPECT_EQ(step.spans[Span::kCallbacks], 0);
  EXPECT_LE(step.spans.sum(), step.seconds());
  EXPECT_GE(step.first_start_ns[size_t(Span::kCompute)], step.first_start_ns[size_t(Span::kInputWait)]);
  EXPECT_EQ(step.first_start_ns[size_t(Span::kCallbacks)], -1);
  EXPECT_EQ(step.samples, 32);
  EXPECT_EQ(step.loss, 0.5);
}

// A checkpoint written inside the callbacks span counts for the checkpoint only.
TEST(StepProfiler, NestedSpansCountExclusively) {
  StepProfiler profiler;
  profiler.begin_step(1, 0);
  {
    auto callbacks = profiler.span(Span::kCallbacks);
    busy_for(std::chrono::microseconds(2000));
    auto checkpoint = profiler.span(Span::kCheckpoint);
    busy_for(std::chrono::microseconds(8000));
  }
  profiler.end_step(1, 0);
  const StepRecord step = profiler.recent_steps().back();
  EXPECT_GE(step.spans[Span::kCheckpoint], 0.008);
  EXPECT_GE(step.spans[Span::kCallbacks], 0.002);
  // Counted twice, the checkpoint's 8 ms would push the spans' sum past the step's wall time (whatever
  // the machine's load does to the busy loops' durations).
  EXPECT_LE(step.spans.sum(), step.seconds()) << "the checkpoint's time was counted twice";
}

TEST(StepProfiler, SpanOutsideAStepCountsForNothing) {
  StepProfiler profiler;
  { auto span = profiler.span(Span::kCheckpoint); }
  profiler.begin_step(1, 0);
  profiler.end_step(1, 0);
  EXPECT_EQ(profiler.totals().spans[Span::kCheckpoint], 0);
}

TEST(StepProfiler, RingKeepsTheLastStepsInOrderAndAggregatesKeepAll) {
  StepProfiler profiler(/*ring_capacity=*/4);
  std::vector<int64_t> observed;
  const int id = profiler.add_observer([&](const StepRecord& s) { observed.push_back(s.global_step); });
  for (int epoch = 1; epoch <= 2; ++epoch) {
    for (int64_t step = 0; step < 3; ++step) {
      profiler.begin_step(epoch, step);
      profiler.end_step(10 * epoch, double(epoch));
    }
  }
  profiler.remove_observer(id);
  profiler.begin_step(3, 0);
  profiler.end_step(1, 0);
  EXPECT_EQ(observed, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  const std::vector<StepRecord> recent = profiler.recent_steps();
  ASSERT_EQ(recent.size(), 4u);
  for (size_t i = 0; i < recent.size(); ++i) EXPECT_EQ(recent[i].global_step, int64_t(i) + 3);
  EXPECT_EQ(profiler.totals().steps, 7);
  EXPECT_EQ(profiler.totals().samples, 3 * 10 + 3 * 20 + 1);
  const auto epochs = profiler.per_epoch();
  EXPECT_EQ(epochs.at(1).samples, 30);
  EXPECT_EQ(epochs.at(2).mean_loss(), 2.0);
  int64_t per_second_steps = 0;
  for (const auto& [second, aggregate] : profiler.per_second()) per_second_steps += aggregate.steps;
  EXPECT_EQ(per_second_steps, 7);
}

TEST(ChromeTrace, StepsAndSpansAreCompleteEventsInMicroseconds) {
  StepProfiler profiler;
  profiler.begin_step(1, 0);
  {
    auto span = profiler.span(Span::kCompute);
    busy_for(std::chrono::microseconds(2000));
  }
  profiler.end_step(4, 1.5);
  const nlohmann::json trace = chrome_trace(profiler.recent_steps());
  const auto& events = trace.at("traceEvents");
  ASSERT_EQ(events.size(), 3u);  // thread name, step, compute
  EXPECT_EQ(events[1]["name"], "step");
  EXPECT_EQ(events[1]["ph"], "X");
  EXPECT_EQ(events[1]["args"]["samples"], 4);
  EXPECT_EQ(events[2]["name"], "compute");
  EXPECT_GE(events[2]["dur"].get<double>(), 2000.0);
  EXPECT_GE(events[2]["ts"].get<double>(), events[1]["ts"].get<double>());
  EXPECT_LE(events[2]["ts"].get<double>() + events[2]["dur"].get<double>(),
            events[1]["ts"].get<double>() + events[1]["dur"].get<double>() + 1e-3);
}

}  // namespace
}  // namespace nimbus::monitor
