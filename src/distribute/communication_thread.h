// A replica's communication thread: runs the gradient buckets' all-reduces on
// collectives of their own (an in-process group or MPI communicator beside the
// replica's), in the order they were started, while the replica's own thread
// goes on with the backward pass. Internal to the library.
//
//   const int64_t ticket = thread.start(std::move(bucket), "step 12");   // returns at once
//   ... more backward ops ...
//   std::vector<float> summed = thread.wait(ticket);                      // rethrows the collective's error
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nimbus/distribute/collectives.h"

namespace nimbus::distribute {

class CommunicationThread {
 public:
  // `collectives` outlives the thread and is used by it alone.
  explicit CommunicationThread(Collectives& collectives);
  ~CommunicationThread();
  CommunicationThread(const CommunicationThread&) = delete;
  CommunicationThread& operator=(const CommunicationThread&) = delete;

  // Queues the sum over the replicas of `buffer`; `context` names the step in timeout messages.
  int64_t start(std::vector<float> buffer, std::string context);
  // The summed buffer of `ticket`, once its all-reduce is done; its error when it failed.
  std::vector<float> wait(int64_t ticket);

 private:
  struct Job {
    std::vector<float> buffer;
    std::string context;
    bool done = false;
    std::exception_ptr error;
  };
  void serve();

  Collectives& collectives_;
  std::mutex mutex_;
  std::condition_variable work_, finished_;
  std::deque<int64_t> queue_;
  std::map<int64_t, Job> jobs_;
  int64_t next_ticket_ = 0;
  // After a failed all-reduce the later ones fail with its error instead of waiting out their own timeouts.
  std::exception_ptr failed_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nimbus::distribute
