#include "communication_thread.h"

#include <fmt/format.h>

#include "nimbus/base/error.h"

namespace nimbus::distribute {

CommunicationThread::CommunicationThread(Collectives& collectives)
    : collectives_(collectives), thread_([this] { serve(); }) {}

CommunicationThread::~CommunicationThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

int64_t CommunicationThread::start(std::vector<float> buffer, std::string context) {
  std::lock_guard lock(mutex_);
  const int64_t ticket = next_ticket_++;
  jobs_.emplace(ticket,
                Job{.buffer = std::move(buffer), .context = std::move(context), .done = false, .error = nullptr});
  queue_.push_back(ticket);
  work_.notify_one();
  return ticket;
}

std::vector<float> CommunicationThread::wait(int64_t ticket) {
  std::unique_lock lock(mutex_);
  auto found = jobs_.find(ticket);
  if (found == jobs_.end()) {
    throw InternalError(fmt::format("all_reduce_wait: no all-reduce with ticket {} on this replica", ticket));
  }
  finished_.wait(lock, [&] { return found->second.done; });
  Job job = std::move(found->second);
  jobs_.erase(found);
  if (job.error) std::rethrow_exception(job.error);
  return std::move(job.buffer);
}

void CommunicationThread::serve() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const int64_t ticket = queue_.front();
    queue_.pop_front();
    Job& job = jobs_.at(ticket);  // std::map: stays put while other jobs come and go
    std::exception_ptr error = failed_;
    if (!error) {
      lock.unlock();
      try {
        collectives_.set_context(job.context);
        collectives_.all_reduce(job.buffer, ReduceOp::kSum);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
    }
    if (error && !failed_) failed_ = error;
    job.error = error;
    job.done = true;
    finished_.notify_all();
  }
}

}  // namespace nimbus::distribute
